"""The prefix-caching block pool, alone and inside the engine."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.kv.prefix_cache import PrefixCache, block_keys
from simulator.request import Request
from tests.conftest import make_config, run_checked
from workloads import RequestStream


def req(i, prompt, hashes, width=4, output=1):
    return Request(i, 0.0, prompt, output, prefix_hashes=np.asarray(hashes), hash_block_tokens=width)


def test_block_keys_follow_the_workload_block_of_each_kv_block():
    # workload blocks of 4 tokens, KV blocks of 2: KV blocks 0,1 lie in workload block 0, 2,3 in block 1
    r = req(0, 9, [10, 11, 12], width=4)
    assert block_keys(r, 2) == ((10, 0), (10, 1), (11, 2), (11, 3))  # 9 // 2 = 4 full KV blocks


def test_second_request_reuses_the_cached_prefix():
    kv = PrefixCache(10, 4)
    a, b = req(0, 12, [1, 2, 3]), req(1, 12, [1, 2, 9])
    kv.new_plan()
    assert kv.prefix_hit_tokens(a) == 0
    kv.acquire_prefix(a)
    kv.allocate(a, 12)
    a.num_computed_tokens = 12
    kv.commit(a)
    kv.new_plan()
    assert kv.prefix_hit_tokens(b) == 8  # blocks (1,0) and (2,1); block (9,2) differs
    # one new block, plus the two reused ones counted against the free pool: their only holder (a)
    # might be preempted by the same plan, and then they would come out of it
    assert kv.num_new_blocks(b, 12) == 3
    tokens, reload = kv.acquire_prefix(b)
    assert (tokens, reload) == (8, 0)
    kv.allocate(b, 12)
    assert kv.block_ids(b)[:2] == kv.block_ids(a)[:2] and kv.block_ids(b)[2] != kv.block_ids(a)[2]
    assert kv.num_freeable_blocks(a) == 1 and kv.num_freeable_blocks(b) == 1
    kv.check([a, b], [])


def test_a_fully_cached_prompt_still_computes_its_last_token():
    kv = PrefixCache(10, 4)
    a = req(0, 8, [1, 2])
    kv.acquire_prefix(a)
    kv.allocate(a, 8)
    a.num_computed_tokens = 8
    kv.commit(a)
    kv.free(a)
    again = req(1, 8, [1, 2])
    assert kv.prefix_hit_tokens(again) == 4  # (8 - 1) // 4 blocks


def test_freed_blocks_stay_cached_until_memory_is_needed_least_recent_first():
    kv = PrefixCache(4, 4)
    a = req(0, 8, [1, 2])
    kv.acquire_prefix(a)
    kv.allocate(a, 8)
    a.num_computed_tokens = 8
    kv.commit(a)
    kv.free(a)
    assert kv.num_cached_blocks == 2 and kv.num_free_blocks == 4 and kv.num_used_blocks == 0
    c = req(1, 12, [7, 8, 9])  # takes the 2 free blocks, then evicts: a's tail block goes first
    kv.acquire_prefix(c)
    kv.allocate(c, 12)
    assert kv.num_cached_blocks == 1
    assert kv.prefix_hit_tokens(req(2, 9, [1, 2, 3])) == 4  # the head block (1, 0) survived
    kv.check([c], [])


def _prompt_blocks_evicted_to_host():
    """A pool of 2 blocks of 4 with 4 host blocks, where a request's two prompt blocks (1, 2) were
    evicted to host memory by a later request."""
    kv = PrefixCache(2, 4, num_host_blocks=4)
    a = req(0, 9, [1, 2, 3])
    kv.acquire_prefix(a)
    kv.allocate(a, 8)
    a.num_computed_tokens = 8
    kv.commit(a)
    kv.free(a)
    filler = req(1, 8, [5, 6])
    kv.acquire_prefix(filler)
    kv.allocate(filler, 8)  # evicts both of a's blocks to host
    kv.free(filler)
    return kv


def test_host_tier_keeps_evicted_blocks_and_counts_reloads():
    kv = _prompt_blocks_evicted_to_host()
    b = req(2, 9, [1, 2, 4])
    kv.new_plan()
    assert kv.prefix_hit_tokens(b) == 8
    tokens, reload = kv.acquire_prefix(b)
    assert (tokens, reload) == (8, 2) and kv.num_host_hit_blocks == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 30), st.integers(0, 3), st.booleans()), max_size=40))
def test_pool_invariants_under_random_requests(ops):
    kv = PrefixCache(12, 2, num_host_blocks=3)
    live: dict[int, Request] = {}
    for i, (slot, prompt, family, release) in enumerate(ops):
        if release and slot in live:
            kv.free(live.pop(slot))
        elif slot not in live:
            r = req(i, prompt, [family * 100 + j for j in range(-(-prompt // 4))])
            kv.new_plan()
            hit = kv.prefix_hit_tokens(r)
            if kv.num_new_blocks(r, prompt) <= kv.num_free_blocks:
                tokens, _ = kv.acquire_prefix(r)
                assert tokens == hit
                kv.allocate(r, prompt)
                r.num_computed_tokens = prompt
                kv.commit(r)
                live[slot] = r
        kv.check(live.values(), [])


def _sessions(num_sessions=6, turns=4, width=16):
    """Multi-turn chats: each turn's prompt extends the previous one (shared hashes)."""
    arrivals, prompts, outputs, offsets, values = [], [], [], [0], []
    t = 0.0
    for turn in range(turns):
        for s in range(num_sessions):
            prompt = 200 * (turn + 1)
            arrivals.append(t)
            t += 0.5
            prompts.append(prompt)
            outputs.append(20)
            values += [s * 10_000 + j for j in range(-(-prompt // width))]
            offsets.append(len(values))
    return RequestStream(
        np.array(arrivals),
        np.array(prompts),
        np.array(outputs),
        hash_values=np.array(values),
        hash_offsets=np.array(offsets),
        hash_block_tokens=width,
    )


def test_engine_reuses_history_and_hit_rate_falls_as_memory_shrinks():
    stream = _sessions()
    rates = {}
    for blocks in (400, 100, 40):
        cfg = make_config(
            kv_cache={"num_blocks": blocks, "block_size": 16, "prefix_caching": True},
            cost_model={"kind": "constant", "step_time_s": 0.01, "per_token_s": 0.001},
        )
        result = run_checked(cfg, stream)
        rates[blocks] = result.summary["prefix_cache_hit_rate_tokens"]
    # ample memory: every turn after the first reuses its whole history (3 of 4 turns, 200 of 400.. tokens)
    ideal = sum(200 * t for t in range(4)) / sum(200 * (t + 1) for t in range(4))
    assert rates[400] == pytest.approx(ideal, abs=0.02)
    assert rates[400] > rates[100] > rates[40]
    off = run_checked(make_config(kv_cache={"num_blocks": 400, "block_size": 16}), stream)
    assert off.summary["prefix_cache_hit_rate_tokens"] == 0.0


def test_prefix_caching_lowers_ttft():
    stream = _sessions()
    ttft = {}
    for on in (False, True):
        cfg = make_config(
            kv_cache={"num_blocks": 400, "block_size": 16, "prefix_caching": on},
            cost_model={"kind": "constant", "step_time_s": 0.01, "per_token_s": 0.001},
        )
        ttft[on] = run_checked(cfg, stream).summary["mean_ttft_ms"]
    assert ttft[True] < 0.6 * ttft[False]


def test_two_requests_reloading_the_same_host_block_in_one_step():
    kv = _prompt_blocks_evicted_to_host()
    b, c = req(2, 9, [1, 2, 4]), req(3, 9, [1, 2, 5])
    kv.new_plan()
    assert kv.prefix_hit_tokens(b) == 8 and kv.prefix_hit_tokens(c) == 8
    assert kv.acquire_prefix(b) == (8, 2)
    assert kv.acquire_prefix(c) == (8, 2)  # reloads its own copy of what b took
