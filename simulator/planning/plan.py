"""``servesim plan``: size and price every candidate for a target load under SLOs, and rank them.

Stages (each a batch of independent tasks on the executor):

1. search: per (candidate, replicate), the maximum rate meeting the p99 SLOs and the one
   meeting the attainment target (``evaluate.search_task``); a "rate" is the workload's
   load in its unit (``load``: requests/s, sessions/s, or closed-loop users);
2. operating points: per (candidate, replicate), one replica at target / replicas, plus
   ``curve_points`` evenly spaced rates for capacity curves (the same rates for every
   replicate, so curves get intervals). A candidate whose operating point misses an SLO
   (its max rate was optimistic for some seeds) gets one more replica and is simulated
   again, up to ``MAX_EXTRA_REPLICAS`` times.

Then: feasible candidates ranked by cost per hour (ties: cost per million output tokens,
then p99 latency), the cheapest chosen, and the Pareto frontier of cost per hour against
the operating point's p99 latency. See ``figures`` for the definitions and
``PlanResult.write`` for the output files.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.config.scenario import validate_scenario
from simulator.config.schema import ScenarioConfig
from simulator.metrics.results import json_safe
from simulator.planning.candidates import CandidateSet
from simulator.planning.capacity import (
    IndependentReplicas,
    ReplicaScaling,
    deployment_cost_per_hour,
    gpus_per_replica,
)
from simulator.planning.evaluate import CandidateRun, RatesTask, SearchTask, rates_task, search_task
from simulator.planning.executors import Executor
from simulator.planning.figures import (
    OPERATING_LATENCIES,
    OPERATING_OTHER,
    CandidateFigures,
    capacity_figures,
    operating_figures,
    set_replicas,
)
from simulator.planning.keys import resolve_variant
from simulator.planning.load import Load, check_load, load_kind, own_load, plan_load, search_range, users_at
from simulator.planning.overrides import apply_overrides, scalar
from simulator.planning.pareto import pareto_front
from simulator.planning.prices import price_per_gpu_hour
from simulator.planning.settings import PlanRequest
from simulator.planning.stats import Interval, replicate_seed
from simulator.planning.steady import SloTargets
from simulator.planning.store import write_json_atomic, write_table_atomic
from workloads import generate

PLAN_SCHEMA = "servesim.plan/1"
MAX_EXTRA_REPLICAS = 3
CURVE_SPAN = 1.25
ProgressFn = Callable[[int, int], None]
StageProgress = Callable[[str], contextlib.AbstractContextManager[ProgressFn]]


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


@contextlib.contextmanager
def _no_progress(_: str) -> Iterator[ProgressFn]:
    yield lambda done, total: None


SLO_FIELDS = (("ttft_ms", "slo_ttft_p99_ms"), ("tpot_ms", "slo_tpot_p99_ms"), ("e2el_ms", "slo_e2el_p99_ms"))


def scenario_slo(base: dict[str, Any], source: str) -> dict[str, float]:
    """The bounds of the scenario's ``slo:`` block as PlanRequest fields (``slo_ttft_p99_ms``, ...), set ones only.

    A plan judges the p99 of each latency against the bound the scenario gives for a single
    request (``servesim run``'s goodput bound), and SLO attainment against the same bounds.
    """
    slo = validate_scenario(base, source).slo
    out = {}
    for name, key in SLO_FIELDS:
        value = getattr(slo, name)
        if value is not None:
            if not math.isfinite(value):
                raise ValueError(f"{source}: slo.{name}: must be a finite number of ms (got {value})")
            out[key] = float(value)
    return out


def target_rate(base: dict[str, Any], base_dir: Path | None, source: str, request: PlanRequest) -> float:
    """The load to provision for: the request's, else the scenario's own (``load.own_load``)."""
    if request.target_rate_per_s is not None:
        return request.target_rate_per_s
    cfg = validate_scenario(base, source)
    try:
        return own_load(cfg, base_dir)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}; give --target-rate") from None


def _check_overrides(load: Load, overrides: dict[str, Any]) -> None:
    """ValueError for a candidate override the plan would silently replace."""
    if load.path in overrides:
        raise ValueError(f"{load.path} is the load the plan searches; remove it from the candidate's overrides")
    if any(path == "slo" or path.startswith("slo.") for path in overrides):
        raise ValueError("the SLOs are the plan's, not a candidate's: set them in the scenario or with --slo-* flags")


def check_search_flags(load: Load, request: PlanRequest, target: float, target_source: str) -> None:
    """ValueError naming the flag when the target or the start is not a load the search can use.

    Both must be loads a point can be simulated at (``Load.bounds``), and the start must lie
    in the search range around the target (``search_range``), where every claim of the
    search holds: doubling from a start far below the target would stop short of it, halving
    from one far above would call a feasible candidate infeasible.
    """
    check_load(load, target, target_source)
    s = request.search
    if s.start_rate_per_s is None:
        return
    check_load(load, s.start_rate_per_s, "--start-rate")
    floor, ceiling = search_range(load, target, s.max_doublings, s.max_halvings)
    if not floor <= s.start_rate_per_s <= ceiling:
        raise ValueError(
            f"--start-rate {s.start_rate_per_s:g}: outside the search range [{floor:.3g}, {ceiling:.3g}] {load.unit} "
            f"(the target {target:g} / 2^{s.max_halvings} to x 2^{s.max_doublings}): the search only tries loads "
            "inside it, so start there"
        )


def _generate_at(config: dict[str, Any], overrides: dict[str, Any], base_dir: Path | None, source: str) -> None:
    """Generate the workload of ``config`` with ``overrides``; ValueError prefixed by ``source`` if it cannot be."""
    cfg = validate_scenario(apply_overrides(config, overrides), source)
    try:
        generate(cfg.workload, cfg.seed, base_dir)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def prepare_candidates(
    base: dict[str, Any],
    base_dir: Path | None,
    cset: CandidateSet,
    prices: dict[str, float],
    request: PlanRequest,
    target_rate_per_s: float,
    scenario_label: str = "scenario",
) -> list[Candidate]:
    """Validate, resolve and price every candidate before anything runs; ValueError naming the candidate.

    Each candidate's workload is generated once as the search will run it (a trace read,
    sessions drawn), so a trace that cannot be replayed stops the plan here. An error in a
    flag names the flag (and the candidate, with a candidates file).
    """
    out = []
    unit: tuple[str, str] | None = None
    own = cset.source == "scenario"  # the scenario's own configuration only
    target_source = "--target-rate" if request.target_rate_per_s is not None else f"{scenario_label}: its own load"
    for i, spec in enumerate(cset.candidates):
        source = scenario_label if own else f"{cset.source}: candidate {spec.name!r}"
        loads: list[Load] = []

        def searchable(config: dict[str, Any], cfg: ScenarioConfig, loads: list[Load] = loads, spec=spec) -> None:
            load = plan_load(cfg, cfg.seed, base_dir, request.search.requests_per_point)
            _check_overrides(load, spec.overrides)
            loads.append(load)

        config, cfg, resolved = resolve_variant(base, spec.overrides, base_dir, source, searchable)
        (load,) = loads
        try:
            check_search_flags(load, request, target_rate_per_s, target_source)
        except ValueError as exc:
            raise ValueError(str(exc) if own else f"{exc} (candidate {spec.name!r})") from None
        # the config as the search will run it (load, request count), generated once here
        at_start = load.overrides(request.search.start_rate_per_s or target_rate_per_s)
        _generate_at(config, at_start, base_dir, source)
        if unit is not None and unit != (load_kind(cfg), load.unit):
            raise ValueError(
                f"{source}: its workload's load is {load_kind(cfg)} in {load.unit}, the first candidate's "
                f"{unit[0]} in {unit[1]}: one plan provisions one kind of load"
            )
        unit = (load_kind(cfg), load.unit)
        missing: list[str] = []

        def price_of(hw_ref: str, spec: dict, missing: list[str] = missing) -> float | None:
            p = price_per_gpu_hour(hw_ref, spec, prices)
            if p is None:
                missing.append(hw_ref)
            return p

        cost = deployment_cost_per_hour(resolved, price_of)
        ref = cfg.hardware if isinstance(cfg.hardware, str) else resolved["hardware"]["name"]
        if cost is None:
            raise ValueError(
                f"{source}: no price for hardware {missing[0]}; give --price {missing[0]}=USD_PER_GPU_HOUR"
            )
        price = cost / gpus_per_replica(resolved)  # per GPU-hour, averaged over the scenario's GPUs
        gpus = gpus_per_replica(resolved)
        out.append(Candidate(i, spec.name, spec.overrides, config, resolved, cfg.seed, ref, price, gpus, load))
    return out


def _run(c: Candidate, replicate: int, base_dir: Path | None, request: PlanRequest) -> CandidateRun:
    slo = SloTargets(request.slo_ttft_p99_ms, request.slo_tpot_p99_ms, request.attainment, request.slo_e2el_p99_ms)
    return CandidateRun(
        c.index,
        replicate,
        c.config,
        None if base_dir is None else str(base_dir.resolve()),  # absolute: a Ray worker runs in another folder
        replicate_seed(c.seed, replicate),
        slo,
        request.search,
    )


def _map(executor: Executor, fn, items: list, stage: StageProgress, description: str) -> list:
    results: list[Any] = [None] * len(items)
    with stage(description) as progress:
        progress(0, len(items))
        for n, (i, result) in enumerate(executor.map_unordered(fn, items), start=1):
            results[i] = result
            progress(n, len(items))
    return results


@dataclass(slots=True)
class PlanResult:
    """The plan: plan.json's content and the two tables."""

    plan: dict[str, Any]
    candidates: pd.DataFrame
    points: pd.DataFrame

    def write(self, out_dir: Path) -> Path:
        """Write ``plan.json``, ``candidates.parquet`` and ``points.parquet`` into ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        write_table_atomic(out_dir / "candidates.parquet", self.candidates.to_dict("records"))
        write_table_atomic(out_dir / "points.parquet", self.points.to_dict("records"))
        write_json_atomic(out_dir / "plan.json", self.plan)
        return out_dir


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """A plan's inputs, validated: what to provision for and the priced candidates."""

    scenario_label: str
    candidate_source: str
    base_dir: Path | None
    target_rate_per_s: float
    start_rate_per_s: float
    candidates: list[Candidate]

    @property
    def load(self) -> Load:
        """The first candidate's load (every candidate has the same kind and unit)."""
        return self.candidates[0].load


