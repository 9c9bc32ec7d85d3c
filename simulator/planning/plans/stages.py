"""The stages that size a candidate from its searches: capacity figures from the replicates' max rates, the
operating points (one more replica while an SLO is missed) and the capacity curves."""

from __future__ import annotations

from typing import Any

from simulator.planning.plans.curves import Runs, as_curve, curve_grid, full_runs, snap
from simulator.planning.plans.figures import capacity_figures, operating_figures, set_replicas
from simulator.planning.plans.outcome import CandidateOutcome, PlanInputs, StageProgress, candidate_run, map_stage
from simulator.planning.points.capacity import ReplicaScaling
from simulator.planning.points.executors import Executor
from simulator.planning.search.evaluate import RatesTask, SearchTask, rates_task, search_task
from simulator.planning.search.load import users_at
from simulator.planning.search.settings import PlanRequest

MAX_EXTRA_REPLICAS = 3


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


def operating_stage(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
    curves: bool,
    search_rows: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Simulate the operating points (and, first round only, the curves if ``curves``: ``curves.curve_stage``'s
    loads, those the ``search_rows`` or the operating point ran at every replicate not simulated again), adding
    replicas where an SLO is missed."""
    k, points = request.replicates, []
    reused: dict[int, tuple[Runs, list[float]]] = {}  # per candidate: the runs its curve reuses, and their loads
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
            overrides = scaling.operating_overrides(int(f.replicas.value))
            rates = [("operating", operating, overrides)]
            n = request.search.curve_points
            if round_ == 0 and n and curves:
                grid, spacing = curve_grid(f, integer, n)
                known = full_runs(search_rows or [], o.candidate.index, k, plain_operating=False)
                plain = overrides == {}
                loads = snap(grid, spacing, [*known, *([operating] if plain else [])])
                rates += [("curve", x, {}) for x, was in loads if not was]
                reused[o.candidate.index] = (known, [x for x, was in loads if was])
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
            if o.candidate.index in reused:  # the curve's loads run already: the search's, or this operating point
                known, loads = reused.pop(o.candidate.index)
                here = {row["replicate"]: row for row in rows if row["phase"] == "operating"}
                points += [row for x in loads for row in as_curve(known.get(x) or [here[r] for r in range(k)])]
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
