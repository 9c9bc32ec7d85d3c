import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.config.presets import hardware_presets, model_presets
from simulator.kv.blocks import BlockManager
from simulator.kv.memory import plan_memory
from simulator.request import Request


def test_capacity_from_memory_formula():
    m, h = model_presets()["llama-3.1-8b"], hardware_presets()["h100-sxm"]
    plan = plan_memory(m, h, tp=1, block_size=16, gpu_memory_utilization=0.9, reserve_bytes=2 * 2**30)
    expected = int((h.memory_bytes * 0.9 - m.weight_bytes_total() - 2 * 2**30) // (16 * 131072))
    assert plan.num_blocks == expected
    # tp=2 halves weights and KV per GPU: more than twice the blocks
    plan2 = plan_memory(m, h, tp=2, block_size=16, gpu_memory_utilization=0.9, reserve_bytes=2 * 2**30)
    assert plan2.num_blocks > 2 * plan.num_blocks


def test_model_that_does_not_fit_is_refused_with_figures():
    m, h = model_presets()["llama-3.1-70b"], hardware_presets()["h100-sxm"]
    with pytest.raises(
        ValueError, match=r"Llama-3.1-70B does not fit on H100-SXM5-80GB with tp=1, pp=1: weights take 131.4 GiB"
    ):
        plan_memory(m, h, 1, 16, 0.9)
    assert plan_memory(m, h, 4, 16, 0.9).num_blocks > 0


def test_allocate_grow_free():
    kv = BlockManager(10, 4)
    r = Request(0, 0.0, 10, 5)
    kv.allocate(r, 10)
    assert kv.num_blocks(r) == 3 and kv.num_free_blocks == 7
    kv.allocate(r, 12)  # still 3 blocks
    assert kv.num_blocks(r) == 3
    kv.allocate(r, 13)
    assert kv.num_blocks(r) == 4 and kv.num_used_blocks == 4
    kv.check([r], [])
    assert kv.free(r) == 4 and kv.num_free_blocks == 10
    assert kv.free(r) == 0  # freeing again releases nothing


def test_over_allocation_is_an_internal_error():
    kv = BlockManager(2, 4)
    with pytest.raises(AssertionError):
        kv.allocate(Request(0, 0.0, 10, 1), 10)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 40), st.booleans()), max_size=60))
def test_block_pool_accounting_under_random_operations(ops):
    kv = BlockManager(20, 4)
    reqs = [Request(i, 0.0, 1, 1) for i in range(6)]
    for idx, tokens, release in ops:
        r = reqs[idx]
        if release:
            kv.free(r)
        elif kv.num_new_blocks(r, tokens) <= kv.num_free_blocks:
            kv.allocate(r, tokens)
            assert kv.num_blocks(r) >= -(-tokens // 4)
        kv.check(reqs, [])
        assert kv.num_free_blocks + kv.num_used_blocks == kv.num_total_blocks