def prepare_plan(
    base: dict[str, Any],
    base_dir: Path | None,
    scenario_label: str,
    cset: CandidateSet,
    request: PlanRequest,
    prices: dict[str, float] | None = None,
) -> PlanInputs:
    """Validate everything a plan needs before any simulation (or Ray start); ValueError naming the culprit.

    ``prices`` (USD per GPU-hour by hardware reference or spec name) override the
    candidate file's, which override the specs'.
    """
    target = target_rate(base, base_dir, scenario_label, request)
    start = request.search.start_rate_per_s or target
    candidates = prepare_candidates(base, base_dir, cset, cset.prices | (prices or {}), request, target, scenario_label)
    return PlanInputs(scenario_label, cset.source, base_dir, target, start, candidates)


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
) -> PlanResult:
    """Plan every candidate; see the module docstring."""
    stage = stage or _no_progress
    scaling = scaling or IndependentReplicas()
    outcomes = [CandidateOutcome(c) for c in inputs.candidates]
    points = _search_stage(outcomes, inputs, request, executor, stage, scaling)
    points += _operating_stage(outcomes, inputs, request, executor, stage, scaling)
    _rank(outcomes, request)
    return _result(outcomes, points, request, inputs)


def _search_stage(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
) -> list[dict[str, Any]]:
    """Search every (candidate, replicate); set each outcome's capacity figures. Returns the simulated points."""
    k, start, target = request.replicates, inputs.start_rate_per_s, inputs.target_rate_per_s
    tasks = [
        SearchTask(_run(o.candidate, r, inputs.base_dir, request), start, target) for o in outcomes for r in range(k)
    ]
    searched = _map(executor, search_task, tasks, stage, "searching max rates")
    for j, o in enumerate(outcomes):
        results = searched[j * k : (j + 1) * k]
        errors = [r["error"] for r in results if r["error"] is not None]
        if errors:
            o.status, o.reason = "error", errors[0]
            continue
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
    return [row for res in searched for row in res["points"]]


