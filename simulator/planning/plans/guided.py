"""The guided plan: candidates searched and sized in batches, the likely cheapest first, the rest pruned
when their best case (analytic bound, one copy's price, or the probe: loads missed that average at most the
load its copies must carry) is dearer than the cheapest deployment found; see ``guided_plan``."""

from __future__ import annotations

import math
from typing import Any

from simulator.planning.plans.outcome import (
    Candidate,
    CandidateOutcome,
    PlanInputs,
    SearchCache,
    StageProgress,
    VerdictProgress,
    candidate_run,
    map_stage,
    tally,
)
from simulator.planning.plans.pruning import Pruner, Reason, cheapest
from simulator.planning.plans.stages import apply_searches, operating_stage
from simulator.planning.points.capacity import ReplicaScaling
from simulator.planning.points.executors import Executor
from simulator.planning.search.evaluate import ProbeTask, SearchTask, search_or_probe_task, search_task
from simulator.planning.search.load import search_range
from simulator.planning.search.settings import PlanRequest

# The first step of a later replicate's search from the first one's answer, relative: the
# replicates' max rates differ by several percent (the p99 of 1,400 window requests).
WARM_STEP = 0.05


def guided_plan(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
    verdicts: VerdictProgress | None,
    cache: SearchCache | None = None,
) -> list[dict[str, Any]]:
    """Search and size the candidates in batches, the likely cheapest first, pruning what cannot win.

    A candidate is pruned when it must cost more than the cheapest feasible deployment of the
    plan (strictly: a tie is planned, as the ranking's tie-breaks need it), and a tuned
    variant only when it must also cost more than its family's cheapest feasible variant (so
    each family's best stays right); ``prune`` says how it is known (its analytic best case,
    one copy's price, or its probe: loads its replicates miss that average at most the probe
    load, ``prune.probe_verdict``). Until a feasible deployment is known, candidates are planned
    one at a time (the likely cheapest, the surest of a tie first); then before each batch the
    candidates left are probed against the cheapest deployment found so far, so a clearly
    dearer one costs a point per replicate, one that straddles the probe load a few, instead
    of a search. The rule is
    applied again at the end to every candidate against the final cheapest deployment (its
    probe loads simulated where missing), so the answer does not depend on the batches (their
    size follows the workers): a candidate planned before the cheapest deployment was known
    is marked pruned all the same. Should a planned candidate's max rate exceed its analytic
    bound (the bound is a long-run one; a finite run has not been seen to beat it), the
    bounds are not trusted: nothing is pruned by a bound. ``search.rank_all``: nothing is
    pruned at all.
    """
    pruner = Pruner(outcomes, inputs, request, executor, stage, scaling)
    pruning = not request.search.rank_all
    points, trusted = _plan_in_batches(pruner, pruning, verdicts, cache)
    best = cheapest(outcomes)
    reasons = pruner.reasons(best, trusted) if pruning else {}
    points += _mark_pruned(pruner, reasons, trusted)
    tally(outcomes, verdicts, None, best)
    return [p for p in points if p["candidate"] not in reasons or p["phase"] == "probe"]


def _plan_in_batches(
    pruner: Pruner, pruning: bool, verdicts: VerdictProgress | None, cache: SearchCache | None
) -> tuple[list[dict[str, Any]], bool]:
    """Search and size the candidates batch by batch, probing the rest against the cheapest found before each.

    Returns the points and whether every bound held (``trusted``).
    """
    outcomes, executor = pruner.outcomes, pruner.executor
    inputs, request, stage, scaling = pruner.inputs, pruner.request, pruner.stage, pruner.scaling
    batch_size = max(1, executor.workers)
    points: list[dict[str, Any]] = []
    # pool-sized ones: ``pools.pd_stage``
    pending = pruner.likely_cheapest_first(o for o in outcomes if o.candidate.pools is None)
    planned: set[int] = set()
    shown_dearer: set[int] = set()  # probed dearer than the cheapest deployment known then (still so at the end)
    trusted = True  # every planned candidate's max rates within its bound (else no bound prunes)
    while pending:
        best = cheapest(outcomes)
        if pruning:
            if trusted:
                pending = [o for o in pending if not pruner.prunable(o, best)]
            shown_dearer |= pruner.probe(pending, best, "probing the candidates left against the cheapest so far")
            pending = [o for o in pending if o.candidate.index not in shown_dearer]
        # until a deployment is known, one candidate at a time (its replicates in parallel): the next are then
        # probed against it instead of searched
        size = 1 if pruning and not math.isfinite(best) else batch_size
        batch, pending = pending[:size], pending[size:]
        if not batch:
            break
        # a lone first replicate leaves workers idle: they simulate the first probe points the likely cost of
        # the candidate searched would set (used if its cost turns out so, as it is likely to; the verdicts are
        # the same either way, only the work differs)
        guess = pruner.likely_cost(batch[0]) if size == 1 and executor.workers > 1 else math.inf
        alongside = pruner.probe_tasks([o for o in pending if not (trusted and pruner.prunable(o, guess))], guess)
        found, probed = _guided_search_stage(batch, inputs, request, executor, stage, scaling, cache, alongside)
        pruner.store(alongside, probed)
        for row in found:
            pruner.rows.setdefault((row["candidate"], row["replicate"], row["rate_per_s"]), row)
        points += found
        points += operating_stage(batch, inputs, request, executor, stage, scaling, curves=False)
        planned |= {o.candidate.index for o in batch}
        if trusted and any(exceeds_bound(o) for o in batch):
            trusted = False
            # a bound failed: what it left out must be planned after all
            left = planned | shown_dearer
            pending = pruner.likely_cheapest_first(
                o for o in outcomes if o.candidate.index not in left and o.candidate.pools is None
            )
        tally(outcomes, verdicts, pruner.bounds if trusted else None, cheapest(outcomes), shown_dearer)
    return points, trusted


