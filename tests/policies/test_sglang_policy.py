"""SGLang (``sglang``): prefill or decode batches, new-token-ratio admission, its decay and reset, retraction, LPM.

Plans against hand-made views (block size 1, so KV blocks are tokens), and hand-worked timelines under a
constant 1 s step.
"""

import numpy as np
import pytest

from policies.batching import resolve_for_hardware
from policies.batching.sglang import SglangParams, SglangPolicy, sglang_chunked_prefill_size
from simulator.build import build
from simulator.config.presets import hardware_presets
from tests.conftest import make_config, make_stream, run_checked
from tests.policies.fake_view import FakeView, running_request
from tests.policies.test_policy_units import ids, waiting

INIT = 0.7
FLOOR = 0.7 * 0.14
DECAY = (INIT - FLOOR) / 600


def policy(**params):
    return SglangPolicy(SglangParams(**params))


def decoding(view, rid, prompt, generated, output=100):
    """A running request in decode: its next token is the only one left to compute."""
    return running_request(view, rid, prompt, prompt + generated - 1, generated=generated, output=output)


def test_defaults_follow_sglang_server_args():
    p = SglangParams()
    assert (p.max_prefill_tokens, p.schedule_policy, p.enable_mixed_chunk) == (16384, "fcfs", False)
    expected = {
        "a100-40gb": 4096,
        "l40s": 4096,
        "a100-80gb": 8192,
        "h100-sxm": 8192,
        "h200": 8192,
        "b200": 16384,
        "mi300x": 16384,
    }
    hw = hardware_presets()
    for name, size in expected.items():
        assert sglang_chunked_prefill_size(hw[name].memory_bytes) == size, name
        assert resolve_for_hardware(p, hw[name].memory_bytes, hw[name].name).chunked_prefill_size == size
    assert policy().chunked_prefill_size == 4096  # no GPU known: SGLang's fallback
    assert policy(chunked_prefill_size=-1).chunked_prefill_size is None  # -1 turns chunked prefill off
    pol = policy()
    assert pol.init_new_token_ratio == INIT and pol.min_new_token_ratio == pytest.approx(FLOOR)
    assert pol.new_token_ratio_decay == pytest.approx(DECAY)


def test_max_running_requests_defaults_to_sglangs_kv_pool_rule():
    view = FakeView(free=100, total=100, block_size=16, max_model_len=4096)  # 1,600 tokens
    assert policy().max_running(view) == 800  # min(1600 // 2, clamp(1600 / 4096 * 512, 2048, 4096))
    assert policy(max_running_requests=3).max_running(view) == 3


def test_admission_reserves_the_ratio_of_the_running_requests_remaining_output():
    # A decodes: 49 output tokens left, reserved at 0.7 = 34.3 tokens. 60 free: 25.7 left for admission.
    view = FakeView(free=60, total=100, block_size=1)
    view.running = [decoding(view, 0, 10, 1, output=50)]
    view.waiting = [waiting(1, 10, output=10), waiting(2, 5, output=1)]
    pol = policy(chunked_prefill_size=64)
    plan = pol.plan_step(view, 0.0)
    # B: 10 + 10 = 20 < 25.7 admitted; C: 5 + 1 = 6 >= 5.7 stops admission. A prefill batch: A does not decode.
    assert ids(plan.scheduled) == [(1, 10)] and not plan.preempt
    assert pol.new_token_ratio == INIT  # a prefill batch does not decay the ratio
    pol.new_token_ratio = 0.1  # 4.9 reserved: both fit
    assert ids(pol.plan_step(view, 0.0).scheduled) == [(1, 10), (2, 5)]


def test_a_step_decodes_when_nothing_can_be_admitted_and_the_ratio_decays():
    view = FakeView(free=60, total=100, block_size=1)
    a = decoding(view, 0, 10, 1, output=50)
    view.running = [a]
    view.waiting = [waiting(1, 30, output=10)]  # 40 >= 25.7
    pol = policy(chunked_prefill_size=64)
    plan = pol.plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 1)]
    assert pol.new_token_ratio == pytest.approx(INIT - DECAY)


