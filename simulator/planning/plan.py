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

This module validates the inputs (``prepare_plan``), runs the plan (``execute_plan``, or
``execute_load_curve`` for several targets), sizes pool-by-pool candidates (``--pd-ratio``),
ranks and writes the result. The default search and its pruning are ``guided``; the stages
both searches share (capacity figures, operating points, curves) are ``stages``; the
candidates, their outcomes and the executor plumbing are ``outcome``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.config.scenario import validate_scenario
from simulator.config.schema import ScenarioConfig
from simulator.metrics.intervals import deployment_intervals
from simulator.metrics.results import json_safe
from simulator.planning.bound import CapacityBound, capacity_bound
from simulator.planning.candidates import CandidateSet
from simulator.planning.capacity import IndependentReplicas, ReplicaScaling, deployment_cost_per_hour, gpus_per_replica
from simulator.planning.evaluate import RatesTask, SearchTask, rates_task, search_task
from simulator.planning.executors import Executor
from simulator.planning.figures import OPERATING_LATENCIES, OPERATING_OTHER, CandidateFigures, operating_figures
from simulator.planning.guided import guided_plan
from simulator.planning.keys import resolve_variant
from simulator.planning.load import Load, check_load, load_kind, own_load, plan_load, search_range
from simulator.planning.outcome import (
    Candidate,
    CandidateOutcome,
    PlanInputs,
    SearchCache,
    StageProgress,
    VerdictProgress,
    candidate_run,
    map_stage,
    no_progress,
    slo_targets,
    tally,
)
from simulator.planning.overrides import apply_overrides, scalar
from simulator.planning.pareto import pareto_front
from simulator.planning.pd_ratio import HEADROOM, bump, enough, helper_count, pd_pools, pool_slo, with_counts
from simulator.planning.pd_ratio import MAX_EXTRA_REPLICAS as PD_MAX_EXTRA
from simulator.planning.pd_ratio import MAX_ROUNDS as PD_MAX_ROUNDS
from simulator.planning.prices import price_per_gpu_hour
from simulator.planning.settings import PlanRequest
from simulator.planning.stages import curve_stage, operating_stage, search_stage
from simulator.planning.stats import Interval, interval, replicate_seed
from simulator.planning.store import write_json_atomic, write_table_atomic
from workloads import RequestStream, generate

PLAN_SCHEMA = "servesim.plan/1"


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


def _generate_at(
    config: dict[str, Any], overrides: dict[str, Any], base_dir: Path | None, source: str
) -> tuple[ScenarioConfig, RequestStream]:
    """The config and workload of ``config`` with ``overrides``; ValueError prefixed by ``source`` if it cannot be."""
    cfg = validate_scenario(apply_overrides(config, overrides), source)
    try:
        return cfg, generate(cfg.workload, cfg.seed, base_dir)
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
        if own and spec.family is not None:
            source = f"{scenario_label}: variant {spec.name!r}"
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
        cfg_at, stream = _generate_at(config, at_start, base_dir, source)
        bound = None
        if not request.search.exhaustive:
            bound = _replicates_bound(config, at_start, cfg_at, stream, base_dir, source, request)
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
        group_gpus = tuple(int(g["tp"]) * int(g["pp"]) for g in resolved["deployment"])
        group_costs = tuple(
            n * (price_of(g["hardware_ref"], g["hardware"]) or 0.0)
            for n, g in zip(group_gpus, resolved["deployment"], strict=True)
        )
        pools = pd_pools(config) if request.search.pd_ratio else None
        out.append(
            Candidate(
                i,
                spec.name,
                spec.overrides,
                config,
                resolved,
                cfg.seed,
                ref,
                price,
                gpus,
                load,
                bound,
                spec.family,
                spec.tuned,
                pools,
                group_gpus,
                group_costs,
            )
        )
    return out


def _replicates_bound(
    config: dict[str, Any],
    at_start: dict[str, Any],
    cfg: ScenarioConfig,
    stream: RequestStream,
    base_dir: Path | None,
    source: str,
    request: PlanRequest,
) -> CapacityBound:
    """The analytic bound of every replicate's requests (each seed draws its own lengths), the largest.

    The estimate stays the first replicate's (it starts that replicate's search); no bound if
    any replicate has none.
    """
    slo, growth = slo_targets(request), request.search.max_growth_fraction
    first = capacity_bound(cfg, base_dir, stream, slo, growth)
    upper = first.upper_rate_per_s
    for r in range(1, request.replicates):
        if upper is None:
            break
        seeded = apply_overrides(config, at_start | {"seed": replicate_seed(cfg.seed, r)})
        cfg_r, stream_r = _generate_at(seeded, {}, base_dir, source)
        other = capacity_bound(cfg_r, base_dir, stream_r, slo, growth).upper_rate_per_s
        upper = None if other is None else max(upper, other)
    if upper is None:
        return CapacityBound(None, first.estimate_rate_per_s, first.reason)
    if upper != first.upper_rate_per_s:
        return CapacityBound(upper, first.estimate_rate_per_s, f"{first.reason}; the largest of the replicates' bounds")
    return first


