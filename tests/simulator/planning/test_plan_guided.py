"""The guided plan against the exhaustive one: the same answer, pruning that never removes the winner,
tuned engine limits, and load curves."""

import random

import pytest

from simulator.planning.plans.candidates import CandidateSet, CandidatesFile, CandidateSpec, candidates_from
from simulator.planning.plans.plan import execute_load_curve, prepare_plan, run_plan
from simulator.planning.plans.prepare import bound_candidates
from simulator.planning.points.executors import InProcessExecutor
from simulator.planning.search.settings import PlanRequest
from tests.simulator.planning.planning_helpers import md1_base, md1_max_rate

HARDWARE = ("l40s", "a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200")


def _request(target: float, exhaustive: bool, **search) -> PlanRequest:
    settings = {"requests_per_point": 200, "curve_points": 0, "rel_tol": 0.02, "exhaustive": exhaustive} | search
    return PlanRequest(slo_ttft_p99_ms=400.0, target_rate_per_s=target, replicates=2, search=settings)


def _by_name(plan):
    return {c["name"]: c for c in plan["candidates"]}


@pytest.mark.parametrize("seed", range(6))
def test_pruning_never_removes_the_cheapest_candidate(seed):
    """Random candidate sets of one-request-at-a-time M/D/1 replicas: the guided plan chooses what the exhaustive
    plan chooses, with the same replicas, and every candidate it prunes costs more than the choice."""
    rng = random.Random(seed)
    specs = []
    for i in range(5):
        overrides = {"hardware": rng.choice(HARDWARE), "cost_model.step_time_s": rng.choice([0.02, 0.05, 0.1, 0.2])}
        specs.append(CandidateSpec(f"c{i}", overrides))
    cset = CandidateSet("test", specs, {})
    target = rng.choice([3.0, 8.0, 20.0])
    base = md1_base()
    exhaustive = run_plan(base, None, "s", cset, _request(target, True), InProcessExecutor()).plan
    guided = run_plan(base, None, "s", cset, _request(target, False), InProcessExecutor()).plan
    assert guided["chosen"] == exhaustive["chosen"]
    full, fast = _by_name(exhaustive), _by_name(guided)
    chosen = exhaustive["chosen"]
    if chosen is None:
        assert all(c["status"] != "pruned" for c in guided["candidates"])
        return
    best = full[chosen]["cost_per_hour_usd"]["value"]
    assert fast[chosen]["replicas"]["value"] == full[chosen]["replicas"]["value"]
    assert fast[chosen]["cost_per_hour_usd"]["value"] == best
    for name, c in fast.items():
        if c["status"] == "pruned":
            # it could not have won, and the least it would cost is true
            least = c["least_cost_per_hour_usd"]
            assert c["rank"] is None and least > best
            assert full[name]["status"] != "feasible" or full[name]["cost_per_hour_usd"]["value"] >= least
            if c["reason"].startswith("pruned: at most"):  # by its analytic bound: never simulated
                assert c["search"]["rates_tried"] == []
                bound = c["search"]["bound"]["upper_rate_per_s"]
                assert bound >= (full[name].get("max_rate_per_s") or {}).get("value", 0.0)
            elif c["reason"].startswith("pruned: misses the SLOs at"):  # by its probe: one point per replicate
                assert [len(r) for r in c["search"]["rates_tried"]] == [1, 1]
                assert all(p == c["search"]["rates_tried"][0] for p in c["search"]["rates_tried"])
            elif c["reason"].startswith("pruned: its replicates miss the SLOs at"):  # straddled: a few points more
                tried = c["search"]["rates_tried"]
                assert len(tried) == 2 and tried[0][0] == tried[1][0] and max(map(len, tried)) > 1
                # the exhaustive search's max rates lie below the loads missed, so their mean does too
                assert full[name]["status"] != "feasible" or full[name]["max_rate_per_s"]["value"] < tried[0][0]
            else:
                assert c["reason"].startswith("pruned: one copy costs")
        elif c["status"] == "feasible":
            # the same replicas wherever both plans sized it (a max rate within the tolerance of the other)
            mine, theirs = c["max_rate_per_s"]["value"], full[name]["max_rate_per_s"]["value"]
            assert mine == pytest.approx(theirs, rel=0.03)
            assert c["replicas"]["value"] == full[name]["replicas"]["value"]


class _ThreeWorkers(InProcessExecutor):
    """In this process, but batching as a pool of three would."""

    workers = 3


