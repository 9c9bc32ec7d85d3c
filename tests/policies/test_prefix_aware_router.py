"""The prefix_aware router: the longest cached prefix while replicas are balanced, the least loaded otherwise."""

from dataclasses import dataclass, field

import numpy as np

from policies.routing import ROUTERS
from policies.routing.routers import PrefixAwareParams


@dataclass
class Replica:
    replica_id: int
    num_outstanding: int
    hits: dict[int, int] = field(default_factory=dict)  # request id -> prefix tokens cached here
    kv_usage: float = 0.0
    num_waiting: int = 0
    num_running: int = 0

    def prefix_hit_tokens(self, request) -> int:
        return self.hits.get(request.request_id, 0)


@dataclass
class Req:
    request_id: int
    num_prompt_tokens: int


def router(**params):
    return ROUTERS.get("prefix_aware")(PrefixAwareParams(**params), np.random.default_rng(0))


def test_defaults_are_sgl_routers():
    p = PrefixAwareParams()
    assert (p.cache_threshold, p.balance_abs_threshold, p.balance_rel_threshold) == (0.3, 64, 1.5)


def test_a_cached_prefix_wins_while_the_replicas_are_balanced():
    req = Req(7, 1000)
    replicas = [Replica(0, 10), Replica(1, 70, {7: 800}), Replica(2, 12)]
    # 70 - 10 = 60 is within the absolute bound: balanced, the prefix decides
    assert router().route(req, replicas, 0.0) == 1
    # a match of 30% of the prompt or less does not count: the least loaded
    replicas[1].hits[7] = 300
    assert router().route(req, replicas, 0.0) == 0


def test_an_imbalance_over_both_bounds_sends_to_the_least_loaded():
    req = Req(7, 1000)
    replicas = [Replica(0, 10), Replica(1, 80, {7: 900}), Replica(2, 12)]
    assert router().route(req, replicas, 0.0) == 0  # 80 - 10 > 64 and 80 > 1.5 x 10
    # both bounds must be exceeded: far apart in absolute terms but within the ratio stays on the prefix
    replicas = [Replica(0, 200), Replica(1, 290, {7: 900}), Replica(2, 220)]  # 90 > 64, 290 < 300
    assert router().route(req, replicas, 0.0) == 1
    # a tighter bound turns the same loads into an imbalance
    assert router(balance_abs_threshold=4, balance_rel_threshold=1.1).route(req, replicas, 0.0) == 0


def test_a_hot_prefix_cannot_pile_every_request_on_one_replica():
    """Every request shares a prefix cached on replica 0 only: the load bound spreads them once it is exceeded."""
    r = router()
    replicas = [Replica(i, 0) for i in range(4)]
    for rid in range(1000):
        replicas[0].hits[rid] = 900
        i = r.route(Req(rid, 1000), replicas, 0.0)
        replicas[i].num_outstanding += 1  # nothing finishes: the worst case
    loads = [x.num_outstanding for x in replicas]
    most, least = max(loads), min(loads)
    assert most - least <= 64 + 1 or most <= 1.5 * least + 1, loads
    assert loads[0] == most  # the prefix still draws what the bound allows
