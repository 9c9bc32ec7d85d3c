"""The guided plan: candidates searched and sized in batches, the likely cheapest first, the rest pruned
when their best case (analytic bound, one copy's price, or the probe: loads missed that average at most the
load its copies must carry) is dearer than the cheapest deployment found; see ``guided_plan``."""

from __future__ import annotations

import math
from typing import Any

from simulator.planning.capacity import ReplicaScaling
from simulator.planning.evaluate import ProbeTask, SearchTask, probe_task, search_or_probe_task, search_task
from simulator.planning.executors import Executor
from simulator.planning.load import search_range
from simulator.planning.outcome import (
    Candidate,
    CandidateOutcome,
    PlanInputs,
    SearchCache,
    StageProgress,
    VerdictProgress,
    candidate_run,
    final_cost,
    map_stage,
    tally,
)
from simulator.planning.prune import (
    MAX_PROBE_ROUNDS,
    ONE_COPY_OVER,
    ProbeVerdict,
    copies_within,
    probe_load,
    probe_verdict,
)
from simulator.planning.settings import PlanRequest
from simulator.planning.stages import apply_searches, operating_stage

# The first step of a later replicate's search from the first one's answer, relative: the
# replicates' max rates differ by several percent (the p99 of 1,400 window requests).
WARM_STEP = 0.05