@pytest.mark.parametrize("seed", range(3))
def test_the_answer_does_not_depend_on_the_batches_and_rank_all_prunes_nothing(seed):
    """Batches of one or three candidates (the probes then run against other cheapest deployments) give the
    same plan.json; ``rank_all`` plans every candidate, with the same choice and the same replicas for it."""
    rng = random.Random(100 + seed)
    specs = [
        CandidateSpec(f"c{i}", {"hardware": rng.choice(HARDWARE), "cost_model.step_time_s": rng.choice([0.02, 0.05])})
        for i in range(6)
    ]
    cset = CandidateSet("test", specs, {})
    base, request = md1_base(), _request(rng.choice([8.0, 20.0]), False)
    one = run_plan(base, None, "s", cset, request, InProcessExecutor()).plan
    three = run_plan(base, None, "s", cset, request, _ThreeWorkers()).plan
    assert one == three
    every = run_plan(base, None, "s", cset, _request(request.target_rate_per_s, False, rank_all=True),
                     InProcessExecutor()).plan  # fmt: skip
    assert all(c["status"] != "pruned" for c in every["candidates"]) and every["chosen"] == one["chosen"]
    if one["chosen"] is not None:
        assert _by_name(every)[one["chosen"]]["replicas"] == _by_name(one)[one["chosen"]]["replicas"]
    for name, c in _by_name(one).items():
        if c["status"] == "pruned" and _by_name(every)[name]["status"] == "feasible":
            assert _by_name(every)[name]["cost_per_hour_usd"]["value"] >= c["least_cost_per_hour_usd"]


def test_tuning_max_num_seqs_finds_the_known_optimum():
    """A replica whose KV cache holds exactly 16 whole requests, with a step of 5 ms plus 0.5 ms per token.

    Up to 16 sequences a bigger batch serves more: decode steps of n sequences emit
    n / (5 + 0.5 n) tokens per ms, which grows with n, and the cache holds them all. Above 16,
    vLLM V0 admits on the prompt's blocks alone (one of the two each request needs), runs out
    of blocks as outputs grow and preempts by recompute: work thrown away, so less served.
    The optimum is the cache's 16, and the tuned plan must pick it (at 45 req/s one replica of
    it serves what takes two of any other).
    """
    base = md1_base(output_tokens=16, step_time_s=0.005) | {
        "policy": {"kind": "vllm_v0", "max_num_seqs": 1},
        "cost_model": {"kind": "constant", "step_time_s": 0.005, "per_token_s": 0.0005},
        "kv_cache": {"num_blocks": 32, "block_size": 16},  # 2 blocks per request (10 + 16 tokens): 16 requests
    }
    file = CandidatesFile.model_validate(
        {
            "candidates": [{"name": "l40s", "overrides": {"hardware": "l40s"}}],
            "tune": {"policy.max_num_seqs": [4, 8, 16, 32]},
        }
    )
    cset = candidates_from(file, "test")
    assert [c.name for c in cset.candidates] == [f"l40s [policy.max_num_seqs={n}]" for n in (4, 8, 16, 32)]
    request = PlanRequest(
        slo_ttft_p99_ms=1000.0, target_rate_per_s=45.0, replicates=1,
        search={"requests_per_point": 600, "curve_points": 0, "rel_tol": 0.02},
    )  # fmt: skip
    full = request.model_copy(update={"search": request.search.model_copy(update={"exhaustive": True})})
    rates = run_plan(base, None, "s", cset, full, InProcessExecutor()).plan["tuning"]["l40s"]["max_rate_per_s"]
    print(rates)
    plan = run_plan(base, None, "s", cset, request, InProcessExecutor()).plan  # guided: may prune the small ones
    r4, r8, r16, r32 = (rates[f"l40s [policy.max_num_seqs={n}]"] for n in (4, 8, 16, 32))
    assert r4 < r8 < r16 and r32 < r16
    for n, rate in ((4, r4), (8, r8), (16, r16)):
        # below the decode-only capacity of n sequences (16 tokens each), within the growth leeway
        assert rate <= n / ((0.005 + 0.0005 * n) * 16) / (1 - request.search.max_growth_fraction)
    assert plan["tuning"]["l40s"]["best"] == "l40s [policy.max_num_seqs=16]"
    assert plan["tuning"]["l40s"]["tuned"] == {"policy.max_num_seqs": 16}
    assert plan["chosen"] == "l40s [policy.max_num_seqs=16]"


