"""What the guided plan knows while it prunes: each candidate's best cases against the cheapest deployment
found, the probe points simulated so far, and the reasons the candidates left out are given.

``Pruner`` holds that state; ``guided.guided_plan`` drives it. The rule (``search.prune``): a
candidate is out when it must cost more than the cheapest feasible deployment of the plan
(strictly), and a tuned variant only when it must also cost more than its family's cheapest
feasible variant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from simulator.planning.plans.outcome import (
    Candidate,
    CandidateOutcome,
    PlanInputs,
    StageProgress,
    candidate_run,
    final_cost,
    map_stage,
)
from simulator.planning.points.capacity import ReplicaScaling
from simulator.planning.points.executors import Executor
from simulator.planning.search.evaluate import ProbeTask, probe_task
from simulator.planning.search.load import search_range
from simulator.planning.search.prune import (
    MAX_PROBE_ROUNDS,
    ONE_COPY_OVER,
    ProbeVerdict,
    copies_within,
    probe_load,
    probe_verdict,
)
from simulator.planning.search.settings import PlanRequest

# a pruned candidate: why, the least it costs per hour, the probe rows that show it
Reason = tuple[str, float, list[dict[str, Any]]]


def lower_bound_cost(c: Candidate, target_rate_per_s: float, scaling: ReplicaScaling) -> float | None:
    """The least a deployment of ``c`` costs per hour: the replicas its analytic bound needs (None: no bound)."""
    if c.bound is None or c.bound.upper_rate_per_s is None:
        return None
    replicas = scaling.replicas_for(target_rate_per_s, c.bound.upper_rate_per_s)
    if replicas is None:
        return None
    return replicas * c.gpus_per_replica * c.price_per_gpu_hour_usd


def cheapest(within: Iterable[CandidateOutcome]) -> float:
    """The least cost per hour of the feasible deployments ``within`` (inf: none)."""
    costs = [c for c in (final_cost(o) for o in within) if c is not None]
    return min(costs, default=math.inf)


def copy_cost(o: CandidateOutcome) -> float:
    """One copy's cost per hour."""
    return o.candidate.gpus_per_replica * o.candidate.price_per_gpu_hour_usd