def _operating_stage(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
    scaling: ReplicaScaling,
) -> list[dict[str, Any]]:
    """Simulate the operating points (and, first round only, the curves), adding replicas where an SLO is missed."""
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
            if round_ == 0 and n:
                top = CURVE_SPAN * max(f.max_rate_per_s.value or 0.0, f.max_goodput_rate_per_s.value or 0.0)
                curve = [top * (j + 1) / n for j in range(n)]
                if integer:  # whole users, each once
                    curve = sorted({float(users_at(x)) for x in curve})
                rates += [("curve", x, {}) for x in curve]
            tasks += [RatesTask(_run(o.candidate, r, inputs.base_dir, request), rates) for r in range(k)]
        label = "operating points" if round_ == 0 else f"operating points, {round_} extra replica(s)"
        rows_by_task = _map(executor, rates_task, tasks, stage, label)
        still = []
        for j, o in enumerate(pending):
            rows = [
                row | {"extra_replicas": round_} for task_rows in rows_by_task[j * k : (j + 1) * k] for row in task_rows
            ]
            points += rows
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


def _value(iv: Interval | None) -> float:
    return math.inf if iv is None or iv.value is None else iv.value


def _rank(outcomes: list[CandidateOutcome], request: PlanRequest) -> None:
    feasible = [o for o in outcomes if o.status == "feasible"]
    latency = f"p99_{request.pareto_latency}_ms"

    def key(o: CandidateOutcome) -> tuple[float, float, float]:
        f = o.figures
        assert f is not None
        return (
            _value(f.cost_per_hour_usd),
            _value(f.operating.get("cost_per_million_output_tokens_usd")),
            _value(f.operating.get(latency)),
        )

    for rank, o in enumerate(sorted(feasible, key=key), start=1):
        o.rank = rank
    front = pareto_front([(key(o)[0], key(o)[2]) for o in feasible])
    for o, on_front in zip(feasible, front, strict=True):
        o.pareto = on_front