def test_a_load_curve_gives_the_cheapest_deployment_at_each_load():
    specs = [
        CandidateSpec("slow-cheap", {"hardware": "l40s", "cost_model.step_time_s": 0.1}),
        CandidateSpec("fast-dear", {"hardware": "h100-sxm", "cost_model.step_time_s": 0.02}),
    ]
    cset = CandidateSet("test", specs, {})
    targets = [2.0, 10.0, 40.0]
    request = _request(targets[0], False)
    inputs = prepare_plan(md1_base(), None, "s", cset, request)
    result = execute_load_curve(inputs, request, InProcessExecutor(), targets)
    curve = result.plan["load_curve"]
    assert [row["target_rate_per_s"] for row in curve] == targets
    assert result.plan["target_rate_per_s"] == targets[-1]
    for row in curve:
        single = run_plan(md1_base(), None, "s", cset, _request(row["target_rate_per_s"], False), InProcessExecutor())
        assert row["chosen"] == single.plan["chosen"]
        chosen = _by_name(single.plan)[row["chosen"]]
        # the same deployment: replicas within one (the shared search range can move a max rate within tolerance)
        assert abs(row["replicas"] - chosen["replicas"]["value"]) <= 1
    costs = [row["cost_per_hour_usd"] for row in curve]
    assert costs == sorted(costs)


def test_the_bounds_are_computed_once_after_the_validation():
    specs = [CandidateSpec("a", {"cost_model.step_time_s": 0.1}), CandidateSpec("b", {"cost_model.step_time_s": 0.05})]
    cset = CandidateSet("test", specs, {})
    request = _request(2.0, False)
    inputs = prepare_plan(md1_base(), None, "s", cset, request)
    assert not inputs.bounded and all(c.bound is None for c in inputs.candidates)
    bounded = bound_candidates(inputs, request)
    assert bounded.bounded and bound_candidates(bounded, request) is bounded
    uppers = [c.bound.upper_rate_per_s for c in bounded.candidates]
    assert uppers[1] > uppers[0] > 0  # half the step time: a larger bound
    exhaustive = _request(2.0, True)
    assert prepare_plan(md1_base(), None, "s", cset, exhaustive).bounded  # the exhaustive search reads none


def _pd_base() -> dict:
    """One prefill and one decode group with constant steps and no transfer cost.

    Prefill: one 10-token prompt per 50 ms step (max_num_seqs 1): an M/D/1 queue whose TTFT is
    the wait plus the step. Decode: 20 decode steps of 20 ms per request (21 output tokens, the
    first from the prefill), 4 at a time: a capacity of 4 / (20 x 0.02 s) = 10 req/s.
    """
    pool = {"hardware": "l40s", "policy": {"kind": "vllm_v0"}}
    return {
        "seed": 0,
        "kv_transfer": {"bandwidth_bytes_per_s": 1e15, "latency_s": 0.0},
        "groups": [
            pool | {"role": "prefill", "policy": {"kind": "vllm_v0", "max_num_seqs": 1},
                    "cost_model": {"kind": "constant", "step_time_s": 0.05}},
            pool | {"role": "decode", "policy": {"kind": "vllm_v0", "max_num_seqs": 4},
                    "cost_model": {"kind": "constant", "step_time_s": 0.02}},
        ],
        "workload": {
            "num_requests": 100,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "lengths": {"kind": "independent", "prompt": {"kind": "fixed", "tokens": 10},
                        "output": {"kind": "fixed", "tokens": 21}},
        },
    }  # fmt: skip