class Pruner:
    """The plan's candidates' best cases and probes against a threshold cost."""

    def __init__(
        self,
        outcomes: list[CandidateOutcome],
        inputs: PlanInputs,
        request: PlanRequest,
        executor: Executor,
        stage: StageProgress,
        scaling: ReplicaScaling,
    ) -> None:
        self.outcomes, self.inputs, self.request = outcomes, inputs, request
        self.executor, self.stage, self.scaling = executor, stage, scaling
        self.target = inputs.target_rate_per_s
        s = request.search
        self.floor, self.ceiling = search_range(inputs.load, inputs.range_centre, s.max_doublings, s.max_halvings)
        self.bounds = {o.candidate.index: lower_bound_cost(o.candidate, self.target, scaling) for o in outcomes}
        self.families: dict[str | None, list[CandidateOutcome]] = {}
        for o in outcomes:
            self.families.setdefault(o.candidate.family, []).append(o)
        self.rows: dict[tuple[int, int, float], dict[str, Any]] = {}  # (candidate, replicate, load) -> its row
        self.probe_work: dict[int, int] = dict.fromkeys((o.candidate.index for o in outcomes), 0)

    def lb(self, o: CandidateOutcome) -> float | None:
        """Its analytic best-case cost per hour (None: no bound)."""
        return self.bounds[o.candidate.index]

    def threshold(self, o: CandidateOutcome, best: float) -> float:
        """What it must cost more than to be pruned: the cheapest deployment, or (a tuned variant) its family's
        cheapest, which is never less."""
        family = o.candidate.family
        return best if family is None else cheapest(self.families[family])

    def prunable(self, o: CandidateOutcome, best: float) -> bool:
        """Its analytic best case costs more than the threshold: it can be neither the plan's choice nor its
        family's best."""
        cost = self.lb(o)
        return cost is not None and cost > self.threshold(o, best)

    def load_of(self, o: CandidateOutcome, best: float) -> float | None:
        """Its probe load against ``best`` (``prune.probe_load``)."""
        c = o.candidate
        limit = self.threshold(o, best)
        return probe_load(copy_cost(o), limit, self.target, self.scaling, self.floor, self.ceiling, c.load.integer)

    def verdict(self, o: CandidateOutcome, load: float) -> ProbeVerdict:
        """Its probe verdict at ``load`` from the rows simulated so far."""
        i, s = o.candidate.index, self.request.search
        return probe_verdict(
            load,
            self.request.replicates,
            lambda r, x: self.rows.get((i, r, x)),
            s.rel_tol,
            self.floor,
            self.ceiling,
            o.candidate.load.integer,
        )

    def probe_tasks(self, within: list[CandidateOutcome], best: float) -> list[ProbeTask]:
        """The probe points to simulate next against ``best`` (the next round of each verdict still open)."""
        tasks = []
        for o in within:
            load = self.load_of(o, best)
            if load is not None and load != ONE_COPY_OVER:
                tasks += [
                    ProbeTask(candidate_run(o.candidate, r, self.inputs.base_dir, self.request), x)
                    for r, x in self.verdict(o, load).pending
                ]
        return tasks

    def store(self, tasks: list[ProbeTask], results: list[dict[str, Any]]) -> None:
        """Keep the rows of simulated probe points."""
        for task, row in zip(tasks, results, strict=True):
            self.rows[task.run.candidate, task.run.replicate, task.rate_per_s] = row
            self.probe_work[task.run.candidate] += row.get("num_simulated", 0)

    def probe(self, within: list[CandidateOutcome], best: float, label: str) -> set[int]:
        """Simulate the probe points not yet known, round by round; the candidates shown dearer than their threshold."""
        for _ in range(MAX_PROBE_ROUNDS):
            tasks = self.probe_tasks(within, best)
            if not tasks:
                break
            self.store(tasks, map_stage(self.executor, probe_task, tasks, self.stage, label))
        out = set()
        for o in within:
            load = self.load_of(o, best)
            if load == ONE_COPY_OVER or (load is not None and self.verdict(o, load).dearer):
                out.add(o.candidate.index)
        return out

    def likely_copies(self, o: CandidateOutcome) -> int | None:
        """The copies its analytic estimate needs (None: no estimate)."""
        b = o.candidate.bound
        if b is None or b.estimate_rate_per_s is None:
            return None
        return self.scaling.replicas_for(self.target, b.estimate_rate_per_s)

    def likely_cost(self, o: CandidateOutcome) -> float:
        """The cost at its analytic estimate (else its best case): planning the likely cheapest first lets the
        probes show the rest dearer."""
        n = self.likely_copies(o)
        if n is not None:
            return n * copy_cost(o)
        lb = self.lb(o)
        return math.inf if lb is None else lb

    def slack(self, o: CandidateOutcome) -> float:
        """How far its analytic estimate clears the per-copy load its likely copies must carry (relative, larger is
        surer): among candidates of one likely cost, the surest is planned first."""
        n = self.likely_copies(o)
        if n is None:
            return 0.0
        return o.candidate.bound.estimate_rate_per_s / self.scaling.least_rate_for(self.target, n) - 1  # type: ignore[union-attr,operator]

    def likely_cheapest_first(self, within: Iterable[CandidateOutcome]) -> list[CandidateOutcome]:
        """``within`` in planning order: likely cost, then the surest, then best case, then index."""

        def key(o: CandidateOutcome) -> tuple[float, float, float, int]:
            lb = self.lb(o)
            return (self.likely_cost(o), -self.slack(o), math.inf if lb is None else lb, o.candidate.index)

        return sorted(within, key=key)

    def reasons(self, best: float, trusted: bool) -> dict[int, Reason]:
        """Every candidate that cannot win against the final ``best`` (its probe loads simulated where missing),
        with why; a bound counts only when ``trusted``."""
        dearer = [
            o
            for o in self.outcomes
            if o.candidate.pools is None
            and o.status != "error"
            and not ((own := final_cost(o)) is not None and own <= self.threshold(o, best))
        ]
        unbounded = [o for o in dearer if not (trusted and self.prunable(o, best))]  # a bound already prunes the rest
        self.probe(unbounded, best, "probing the dearer candidates at the cheapest's cost")
        out: dict[int, Reason] = {}
        for o in dearer:
            reason = self._reason(o, best, trusted)
            if reason is not None:
                out[o.candidate.index] = reason
        return out

    def _reason(self, o: CandidateOutcome, best: float, trusted: bool) -> Reason | None:
        c, limit = o.candidate, self.threshold(o, best)
        what = "the cheapest feasible deployment" if c.family is None else "its family's cheapest feasible variant"
        cost, load = self.lb(o), self.load_of(o, best)
        if trusted and self.prunable(o, best):
            assert c.bound is not None and c.bound.upper_rate_per_s is not None and cost is not None
            return (
                f"pruned: at most {c.bound.upper_rate_per_s:.3g} {c.load.unit} per copy ({c.bound.reason}), "
                f"so at least {cost:.2f} USD/h, above {what} ({limit:.2f} USD/h)",
                cost,
                [],
            )
        if load == ONE_COPY_OVER:
            return (
                f"pruned: one copy costs {copy_cost(o):.2f} USD/h, above {what} ({limit:.2f} USD/h)",
                copy_cost(o),
                [],
            )
        if load is None or not (shown := self.verdict(o, load)).dearer:
            return None
        n = copies_within(copy_cost(o), limit)
        unit = c.load.unit
        if all(x == load for x in shown.missed):
            how = f"misses the SLOs at {load:.4g} {unit} per copy on every replicate"
        else:
            how = (
                f"its replicates miss the SLOs at {', '.join(f'{x:.4g}' for x in shown.missed)} {unit} "
                f"per copy, on average at most {load:.4g}"
            )
        return (
            f"pruned: {how}, so more than {n} copies: at least {(n + 1) * copy_cost(o):.2f} USD/h, above "
            f"{what} ({limit:.2f} USD/h)",
            (n + 1) * copy_cost(o),
            [{k_: v for k_, v in row.items() if k_ != "eval_order"} | {"phase": "probe"}
             for seq in shown.rows for row in seq],
        )  # fmt: skip
