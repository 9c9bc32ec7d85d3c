"""Worker side of a plan: simulate a candidate at given loads and search its maximum load.

Tasks are plain data and the functions are pure, so they run alike in this process, in a
process pool or on Ray. Every load point of a (candidate, replicate) uses the same seed:
common random numbers, so the arrival times at rate r are one sample path scaled by 1/r
and the feasibility of a rate is (in practice) monotone. What a load is (an arrival rate,
a trace's time scale, a session rate, a number of closed-loop users) is
``simulator.planning.search.load``'s business; "rate" below is any of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.build import build
from simulator.config.errors import format_validation_error
from simulator.config.schema import ScenarioConfig
from simulator.planning.points.overrides import apply_overrides
from simulator.planning.search.early_stop import VerdictKnown, VerdictWatch
from simulator.planning.search.load import Load, plan_load, search_range
from simulator.planning.search.rates import Probe, guided_max_rate, max_feasible_rate
from simulator.planning.search.settings import SearchSettings
from simulator.planning.search.shared import kept_cost_model
from simulator.planning.search.steady import SloTargets, steady_stats


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
    ``guided``: ``search.guided_max_rate`` steered by the margins, ``capacity_hint`` (the
    analytic bound, for the margins' model), ``first_step`` (the relative step of the first
    expansion) and ``slope_hints`` (the margins' slopes near another replicate's thresholds);
    the attainment search starts from the runs the p99 search made. Else
    ``search.max_feasible_rate`` (the exhaustive search).
    """

    run: CandidateRun
    start_rate_per_s: float
    target_rate_per_s: float | None = None
    guided: bool = False
    first_step: float = 1.0
    capacity_hint: float | None = None
    slope_hints: tuple[float | None, float | None] = (None, None)  # d margin / d rate near each threshold


@dataclass(frozen=True, slots=True)
class RatesTask:
    """Rates to simulate, each with a phase label (``operating``, ``curve``) and config overrides."""

    run: CandidateRun
    rates: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProbeTask:
    """One search point of a (candidate, replicate), simulated as the guided search does (stopped early)."""

    run: CandidateRun
    rate_per_s: float


def _validated(data: dict[str, Any]) -> ScenarioConfig:
    """``data`` as a scenario; a candidate's problem is one line (ValueError), as a plan reports it."""
    try:
        return ScenarioConfig.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc)) from None


def run_load(run: CandidateRun) -> Load:
    """How the load points of ``run`` are configured (reads its trace, draws its sessions); ValueError if none."""
    base_dir = Path(run.base_dir) if run.base_dir is not None else None
    return plan_load(_validated(run.config), run.seed, base_dir, run.search.requests_per_point)


def rate_config(
    run: CandidateRun, rate_per_s: float, overrides: dict[str, Any] | None = None, load: Load | None = None
) -> ScenarioConfig:
    """The candidate's scenario at load ``rate_per_s`` with the plan's point size, seed and SLOs (and ``overrides``)."""
    load = load if load is not None else run_load(run)
    slo = {"ttft_ms": run.slo.ttft_p99_ms, "tpot_ms": run.slo.tpot_p99_ms, "e2el_ms": run.slo.e2el_p99_ms}
    data = apply_overrides(run.config, (overrides or {}) | load.overrides(rate_per_s) | {"seed": run.seed, "slo": slo})
    return _validated(data)


def simulate_rate(
    run: CandidateRun,
    rate_per_s: float,
    overrides: dict[str, Any] | None = None,
    load: Load | None = None,
    early_stop: bool = False,
    slo_only: bool = False,
) -> dict[str, Any]:
    """One load point: steady-state statistics plus the whole run's vLLM throughput and goodput.

    ``early_stop``: end the run once both verdicts are certainly False (``early_stop.VerdictWatch``,
    where it applies); such a point has its verdicts, ``stopped_early`` True, the requests
    admitted by then as ``num_simulated`` and no statistics (NaN); ``slo_only`` ends it once ``meets_slo``
    is certainly False (``meets_attainment`` None where it was not known yet). Raises ValueError when the
    configuration cannot run (a model that does not fit).
    """
    cfg = rate_config(run, rate_per_s, overrides, load)
    base_dir = Path(run.base_dir) if run.base_dir is not None else None
    # the process's cost models, their memos filled by its earlier points
    sim = build(cfg, base_dir=base_dir, record_steps=False, cost_model_for=kept_cost_model)
    s = run.search
    if early_stop and VerdictWatch.applies(sim.stream, run.slo):
        delay = cfg.client.stream_delay_s
        VerdictWatch(sim.stream, run.slo, s.warmup_fraction, s.cooldown_fraction, delay, slo_only=slo_only).attach(sim)
        try:
            result = sim.run()
        except VerdictKnown as stop:
            return _stopped_row(rate_per_s, stop)
    else:
        result = sim.run()
    stats = steady_stats(result.requests, run.slo, s.warmup_fraction, s.cooldown_fraction, s.max_growth_fraction)
    summary = result.summary
    completed = summary["completed"]
    return {
        "rate_per_s": rate_per_s,
        "num_simulated": len(result.requests),
        "stopped_early": False,
        "stop_reason": None,
        **stats,
        "request_throughput": summary["request_throughput"],
        "request_goodput": summary.get("request_goodput"),
        "output_throughput": summary["output_throughput"],
        "mean_output_tokens": summary["total_output_tokens"] / completed if completed else None,
    }