def test_the_ratio_decays_per_decode_step_even_those_the_engine_fast_forwards():
    view = FakeView(free=60, total=100, block_size=1)
    a = decoding(view, 0, 10, 1, output=50)
    view.running = [a]
    pol = policy()
    pol.plan_step(view, 0.0)  # a decode: one decay
    # the engine asks steady_decode, runs that step and 5 more without asking (its step count says so): the next
    # plan catches up
    assert pol.steady_decode(view)
    a.num_generated_tokens += 6
    a.num_computed_tokens += 6
    view.num_steps += 6
    pol.plan_step(view, 6.0)
    assert pol.new_token_ratio == pytest.approx(INIT - 7 * DECAY)
    # the skipped steps count even when every request that ran them has finished since (the window ran to the end)
    gone = policy()
    gone.plan_step(view, 0.0)
    assert gone.steady_decode(view)
    view.num_steps += 4
    view.running = []
    view.waiting = [running_request(view, 1, 10, 0, generated=0, output=5)]
    gone.plan_step(view, 4.0)  # a prefill (no decay): the first plan's decode and the 3 steps run after it
    assert gone.new_token_ratio == pytest.approx(INIT - 4 * DECAY)
    view.running, view.waiting = [a], []
    # without steady_decode the engine plans every step: tokens beyond one a step (speculative decoding) are no steps
    spec = policy()
    spec.plan_step(view, 0.0)
    a.num_generated_tokens += 3
    a.num_computed_tokens += 3
    spec.plan_step(view, 1.0)
    assert spec.new_token_ratio == pytest.approx(INIT - 2 * DECAY)
    fast = policy(new_token_ratio_decay_steps=2)
    for _ in range(3):
        fast.plan_step(view, 0.0)
        a.num_generated_tokens += 1
        a.num_computed_tokens += 1
    assert fast.new_token_ratio == pytest.approx(FLOOR)  # never below min_new_token_ratio


def test_the_ratio_resets_when_the_scheduler_goes_idle():
    pol = policy()
    pol.new_token_ratio = 0.2
    plan = pol.plan_step(FakeView(), 0.0)
    assert not plan.scheduled and pol.new_token_ratio == INIT


def test_retraction_takes_the_fewest_outputs_then_the_longest_prompt_and_raises_the_ratio():
    # Each decode needs one more block (token); 1 free, 3 needed. Among the 1-token outputs the 8-token prompt goes.
    view = FakeView(free=1, total=40, block_size=1)
    r1 = decoding(view, 1, 4, 3)
    r2 = decoding(view, 2, 8, 1)
    r3 = decoding(view, 3, 2, 1)
    view.running = [r1, r2, r3]
    pol = policy()
    pol.new_token_ratio = 0.1
    plan = pol.plan_step(view, 0.0)
    assert plan.preempt == [r2] and ids(plan.scheduled) == [(1, 1), (3, 1)]
    # retract_decode: (decoded + 20 per request) / (max_new_tokens + 1) over the two left
    assert pol.new_token_ratio == pytest.approx((3 + 1 + 20 * 2) / (100 + 100 + 1))
    assert pol.new_token_ratio > 0.1


def test_retraction_keeps_the_last_request():
    view = FakeView(free=0, total=40, block_size=1)
    only = decoding(view, 1, 4, 3)
    view.running = [only]
    plan = policy().plan_step(view, 0.0)
    assert plan.preempt == [only] and not plan.scheduled  # it cannot grow: it preempts itself (recompute)


def test_lpm_serves_the_longest_cached_prefix_first():
    view = FakeView(free=400, total=400, block_size=1)
    view.waiting = [waiting(1, 48), waiting(2, 48), waiting(3, 48)]
    view.hits = {1: 0, 2: 32, 3: 16}
    assert ids(policy(schedule_policy="lpm").plan_step(view, 0.0).scheduled) == [(2, 16), (3, 32), (1, 48)]
    assert ids(policy().plan_step(view, 0.0).scheduled) == [(1, 48), (2, 16), (3, 32)]  # fcfs: queue order
    # more than 128 waiting: SGLang skips the sort (FCFS)
    view.waiting = [waiting(i, 4) for i in range(129)]
    view.hits = {128: 3}
    assert policy(schedule_policy="lpm").queue_order(view) is view.waiting


