"""A plan's candidates and their outcomes, and the plumbing every stage shares: a candidate's run at a
replicate, a batch of tasks mapped on the executor with progress, the running tally of verdicts."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.planning.plans.figures import CandidateFigures
from simulator.planning.plans.pd_ratio import Pools
from simulator.planning.points.executors import Executor
from simulator.planning.points.stats import replicate_seed
from simulator.planning.search.bound import CapacityBound
from simulator.planning.search.evaluate import CandidateRun
from simulator.planning.search.load import Load
from simulator.planning.search.settings import PlanRequest
from simulator.planning.search.steady import SloTargets

ProgressFn = Callable[[int, int], None]
StageProgress = Callable[[str], contextlib.AbstractContextManager[ProgressFn]]
VerdictProgress = Callable[[int, int, str], None]
SearchCache = dict[tuple[int, int], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A candidate validated and priced."""

    index: int
    name: str
    overrides: dict[str, Any]
    config: dict[str, Any]
    resolved: dict[str, Any]
    seed: int
    hardware_ref: str
    price_per_gpu_hour_usd: float
    gpus_per_replica: int
    load: Load  # how its load points are configured (at its first replicate's seed)
    bound: CapacityBound | None = None  # the analytic capacity of one copy (guided search only)
    family: str | None = None  # a tuned variant's candidate (``candidates.tuned_variants``)
    tuned: dict[str, Any] = field(default_factory=dict)
    pools: Pools | None = None  # sized pool by pool (``pd_ratio``): its prefill and decode groups
    group_gpus: tuple[int, ...] = ()  # GPUs of one replica of each group
    group_costs_per_hour_usd: tuple[float, ...] = ()  # USD per hour of one replica of each group


@dataclass(slots=True)
class CandidateOutcome:
    candidate: Candidate
    status: str = "infeasible"  # feasible | infeasible | error
    reason: str | None = None
    figures: CandidateFigures | None = None
    extra_replicas: int = 0
    rank: int | None = None
    pareto: bool = False
    notes: list[str] = field(default_factory=list)
    rates_tried: list[list[float]] = field(default_factory=list)  # per replicate, in the order simulated
    simulated_requests: int = 0
    unrecorded_work: int = 0  # requests simulated for it that plan.json does not record (batch-dependent: before
    # it was pruned, or probes that said plan it)
    least_cost_per_hour_usd: float | None = None  # pruned: the least it can cost (the reason says why)
    pool_figures: dict[str, Any] | None = None  # sized pool by pool: each pool's capacity and replicas


@contextlib.contextmanager
def no_progress(_: str) -> Iterator[ProgressFn]:
    yield lambda done, total: None


def slo_targets(request: PlanRequest) -> SloTargets:
    return SloTargets(request.slo_ttft_p99_ms, request.slo_tpot_p99_ms, request.attainment, request.slo_e2el_p99_ms)


def candidate_run(c: Candidate, replicate: int, base_dir: Path | None, request: PlanRequest) -> CandidateRun:
    slo = slo_targets(request)
    return CandidateRun(
        c.index,
        replicate,
        c.config,
        None if base_dir is None else str(base_dir.resolve()),  # absolute: a Ray worker runs in another folder
        replicate_seed(c.seed, replicate),
        slo,
        request.search,
    )


def map_stage(executor: Executor, fn, items: list, stage: StageProgress, description: str) -> list:
    results: list[Any] = [None] * len(items)
    with stage(description) as progress:
        progress(0, len(items))
        for n, (i, result) in enumerate(executor.map_unordered(fn, items), start=1):
            results[i] = result
            progress(n, len(items))
    return results


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """A plan's inputs, validated: what to provision for and the priced candidates."""

    scenario_label: str
    candidate_source: str
    base_dir: Path | None
    target_rate_per_s: float
    start_rate_per_s: float
    candidates: list[Candidate]
    range_rate_per_s: float | None = None  # the load the search range is centred on; None: the target
    bounded: bool = True  # whether the candidates' analytic bounds are set (``prepare.bound_candidates``)

    @property
    def range_centre(self) -> float:
        return self.target_rate_per_s if self.range_rate_per_s is None else self.range_rate_per_s

    @property
    def load(self) -> Load:
        """The first candidate's load (every candidate has the same kind and unit)."""
        return self.candidates[0].load


def final_cost(o: CandidateOutcome) -> float | None:
    f = o.figures
    if o.status != "feasible" or f is None or f.cost_per_hour_usd is None:
        return None
    return f.cost_per_hour_usd.value


def tally(
    outcomes: list[CandidateOutcome],
    verdicts: VerdictProgress | None,
    bounds: dict[int, float | None] | None = None,
    best: float = math.inf,
    shown_dearer: set[int] | frozenset[int] = frozenset(),
) -> None:
    """Tell ``verdicts`` how many candidates are decided, and how (``shown_dearer``: probed dearer than ``best``)."""
    if verdicts is None:
        return
    counts = {"feasible": 0, "infeasible": 0, "pruned": 0, "error": 0}
    for o in outcomes:
        lb = None if bounds is None else bounds[o.candidate.index]
        if o.status == "pruned" or (lb is not None and lb > best) or o.candidate.index in shown_dearer:
            counts["pruned"] += 1
        elif o.status in ("feasible", "error"):
            counts[o.status] += 1
        elif o.figures is not None and (o.figures.replicas is None or o.figures.operating_meets_slo is False):
            counts["infeasible"] += 1
    text = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    if math.isfinite(best):
        text += f"; cheapest {best:.2f} USD/h"
    verdicts(sum(counts.values()), len(outcomes), text)
