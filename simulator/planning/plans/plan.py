"""``servesim plan``: size and price every candidate for a target load under SLOs, and rank them.

Stages (each a batch of independent tasks on the executor):

1. search: per (candidate, replicate), the maximum rate meeting the p99 SLOs and the one
   meeting the attainment target (``evaluate.search_task``); a "rate" is the workload's
   load in its unit (``load``: requests/s, sessions/s, or closed-loop users);
2. operating points: per (candidate, replicate), one replica at target / replicas, plus
   ``curve_points`` evenly spaced rates for capacity curves (the same rates for every
   replicate, so curves get intervals; ``curves``: a rate the search or the operating point
   ran at every replicate stands for the grid rate within half a spacing, not run again).
   A candidate whose operating point misses an SLO (its max rate was optimistic for some
   seeds) gets one more replica and is simulated again, up to ``MAX_EXTRA_REPLICAS`` times.

Then: feasible candidates ranked by cost per hour (ties: cost per million output tokens,
then p99 latency), the cheapest chosen, and the Pareto frontier of cost per hour against
the operating point's p99 latency. See ``figures`` for the definitions and
``PlanResult.write`` for the output files.

This module runs the plan (``execute_plan``, or ``execute_load_curve`` for several targets);
``prepare`` validates its inputs, ``pools`` sizes pool-by-pool candidates (``--pd-ratio``),
``result`` ranks and writes. The default search and its pruning are ``guided`` and ``pruning``;
the stages both searches share (capacity figures, operating points) are ``stages``, the curves ``curves``; the
candidates, their outcomes and the executor plumbing are ``outcome``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from simulator.planning.plans.candidates import CandidateSet
from simulator.planning.plans.curves import curve_stage
from simulator.planning.plans.guided import guided_plan
from simulator.planning.plans.outcome import (
    CandidateOutcome,
    PlanInputs,
    SearchCache,
    StageProgress,
    VerdictProgress,
    no_progress,
    tally,
)
from simulator.planning.plans.pools import pd_stage
from simulator.planning.plans.prepare import bound_candidates, prepare_plan
from simulator.planning.plans.result import PlanResult, plan_result, rank_outcomes
from simulator.planning.plans.stages import operating_stage, search_stage
from simulator.planning.points.capacity import IndependentReplicas, ReplicaScaling
from simulator.planning.points.executors import Executor
from simulator.planning.search.load import check_load
from simulator.planning.search.settings import PlanRequest


def run_plan(
    base: dict[str, Any],
    base_dir: Path | None,
    scenario_label: str,
    cset: CandidateSet,
    request: PlanRequest,
    executor: Executor,
    prices: dict[str, float] | None = None,
    stage: StageProgress | None = None,
) -> PlanResult:
    """``prepare_plan`` then ``execute_plan``."""
    inputs = prepare_plan(base, base_dir, scenario_label, cset, request, prices)
    return execute_plan(inputs, request, executor, stage)


def execute_plan(
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress | None = None,
    scaling: ReplicaScaling | None = None,
    verdicts: VerdictProgress | None = None,
    cache: SearchCache | None = None,
) -> PlanResult:
    """Plan every candidate; see the module docstring.

    ``cache`` holds the guided searches by (candidate, replicate) across plans of the same
    inputs at other targets (``execute_load_curve``).

    ``verdicts(decided, total, text)`` hears of the candidates decided so far (feasible,
    infeasible, pruned, error) with the running tally.
    """
    stage = stage or no_progress
    scaling = scaling or IndependentReplicas()
    inputs = bound_candidates(inputs, request)  # while the executor's workers start
    outcomes = [CandidateOutcome(c) for c in inputs.candidates]
    pooled = [o for o in outcomes if o.candidate.pools is not None]
    if request.search.exhaustive:
        whole = [o for o in outcomes if o.candidate.pools is None]
        points = pd_stage(pooled, inputs, request, executor, stage) if pooled else []
        searched = search_stage(whole, inputs, request, executor, stage, scaling)
        points += searched
        points += operating_stage(whole, inputs, request, executor, stage, scaling, curves=True, search_rows=searched)
        rank_outcomes(outcomes, request)
        tally(outcomes, verdicts)
        return plan_result(outcomes, points, request, inputs)
    points = pd_stage(pooled, inputs, request, executor, stage) if pooled else []
    points += guided_plan(outcomes, inputs, request, executor, stage, scaling, verdicts, cache)
    rank_outcomes(outcomes, request)
    ranked = sorted((o for o in outcomes if o.rank is not None), key=lambda o: o.rank or 0)
    if ranked and request.search.curve_points:
        points += curve_stage(ranked[0], inputs, request, executor, stage, scaling, points)
    return plan_result(outcomes, points, request, inputs)


def execute_load_curve(
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    targets: list[float],
    stage: StageProgress | None = None,
    verdicts: VerdictProgress | None = None,
) -> PlanResult:
    """Plan each load of ``targets``; the result is the last one's plan with ``load_curve``: per target the cheapest
    deployment (chosen candidate, replicas, GPUs, cost per hour).

    The searches are shared: one search range (centred on the first target) for all, and
    the guided searches run once per (candidate, replicate) (the exhaustive ones once per
    target). ValueError naming ``--target-rate`` for a load a point cannot be simulated at.
    """
    for t in targets:
        check_load(inputs.load, t, "--target-rate")
    cache: SearchCache = {}
    inputs = bound_candidates(inputs, request)  # once, for every target
    curve, result, work = [], None, 0
    for t in targets:
        at = dataclasses.replace(inputs, target_rate_per_s=t, range_rate_per_s=targets[0])
        result = execute_plan(at, request, executor, stage, verdicts=verdicts, cache=cache)
        work += result.simulated_requests - _cached_work(cache)  # each plan counts the shared searches again
        plan = result.plan
        chosen = next((c for c in plan["candidates"] if c["chosen"]), None)
        pools = None if chosen is None else chosen.get("pools")
        curve.append(
            {
                "target_rate_per_s": t,
                "chosen": plan["chosen"],
                "replicas": None if chosen is None else chosen["replicas"]["value"],
                "prefill_replicas": None if pools is None else pools.get("prefill_replicas"),
                "decode_replicas": None if pools is None else pools.get("decode_replicas"),
                "num_gpus": None if chosen is None else chosen["num_gpus"]["value"],
                "cost_per_hour_usd": None if chosen is None else chosen["cost_per_hour_usd"]["value"],
                "ranking": plan["ranking"],
            }
        )
    assert result is not None
    result.plan["load_curve"] = curve
    result.simulated_requests = work + _cached_work(cache)
    return result


def _cached_work(cache: SearchCache) -> int:
    return sum(row.get("num_simulated", 0) for res in cache.values() for row in res["points"])
