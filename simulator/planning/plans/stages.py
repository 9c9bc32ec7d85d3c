"""The stages that size a candidate from its searches: capacity figures from the replicates' max rates, the
operating points (one more replica while an SLO is missed) and the capacity curves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simulator.planning.plans.figures import CandidateFigures, capacity_figures, operating_figures, set_replicas
from simulator.planning.plans.outcome import CandidateOutcome, PlanInputs, StageProgress, candidate_run, map_stage
from simulator.planning.plans.pd_ratio import with_counts
from simulator.planning.points.capacity import ReplicaScaling
from simulator.planning.points.executors import Executor
from simulator.planning.search.evaluate import RatesTask, SearchTask, rates_task, search_task
from simulator.planning.search.load import users_at
from simulator.planning.search.settings import PlanRequest

MAX_EXTRA_REPLICAS = 3
CURVE_SPAN = 1.25


def apply_searches(
    o: CandidateOutcome,
    results: list[dict[str, Any]],
    inputs: PlanInputs,
    request: PlanRequest,
    scaling: ReplicaScaling,
) -> None:
    """Set a candidate's capacity figures (or its error) from its replicates' search results."""
    o.rates_tried = [[row["rate_per_s"] for row in res["points"]] for res in results]
    o.simulated_requests += sum(row.get("num_simulated", 0) for res in results for row in res["points"])
    errors = [r["error"] for r in results if r["error"] is not None]
    if errors:
        o.status, o.reason = "error", errors[0]
        return
    c = o.candidate
    o.figures = capacity_figures(
        results, request, c.gpus_per_replica, c.price_per_gpu_hour_usd, inputs.target_rate_per_s, scaling
    )
    unit, noun = c.load.unit, "concurrency" if c.load.integer else "rate"
    if o.figures.unbounded:
        ceiling = min(r["ceiling_rate_per_s"] for r in results)
        o.notes.append(
            f"no {noun} up to {ceiling:.3g} {unit} (the search's ceiling) missed the SLOs: the max is at least that"
        )
    if o.figures.replicas is None:
        floor = max(r["floor_rate_per_s"] for r in results)
        o.reason = f"no {noun} down to {floor:.3g} {unit} (the search's floor) meets the SLOs"
        points = [row for res in results for row in res["points"]]
        slowest = min(points, key=lambda row: row["rate_per_s"], default=None)
        why = None if slowest is None else _missed(slowest, request)
        if why:
            o.reason += f" (at {slowest['rate_per_s']:.3g} {unit}: {why})"


def _missed(row: dict[str, Any], request: PlanRequest) -> str | None:
    """What a load point missed, in words: the early stop's reason, else each p99 above its bound."""
    if row.get("stop_reason"):
        return str(row["stop_reason"])
    missed = [
        f"p99 {key.upper()} {row[f'p99_{key}_ms']:.4g} ms > {bound:g} ms"
        for key, bound in request.slo_bounds.items()
        if bound is not None and row.get(f"p99_{key}_ms") is not None and row[f"p99_{key}_ms"] > bound
    ]
    return ", ".join(missed) or None


def search_stage(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
) -> list[dict[str, Any]]:
    """The exhaustive search of every (candidate, replicate); sets each outcome's capacity figures."""
    k, start, target = request.replicates, inputs.start_rate_per_s, inputs.range_centre
    tasks = [
        SearchTask(candidate_run(o.candidate, r, inputs.base_dir, request), start, target)
        for o in outcomes
        for r in range(k)
    ]
    searched = map_stage(executor, search_task, tasks, stage, "searching max rates")
    for j, o in enumerate(outcomes):
        apply_searches(o, searched[j * k : (j + 1) * k], inputs, request, scaling)
    return [row for res in searched for row in res["points"]]


def curve_rates(f: CandidateFigures, integer: bool, n: int) -> list[float]:
    """``n`` evenly spaced loads up to ``CURVE_SPAN`` times the larger max rate."""
    top = CURVE_SPAN * max(f.max_rate_per_s.value or 0.0, f.max_goodput_rate_per_s.value or 0.0)
    curve = [top * (j + 1) / n for j in range(n)]
    if integer:  # whole users, each once
        curve = sorted({float(users_at(x)) for x in curve})
    return curve


def curve_stage(
    o: CandidateOutcome, inputs: PlanInputs, request: PlanRequest, executor: Executor, stage: StageProgress
) -> list[dict[str, Any]]:
    """The chosen candidate's capacity-curve loads, the same for every replicate."""
    f = o.figures
    assert f is not None
    rates = [("curve", x, {}) for x in curve_rates(f, o.candidate.load.integer, request.search.curve_points)]
    c = o.candidate
    config = c.config
    if c.pools is not None and o.pool_figures is not None:  # sized pool by pool: the curve of its deployment
        config = with_counts(c.config, c.pools, o.pool_figures["prefill_replicas"], o.pool_figures["decode_replicas"])
    tasks = [  # a task per point: the points near and past the max rate cost the most, and the workers share them
        RatesTask(replace(candidate_run(c, r, inputs.base_dir, request), config=config), [rate])
        for r in range(request.replicates)
        for rate in rates
    ]
    rows = map_stage(executor, rates_task, tasks, stage, "capacity curve of the chosen candidate")
    out = [row | {"extra_replicas": 0} for task_rows in rows for row in task_rows]
    o.simulated_requests += sum(row.get("num_simulated", 0) for row in out)
    return out


def operating_stage(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
    curves: bool,
) -> list[dict[str, Any]]:
    """Simulate the operating points (and, first round only, the curves if ``curves``), adding replicas where an
    SLO is missed."""
    k, points = request.replicates, []
    pending = [o for o in outcomes if o.figures is not None and o.figures.replicas is not None]
    for round_ in range(MAX_EXTRA_REPLICAS + 1):
        if not pending:
            break
        tasks = []
        for o in pending:
            f = o.figures
            assert f is not None and f.rate_per_replica_s is not None
            assert f.replicas is not None and f.replicas.value is not None
            integer = o.candidate.load.integer
            operating = float(users_at(f.rate_per_replica_s)) if integer else f.rate_per_replica_s
            rates = [("operating", operating, scaling.operating_overrides(int(f.replicas.value)))]
            n = request.search.curve_points
            if round_ == 0 and n and curves:
                rates += [("curve", x, {}) for x in curve_rates(f, integer, n)]
            tasks += [RatesTask(candidate_run(o.candidate, r, inputs.base_dir, request), rates) for r in range(k)]
        label = "operating points" if round_ == 0 else f"operating points, {round_} extra replica(s)"
        rows_by_task = map_stage(executor, rates_task, tasks, stage, label)
        still = []
        for j, o in enumerate(pending):
            rows = [
                row | {"extra_replicas": round_} for task_rows in rows_by_task[j * k : (j + 1) * k] for row in task_rows
            ]
            points += rows
            o.simulated_requests += sum(row.get("num_simulated", 0) for row in rows)
            f, c = o.figures, o.candidate
            assert f is not None and f.replicas is not None
            operating_figures(f, [r for r in rows if r["phase"] == "operating"], request, scaling)
            if f.operating_meets_slo:
                o.status, o.extra_replicas = "feasible", round_
            elif round_ < MAX_EXTRA_REPLICAS:
                bumped = f.replicas.map(lambda n: n + 1)
                set_replicas(f, bumped, c.gpus_per_replica, c.price_per_gpu_hour_usd, inputs.target_rate_per_s, scaling)
                still.append(o)
            else:
                o.reason = f"the operating point misses the SLOs even with {MAX_EXTRA_REPLICAS} extra replicas"
        pending = still
    return points
