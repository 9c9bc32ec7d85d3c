"""TensorRT-LLM (``trtllm``): in-flight batching under max_num_tokens, GUARANTEED_NO_EVICT and MAX_UTILIZATION.

Plans against hand-made views, hand-worked timelines under a constant 1 s step, and the no-eviction
property of the default capacity policy over random workloads.
"""

import numpy as np
import pytest

from policies.batching.trtllm import TrtllmParams
from simulator.build import build
from tests.conftest import make_config, make_stream, run_checked
from tests.policies.fake_view import FakeView, running_request
from tests.policies.test_policy_units import ids, make, waiting


def test_defaults_follow_the_llm_api():
    p = TrtllmParams()
    assert (p.max_batch_size, p.max_num_tokens) == (2048, 8192)
    assert p.capacity_scheduler_policy == "GUARANTEED_NO_EVICT" and p.enable_chunked_prefill is False


def pressure_view():
    # 20 blocks of 4. A decodes (8 prompt, 12 output: 5 blocks to completion, 2 held, 3 owed); 18 free.
    view = FakeView(free=18, total=20, block_size=4)
    view.running = [running_request(view, 0, 8, 8, generated=1, output=12)]
    view.waiting = [waiting(1, 16, output=16), waiting(2, 20, output=12), waiting(3, 4, output=4)]
    return view


def test_guaranteed_no_evict_admits_only_with_blocks_to_completion():
    # spare = 18 free - 3 owed = 15. B needs 8 blocks to completion (15 -> 7); C needs 8 > 7: admission stops
    # there, and D (2 blocks) waits behind it. The decode comes first in the step.
    plan = make("trtllm", max_num_tokens=64).plan_step(pressure_view(), 0.0)
    assert ids(plan.scheduled) == [(0, 1), (1, 16)] and not plan.kv_tokens and not plan.preempt


def test_max_utilization_admits_while_this_step_fits():
    # A's 9th token takes its 3rd block (17 left); B 4 blocks, C 5, D 1: all fit this step.
    plan = make("trtllm", max_num_tokens=64, capacity_scheduler_policy="MAX_UTILIZATION").plan_step(
        pressure_view(), 0.0
    )
    assert ids(plan.scheduled) == [(0, 1), (1, 16), (2, 20), (3, 4)]


def test_max_utilization_pauses_the_newest_and_admits_nothing_then():
    view = FakeView(waiting=[waiting(9, 4)], free=0, total=10, block_size=4)
    old = running_request(view, 0, 4, 4, generated=1)
    new = running_request(view, 1, 4, 4, generated=1)
    view.running = [old, new]
    plan = make("trtllm", capacity_scheduler_policy="MAX_UTILIZATION").plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 1)] and plan.preempt == [new]


def test_decodes_come_first_and_a_whole_prompt_must_fit_the_token_budget():
    # budget 8: the decode takes 1; B's 8-token prompt does not fit the 7 left, and without chunking it waits
    # (the micro-batch scheduler stops at it), although C's 2 would fit.
    view = FakeView(free=50, total=50, block_size=4)
    view.running = [running_request(view, 0, 4, 4, generated=1)]
    view.waiting = [waiting(1, 8), waiting(2, 2)]
    assert ids(make("trtllm", max_num_tokens=8).plan_step(view, 0.0).scheduled) == [(0, 1)]
    # chunked context, first come first served: B gets what is left cut to whole blocks (4 of 7), C the 2 it needs
    plan = make("trtllm", max_num_tokens=8, enable_chunked_prefill=True).plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 1), (1, 4), (2, 2)]


def test_without_chunking_a_prompt_longer_than_max_num_tokens_is_refused():
    cfg = make_config(policy={"kind": "trtllm", "max_num_tokens": 16, "max_batch_size": 4})
    result = run_checked(cfg, make_stream([0.0, 0.0], [17, 16], [5, 5]))
    assert result.summary["completed"] == 1 and result.summary["rejected"] == 1
    cfg = make_config(
        policy={"kind": "trtllm", "max_num_tokens": 16, "max_batch_size": 4, "enable_chunked_prefill": True}
    )
    assert run_checked(cfg, make_stream([0.0, 0.0], [17, 16], [5, 5])).summary["completed"] == 2


