"""Unit tests of the StepExecutor: each of its mechanics by hand, no SimPy, no policy."""

import pytest

from policies.batching.registry import BatchTraits
from policies.interface import StepPlan
from simulator.engine.executor import Carried, DecisionLog, StepExecutor
from simulator.kv.blocks import BlockManager
from simulator.kv.host import HostPool
from simulator.kv.prefix_cache import PrefixCache
from simulator.request import Request, State


class Sink:
    def __init__(self):
        self.done, self.itls, self.rows = [], [], []

    def request_done(self, req, now_s):
        self.done.append((req.request_id, req.state.name, now_s))

    def itl(self, gap_s, count):
        self.itls.append((gap_s, count))

    def step(self, *row):
        self.rows.append(row)


PLAIN = BatchTraits()


def executor(num_blocks=16, block_size=4, role="mixed", swap=0, kv=None, traits=PLAIN, max_model_len=64):
    pool = kv if kv is not None else BlockManager(num_blocks, block_size, HostPool(swap))
    return StepExecutor(pool, traits, Sink(), max_model_len, role=role, block_bytes=100.0, log=DecisionLog())


def run_step(ex, plan, start, end, carried=None):
    carried = carried or Carried()
    ex.carry_out(plan, start, carried)
    shape = ex.shape(plan)
    left = ex.apply(plan, end)
    ex.record(start, end - start, shape, carried)
    ex.check()
    return shape, left


def test_enqueue_rejects_what_can_never_run_with_its_reason():
    ex = executor(num_blocks=4, block_size=4, max_model_len=30)
    too_long, too_big, fine = Request(0, 0.0, 25, 10), Request(1, 0.0, 10, 10), Request(2, 0.0, 8, 4)
    assert not ex.enqueue(too_long, 0.0) and "max model length (30)" in too_long.reject_reason
    assert not ex.enqueue(too_big, 0.0) and "needs 5 KV blocks" in too_big.reject_reason
    assert ex.enqueue(fine, 0.0) and list(ex.waiting) == [fine]
    assert [d[:2] for d in ex.sink.done] == [(0, "REJECTED"), (1, "REJECTED")]


def test_a_prompt_then_decodes_emit_tokens_and_the_finish_frees_the_blocks():
    ex = executor()
    r = Request(0, 0.0, 6, 3)
    ex.enqueue(r, 0.0)
    shape, left = run_step(ex, StepPlan(scheduled=[(r, 6)]), 0.0, 1.0)
    assert shape.prefill_new_tokens == (6,) and shape.num_sampled_tokens == 1 and not left
    assert r.first_token_s == 1.0 and ex.kv.num_blocks(r) == 2 and r.state is State.RUNNING
    shape, _ = run_step(ex, StepPlan(scheduled=[(r, 1)]), 1.0, 2.0)
    assert shape.num_decode_seqs == 1 and shape.decode_context_tokens == 7
    _, left = run_step(ex, StepPlan(scheduled=[(r, 1)]), 2.0, 3.5)
    assert left == [r] and r.state is State.FINISHED and r.finished_s == 3.5
    assert ex.kv.num_free_blocks == 16 and ex.kv.num_blocks(r) == 0
    assert ex.sink.itls == [(1.0, 1), (1.5, 1)]  # the gaps between the three tokens
    assert [row[8] for row in ex.sink.rows] == [2, 2, 0]  # KV blocks in use after each step


def test_a_one_token_chunk_of_a_prompt_is_prefill_work():
    ex = executor()
    r = Request(0, 0.0, 5, 2)
    ex.enqueue(r, 0.0)
    run_step(ex, StepPlan(scheduled=[(r, 4)]), 0.0, 1.0)
    shape, _ = run_step(ex, StepPlan(scheduled=[(r, 1)]), 1.0, 2.0)
    assert shape.prefill_new_tokens == (1,) and shape.prefill_cached_tokens == (4,) and shape.num_decode_seqs == 0


def test_recompute_preemption_goes_back_behind_requests_holding_transferred_kv():
    ex = executor()
    old, new = Request(0, 0.0, 4, 8), Request(1, 0.0, 4, 8)
    for r in (old, new):
        ex.enqueue(r, 0.0)
    run_step(ex, StepPlan(scheduled=[(old, 4), (new, 4)]), 0.0, 1.0)
    carried = Carried()
    ex.carry_out(StepPlan(preempt=[new]), 1.0, carried)
    assert carried.num_preempted == 1 and carried.num_swaps == 0
    assert new.state is State.PREEMPTED and new.num_computed_tokens == 0 and new.num_preemptions == 1
    assert list(ex.waiting) == [new] and ex.kv.num_blocks(new) == 0
    ex.check()