def lower_bound_cost(c: Candidate, target_rate_per_s: float, scaling: ReplicaScaling) -> float | None:
    """The least a deployment of ``c`` costs per hour: the replicas its analytic bound needs (None: no bound)."""
    if c.bound is None or c.bound.upper_rate_per_s is None:
        return None
    replicas = scaling.replicas_for(target_rate_per_s, c.bound.upper_rate_per_s)
    if replicas is None:
        return None
    return replicas * c.gpus_per_replica * c.price_per_gpu_hour_usd


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
    target, k, s = inputs.target_rate_per_s, request.replicates, request.search
    floor, ceiling = search_range(inputs.load, inputs.range_centre, s.max_doublings, s.max_halvings)
    bounds = {o.candidate.index: lower_bound_cost(o.candidate, target, scaling) for o in outcomes}
    pruning = not s.rank_all

    def lb(o: CandidateOutcome) -> float | None:
        return bounds[o.candidate.index]

    def cheapest(within: list[CandidateOutcome]) -> float:
        costs = [c for c in (final_cost(o) for o in within) if c is not None]
        return min(costs, default=math.inf)

    families: dict[str | None, list[CandidateOutcome]] = {}
    for o in outcomes:
        families.setdefault(o.candidate.family, []).append(o)

    def threshold(o: CandidateOutcome, best: float) -> float:
        """What it must cost more than to be pruned: the cheapest deployment, or (a tuned variant) its
        family's cheapest, which is never less."""
        family = o.candidate.family
        return best if family is None else cheapest(families[family])

    def prunable(o: CandidateOutcome, best: float) -> bool:
        """Its analytic best case costs more than the threshold: it can be neither the plan's choice nor its
        family's best."""
        cost = lb(o)
        return cost is not None and cost > threshold(o, best)

    def copy_cost(o: CandidateOutcome) -> float:
        return o.candidate.gpus_per_replica * o.candidate.price_per_gpu_hour_usd

    def load_of(o: CandidateOutcome, best: float) -> float | None:
        c = o.candidate
        return probe_load(copy_cost(o), threshold(o, best), target, scaling, floor, ceiling, c.load.integer)

    rows: dict[tuple[int, int, float], dict[str, Any]] = {}  # (candidate, replicate, load) -> a point's row
    probe_work: dict[int, int] = dict.fromkeys((o.candidate.index for o in outcomes), 0)

    def verdict(o: CandidateOutcome, load: float) -> ProbeVerdict:
        i = o.candidate.index
        return probe_verdict(
            load, k, lambda r, x: rows.get((i, r, x)), s.rel_tol, floor, ceiling, o.candidate.load.integer
        )

    def probe_tasks(within: list[CandidateOutcome], best: float) -> list[ProbeTask]:
        """The probe points to simulate next against ``best`` (the next round of each verdict still open)."""
        tasks = []
        for o in within:
            load = load_of(o, best)
            if load is not None and load != ONE_COPY_OVER:
                tasks += [
                    ProbeTask(candidate_run(o.candidate, r, inputs.base_dir, request), x)
                    for r, x in verdict(o, load).pending
                ]
        return tasks

    def store(tasks: list[ProbeTask], results: list[dict[str, Any]]) -> None:
        for task, row in zip(tasks, results, strict=True):
            rows[task.run.candidate, task.run.replicate, task.rate_per_s] = row
            probe_work[task.run.candidate] += row.get("num_simulated", 0)

    def probe(within: list[CandidateOutcome], best: float, label: str) -> set[int]:
        """Simulate the probe points not yet known, round by round; the candidates shown dearer than their threshold."""
        for _ in range(MAX_PROBE_ROUNDS):
            tasks = probe_tasks(within, best)
            if not tasks:
                break
            store(tasks, map_stage(executor, probe_task, tasks, stage, label))
        out = set()
        for o in within:
            load = load_of(o, best)
            if load == ONE_COPY_OVER or (load is not None and verdict(o, load).dearer):
                out.add(o.candidate.index)
        return out

    def likely_copies(o: CandidateOutcome) -> int | None:
        """The copies its analytic estimate needs (None: no estimate)."""
        b = o.candidate.bound
        if b is None or b.estimate_rate_per_s is None:
            return None
        return scaling.replicas_for(target, b.estimate_rate_per_s)

    def likely_cost(o: CandidateOutcome) -> float:
        """The cost at its analytic estimate (else its best case): planning the likely cheapest first lets the
        probes show the rest dearer."""
        n = likely_copies(o)
        if n is not None:
            return n * copy_cost(o)
        return math.inf if lb(o) is None else lb(o)  # type: ignore[return-value]

    def slack(o: CandidateOutcome) -> float:
        """How far its analytic estimate clears the per-copy load its likely copies must carry (relative, larger is
        surer): among candidates of one likely cost, the surest is planned first."""
        n = likely_copies(o)
        if n is None:
            return 0.0
        return o.candidate.bound.estimate_rate_per_s / scaling.least_rate_for(target, n) - 1  # type: ignore[union-attr,operator]

    def likely_cheapest_first(within) -> list[CandidateOutcome]:
        return sorted(
            within,
            key=lambda o: (likely_cost(o), -slack(o), math.inf if lb(o) is None else lb(o), o.candidate.index),
        )

    batch_size = max(1, executor.workers)
    points: list[dict[str, Any]] = []
    pending = likely_cheapest_first(o for o in outcomes if o.candidate.pools is None)  # pool-sized ones: ``_pd_stage``
    planned: set[int] = set()
    shown_dearer: set[int] = set()  # probed dearer than the cheapest deployment known then (still so at the end)
    trusted = True  # every planned candidate's max rates within its bound (else no bound prunes)
    while pending:
        best = cheapest(outcomes)
        if pruning:
            if trusted:
                pending = [o for o in pending if not prunable(o, best)]
            shown_dearer |= probe(pending, best, "probing the candidates left against the cheapest so far")
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
        guess = likely_cost(batch[0]) if size == 1 and executor.workers > 1 else math.inf
        alongside = probe_tasks([o for o in pending if not (trusted and prunable(o, guess))], guess)
        found, probed = _guided_search_stage(batch, inputs, request, executor, stage, scaling, cache, alongside)
        store(alongside, probed)
        for row in found:
            rows.setdefault((row["candidate"], row["replicate"], row["rate_per_s"]), row)
        points += found
        points += operating_stage(batch, inputs, request, executor, stage, scaling, curves=False)
        planned |= {o.candidate.index for o in batch}
        if trusted and any(exceeds_bound(o) for o in batch):
            trusted = False
            # a bound failed: what it left out must be planned after all
            left = planned | shown_dearer
            pending = likely_cheapest_first(
                o for o in outcomes if o.candidate.index not in left and o.candidate.pools is None
            )
        tally(outcomes, verdicts, bounds if trusted else None, cheapest(outcomes), shown_dearer)
    best = cheapest(outcomes)
    reasons: dict[int, tuple[str, float, list[dict[str, Any]]]] = {}  # pruned: (why, least cost, probe rows)
    if pruning:
        dearer = [
            o
            for o in outcomes
            if o.candidate.pools is None
            and o.status != "error"
            and not ((own := final_cost(o)) is not None and own <= threshold(o, best))
        ]
        unbounded = [o for o in dearer if not (trusted and prunable(o, best))]  # a bound already prunes the rest
        probe(unbounded, best, "probing the dearer candidates at the cheapest's cost")
        for o in dearer:
            c, limit = o.candidate, threshold(o, best)
            what = "the cheapest feasible deployment" if c.family is None else "its family's cheapest feasible variant"
            cost, load = lb(o), load_of(o, best)
            if trusted and prunable(o, best):
                assert c.bound is not None and c.bound.upper_rate_per_s is not None and cost is not None
                reasons[c.index] = (
                    f"pruned: at most {c.bound.upper_rate_per_s:.3g} {c.load.unit} per copy ({c.bound.reason}), "
                    f"so at least {cost:.2f} USD/h, above {what} ({limit:.2f} USD/h)",
                    cost,
                    [],
                )
            elif load == ONE_COPY_OVER:
                reasons[c.index] = (
                    f"pruned: one copy costs {copy_cost(o):.2f} USD/h, above {what} ({limit:.2f} USD/h)",
                    copy_cost(o),
                    [],
                )
            elif load is not None and (shown := verdict(o, load)).dearer:
                n = copies_within(copy_cost(o), limit)
                unit = c.load.unit
                if all(x == load for x in shown.missed):
                    how = f"misses the SLOs at {load:.4g} {unit} per copy on every replicate"
                else:
                    how = (
                        f"its replicates miss the SLOs at {', '.join(f'{x:.4g}' for x in shown.missed)} {unit} "
                        f"per copy, on average at most {load:.4g}"
                    )
                reasons[c.index] = (
                    f"pruned: {how}, so more than {n} copies: at least {(n + 1) * copy_cost(o):.2f} USD/h, above "
                    f"{what} ({limit:.2f} USD/h)",
                    (n + 1) * copy_cost(o),
                    [{k_: v for k_, v in row.items() if k_ != "eval_order"} | {"phase": "probe"}
                     for seq in shown.rows for row in seq],
                )  # fmt: skip
    for o in outcomes:
        index = o.candidate.index
        if index in reasons:
            reason, least, recorded = reasons[index]
            kept_work = sum(row.get("num_simulated", 0) for row in recorded)
            o.status, o.figures, o.extra_replicas, o.notes = "pruned", None, 0, []
            o.unrecorded_work += o.simulated_requests + probe_work[index] - kept_work
            o.simulated_requests, o.reason, o.least_cost_per_hour_usd = kept_work, reason, least
            by_replicate: dict[int, list[float]] = {}
            for row in recorded:
                by_replicate.setdefault(row["replicate"], []).append(row["rate_per_s"])
            o.rates_tried = [by_replicate[r] for r in sorted(by_replicate)]
            points += [row | {"extra_replicas": 0} for row in recorded]
        else:
            o.unrecorded_work += probe_work[index]  # its probes said "plan it": batch-dependent, not in plan.json
            if not trusted and exceeds_bound(o):
                o.notes.append("its simulated max rate exceeds its analytic bound: no candidate was pruned by a bound")
    tally(outcomes, verdicts, None, best)
    return [p for p in points if p["candidate"] not in reasons or p["phase"] == "probe"]


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