def _notes(o: CandidateOutcome, request: PlanRequest) -> list[str]:
    name, f = o.candidate.name, o.figures
    notes = [f"{name}: {o.reason}"] if o.reason and o.status != "feasible" else []
    notes += [f"{name}: {n}" for n in o.notes]
    if f is None:
        return notes
    if o.extra_replicas:
        notes.append(f"{name}: {o.extra_replicas} replica(s) added: the operating point missed an SLO without them")
    bounds = {f"p99_{name}_ms": bound for name, bound in request.slo_bounds.items()}
    for metric in f.straddles:
        if metric == "replicas":
            r = f.replicas
            assert r is not None
            notes.append(
                f"{name}: replicas needed {r.value:g} [{r.low:g}, {r.high:g}]: the max rate's interval "
                "straddles the per-replica load; more replicates narrow it"
            )
        else:
            iv = f.operating[metric]
            notes.append(
                f"{name}: {metric} at the operating point {iv.value:.4g} [{iv.low:.4g}, {iv.high:.4g}] "
                f"straddles the SLO {bounds[metric]:g} ms"
            )
    return notes


def _candidate_json(o: CandidateOutcome) -> dict[str, Any]:
    c, f = o.candidate, o.figures

    def iv(x: Interval | None) -> dict[str, Any] | None:
        return None if x is None else x.to_json()

    out: dict[str, Any] = {
        "name": c.name,
        "overrides": c.overrides,
        "status": o.status,
        "reason": o.reason,
        "rank": o.rank,
        "chosen": o.rank == 1,
        "pareto": o.pareto,
        "hardware": c.hardware_ref,
        "hardware_name": c.resolved["hardware"]["name"],
        "model_name": c.resolved["model"]["name"],
        "policy_kind": c.resolved["policy"]["kind"],
        "tp": c.resolved["parallelism"]["tp"],
        "gpus_per_replica": c.gpus_per_replica,
        "price_per_gpu_hour_usd": c.price_per_gpu_hour_usd,
        "seed": c.seed,
    }
    if f is None:
        return out
    out |= {
        "max_rate_per_s": iv(f.max_rate_per_s),
        "max_goodput_rate_per_s": iv(f.max_goodput_rate_per_s),
        "goodput_per_gpu_per_s": iv(f.goodput_per_gpu_per_s),
        "max_rate_unbounded": f.unbounded,
        "replicas": iv(f.replicas),
        "num_gpus": iv(f.num_gpus),
        "cost_per_hour_usd": iv(f.cost_per_hour_usd),
        "extra_replicas": o.extra_replicas,
        "operating_point": None
        if not f.operating
        else {"rate_per_replica_s": f.rate_per_replica_s, "meets_slo": f.operating_meets_slo}
        | {k: v.to_json() for k, v in f.operating.items()},
        "straddles": f.straddles,
    }
    return out