def test_swap_preemption_keeps_the_counters_and_counts_the_traffic_both_ways():
    ex = executor(swap=8)
    r = Request(0, 0.0, 8, 4)
    ex.enqueue(r, 0.0)
    run_step(ex, StepPlan(scheduled=[(r, 8)]), 0.0, 1.0)
    carried = Carried()
    ex.carry_out(StepPlan(preempt=[r], preemption_mode="swap"), 1.0, carried)
    assert ex.is_swapped(r) and r.num_computed_tokens == 8 and carried.swap_bytes == 200.0  # 2 blocks x 100
    ex.check()
    back = Carried()
    ex.carry_out(StepPlan(scheduled=[(r, 1)]), 2.0, back)
    assert not ex.is_swapped(r) and back.num_swaps == 1 and back.swap_bytes == 200.0


def test_swap_without_room_falls_back_to_recompute():
    ex = executor(swap=1)
    r = Request(0, 0.0, 8, 4)
    ex.enqueue(r, 0.0)
    run_step(ex, StepPlan(scheduled=[(r, 8)]), 0.0, 1.0)
    carried = Carried()
    ex.carry_out(StepPlan(preempt=[r], preemption_mode="swap"), 1.0, carried)
    assert not ex.is_swapped(r) and r.num_computed_tokens == 0 and carried.num_swaps == 0


def test_admission_reuses_a_cached_prefix():
    import numpy as np

    ex = executor(kv=PrefixCache(16, 4))
    a = Request(0, 0.0, 9, 1, prefix_hashes=np.array([7, 8, 9]), hash_block_tokens=4)
    b = Request(1, 0.0, 9, 1, prefix_hashes=np.array([7, 8, 5]), hash_block_tokens=4)
    ex.enqueue(a, 0.0)
    run_step(ex, StepPlan(scheduled=[(a, 9)]), 0.0, 1.0)
    ex.enqueue(b, 1.0)
    ex.kv.new_plan()
    assert ex.prefix_hit_tokens(b) == 8
    _, left = run_step(ex, StepPlan(scheduled=[(b, 1)]), 1.0, 2.0)
    assert b.num_cached_tokens == 8 and left == [b]


def test_a_prefill_engine_hands_a_prompt_off_instead_of_emitting():
    ex = executor(role="prefill")
    r, one = Request(0, 0.0, 4, 5), Request(1, 0.0, 4, 1)
    ex.enqueue(r, 0.0)
    ex.enqueue(one, 0.0)
    _, left = run_step(ex, StepPlan(scheduled=[(r, 4), (one, 4)]), 0.0, 1.0)
    assert left == [r, one] and r.state is State.TRANSFERRING and one.state is State.FINISHED
    assert ex.sending == [r] and r.first_token_s is None  # the first token travels with the KV
    ex.release_sent(r)
    assert ex.kv.num_used_blocks == 0
    ex.check()


def test_leases_wait_for_room_and_hand_their_blocks_to_the_request():
    ex = executor(num_blocks=4, block_size=4)
    holder = Request(9, 0.0, 8, 8)
    ex.enqueue(holder, 0.0)
    run_step(ex, StepPlan(scheduled=[(holder, 8)]), 0.0, 1.0)  # 2 of 4 blocks
    incoming = Request(0, 0.0, 8, 4)
    incoming.state, incoming.num_computed_tokens, incoming.num_generated_tokens = State.TRANSFERRING, 8, 1
    ex.offer_transfer(incoming)
    assert ex.reserve_incoming(pending_blocks=1) == []  # 9 tokens need 3 blocks; 1 of the 2 free is spoken for
    assert list(ex.incoming) == [incoming]
    assert ex.reserve_incoming() == [] and ex.kv.num_used_blocks == 2  # still short: a normal outcome
    ex.carry_out(StepPlan(preempt=[holder]), 1.0, Carried())
    assert ex.reserve_incoming() == [incoming] and ex.kv.num_used_blocks == 3
    ex.check()
    ex.accept_transferred(incoming, 2.0)
    assert ex.waiting[0] is incoming and ex.kv.num_blocks(incoming) == 3 and incoming.first_token_s == 2.0
    ex.check()


def test_check_finds_blocks_held_by_a_request_that_left():
    ex = executor()
    ghost = Request(5, 0.0, 4, 4)
    ex.kv.allocate(ghost, 4)
    with pytest.raises(AssertionError, match="requests that left"):
        ex.check()


def test_the_decision_log_holds_plans_and_ends():
    ex = executor()
    r = Request(0, 0.0, 4, 1)
    ex.enqueue(r, 0.0)
    run_step(ex, StepPlan(), 0.0, 0.0)  # an idle plan is no decision
    run_step(ex, StepPlan(scheduled=[(r, 4)]), 0.0, 1.0)
    assert ex.log.rows == [("plan", ((0, 4),), (), ()), ("end", 0, "FINISHED", None)]
