"""Capacity curves: a sized candidate's runs at ``curve_points`` loads up to ``CURVE_SPAN`` times its max rate, the
same loads for every replicate (seed), for the plan report's latency-against-load figures.

The loads are a grid evenly spaced by ``spacing`` = span x max rate / n, except that a grid load moves to the nearest
load the candidate has already simulated in full at every replicate (its search's or operating point's runs:
the same configuration and seed, no overrides, not stopped early) when one is less than half a spacing away; each
such load stands for one grid load. Those runs are not simulated again: their rows are repeated as ``curve`` rows
with ``num_simulated`` 0 (the requests were simulated, and counted, once), the statistics bit for bit those a new
run would give (a point's run depends on its configuration, load and seed only). On ``benchmarks/bench_plan.py``
the operating point and the load every replicate's search starts from stand for 2 of the 8 loads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from simulator.planning.plans.figures import CandidateFigures
from simulator.planning.plans.outcome import CandidateOutcome, PlanInputs, StageProgress, candidate_run, map_stage
from simulator.planning.plans.pd_ratio import with_counts
from simulator.planning.points.capacity import ReplicaScaling
from simulator.planning.points.executors import Executor
from simulator.planning.search.evaluate import RatesTask, rates_task
from simulator.planning.search.load import users_at
from simulator.planning.search.settings import PlanRequest

CURVE_SPAN = 1.25
PLAIN_PHASES = ("search", "probe", "operating")  # the phases whose runs a curve load may reuse
Runs = dict[float, list[dict[str, Any]]]  # load -> its row at each replicate, in replicate order


def curve_grid(f: CandidateFigures, integer: bool, n: int) -> tuple[list[float], float]:
    """``n`` evenly spaced loads up to ``CURVE_SPAN`` times the larger max rate (whole users, each once, for an
    integer load), and their spacing."""
    top = CURVE_SPAN * max(f.max_rate_per_s.value or 0.0, f.max_goodput_rate_per_s.value or 0.0)
    curve = [top * (j + 1) / n for j in range(n)]
    if integer:
        curve = sorted({float(users_at(x)) for x in curve})
    return curve, top / n


def snap(grid: list[float], spacing: float, known: Iterable[float]) -> list[tuple[float, bool]]:
    """Each grid load as (load, known): the nearest ``known`` load less than ``spacing`` / 2 away (the smaller of
    two as near; each known load used once), else the grid load itself. Sorted, each load once."""
    free = sorted(set(known))
    out: dict[float, bool] = {}
    for x in grid:
        near = [k for k in free if abs(k - x) < spacing / 2]
        if near:
            k = min(near, key=lambda k: (abs(k - x), k))
            free.remove(k)
            out[k] = True
        else:
            out[x] = out.get(x, False)
    return sorted(out.items())


def full_runs(rows: Iterable[dict[str, Any]], candidate: int, replicates: int, plain_operating: bool) -> Runs:
    """The loads every replicate of ``candidate`` has simulated in full without overrides among ``rows``, with
    those rows (the first of each replicate's at a load). ``plain_operating``: whether the operating points ran
    without overrides (``ReplicaScaling.operating_overrides``), so theirs count."""
    phases = PLAIN_PHASES if plain_operating else tuple(p for p in PLAIN_PHASES if p != "operating")
    by_load: dict[float, dict[int, dict[str, Any]]] = {}
    for row in rows:
        if row["candidate"] == candidate and row["phase"] in phases and not row["stopped_early"]:
            by_load.setdefault(row["rate_per_s"], {}).setdefault(row["replicate"], row)
    return {
        load: [runs[r] for r in range(replicates)]
        for load, runs in by_load.items()
        if all(r in runs for r in range(replicates))
    }


def as_curve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of runs already simulated, as ``curve`` rows (``num_simulated`` 0: counted where they ran)."""
    return [
        {k: v for k, v in row.items() if k != "eval_order"}
        | {"phase": "curve", "num_simulated": 0, "extra_replicas": 0}
        for row in rows
    ]


def plain_operating(o: CandidateOutcome, scaling: ReplicaScaling) -> bool:
    """Whether every operating point of ``o`` ran without config overrides (as the curve's runs do)."""
    f = o.figures
    if f is None or f.replicas is None or f.replicas.value is None:
        return False
    last = int(f.replicas.value)
    return all(scaling.operating_overrides(n) == {} for n in range(last - o.extra_replicas, last + 1))


def curve_stage(
    o: CandidateOutcome,
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
    rows: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The chosen candidate's capacity curve, the same loads for every replicate; ``rows``: the plan's rows so far
    (the runs a curve load may reuse)."""
    f = o.figures
    assert f is not None
    c, k = o.candidate, request.replicates
    grid, spacing = curve_grid(f, c.load.integer, request.search.curve_points)
    config = c.config
    known: Runs = {}
    if c.pools is not None and o.pool_figures is not None:  # sized pool by pool: the curve of its deployment
        config = with_counts(c.config, c.pools, o.pool_figures["prefill_replicas"], o.pool_figures["decode_replicas"])
    else:
        known = full_runs(rows, c.index, k, plain_operating(o, scaling))
    loads = snap(grid, spacing, known)
    # a task per point, the highest loads first: the points past the max rate cost the most (up to 2-3x), and the
    # workers share the rest after them (the stage ends with the cheap points, not with one worker's costly one)
    todo = sorted(((x, r) for r in range(k) for x, reused in loads if not reused), key=lambda p: (-p[0], p[1]))
    tasks = [
        RatesTask(replace(candidate_run(c, r, inputs.base_dir, request), config=config), [("curve", x, {})])
        for x, r in todo
    ]
    done = map_stage(executor, rates_task, tasks, stage, "capacity curve of the chosen candidate") if tasks else []
    out = [row | {"extra_replicas": 0} for task_rows in done for row in task_rows]
    out.sort(key=lambda row: (row["replicate"], row["rate_per_s"]))
    o.simulated_requests += sum(row.get("num_simulated", 0) for row in out)
    return out + [row for x, reused in loads if reused for row in as_curve(known[x])]