def _candidate_row(o: CandidateOutcome, request: PlanRequest, target: float) -> dict[str, Any]:
    j = _candidate_json(o)
    row: dict[str, Any] = {
        k: j[k]
        for k in (
            "name",
            "status",
            "reason",
            "rank",
            "chosen",
            "pareto",
            "hardware",
            "hardware_name",
            "model_name",
            "policy_kind",
            "tp",
            "gpus_per_replica",
            "price_per_gpu_hour_usd",
            "seed",
        )
    }
    row["overrides_json"] = scalar(o.candidate.overrides)
    f = o.figures
    empty = Interval(None)
    for name in ("max_rate_per_s", "max_goodput_rate_per_s", "goodput_per_gpu_per_s"):
        row |= (getattr(f, name) if f is not None else empty).columns(name)
    for name in ("replicas", "num_gpus", "cost_per_hour_usd"):
        x = getattr(f, name) if f is not None else None
        row |= (x or empty).columns(name)
    row["extra_replicas"] = o.extra_replicas
    row["rate_per_replica_s"] = f.rate_per_replica_s if f is not None else None
    row["op_meets_slo"] = f.operating_meets_slo if f is not None else None
    ops = f.operating if f is not None else {}
    for name in (
        *OPERATING_LATENCIES,
        *OPERATING_OTHER,
        "vllm_goodput_per_s",
        "output_tokens_per_s",
        "cost_per_million_output_tokens_usd",
    ):
        row |= ops.get(name, empty).columns(f"op_{name}")
    row["straddles"] = ",".join(f.straddles) if f is not None else ""
    row |= {
        "target_rate_per_s": target,
        "slo_ttft_p99_ms": request.slo_ttft_p99_ms,
        "slo_tpot_p99_ms": request.slo_tpot_p99_ms,
        "slo_e2el_p99_ms": request.slo_e2el_p99_ms,
        "attainment_target": request.attainment,
        "replicates": request.replicates,
    }
    return row


def _result(
    outcomes: list[CandidateOutcome], points: list[dict[str, Any]], request: PlanRequest, inputs: PlanInputs
) -> PlanResult:
    target = inputs.target_rate_per_s
    ranked = sorted((o for o in outcomes if o.rank is not None), key=lambda o: o.rank or 0)
    names = {o.candidate.index: o.candidate.name for o in outcomes}
    point_rows = [
        {"candidate": names[p["candidate"]], **{k: v for k, v in p.items() if k != "candidate"}}
        | {
            "slo_ttft_p99_ms": request.slo_ttft_p99_ms,
            "slo_tpot_p99_ms": request.slo_tpot_p99_ms,
            "slo_e2el_p99_ms": request.slo_e2el_p99_ms,
            "attainment_target": request.attainment,
        }
        for p in points
    ]
    plan = {
        "schema": PLAN_SCHEMA,
        "scenario": inputs.scenario_label,
        "candidates_file": None if inputs.candidate_source == "scenario" else inputs.candidate_source,
        "slo": {
            "ttft_p99_ms": request.slo_ttft_p99_ms,
            "tpot_p99_ms": request.slo_tpot_p99_ms,
            "e2el_p99_ms": request.slo_e2el_p99_ms,
            "attainment": request.attainment,
        },
        "load": {"kind": inputs.load.kind, "unit": inputs.load.unit, "field": inputs.load.path},
        "target_rate_per_s": target,
        "replicates": request.replicates,
        "confidence": request.confidence,
        "ci_method": request.ci_method,
        "pareto_latency": f"p99_{request.pareto_latency}_ms",
        "search": request.search.model_dump(),
        "candidates": [_candidate_json(o) for o in outcomes],
        "ranking": [o.candidate.name for o in ranked],
        "chosen": ranked[0].candidate.name if ranked else None,
        "pareto_frontier": [o.candidate.name for o in ranked if o.pareto],
        "notes": [n for o in outcomes for n in _notes(o, request)],
        "tables": {"candidates": "candidates.parquet", "points": "points.parquet"},
    }
    if not ranked:
        plan["notes"].append("no candidate meets the SLOs at the target rate")
    candidates = pd.DataFrame.from_records([_candidate_row(o, request, target) for o in outcomes])
    return PlanResult(json_safe(plan), candidates, pd.DataFrame.from_records(point_rows))