def test_a_long_prompt_is_chunked_and_holds_the_chunk_budget():
    view = FakeView(free=400, total=400, block_size=1)
    view.waiting = [waiting(0, 40, output=5), waiting(1, 4, output=5)]
    pol = policy(chunked_prefill_size=16)
    assert ids(pol.plan_step(view, 0.0).scheduled) == [(0, 16)]  # the chunk budget is spent
    view.running = [running_request(view, 0, 40, 16, output=5)]
    view.waiting = [waiting(1, 4, output=5)]
    assert ids(pol.plan_step(view, 1.0).scheduled) == [(0, 16)]
    view.running = [running_request(view, 0, 40, 32, output=5)]
    assert ids(pol.plan_step(view, 2.0).scheduled) == [(0, 8), (1, 4)]  # its last chunk, then the next request


def test_a_request_that_can_never_be_admitted_is_refused():
    view = FakeView(free=40, total=40, block_size=1, max_model_len=4096)
    view.waiting = [waiting(0, 30, output=10)]  # 40 tokens: admission needs fewer than the 40 the cache holds
    plan = policy().plan_step(view, 0.0)
    assert [r.request_id for r, _ in plan.reject] == [0]


def test_timeline_prefill_and_decode_batches_alternate(by_id):
    # A (4 prompt, 3 out) at 0; B (4, 2) at 0.5. [0,1] A's prefill -> A tok1 @1. [1,2] B's prefill alone (a prefill
    # batch; A waits) -> B tok1 @2. [2,3] A tok2, B tok2 (done) @3. [3,4] A tok3 (done) @4. vLLM V1 finishes A at 3.
    cfg = make_config(policy={"kind": "sglang"})
    result = run_checked(cfg, make_stream([0.0, 0.5], [4, 4], [3, 2]))
    r = by_id(result)
    assert r.loc[0, "first_token_s"] == 1.0 and r.loc[0, "finished_s"] == 4.0
    assert r.loc[1, "first_token_s"] == 2.0 and r.loc[1, "finished_s"] == 3.0
    assert result.steps["num_prefill_tokens"].tolist() == [4, 4, 0, 0]


def test_timeline_with_mixed_chunks_decodes_alongside_a_prefill(by_id):
    # enable_mixed_chunk: [1,2] holds A's decode and B's prefill -> A tok2, B tok1 @2; [2,3] both finish @3.
    cfg = make_config(policy={"kind": "sglang", "enable_mixed_chunk": True})
    r = by_id(run_checked(cfg, make_stream([0.0, 0.5], [4, 4], [3, 2])))
    assert r.loc[0, "finished_s"] == 3.0 and r.loc[1, "first_token_s"] == 2.0 and r.loc[1, "finished_s"] == 3.0


def test_under_memory_pressure_requests_are_retracted_and_all_complete():
    rng = np.random.default_rng(7)
    n = 60
    stream = make_stream(
        np.cumsum(rng.exponential(0.3, n)).tolist(), rng.integers(8, 30, n).tolist(), rng.integers(20, 50, n).tolist()
    )
    # a low starting ratio over-admits: the running requests outgrow the 96-token cache and SGLang retracts
    params = {"kind": "sglang", "chunked_prefill_size": 32, "init_new_token_ratio": 0.3}
    cfg = make_config(policy=params, kv_cache={"num_blocks": 24, "block_size": 4})
    s = run_checked(cfg, stream).summary
    assert s["completed"] == n and s["rejected"] == 0
    assert s["preemptions"] > 0
    plain = build(cfg, stream=stream, fast_forward=False).run().summary  # the ratio survives fast-forwarding
    assert (plain["preemptions"], plain["completed"]) == (s["preemptions"], s["completed"])
