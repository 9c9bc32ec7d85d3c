"""Worker side of a plan: simulate a candidate at given rates and search its maximum rate.

Tasks are plain data and the functions are pure, so they run alike in this process, in a
process pool or on Ray. Every rate point of a (candidate, replicate) uses the same seed:
common random numbers, so the arrival times at rate r are one sample path scaled by 1/r
and the feasibility of a rate is (in practice) monotone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.build import build
from simulator.config import ScenarioConfig
from simulator.planning.overrides import apply_overrides
from simulator.planning.search import max_feasible_rate
from simulator.planning.settings import SearchSettings
from simulator.planning.steady import SloTargets, steady_stats


@dataclass(frozen=True, slots=True)
class CandidateRun:
    """A candidate's raw scenario mapping and one replicate's seed."""

    candidate: int
    replicate: int
    config: dict[str, Any]
    base_dir: str | None
    seed: int
    slo: SloTargets
    search: SearchSettings


@dataclass(frozen=True, slots=True)
class SearchTask:
    run: CandidateRun
    start_rate_per_s: float


@dataclass(frozen=True, slots=True)
class RatesTask:
    """Rates to simulate, each with a phase label (``operating``, ``curve``) and config overrides."""

    run: CandidateRun
    rates: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)


def rate_config(run: CandidateRun, rate_per_s: float, overrides: dict[str, Any] | None = None) -> ScenarioConfig:
    """The candidate's scenario at ``rate_per_s`` with the plan's request count, seed and SLOs (and ``overrides``)."""
    data = apply_overrides(
        run.config,
        (overrides or {})
        | {
            "workload.arrival.rate_per_s": rate_per_s,
            "workload.num_requests": run.search.requests_per_point,
            "workload.duration_s": None,
            "seed": run.seed,
            "slo": {"ttft_ms": run.slo.ttft_p99_ms, "tpot_ms": run.slo.tpot_p99_ms},
        },
    )
    return ScenarioConfig.model_validate(data)


def simulate_rate(run: CandidateRun, rate_per_s: float, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """One rate point: steady-state statistics plus the whole run's vLLM throughput and goodput.

    Raises ValueError when the configuration cannot run (a model that does not fit).
    """
    cfg = rate_config(run, rate_per_s, overrides)
    base_dir = Path(run.base_dir) if run.base_dir is not None else None
    result = build(cfg, base_dir=base_dir, record_steps=False).run()
    s = run.search
    stats = steady_stats(result.requests, run.slo, s.warmup_fraction, s.cooldown_fraction, s.max_growth_fraction)
    summary = result.summary
    completed = summary["completed"]
    return {
        "rate_per_s": rate_per_s,
        **stats,
        "request_throughput": summary["request_throughput"],
        "request_goodput": summary.get("request_goodput"),
        "output_throughput": summary["output_throughput"],
        "mean_output_tokens": summary["total_output_tokens"] / completed if completed else None,
    }


def _rows(run: CandidateRun, phase_rows: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {"candidate": run.candidate, "replicate": run.replicate, "seed": run.seed, "phase": phase, **row}
        for phase, row in phase_rows
    ]


def search_task(task: SearchTask) -> dict[str, Any]:
    """The maximum rate meeting the p99 SLOs and the one meeting the attainment target.

    Both searches share the simulations of the rates they both visit. Returns
    ``max_rate_per_s``, ``upper_rate_per_s``, ``max_goodput_rate_per_s``,
    ``upper_goodput_rate_per_s``, ``points`` (every simulated rate, in order) and
    ``error`` (the message when the configuration cannot run, else None).
    """
    run, s = task.run, task.run.search
    cache: dict[float, dict[str, Any]] = {}

    def point(rate: float) -> dict[str, Any]:
        if rate not in cache:
            cache[rate] = simulate_rate(run, rate) | {"eval_order": len(cache)}
        return cache[rate]

    def bracket(flag: str):
        return max_feasible_rate(
            lambda r: point(r)[flag], task.start_rate_per_s, s.rel_tol, s.max_doublings, s.max_halvings
        )

    try:
        slo = bracket("meets_slo")
        goodput = bracket("meets_attainment")
    except ValueError as exc:
        return {"error": str(exc), "points": _rows(run, [("search", r) for r in cache.values()])}
    return {
        "error": None,
        "max_rate_per_s": slo.max_rate_per_s,
        "upper_rate_per_s": slo.upper_rate_per_s,
        "max_goodput_rate_per_s": goodput.max_rate_per_s,
        "upper_goodput_rate_per_s": goodput.upper_rate_per_s,
        "points": _rows(run, [("search", r) for r in cache.values()]),
    }


def rates_task(task: RatesTask) -> list[dict[str, Any]]:
    """Simulate each (phase, rate, overrides) of the task; one row each, in order."""
    return _rows(task.run, [(phase, simulate_rate(task.run, rate, over)) for phase, rate, over in task.rates])