def test_timeline_contexts_and_generations_share_a_step(by_id):
    # A (4 prompt, 3 out) at 0; B (4, 2) at 0.5. [0,1] A's context -> A tok1 @1. [1,2] A's decode + B's context
    # (1 + 4 tokens) -> A tok2, B tok1 @2. [2,3] A tok3, B tok2: both done @3.
    cfg = make_config(policy={"kind": "trtllm", "max_num_tokens": 8, "max_batch_size": 4})
    result = run_checked(cfg, make_stream([0.0, 0.5], [4, 4], [3, 2]))
    r = by_id(result)
    assert r.loc[0, "first_token_s"] == 1.0 and r.loc[0, "finished_s"] == 3.0
    assert r.loc[1, "first_token_s"] == 2.0 and r.loc[1, "finished_s"] == 3.0
    assert result.steps["num_prefill_tokens"].tolist() == [4, 4, 0]


def test_timeline_chunked_context_over_steps(by_id):
    # A (20 prompt, 2 out), budget 8, blocks of 16 tokens: chunks 8, 8, 4 -> tok1 @3, tok2 @4.
    cfg = make_config(
        policy={"kind": "trtllm", "max_num_tokens": 8, "max_batch_size": 4, "enable_chunked_prefill": True}
    )
    result = run_checked(cfg, make_stream([0.0], [20], [2]))
    r = by_id(result)
    assert r.loc[0, "first_token_s"] == 3.0 and r.loc[0, "finished_s"] == 4.0
    assert result.steps["num_prefill_tokens"].tolist() == [8, 8, 4, 0]


def random_stream(seed, n=80):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(0.25, n)).tolist()
    return make_stream(arrivals, rng.integers(1, 40, n).tolist(), rng.integers(1, 40, n).tolist())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunked", [False, True])
def test_guaranteed_no_evict_never_preempts(seed, chunked):
    """Random workloads on a small cache (30 blocks of 4): GUARANTEED_NO_EVICT ends every request, preempting none."""
    stream = random_stream(seed)
    params = {"kind": "trtllm", "max_batch_size": 16, "max_num_tokens": 64, "enable_chunked_prefill": chunked}
    cfg = make_config(policy=params, kv_cache={"num_blocks": 30, "block_size": 4})
    s = run_checked(cfg, stream).summary
    assert s["preemptions"] == 0
    assert s["completed"] + s["rejected"] == len(stream) and s["rejected"] == 0
    plain = build(cfg, stream=stream, fast_forward=False).run().summary
    assert plain["preemptions"] == 0 and plain["completed"] == s["completed"]


def test_max_utilization_preempts_on_the_same_workloads():
    params = {
        "kind": "trtllm",
        "max_batch_size": 16,
        "max_num_tokens": 64,
        "capacity_scheduler_policy": "MAX_UTILIZATION",
    }
    cfg = make_config(policy=params, kv_cache={"num_blocks": 30, "block_size": 4})
    total = 0
    for seed in range(6):
        stream = random_stream(seed)
        s = run_checked(cfg, stream).summary
        assert s["completed"] + s["rejected"] == len(stream)
        total += s["preemptions"]
    assert total > 0


def waiting_view(prompt: int) -> FakeView:
    # one generation request (4 prompt tokens computed, 1 generated) and one context waiting
    view = FakeView(free=50, total=50, block_size=4)
    view.running = [running_request(view, 0, 4, 4, generated=1)]
    view.waiting = [waiting(1, prompt)]
    return view


def test_batch_waiting_holds_contexts_until_the_timeout():
    """max_num_tokens 64 x ratio 0.5 = 32: a step of one decode and an 8-token context (9 tokens) holds the context
    back for batch_wait_timeout_iters 2 steps, then runs it (PyExecutor._waiting_requests)."""
    policy = make("trtllm", max_num_tokens=64, batch_wait_timeout_iters=2, batch_wait_max_tokens_ratio=0.5)
    view = waiting_view(8)
    assert ids(policy.plan_step(view, 0.0).scheduled) == [(0, 1)]
    assert ids(policy.plan_step(view, 1.0).scheduled) == [(0, 1)]
    assert ids(policy.plan_step(view, 2.0).scheduled) == [(0, 1), (1, 8)]
    # the count starts again after the contexts ran
    assert ids(policy.plan_step(view, 3.0).scheduled) == [(0, 1)]


