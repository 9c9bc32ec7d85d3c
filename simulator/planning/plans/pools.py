"""Disaggregated candidates sized pool by pool (``--pd-ratio``): each pool's capacity searched beside enough
replicas of the other (``pd_ratio``), then the replicas of each pool for the target, checked by simulating the
deployment whole."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simulator.planning.plans.figures import CandidateFigures, operating_figures
from simulator.planning.plans.outcome import (
    CandidateOutcome,
    PlanInputs,
    StageProgress,
    candidate_run,
    map_stage,
    slo_targets,
)
from simulator.planning.plans.pd_ratio import HEADROOM, bump, enough, helper_count, pool_slo, with_counts
from simulator.planning.plans.pd_ratio import MAX_EXTRA_REPLICAS as PD_MAX_EXTRA
from simulator.planning.plans.pd_ratio import MAX_ROUNDS as PD_MAX_ROUNDS
from simulator.planning.points.capacity import (
    IndependentReplicas,
)
from simulator.planning.points.executors import Executor
from simulator.planning.points.stats import Interval, interval
from simulator.planning.search.evaluate import RatesTask, SearchTask, rates_task, search_task
from simulator.planning.search.settings import PlanRequest


def pd_stage(
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