def test_the_prefill_decode_ratio_is_the_one_theory_gives():
    """TTFT p99 300 ms, 22 req/s. One prefill replica meets the TTFT bound up to the M/D/1 rate with a p99
    wait of 250 ms (12.6 req/s by Erlang's formula), so 22 req/s needs 2; one decode replica is stable up to
    10 req/s (no bound on the decode side), so 3. The pool-by-pool plan answers 2P:3D; copies of the
    candidate's own 1P:1D cluster (at most 10 req/s a copy) would need 3P:3D."""
    lam_p = md1_max_rate(0.25, 0.99, 0.05)
    assert 11 < lam_p < 22 / 1.5  # 22 / lam_p rounds up to 2 with room either way
    cset = CandidateSet("test", [CandidateSpec("pd", {})], {})

    def plan(pd_ratio: bool):
        request = PlanRequest(
            slo_ttft_p99_ms=300.0, target_rate_per_s=22.0, replicates=2,
            search={"requests_per_point": 1000, "curve_points": 0, "pd_ratio": pd_ratio},
        )  # fmt: skip
        return run_plan(_pd_base(), None, "s", cset, request, InProcessExecutor()).plan

    pooled = plan(True)
    (c,) = pooled["candidates"]
    assert c["status"] == "feasible", c["reason"]
    pools = c["pools"]
    print(pools)
    assert pools["prefill_max_rate_per_s"]["value"] == pytest.approx(lam_p, rel=0.12)
    assert 10.0 * 0.9 <= pools["decode_max_rate_per_s"]["value"] <= 10.0 / 0.95 * 1.02  # stable up to capacity
    assert (pools["prefill_replicas"], pools["decode_replicas"]) == (2, 3)
    assert c["num_gpus"]["value"] == 5 and c["extra_replicas"] == 0
    assert c["operating_point"]["p99_ttft_ms"]["value"] <= 300.0
    copies = plan(False)["candidates"][0]
    assert copies["status"] == "feasible" and copies["num_gpus"]["value"] == 6  # three copies of 1P:1D
    assert c["cost_per_hour_usd"]["value"] < copies["cost_per_hour_usd"]["value"]


def test_pruning_keeps_every_family_best():
    """A tuned family dearer than the plan's choice still gets its best variant right: a variant is pruned only
    when it could be neither the choice nor its family's best."""
    file = CandidatesFile.model_validate(
        {
            "candidates": [
                {"name": "cheap", "overrides": {"hardware": "l40s"}},
                {"name": "dear", "overrides": {"hardware": "b200"}, "tune": {"cost_model.step_time_s": [0.05, 0.1]}},
            ]
        }
    )
    cset = candidates_from(file, "test")
    plans = {
        exhaustive: run_plan(md1_base(), None, "s", cset, _request(8.0, exhaustive), InProcessExecutor()).plan
        for exhaustive in (True, False)
    }
    assert plans[True]["chosen"] == plans[False]["chosen"] == "cheap"
    best = plans[True]["tuning"]["dear"]["best"]
    assert best == "dear [cost_model.step_time_s=0.05]" and plans[False]["tuning"]["dear"]["best"] == best
    fast = _by_name(plans[False])
    # the slower variant costs more than both the choice and its family's best: pruned
    assert fast["dear [cost_model.step_time_s=0.1]"]["status"] in ("pruned", "feasible")
    assert fast[best]["status"] == "feasible"


def test_a_straddling_candidate_is_pruned_by_a_few_probe_points_as_the_exhaustive_plan_prices_it():
    """An L40S copy of M/D/1 serving ~4.7 req/s against one H100 copy serving ~22: at targets near 3 x 4.7 the
    L40S's two replicates straddle the probe load (a third of the target, what three copies at its price must
    each carry). Its probe then takes more points than one per replicate and, where the least loads missed average
    at most the probe load, prunes it; the exhaustive plan prices it dearer every time."""
    specs = [
        CandidateSpec("slow", {"hardware": "l40s", "cost_model.step_time_s": 0.1}),
        CandidateSpec("fast", {"hardware": "h100-sxm", "cost_model.step_time_s": 0.04}),
    ]
    cset, base = CandidateSet("test", specs, {}), md1_base()
    straddled = 0
    for target in (14.28, 14.31, 14.34):
        guided = _by_name(run_plan(base, None, "s", cset, _request(target, False), InProcessExecutor()).plan)
        full = _by_name(run_plan(base, None, "s", cset, _request(target, True), InProcessExecutor()).plan)
        assert guided["fast"]["chosen"] and full["fast"]["chosen"]
        assert guided["fast"]["replicas"]["value"] == full["fast"]["replicas"]["value"] == 1
        slow = guided["slow"]
        if slow["status"] == "pruned":
            assert full["slow"]["cost_per_hour_usd"]["value"] >= slow["least_cost_per_hour_usd"]
            assert full["slow"]["max_rate_per_s"]["value"] < target / 3
            if slow["reason"].startswith("pruned: its replicates miss the SLOs at"):
                straddled += 1
                assert max(len(r) for r in slow["search"]["rates_tried"]) > 1
        else:  # straddled within the tolerance: planned, and as the exhaustive plan sizes it
            assert slow["replicas"]["value"] == full["slow"]["replicas"]["value"]
    assert straddled >= 1
