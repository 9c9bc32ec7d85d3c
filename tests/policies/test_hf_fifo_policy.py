"""The hf_fifo policy: decode first, chunked prefill under a token budget, safety margin, preemption."""

from policies.batching.hf_fifo import HfFifoParams, HfFifoPolicy
from simulator.request import Request, State
from tests.conftest import make_config, make_stream, run_checked
from tests.policies.fake_view import FakeView


def View(waiting=(), running=(), free=100, total=100):  # a view of the requests running() made
    view = FakeView(waiting, running, free, total)
    view.blocks.update({r.request_id: _blocks[r] for r in running})
    return view


_blocks: dict[Request, int] = {}  # blocks held by the requests running() makes


def running(rid, prompt, computed, generated=0, blocks=None):
    r = Request(rid, 0.0, prompt, 100)
    r.state, r.num_computed_tokens, r.num_generated_tokens = State.RUNNING, computed, generated
    _blocks[r] = -(-computed // 16) if blocks is None else blocks
    return r


def policy(**kw):
    return HfFifoPolicy(HfFifoParams(**kw))


def test_decodes_come_first_then_the_budget_chunks_prefills():
    dec = running(0, 50, 51, generated=2)
    new = [Request(i, 0.0, 300, 10) for i in (1, 2)]
    plan = policy(max_num_batched_tokens=400).plan_step(View(waiting=new, running=[dec]), 0.0)
    assert [(r.request_id, n) for r, n in plan.scheduled] == [(0, 1), (1, 300), (2, 99)]


def test_a_part_prefilled_request_continues_before_waiting_ones():
    part = running(0, 300, 99)
    new = Request(1, 0.0, 50, 10)
    plan = policy(max_num_batched_tokens=512).plan_step(View(waiting=[new], running=[part]), 0.0)
    assert [(r.request_id, n) for r, n in plan.scheduled] == [(0, 201), (1, 50)]


def test_below_the_safety_margin_only_decodes_join():
    dec = running(0, 50, 51, generated=2)
    new = Request(1, 0.0, 50, 10)
    plan = policy(safety_margin=0.15).plan_step(View(waiting=[new], running=[dec], free=10, total=100), 0.0)
    assert [r.request_id for r, _ in plan.scheduled] == [0]
    alone = policy(safety_margin=0.15).plan_step(View(waiting=[new], free=10, total=100), 0.0)
    assert [r.request_id for r, _ in alone.scheduled] == [1]  # the first prefill still runs


def test_batch_cap():
    new = [Request(i, 0.0, 10, 10) for i in range(5)]
    plan = policy(max_num_seqs=3, max_num_batched_tokens=64).plan_step(View(waiting=new), 0.0)
    assert len(plan.scheduled) == 3


def test_no_block_for_any_decode_preempts_the_newest():
    old, young = running(0, 32, 32, generated=1, blocks=2), running(1, 32, 32, generated=1, blocks=2)
    plan = policy().plan_step(View(running=[old, young], free=0, total=4), 0.0)
    assert plan.preempt == [young] and [(r.request_id, n) for r, n in plan.scheduled] == [(0, 1)]


def test_simulation_under_memory_pressure_keeps_invariants():
    cfg = make_config(
        policy={"kind": "hf_fifo", "max_num_seqs": 8, "max_num_batched_tokens": 64},
        kv_cache={"num_blocks": 24, "block_size": 16},
    )
    stream = make_stream([0.0] * 10, [40] * 10, [60] * 10)
    result = run_checked(cfg, stream)
    assert result.summary["completed"] == 10 and result.summary["preemptions"] > 0