def slo_margin(row: dict[str, Any], slo: SloTargets) -> float | None:
    """How far a point is from meeting the p99 bounds: the largest log(p99 / bound), <= 0 when met.

    None when the run tells nothing finite: a p99 that is infinite or missing (a run stopped
    early), or a point called infeasible for its growing queue while its latencies are within
    the bounds (the margin would point the wrong way).
    """
    logs = []
    for name, bound in (("ttft", slo.ttft_p99_ms), ("tpot", slo.tpot_p99_ms), ("e2el", slo.e2el_p99_ms)):
        if bound is None:
            continue
        value = row.get(f"p99_{name}_ms")
        if value is None or math.isnan(value):
            if name == "tpot" and not row.get("stopped_early"):
                continue  # one-token outputs only: no TPOT to bound
            return None
        if not (math.isfinite(value) and value > 0):
            return None
        logs.append(math.log(value / bound))
    if not logs:
        return None
    m = max(logs)
    if row["meets_slo"]:
        return min(m, 0.0)
    return m if m > 0 else None


def attainment_margin(row: dict[str, Any], slo: SloTargets) -> float | None:
    """How far a point is from the attainment target: log of ``steady.attainment_ratio`` (<= 0 when met).

    That ratio (the worst-bound lateness of the request at the attainment quantile) moves
    with load as a latency tail does, unlike the attainment itself, which stays near 1 and
    then drops at once when every request of a shared batch slows together. None as
    ``slo_margin`` says.
    """
    value = row.get("attainment_ratio")
    if value is None or not (math.isfinite(value) and value > 0):
        return None
    m = math.log(value)
    if row["meets_attainment"]:
        return min(m, 0.0)
    return m if m > 0 else None


STAT_KEYS = (
    "num_measured",
    "window_rate_per_s",
    *(f"{stat}_{name}_ms" for name in ("ttft", "tpot", "e2el") for stat in ("mean", "p50", "p90", "p99")),
    "slo_attainment",
    "attainment_ratio",
    "growth_fraction",
)


def _stopped_row(rate_per_s: float, stop: VerdictKnown) -> dict[str, Any]:
    """The row of a point whose run ``VerdictWatch`` ended: its verdicts (both False) and no statistics."""
    return (
        {"rate_per_s": rate_per_s, "num_simulated": stop.num_admitted, "stopped_early": True}
        | dict.fromkeys(STAT_KEYS, math.nan)
        | {"stable": None, "meets_slo": False, "stop_reason": stop.reason}
        | {"meets_attainment": False if stop.attainment_known else None}
        | dict.fromkeys(("request_throughput", "request_goodput", "output_throughput", "mean_output_tokens"))
    )


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
            cache[rate] = simulate_rate(run, rate, load=load, early_stop=task.guided) | {"eval_order": len(cache)}
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

    margins = {"meets_slo": slo_margin, "meets_attainment": attainment_margin}

    def probe(rate: float, flag: str) -> Probe:
        row = point(rate)
        return Probe(bool(row[flag]), margins[flag](row, run.slo))

    def guided(flag: str, start: float, known: bool, slope: float | None):
        return guided_max_rate(
            lambda r: probe(r, flag),
            start,
            s.rel_tol,
            floor=floor,
            ceiling=ceiling,
            integer=load.integer,
            first_step=task.first_step,
            known={r: probe(r, flag) for r in cache} if known else None,
            capacity_hint=task.capacity_hint,
            slope_hint=slope,
        )

    def _slope(b, flag: str) -> float | None:
        """The margin's slope across the final bracket (per unit of load), where both ends have one."""
        if b.upper_rate_per_s is None or b.max_rate_per_s <= 0:
            return None
        m_lo, m_hi = (margins[flag](cache[r], run.slo) for r in (b.max_rate_per_s, b.upper_rate_per_s))
        if m_lo is None or m_hi is None or not m_hi > m_lo:
            return None
        return (m_hi - m_lo) / (b.upper_rate_per_s - b.max_rate_per_s)

    try:
        load = run_load(run)
        target = task.target_rate_per_s if task.target_rate_per_s is not None else task.start_rate_per_s
        floor, ceiling = search_range(load, target, s.max_doublings, s.max_halvings)
        if not floor <= ceiling:
            raise ValueError(f"no load between {floor:g} and {ceiling:g} {load.unit} to search")
        start = min(max(task.start_rate_per_s, floor), ceiling)
        start = float(round(start)) if load.integer else start
        if task.guided:
            slo = guided("meets_slo", start, known=False, slope=task.slope_hints[0])
            goodput = guided("meets_attainment", start, known=True, slope=task.slope_hints[1])
        else:
            slo = bracket("meets_slo")
            goodput = bracket("meets_attainment")
    except ValueError as exc:
        return {"error": str(exc), "points": _rows(run, [("search", r) for r in cache.values()])}
    return {
        "error": None,
        "slopes": (_slope(slo, "meets_slo"), _slope(goodput, "meets_attainment")),
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


def search_or_probe_task(task: SearchTask | ProbeTask) -> dict[str, Any]:
    """``search_task`` or ``probe_task``, by the task's kind: one stage may run both."""
    return probe_task(task) if isinstance(task, ProbeTask) else search_task(task)


def probe_task(task: ProbeTask) -> dict[str, Any]:
    """The row of one load point, as the guided search would have it (``phase`` "probe"; the same seed, so the
    same ``meets_slo``, the verdict a probe reads), stopped as soon as ``meets_slo`` is certainly False (its
    ``meets_attainment`` then None where not known yet); ``{"error": message}`` when the configuration cannot
    run."""
    try:
        row = simulate_rate(task.run, task.rate_per_s, load=run_load(task.run), early_stop=True, slo_only=True)
    except ValueError as exc:
        return {"error": str(exc)}
    return _rows(task.run, [("probe", row)])[0]
