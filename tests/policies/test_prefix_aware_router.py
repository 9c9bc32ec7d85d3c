"""The prefix_aware router (sgl-router's cache-aware policy): the longest prefix its own tree remembers for a
replica while replicas are balanced, the least loaded otherwise; every routed prompt is remembered at once."""

from dataclasses import dataclass

import numpy as np
import pytest

from policies.routing import ROUTERS
from policies.routing.routers import MAX_TREE_TOKENS, PrefixAwareParams
from workloads import RequestStream


@dataclass
class Replica:
    replica_id: int
    num_outstanding: int = 0
    kv_usage: float = 0.0
    num_waiting: int = 0
    num_running: int = 0

    def prefix_hit_tokens(self, request) -> int:
        raise AssertionError("the router reads its own tree, not the engines' caches")


@dataclass
class Req:
    request_id: int
    blocks: tuple[int, ...]  # chained hashes, 100 tokens each
    hash_block_tokens: int = 100

    @property
    def num_prompt_tokens(self) -> int:
        return 100 * len(self.blocks)

    @property
    def prefix_hashes(self):
        return np.asarray(self.blocks, dtype=np.int64)


def router(**params):
    return ROUTERS.get("prefix_aware")(PrefixAwareParams(**params), np.random.default_rng(0))


def test_defaults_are_sgl_routers():
    p = PrefixAwareParams()
    assert (p.cache_threshold, p.balance_abs_threshold, p.balance_rel_threshold) == (0.3, 64, 1.5)
    assert (p.eviction_interval_s, p.max_tree_tokens) == (120.0, MAX_TREE_TOKENS) == (120.0, 67_108_864 // 4)


def test_a_routed_prefix_draws_the_requests_sharing_it_from_the_moment_it_is_routed():
    r = router()
    replicas = [Replica(0, 3), Replica(1, 1), Replica(2, 2)]
    # nothing remembered: the smallest tree, all empty, so the least loaded
    assert r.route(Req(0, (1, 2, 3, 4)), replicas, 0.0) == 1
    replicas[1].num_outstanding += 1
    # 3 of 4 blocks remembered for replica 1 (75 % > 30 %): it follows, though busier than replica 2
    assert r.route(Req(1, (1, 2, 3, 9)), replicas, 0.0) == 1
    replicas[1].num_outstanding += 1
    # a match of 30 % or less does not count: the smallest tree, replica 0 or 2 (empty), the less loaded of them
    assert r.route(Req(2, (1, 7, 8, 9)), replicas, 0.0) == 2
    # equal matches go to the less loaded
    assert r.route(Req(3, (1, 7, 8, 5)), replicas, 0.0) == 2


def test_an_imbalance_over_both_bounds_sends_to_the_least_loaded_and_remembers_it_there():
    r = router()
    replicas = [Replica(0, 10), Replica(1, 80), Replica(2, 12)]
    r.tree.insert(1, Req(9, (1, 2, 3)), 0.0)
    assert r.route(Req(0, (1, 2, 3, 4)), replicas, 0.0) == 0  # 80 - 10 > 64 and 80 > 1.5 x 10
    assert r.tree.matched_tokens(0, Req(1, (1, 2, 3, 4))) == 400
    # both bounds must be exceeded: far apart in absolute terms but within the ratio stays on the prefix
    replicas = [Replica(0, 200), Replica(1, 290), Replica(2, 220)]  # 90 > 64, 290 < 300
    r = router()
    r.tree.insert(1, Req(9, (1, 2, 3)), 0.0)
    assert r.route(Req(0, (1, 2, 3, 4)), replicas, 0.0) == 1
    # a tighter bound turns the same loads into an imbalance
    r = router(balance_abs_threshold=4, balance_rel_threshold=1.1)
    r.tree.insert(1, Req(9, (1, 2, 3)), 0.0)
    assert r.route(Req(0, (1, 2, 3, 4)), replicas, 0.0) == 0


def test_the_tree_forgets_the_least_recently_routed_prompts_at_each_eviction():
    r = router(max_tree_tokens=500, eviction_interval_s=10.0)
    replicas = [Replica(0), Replica(1)]
    r.tree.insert(0, Req(0, (1, 2, 3)), 0.0)
    r.tree.insert(0, Req(1, (1, 2, 7, 8)), 5.0)  # 600 tokens remembered: blocks 1, 2 (touched at 5), 3, 7, 8
    assert r.tree.size_tokens(0) == 500
    r.tree.insert(0, Req(2, (1, 2, 9)), 6.0)
    assert r.tree.size_tokens(0) == 600
    r.route(Req(3, (4,)), replicas, 10.0)  # the first eviction: block 3 (used at 0) goes, 500 tokens remain
    assert r.tree.size_tokens(0) == 500
    assert r.tree.matched_tokens(0, Req(4, (1, 2, 3))) == 200
    assert r.tree.matched_tokens(0, Req(4, (1, 2, 7, 8))) == 400
    # a block goes before its prefix: with room for 200 tokens only blocks 1 and 2 stay
    r.params = PrefixAwareParams(max_tree_tokens=200, eviction_interval_s=10.0)
    r.route(Req(5, (6,)), replicas, 20.0)
    assert r.tree.size_tokens(0) == 200
    assert r.tree.matched_tokens(0, Req(6, (1, 2, 9))) == 200


def test_a_hot_prefix_cannot_pile_every_request_on_one_replica():
    """Every request shares a prefix: the load bound spreads them once it is exceeded."""
    r = router()
    replicas = [Replica(i, 0) for i in range(4)]
    for rid in range(1000):
        i = r.route(Req(rid, (1, 2, 3, 4, 5, 6, 7, 8, 9, 100 + rid)), replicas, 0.0)
        replicas[i].num_outstanding += 1  # nothing finishes: the worst case
    loads = [x.num_outstanding for x in replicas]
    most, least = max(loads), min(loads)
    assert most - least <= 64 + 1 or most <= 1.5 * least + 1, loads
    assert loads[0] == most  # the prefix still draws what the bound allows


@pytest.mark.parametrize("fast_forward", [False, True])
def test_a_burst_sharing_a_new_prefix_follows_its_first_request(fast_forward):
    """Eight prompts sharing a 3,584-token prefix arrive 10 ms apart, before the first one's prefill ends: sgl-router
    has remembered the prefix for the first one's replica since routing it, so the others follow and reuse it."""
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    n, shared = 8, 7
    values, offsets = [], [0]
    for i in range(n):
        values += [1000 + j for j in range(shared)] + [50_000 + i]
        offsets.append(len(values))
    stream = RequestStream(
        np.arange(n) * 0.010,
        np.full(n, 4096),
        np.full(n, 50),
        hash_values=np.asarray(values, dtype=np.int64),
        hash_offsets=np.asarray(offsets),
        hash_block_tokens=512,
    )
    cfg = validate_scenario({"replicas": 4, "router": "prefix_aware", "kv_cache": {"prefix_caching": True}})
    result = build(cfg, stream=stream, fast_forward=fast_forward, check_invariants=True).run()
    requests = result.requests.sort_values("request_id")
    assert requests.replica_id.tolist() == [0] * n
    assert requests.num_cached_tokens.tolist() == [0] + [shared * 512] * (n - 1)
