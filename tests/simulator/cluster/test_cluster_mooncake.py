"""Prefix caching and prefix-aware routing on the Mooncake conversation trace (Kimi, FAST'25)."""

import numpy as np
import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from workloads import generate
from workloads.describe import describe

WINDOW = {"kind": "trace", "source": "mooncake-conversation", "window_s": [0, 600], "sessions_from_prefix_blocks": 2}


@pytest.fixture(scope="module")
def stream():
    return generate(validate_scenario({"workload": WINDOW}).workload, 0)


def test_hit_rate_approaches_the_unbounded_cache_bound_and_falls_with_memory(stream):
    bound = describe(stream)["prefix_blocks"]["repeat_fraction"]  # what `servesim workload describe` prints
    hit = {}
    for num_blocks in (400_000, 20_000, 4_000):
        # KV blocks of 512 tokens, the trace's hash granularity, so hits and repeats count the same blocks
        cfg = validate_scenario(
            {
                "workload": WINDOW,
                "max_model_len": 131072,
                "kv_cache": {"prefix_caching": True, "block_size": 512, "num_blocks": num_blocks},
            }
        )
        req = build(cfg, stream=stream).run().requests
        hit[num_blocks] = (req["num_cached_tokens"] // 512).sum() / np.ceil(req["num_prompt_tokens"] / 512).sum()
    assert hit[400_000] == pytest.approx(bound, abs=0.02)
    assert hit[400_000] > hit[20_000] > hit[4_000]
    assert hit[4_000] < 0.5 * bound


def test_prefix_aware_and_session_affinity_routing_raise_the_hit_rate():
    # the first 300 s (918 requests): hit rates 0.09 round robin, 0.20 prefix-aware, 0.21 session affinity
    window = WINDOW | {"window_s": [0, 300]}
    stream = generate(validate_scenario({"workload": window}).workload, 0)
    base = {
        "workload": window,
        "replicas": 4,
        "max_model_len": 131072,
        "kv_cache": {"prefix_caching": True, "host_cache_bytes": 200e9},
    }
    rate = {}
    for router in ("round_robin", "prefix_aware", "session_affinity"):
        summary = build(validate_scenario(base | {"router": router}), stream=stream).run().summary
        rate[router] = summary["prefix_cache_hit_rate_tokens"]
    assert rate["prefix_aware"] > 1.5 * rate["round_robin"]
    assert rate["session_affinity"] > 1.5 * rate["round_robin"]


def test_sessions_from_prefix_blocks():
    full = generate(validate_scenario({"workload": WINDOW | {"window_s": None}}).workload, 0)
    assert len(np.unique(full.session_id)) == 7373  # distinct hashes of block 1 in the trace
    with pytest.raises(ValueError, match="has its own session ids"):
        generate(
            validate_scenario(
                {"workload": {"kind": "trace", "source": "agent-rounds", "sessions_from_prefix_blocks": 2}}
            ).workload,
            0,
        )
