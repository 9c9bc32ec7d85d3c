"""Each batch policy against a hand-made view: one plan, its decisions checked by hand.

(hf_fifo has its own file, tests/policies/test_hf_fifo_policy.py; whole-run behaviour is in
tests/policies/test_policy_ladder.py and tests/policies/test_vllm_policy.py.)
"""

import pytest

import policies
from policies.batching.common import admission_order, newest_first
from simulator.request import Request
from tests.policies.fake_view import FakeView, running_request


def make(kind, **params):
    entry = policies.BATCH_POLICIES.entry(kind)
    return entry.factory(entry.params(kind=kind, **params))


def waiting(rid, prompt, output=10, priority=0, enqueued_s=0.0):
    r = Request(rid, 0.0, prompt, output, priority)
    r.enqueued_s = enqueued_s
    return r


def ids(pairs):
    return [(r.request_id, n) for r, n in pairs]


def test_vllm_prefills_first_and_preempts_the_newest_when_a_decode_lacks_a_block():
    view = FakeView(free=0, total=10, block_size=4)
    old = running_request(view, 0, 4, 4, generated=1)  # its next token needs a second block
    new = running_request(view, 1, 4, 4, generated=1)
    view.running = [old, new]
    plan = make("vllm_v0").plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 1)] and plan.preempt == [new]
    view2 = FakeView(waiting=[waiting(2, 8)], free=10, total=10, block_size=4)
    view2.running = [running_request(view2, 0, 4, 5, generated=2)]
    plan = make("vllm_v0").plan_step(view2, 0.0)
    assert ids(plan.scheduled) == [(2, 8)]  # prefill-first: the running request waits this step


def test_vllm_keeps_the_watermark_free_for_new_prompts():
    view = FakeView(waiting=[waiting(0, 16)], free=4, total=10, block_size=4)
    assert make("vllm_v0", watermark=0.1).plan_step(view, 0.0).scheduled == []  # 4 - 4 < 1 block of watermark
    assert ids(make("vllm_v0", watermark=0.0).plan_step(view, 0.0).scheduled) == [(0, 16)]


def test_sarathi_schedules_decodes_then_chunks_prompts_into_the_budget():
    view = FakeView(waiting=[waiting(2, 100)], free=50, total=50, block_size=16)
    dec = running_request(view, 0, 10, 11, generated=2)
    part = running_request(view, 1, 60, 20)
    view.running = [dec, part]
    plan = make("sarathi", max_num_seqs=8, token_budget=64).plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 1), (1, 40), (2, 23)]


def test_continuous_reserves_prompt_plus_output_at_admission():
    view = FakeView(waiting=[waiting(0, 6, output=10)], free=10, total=10, block_size=4)
    plan = make("continuous").plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 6)] and {r.request_id: n for r, n in plan.kv_tokens.items()} == {0: 16}


def test_static_lets_nobody_join_a_running_batch():
    view = FakeView(waiting=[waiting(1, 4)], free=10, total=10, block_size=4)
    view.running = [running_request(view, 0, 4, 5, generated=2)]
    plan = make("static", max_batch_size=4).plan_step(view, 0.0)
    assert ids(plan.scheduled) == [(0, 1)]


def test_dynamic_waits_for_a_full_batch_until_the_oldest_has_waited_max_wait():
    view = FakeView(waiting=[waiting(0, 4, enqueued_s=1.0)], free=10, total=10, block_size=4)
    policy = make("dynamic", max_batch_size=2, max_wait_s=0.5)
    early = policy.plan_step(view, 1.2)
    assert early.scheduled == [] and early.wake_at_s == 1.5
    assert ids(policy.plan_step(view, 1.5).scheduled) == [(0, 4)]


def test_priority_serves_the_lowest_class_first_and_preempts_the_least_important():
    view = FakeView(free=0, total=10, block_size=4)
    view.waiting = [waiting(2, 4, priority=3), waiting(3, 4, priority=0)]
    low = running_request(view, 0, 4, 4, generated=1, priority=5)
    high = running_request(view, 1, 4, 4, generated=1, priority=1)
    view.running = [low, high]
    plan = make("priority").plan_step(view, 0.0)
    # request 3 (class 0) outranks both running requests and may push the class-5 one out to get in
    assert plan.preempt == [low] and ids(plan.scheduled) == [(3, 4)]


def test_no_kv_cache_recomputes_everything_and_sends_the_newest_back_when_full():
    view = FakeView(free=3, total=3, block_size=4)
    a = running_request(view, 0, 4, 0, generated=1, blocks=0)
    b = running_request(view, 1, 4, 0, generated=1, blocks=0)
    view.running = [a, b]
    plan = make("no_kv_cache").plan_step(view, 0.0)
    assert plan.discard_kv and ids(plan.scheduled) == [(0, 5)] and plan.preempt == [b]


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 0, 1]])
def test_victim_keys_rank_by_admission_whatever_order_the_candidates_come_in(order):
    view = FakeView()
    running = [running_request(view, i, 4, 4) for i in range(3)]
    key = admission_order(running)
    candidates = [running[i] for i in order]
    assert max(candidates, key=key) is running[2]
    assert [r.request_id for r in newest_first(candidates, key)] == [2, 1, 0]


def test_every_registered_policy_declares_traits_that_match_its_class():
    for name in policies.BATCH_POLICIES:
        entry = policies.BATCH_POLICIES.entry(name)
        assert entry.traits.steady_decode == callable(getattr(entry.factory, "steady_decode", None)), name


def test_registering_a_policy_whose_traits_disagree_with_its_class_fails():
    from policies.batching import registry as batch_registry
    from policies.batching.registry import BatchTraits
    from policies.registry import Registry

    reg = Registry("batch policy", BatchTraits(), batch_registry._check_traits)

    class Misspelt:
        def plan_step(self, view, now_s): ...

        def steady_decoding(self, view): ...  # not the capability's name

    with pytest.raises(TypeError, match="declares steady_decode but has no steady_decode method"):
        reg.register("misspelt", traits=BatchTraits(steady_decode=True))(Misspelt)

    class Undeclared:
        def plan_step(self, view, now_s): ...

        def steady_decode(self, view): ...

    with pytest.raises(TypeError, match="traits do not declare it"):
        reg.register("undeclared")(Undeclared)


def test_sarathi_admits_a_prompt_within_the_watermark_of_the_whole_cache_when_alone():
    """100 blocks of 16, a 1% watermark: a 1,585-token prompt (100 blocks with its output) runs alone."""
    from tests.conftest import make_config, run_checked

    lengths = {
        "kind": "independent",
        "prompt": {"kind": "fixed", "tokens": 1585},
        "output": {"kind": "fixed", "tokens": 15},
    }
    cfg = make_config(
        policy={"kind": "sarathi", "max_num_seqs": 4, "token_budget": 512},
        kv_cache={"num_blocks": 100, "block_size": 16},
        workload={"num_requests": 1, "arrival": {"kind": "constant", "rate_per_s": 1.0}, "lengths": lengths},
    )
    result = run_checked(cfg)
    assert result.summary["completed"] == 1 and result.summary["preemptions"] == 0