@dataclass(slots=True)
class PlanResult:
    """The plan: plan.json's content and the two tables."""

    plan: dict[str, Any]
    candidates: pd.DataFrame
    points: pd.DataFrame
    # requests simulated in all, pruned candidates' included: how much work the plan took, which
    # (unlike plan.json) depends on the executor's batches
    simulated_requests: int = 0

    def write(self, out_dir: Path) -> Path:
        """Write ``plan.json``, ``candidates.parquet`` and ``points.parquet`` into ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        write_table_atomic(out_dir / "candidates.parquet", self.candidates.to_dict("records"))
        write_table_atomic(out_dir / "points.parquet", self.points.to_dict("records"))
        write_json_atomic(out_dir / "plan.json", self.plan)
        return out_dir


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
    if request.search.pd_ratio and all(c.pools is None for c in candidates):
        raise ValueError(
            "--pd-ratio: no candidate is a disaggregated cluster of one prefill and one decode group "
            "(groups: [{role: prefill, ...}, {role: decode, ...}])"
        )
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
    outcomes = [CandidateOutcome(c) for c in inputs.candidates]
    pooled = [o for o in outcomes if o.candidate.pools is not None]
    if request.search.exhaustive:
        whole = [o for o in outcomes if o.candidate.pools is None]
        points = _pd_stage(pooled, inputs, request, executor, stage) if pooled else []
        points += search_stage(whole, inputs, request, executor, stage, scaling)
        points += operating_stage(whole, inputs, request, executor, stage, scaling, curves=True)
        _rank(outcomes, request)
        tally(outcomes, verdicts)
        return _result(outcomes, points, request, inputs)
    points = _pd_stage(pooled, inputs, request, executor, stage) if pooled else []
    points += guided_plan(outcomes, inputs, request, executor, stage, scaling, verdicts, cache)
    _rank(outcomes, request)
    ranked = sorted((o for o in outcomes if o.rank is not None), key=lambda o: o.rank or 0)
    if ranked and request.search.curve_points:
        points += curve_stage(ranked[0], inputs, request, executor, stage)
    return _result(outcomes, points, request, inputs)


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


def _pd_stage(
    outcomes: list[CandidateOutcome],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
) -> list[dict[str, Any]]:
    """Size each disaggregated candidate pool by pool (``pd_ratio``); sets its figures and ``pool_figures``."""
    k, s, slo = request.replicates, request.search, slo_targets(request)
    points: list[dict[str, Any]] = []
    helpers = {o.candidate.index: {"prefill": None, "decode": None} for o in outcomes}  # other pool's replicas
    found: dict[tuple[int, str], list[dict[str, Any]]] = {}
    pending = {(o.candidate.index, pool) for o in outcomes for pool in ("prefill", "decode")}
    by_index = {o.candidate.index: o for o in outcomes}
    ratio: dict[int, float | None] = dict.fromkeys(by_index)  # one prefill replica's capacity over a decode one's
    for _ in range(PD_MAX_ROUNDS):
        if not pending:
            break
        tasks, keys = [], []
        for index, pool in sorted(pending):
            c, pools = by_index[index].candidate, by_index[index].candidate.pools
            assert pools is not None
            if pool == "prefill":
                n = helper_count(pools.prefill_count, pools.decode_count, ratio[index])
                config = with_counts(c.config, pools, 1, n)
            else:
                r = ratio[index]
                n = helper_count(pools.decode_count, pools.prefill_count, None if r is None else 1 / r)
                config = with_counts(c.config, pools, n, 1)
            helpers[index][pool] = n
            for rep in range(k):
                run = replace(candidate_run(c, rep, inputs.base_dir, request), config=config, slo=pool_slo(slo, pool))
                tasks.append(SearchTask(run, inputs.start_rate_per_s, inputs.range_centre, guided=not s.exhaustive))
                keys.append((index, pool))
        results = map_stage(executor, search_task, tasks, stage, "searching each pool's capacity")
        grouped: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for key, res in zip(keys, results, strict=True):
            grouped.setdefault(key, []).append(res)
            for row in res["points"]:
                points.append(row | {"phase": f"pool_{key[1]}"})
        found |= grouped
        pending = set()
        for index in sorted({i for i, _ in grouped}):
            o = by_index[index]
            res_p, res_d = found.get((index, "prefill")), found.get((index, "decode"))
            if res_p is None or res_d is None or any(r["error"] for r in res_p + res_d):
                continue
            mu_p = sum(r["max_rate_per_s"] for r in res_p) / k
            mu_d = sum(r["max_rate_per_s"] for r in res_d) / k
            if mu_p <= 0 or mu_d <= 0:
                continue
            ratio[index] = mu_p / mu_d
            if not enough(helpers[index]["prefill"], mu_p, mu_d):
                pending.add((index, "prefill"))
            if not enough(helpers[index]["decode"], mu_d, mu_p):
                pending.add((index, "decode"))
    for o in outcomes:
        index = o.candidate.index
        res_p, res_d = found[index, "prefill"], found[index, "decode"]
        short = sorted(pool for i, pool in pending if i == index)
        if short:
            o.notes.append(
                f"the {' and '.join(short)} pool's capacity was measured beside fewer replicas of the other pool "
                f"than {HEADROOM:g}x headroom asks after {PD_MAX_ROUNDS} rounds: it may be underestimated"
            )
        o.rates_tried = [[row["rate_per_s"] for row in r["points"]] for r in res_p + res_d]
        o.simulated_requests += sum(row.get("num_simulated", 0) for r in res_p + res_d for row in r["points"])
        errors = [r["error"] for r in res_p + res_d if r["error"] is not None]
        if errors:
            o.status, o.reason = "error", errors[0]
            continue
        points += _pd_size(o, res_p, res_d, helpers[index], inputs, request, executor, stage)
    return points


def _pd_size(
    o: CandidateOutcome,
    res_p: list[dict[str, Any]],
    res_d: list[dict[str, Any]],
    helpers: dict[str, int | None],
    inputs: PlanInputs,
    request: PlanRequest,
    executor: Executor,
    stage: StageProgress,
) -> list[dict[str, Any]]:
    """Replicas of each pool for the target, checked (and raised where a bound is missed) by simulating the
    deployment whole."""
    c, pools, target = o.candidate, o.candidate.pools, inputs.target_rate_per_s
    assert pools is not None
    conf, method = request.confidence, request.ci_method
    mu_p = interval([r["max_rate_per_s"] for r in res_p], conf, method, floor=0.0)
    mu_d = interval([r["max_rate_per_s"] for r in res_d], conf, method, floor=0.0)
    scaling = IndependentReplicas()
    p = scaling.replicas_for(target, mu_p.value or 0.0)
    d = scaling.replicas_for(target, mu_d.value or 0.0)
    o.pool_figures = {
        "prefill_max_rate_per_s": mu_p.to_json(),
        "decode_max_rate_per_s": mu_d.to_json(),
        "search_helpers": helpers,
    }
    if p is None or d is None:
        pool = "prefill" if p is None else "decode"
        o.reason = f"no load down to the search's floor meets the SLOs with one {pool} replica"
        return []
    gp, gd = c.group_gpus[pools.prefill], c.group_gpus[pools.decode]
    cp, cd = c.group_costs_per_hour_usd[pools.prefill], c.group_costs_per_hour_usd[pools.decode]
    points: list[dict[str, Any]] = []
    for round_ in range(PD_MAX_EXTRA + 1):
        config = with_counts(c.config, pools, p, d)
        tasks = [
            RatesTask(
                replace(candidate_run(c, rep, inputs.base_dir, request), config=config), [("operating", target, {})]
            )
            for rep in range(request.replicates)
        ]
        done = map_stage(executor, rates_task, tasks, stage, "operating points")
        rows = [row | {"extra_replicas": round_} for rs in done for row in rs]
        points += rows
        o.simulated_requests += sum(row.get("num_simulated", 0) for row in rows)
        capacity = [
            min(p * rp["max_rate_per_s"], d * rd["max_rate_per_s"]) for rp, rd in zip(res_p, res_d, strict=True)
        ]
        goodput = [
            min(p * rp["max_goodput_rate_per_s"], d * rd["max_goodput_rate_per_s"])
            for rp, rd in zip(res_p, res_d, strict=True)
        ]
        gpus = p * gp + d * gd
        f = CandidateFigures(
            max_rate_per_s=interval(capacity, conf, method, floor=0.0),
            max_goodput_rate_per_s=interval(goodput, conf, method, floor=0.0),
            goodput_per_gpu_per_s=interval([g / gpus for g in goodput], conf, method, floor=0.0),
            unbounded=False,
        )
        f.replicas, f.num_gpus = Interval(1.0), Interval(float(gpus))
        f.cost_per_hour_usd = Interval(p * cp + d * cd)
        f.rate_per_replica_s = target
        operating_figures(f, rows, request, scaling)
        o.figures = f
        o.pool_figures |= {"prefill_replicas": p, "decode_replicas": d}
        if f.operating_meets_slo:
            o.status, o.extra_replicas = "feasible", round_
            return points
        held = {
            name: not (bound is not None and (f.operating[f"p99_{name}_ms"].value or 0.0) > bound)
            for name, bound in request.slo_bounds.items()
        }
        stable = all(row["stable"] for row in rows)
        dp, dd = bump(held, stable, p * (mu_p.value or 0.0), d * (mu_d.value or 0.0))
        p, d = p + dp, d + dd
    o.reason = f"the operating point misses the SLOs even with {PD_MAX_EXTRA} rounds of extra replicas"
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
    pools = o.pool_figures
    if pools is not None and "prefill_replicas" in pools:
        notes.append(
            f"{name}: sized pool by pool: {pools['prefill_replicas']} prefill + {pools['decode_replicas']} decode "
            f"replicas (one prefill replica serves {pools['prefill_max_rate_per_s']['value']:.4g}, one decode replica "
            f"{pools['decode_max_rate_per_s']['value']:.4g} {o.candidate.load.unit})"
        )
    if o.extra_replicas and pools is not None:
        notes.append(f"{name}: raised in {o.extra_replicas} round(s): the deployment missed an SLO without them")
    elif o.extra_replicas:
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
        "family": c.family,
        "tuned": c.tuned,
    }
    bound = c.bound
    out["search"] = {
        "bound": None
        if bound is None
        else {
            "upper_rate_per_s": bound.upper_rate_per_s,
            "estimate_rate_per_s": bound.estimate_rate_per_s,
            "reason": bound.reason,
        },
        "rates_tried": o.rates_tried,
        "simulated_requests": o.simulated_requests,
    }
    if o.status == "pruned":
        out["least_cost_per_hour_usd"] = o.least_cost_per_hour_usd
    if o.pool_figures is not None:
        out["pools"] = o.pool_figures
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
        | {k: v.to_json() for k, v in f.operating.items()}
        | {"prediction_intervals": _prediction_intervals(o.candidate, f.operating)},
        "straddles": f.straddles,
    }
    return out


def _prediction_intervals(candidate: Candidate, operating: dict[str, Interval]) -> dict[str, Any]:
    """The operating point's mean TTFT and TPOT with the intervals servesim's measured error gives them
    (``simulator.metrics.intervals``: the engine of the candidate's policy); empty without the shipped bounds."""
    values = {name: operating[name].value for name in ("mean_ttft_ms", "mean_tpot_ms") if name in operating}
    policy = candidate.resolved.get("policy") or candidate.config.get("policy")
    intervals = deployment_intervals(values, policy, candidate.config.get("cost_model"))
    out: dict[str, Any] = {iv.metric: [iv.low, iv.high] for iv in intervals}
    if intervals:
        out |= {"level": intervals[0].level, "basis": intervals[0].basis}
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


def _tuning(outcomes: list[CandidateOutcome]) -> dict[str, Any]:
    """Per tuned family: its variants, each one's max rate, and the best (the cheapest feasible; of equal costs
    the highest max rate), with the values it was tuned to."""
    families: dict[str, list[CandidateOutcome]] = {}
    for o in outcomes:
        if o.candidate.family is not None:
            families.setdefault(o.candidate.family, []).append(o)
    out = {}
    for family, variants in families.items():
        # the cheapest; of equal costs the one with the most headroom (highest max rate), then the ranking's order
        ranked = sorted(
            (o for o in variants if o.rank is not None),
            key=lambda o: (_value(o.figures.cost_per_hour_usd), -_value(o.figures.max_rate_per_s), o.rank),  # type: ignore[union-attr]
        )
        best = ranked[0] if ranked else None
        out[family] = {
            "variants": [o.candidate.name for o in variants],
            "best": None if best is None else best.candidate.name,
            "tuned": None if best is None else best.candidate.tuned,
            "max_rate_per_s": {o.candidate.name: _value_or_none(o, "max_rate_per_s") for o in variants},
        }
    return out


def _value_or_none(o: CandidateOutcome, name: str) -> float | None:
    return None if o.figures is None else getattr(o.figures, name).value


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
        "simulated_requests": sum(o.simulated_requests for o in outcomes),
        "candidates": [_candidate_json(o) for o in outcomes],
        "ranking": [o.candidate.name for o in ranked],
        "chosen": ranked[0].candidate.name if ranked else None,
        "pareto_frontier": [o.candidate.name for o in ranked if o.pareto],
        "tuning": _tuning(outcomes),
        "notes": [n for o in outcomes for n in _notes(o, request)],
        "tables": {"candidates": "candidates.parquet", "points": "points.parquet"},
    }
    if not ranked:
        plan["notes"].append("no candidate meets the SLOs at the target rate")
    candidates = pd.DataFrame.from_records([_candidate_row(o, request, target) for o in outcomes])
    work = sum(o.simulated_requests for o in outcomes) + sum(o.unrecorded_work for o in outcomes)
    return PlanResult(json_safe(plan), candidates, pd.DataFrame.from_records(point_rows), work)
