"""What a plan is asked: SLOs, target, replicates, and how each rate point is simulated."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchSettings(_Frozen):
    """How the maximum rate is searched and how long each rate point is simulated."""

    requests_per_point: int = Field(
        2000, ge=20, description="Requests simulated at each rate (arrivals at the rate, then drained)."
    )
    warmup_fraction: float = Field(
        0.2, ge=0, lt=0.9, description="Earliest-arriving fraction of requests left out of the statistics."
    )
    cooldown_fraction: float = Field(
        0.1, ge=0, lt=0.5, description="Latest-arriving fraction left out (the system drains around them)."
    )
    max_growth_fraction: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Largest growth of the number in system, as a fraction of the arrival rate, still called stable.",
    )
    rel_tol: float = Field(0.02, gt=0, lt=1, description="Bisection stops when (hi - lo) <= rel_tol x lo.")
    start_rate_per_s: float | None = Field(
        None, gt=0, description="First rate tried; None: the target rate (requests/s)."
    )
    max_doublings: int = Field(16, ge=0, le=60, description="Doublings before a rate is called unbounded.")
    max_halvings: int = Field(16, ge=0, le=60, description="Halvings before a candidate is called infeasible.")
    curve_points: int = Field(
        8, ge=0, le=200, description="Evenly spaced rates per candidate, up to 1.25x its max rate, for capacity curves."
    )

    @model_validator(mode="after")
    def _window(self) -> SearchSettings:
        if self.warmup_fraction + self.cooldown_fraction >= 0.9:
            raise ValueError("warmup_fraction + cooldown_fraction must leave at least 10% of the requests measured")
        return self


class PlanRequest(_Frozen):
    """The question a plan answers."""

    slo_ttft_p99_ms: float | None = Field(None, gt=0, description="Bound on the p99 time to first token, ms.")
    slo_tpot_p99_ms: float | None = Field(None, gt=0, description="Bound on the p99 time per output token, ms.")
    attainment: float = Field(
        0.9, gt=0, le=1, description="SLO attainment for DistServe-style goodput: the fraction meeting every bound."
    )
    target_rate_per_s: float | None = Field(
        None, gt=0, description="Load to provision for, requests/s; None: the scenario's own arrival rate."
    )
    replicates: int = Field(1, ge=1, le=1000, description="Independent seeds; intervals need at least 2.")
    confidence: float = Field(0.95, gt=0, lt=1, description="Confidence level of the intervals.")
    ci_method: Literal["t", "bootstrap"] = Field("t", description="t-interval or percentile bootstrap of the mean.")
    pareto_latency: Literal["ttft", "tpot", "e2el"] = Field(
        "ttft", description="The p99 latency the Pareto frontier trades against cost."
    )
    search: SearchSettings = Field(default_factory=SearchSettings, description="Rate search and simulation length.")

    @model_validator(mode="after")
    def _some_slo(self) -> PlanRequest:
        if self.slo_ttft_p99_ms is None and self.slo_tpot_p99_ms is None:
            raise ValueError("give at least one SLO: --slo-ttft-p99-ms and/or --slo-tpot-p99-ms")
        return self