def test_batch_waiting_runs_contexts_that_reach_the_token_ratio_or_have_no_decode_beside_them():
    policy = make("trtllm", max_num_tokens=64, batch_wait_timeout_iters=20, batch_wait_max_tokens_ratio=0.5)
    assert ids(policy.plan_step(waiting_view(31), 0.0).scheduled) == [(0, 1), (1, 31)]  # 31 + 1 = 32 tokens
    alone = FakeView(waiting=[waiting(1, 8)], free=50, total=50, block_size=4)
    assert ids(policy.plan_step(alone, 0.0).scheduled) == [(1, 8)]  # no generation request: never waits
    off = make("trtllm", max_num_tokens=64)  # TensorRT-LLM's defaults: 0 and 0.0, no waiting
    assert ids(off.plan_step(waiting_view(8), 0.0).scheduled) == [(0, 1), (1, 8)]


@pytest.mark.parametrize("seed", range(4))
def test_batch_waiting_ends_every_request_and_the_fast_path_agrees(seed):
    stream = random_stream(seed)
    params = {
        "kind": "trtllm",
        "max_batch_size": 16,
        "max_num_tokens": 64,
        "batch_wait_timeout_iters": 5,
        "batch_wait_max_tokens_ratio": 0.9,
    }
    cfg = make_config(policy=params, kv_cache={"num_blocks": 30, "block_size": 4})
    fast = run_checked(cfg, stream)
    assert fast.summary["completed"] == len(stream) and fast.summary["preemptions"] == 0
    plain = build(cfg, stream=stream, fast_forward=False).run()
    assert plain.requests.equals(fast.requests)
    # contexts waited: the first token comes later than without batch waiting
    eager = run_checked(
        make_config(
            policy=params | {"batch_wait_timeout_iters": 0, "batch_wait_max_tokens_ratio": 0},
            kv_cache={"num_blocks": 30, "block_size": 4},
        ),
        stream,
    )
    assert fast.requests["first_token_s"].mean() > eager.requests["first_token_s"].mean()


def test_attention_dp_ranks_do_not_wait_for_a_batch():
    from simulator.cluster.dp_attention import rank_policy

    params = TrtllmParams(batch_wait_timeout_iters=20, batch_wait_max_tokens_ratio=0.9)
    ranked = rank_policy(params, "trtllm", 4)
    assert (ranked.batch_wait_timeout_iters, ranked.batch_wait_max_tokens_ratio) == (0, 0.0)
    assert rank_policy(params, "trtllm", 1) is params


def test_the_members_that_open_a_plan_count_as_generation_and_survive_holding_back_contexts():
    """``num_generation`` reads the members a plan opens with (``num_lead_decodes``) as generation requests without
    looking at each, as counting them one by one does; holding the contexts back keeps them, and a plan whose opening
    entries lose one no longer says they open it."""
    from policies.batching.trtllm import hold_back_contexts, num_generation
    from policies.interface import StepPlan

    view = FakeView()
    decodes = [running_request(view, i, 50, 50 + i, generated=i + 1) for i in range(3)]
    for r in decodes:
        r.num_generated_tokens = r.num_computed_tokens - 50 + 1  # one token more than computed: a decode
    context = running_request(view, 9, 200, 0)
    plan = StepPlan(scheduled=[(r, 1) for r in decodes] + [(context, 200)], num_lead_decodes=3)
    counted = StepPlan(scheduled=list(plan.scheduled))
    assert num_generation(plan) == num_generation(counted) == 3
    hold_back_contexts(plan)
    assert [r for r, _ in plan.scheduled] == decodes and plan.num_lead_decodes == 3
    lost = StepPlan(scheduled=[(context, 200), *[(r, 1) for r in decodes]], num_lead_decodes=2)
    hold_back_contexts(lost)
    assert lost.num_lead_decodes == 0
