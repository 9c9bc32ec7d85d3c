"""What a plan is asked: SLOs, target, replicates, and how each rate point is simulated.

Every float is finite (``allow_inf_nan=False``): an infinite target or SLO is refused, never
carried into a search.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_REQUESTS_PER_POINT = 10_000_000
MIN_REL_TOL = 1e-6


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SearchSettings(_Frozen):
    """How the maximum rate is searched and how long each rate point is simulated."""

    requests_per_point: int = Field(
        2000,
        ge=20,
        le=MAX_REQUESTS_PER_POINT,
        description="Requests simulated at each rate (arrivals at the rate, then drained).",
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
    rel_tol: float = Field(
        0.02,
        ge=MIN_REL_TOL,
        lt=1,
        description="Bisection stops when (hi - lo) <= rel_tol x lo (finer than 1e-6 resolves nothing a rate "
        "point can tell apart).",
    )
    start_rate_per_s: float | None = Field(
        None,
        gt=0,
        description="First load tried, in the workload's load unit; None: the target. It must lie in the search "
        "range (simulator.planning.search.load.search_range).",
    )
    max_doublings: int = Field(
        16, ge=0, le=60, description="The search's ceiling is the target x 2^max_doublings (then: unbounded)."
    )
    max_halvings: int = Field(
        16, ge=0, le=60, description="The search's floor is the target / 2^max_halvings (then: infeasible)."
    )
    curve_points: int = Field(
        8,
        ge=0,
        le=200,
        description="Evenly spaced rates up to 1.25x the max rate, for capacity curves: the chosen candidate's "
        "(every feasible candidate's with exhaustive), the same for every replicate; a rate the search or the "
        "operating point ran to the end at every replicate stands for the one within half a spacing (its runs "
        "are not made again); the other curves are drawn from the rates the search tried.",
    )
    pd_ratio: bool = Field(
        False,
        description="Size a disaggregated candidate (one prefill and one decode group) pool by pool for the "
        "target: the prefill:decode ratio it needs (simulator.planning.plans.pd_ratio), not copies of its own P:D.",
    )
    exhaustive: bool = Field(
        False,
        description="The plain search: every candidate, doubling or halving from the start then bisection, and "
        "curves for every candidate. Default: the guided search (analytic bound, margins, replicates started "
        "from the first one's answer, candidates pruned by their best case).",
    )

    rank_all: bool = Field(
        False,
        description="Guided search of every candidate, none pruned: the whole ranking and Pareto frontier (slower). "
        "Default: a candidate that cannot be the cheapest (nor its tuned family's cheapest) is pruned.",
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
    slo_e2el_p99_ms: float | None = Field(None, gt=0, description="Bound on the p99 end-to-end latency, ms.")
    attainment: float = Field(
        0.9, gt=0, le=1, description="SLO attainment for DistServe-style goodput: the fraction meeting every bound."
    )
    target_rate_per_s: float | None = Field(
        None,
        gt=0,
        description="Load to provision for, in the workload's load unit (req/s, sessions/s, users); None: the "
        "scenario's own load.",
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
        if self.slo_ttft_p99_ms is None and self.slo_tpot_p99_ms is None and self.slo_e2el_p99_ms is None:
            raise ValueError(
                "give at least one SLO: a slo: block in the scenario (ttft_ms, tpot_ms, e2el_ms) or "
                "--slo-ttft-ms / --slo-tpot-ms / --slo-e2el-ms"
            )
        return self

    @property
    def slo_bounds(self) -> dict[str, float | None]:
        """The p99 bounds by latency name (ttft, tpot, e2el), None where not constrained."""
        return {"ttft": self.slo_ttft_p99_ms, "tpot": self.slo_tpot_p99_ms, "e2el": self.slo_e2el_p99_ms}
