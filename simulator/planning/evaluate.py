"""Worker side of a plan: simulate a candidate at given loads and search its maximum load.

Tasks are plain data and the functions are pure, so they run alike in this process, in a
process pool or on Ray. Every load point of a (candidate, replicate) uses the same seed:
common random numbers, so the arrival times at rate r are one sample path scaled by 1/r
and the feasibility of a rate is (in practice) monotone. What a load is (an arrival rate,
a trace's time scale, a session rate, a number of closed-loop users) is
``simulator.planning.load``'s business; "rate" below is any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.build import build
from simulator.config.schema import ScenarioConfig
from simulator.planning.load import Load, plan_load, search_range
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
    """Search one (candidate, replicate) from ``start_rate_per_s``.

    The search range is ``search_range`` around ``target_rate_per_s`` (None: around the start).
    """

    run: CandidateRun
    start_rate_per_s: float
    target_rate_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class RatesTask:
    """Rates to simulate, each with a phase label (``operating``, ``curve``) and config overrides."""

    run: CandidateRun
    rates: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)


def run_load(run: CandidateRun) -> Load:
    """How the load points of ``run`` are configured (reads its trace, draws its sessions); ValueError if none."""
    base_dir = Path(run.base_dir) if run.base_dir is not None else None
    return plan_load(ScenarioConfig.model_validate(run.config), run.seed, base_dir, run.search.requests_per_point)


def rate_config(
    run: CandidateRun, rate_per_s: float, overrides: dict[str, Any] | None = None, load: Load | None = None
) -> ScenarioConfig:
    """The candidate's scenario at load ``rate_per_s`` with the plan's point size, seed and SLOs (and ``overrides``)."""
    load = load if load is not None else run_load(run)
    slo = {"ttft_ms": run.slo.ttft_p99_ms, "tpot_ms": run.slo.tpot_p99_ms, "e2el_ms": run.slo.e2el_p99_ms}
    data = apply_overrides(run.config, (overrides or {}) | load.overrides(rate_per_s) | {"seed": run.seed, "slo": slo})
    return ScenarioConfig.model_validate(data)


def simulate_rate(
    run: CandidateRun, rate_per_s: float, overrides: dict[str, Any] | None = None, load: Load | None = None
) -> dict[str, Any]:
    """One load point: steady-state statistics plus the whole run's vLLM throughput and goodput.

    Raises ValueError when the configuration cannot run (a model that does not fit).
    """
    cfg = rate_config(run, rate_per_s, overrides, load)
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
    """The maximum load meeting the p99 SLOs and the one meeting the attainment target.

    Both searches share the simulations of the loads they both visit, and try loads in
    ``search_range`` only (the start is moved into it if this seed's range is narrower).
    Returns ``max_rate_per_s``, ``upper_rate_per_s``, ``max_goodput_rate_per_s``,
    ``upper_goodput_rate_per_s``, ``floor_rate_per_s``, ``ceiling_rate_per_s``, ``points``
    (every simulated load, in order) and ``error`` (the message when the configuration
    cannot run, else None).
    """
    run, s = task.run, task.run.search
    cache: dict[float, dict[str, Any]] = {}

    def point(rate: float) -> dict[str, Any]:
        if rate not in cache:
            cache[rate] = simulate_rate(run, rate, load=load) | {"eval_order": len(cache)}
        return cache[rate]

    def bracket(flag: str):
        return max_feasible_rate(
            lambda r: point(r)[flag],
            start,
            s.rel_tol,
            floor=floor,
            ceiling=ceiling,
            integer=load.integer,
        )

    try:
        load = run_load(run)
        target = task.target_rate_per_s if task.target_rate_per_s is not None else task.start_rate_per_s
        floor, ceiling = search_range(load, target, s.max_doublings, s.max_halvings)
        if not floor <= ceiling:
            raise ValueError(f"no load between {floor:g} and {ceiling:g} {load.unit} to search")
        start = min(max(task.start_rate_per_s, floor), ceiling)
        start = float(round(start)) if load.integer else start
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
        "floor_rate_per_s": floor,
        "ceiling_rate_per_s": ceiling,
        "points": _rows(run, [("search", r) for r in cache.values()]),
    }


def rates_task(task: RatesTask) -> list[dict[str, Any]]:
    """Simulate each (phase, rate, overrides) of the task; one row each, in order."""
    load = run_load(task.run)
    return _rows(task.run, [(phase, simulate_rate(task.run, rate, over, load)) for phase, rate, over in task.rates])