def _mark_pruned(pruner: Pruner, reasons: dict[int, Reason], trusted: bool) -> list[dict[str, Any]]:
    """Set each pruned outcome's status, reason, work and recorded probe rates; the probe rows to keep."""
    points: list[dict[str, Any]] = []
    for o in pruner.outcomes:
        index = o.candidate.index
        if index in reasons:
            reason, least, recorded = reasons[index]
            kept_work = sum(row.get("num_simulated", 0) for row in recorded)
            o.status, o.figures, o.extra_replicas, o.notes = "pruned", None, 0, []
            o.unrecorded_work += o.simulated_requests + pruner.probe_work[index] - kept_work
            o.simulated_requests, o.reason, o.least_cost_per_hour_usd = kept_work, reason, least
            by_replicate: dict[int, list[float]] = {}
            for row in recorded:
                by_replicate.setdefault(row["replicate"], []).append(row["rate_per_s"])
            o.rates_tried = [by_replicate[r] for r in sorted(by_replicate)]
            points += [row | {"extra_replicas": 0} for row in recorded]
        else:
            o.unrecorded_work += pruner.probe_work[
                index
            ]  # its probes said "plan it": batch-dependent, not in plan.json
            if not trusted and exceeds_bound(o):
                o.notes.append("its simulated max rate exceeds its analytic bound: no candidate was pruned by a bound")
    return points


def exceeds_bound(o: CandidateOutcome) -> bool:
    """Whether a planned candidate's max rate (any replicate's mean) went above its analytic bound."""
    b, f = o.candidate.bound, o.figures
    if b is None or b.upper_rate_per_s is None or f is None:
        return False
    return any((x or 0.0) > b.upper_rate_per_s for x in (f.max_rate_per_s.value, f.max_goodput_rate_per_s.value))


def _capacity(c: Candidate) -> float | None:
    return None if c.bound is None else c.bound.upper_rate_per_s


def _guided_search_stage(
    batch: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
    cache: SearchCache | None = None,
    alongside: list[ProbeTask] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The guided search of a batch: every first replicate from its analytic estimate and bound, then the
    other replicates from the first one's answers. Sets each outcome's capacity figures. ``alongside``: probe
    points simulated with the first replicates. Returns the search points and the rows of ``alongside``."""
    k, target, s = request.replicates, inputs.range_centre, request.search
    floor, ceiling = search_range(inputs.load, target, s.max_doublings, s.max_halvings)
    cache = {} if cache is None else cache

    def start_of(c: Candidate) -> float:
        if s.start_rate_per_s is not None or c.bound is None or c.bound.estimate_rate_per_s is None:
            return inputs.start_rate_per_s
        x = min(max(c.bound.estimate_rate_per_s, floor), ceiling)
        return float(max(1, round(x))) if c.load.integer else x

    first = [
        SearchTask(
            candidate_run(o.candidate, 0, inputs.base_dir, request),
            start_of(o.candidate),
            target,
            guided=True,
            capacity_hint=_capacity(o.candidate),
        )
        for o in batch
        if (o.candidate.index, 0) not in cache
    ]
    alongside = alongside or []
    tasks: list[SearchTask | ProbeTask] = [*first, *alongside]
    label = "searching max rates (first replicates)"
    done = map_stage(executor, search_or_probe_task, tasks, stage, label) if tasks else []
    done, probed = done[: len(first)], done[len(first) :]
    for task, res in zip(first, done, strict=True):
        cache[task.run.candidate, 0] = res
    firsts = [cache[o.candidate.index, 0] for o in batch]
    rest = []
    for o, r0 in zip(batch, firsts, strict=True):
        if r0["error"] is not None:
            continue
        # the first replicate's answer is the likely threshold: one tolerance above it closes the bracket
        warm = r0["max_rate_per_s"] > 0 and r0["upper_rate_per_s"] is not None
        start = r0["max_rate_per_s"] if warm else start_of(o.candidate)
        if o.candidate.load.integer:
            start = float(max(1, round(start)))
        for r in range(1, k):
            if (o.candidate.index, r) in cache:
                continue
            rest.append(
                SearchTask(
                    candidate_run(o.candidate, r, inputs.base_dir, request),
                    start,
                    target,
                    guided=True,
                    first_step=WARM_STEP if warm else 1.0,
                    capacity_hint=_capacity(o.candidate),
                    slope_hints=r0.get("slopes", (None, None)),
                )
            )
    others = map_stage(executor, search_task, rest, stage, "searching max rates (other replicates)") if rest else []
    for task, res in zip(rest, others, strict=True):
        cache[task.run.candidate, task.run.replicate] = res
    by_candidate = {
        o.candidate.index: [cache[o.candidate.index, r] for r in range(k if r0["error"] is None else 1)]
        for o, r0 in zip(batch, firsts, strict=True)
    }
    points = []
    for o in batch:
        results = by_candidate[o.candidate.index]
        points += [row for res in results for row in res["points"]]
        apply_searches(o, results, inputs, request, scaling)
    return points, probed
