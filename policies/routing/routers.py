"""The built-in routers. Each returns an index into the candidate replicas it is given."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from policies.interface import RequestView
from policies.routing.interface import ReplicaState
from policies.routing.registry import ROUTERS

MAX_TREE_TOKENS = 67_108_864 // 4
"""sgl-router's ``--max-tree-size`` default (67,108,864 characters of prompt text per worker) at about 4 characters a
token (OpenAI's rule of thumb for English text)."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _least(replicas: Sequence[ReplicaState], key) -> int:
    """Index of the replica with the smallest ``key``; ties go to the lowest index."""
    best, best_key = 0, key(replicas[0])
    for i in range(1, len(replicas)):
        k = key(replicas[i])
        if k < best_key:
            best, best_key = i, k
    return best


def _load(r: ReplicaState) -> tuple[int, float]:
    return (r.num_outstanding, r.kv_usage)


def _least_loaded(replicas: Sequence[ReplicaState]) -> int:
    """``_least(replicas, _load)``, asking for KV usage only among the replicas tied on requests in flight."""
    outstanding = [r.num_outstanding for r in replicas]
    fewest = min(outstanding)
    tied = [i for i, n in enumerate(outstanding) if n == fewest]
    if len(tied) == 1:
        return tied[0]
    return tied[_least([replicas[i] for i in tied], lambda r: r.kv_usage)]


class RoundRobinParams(_Params):
    kind: Literal["round_robin"] = "round_robin"


@ROUTERS.register("round_robin", params=RoundRobinParams)
class RoundRobin:
    """Replicas in turn, ignoring load (a plain L4 load balancer)."""

    def __init__(self, params: RoundRobinParams, rng: np.random.Generator) -> None:
        self._next = 0

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        i = self._next % len(replicas)
        self._next += 1
        return i


class RandomParams(_Params):
    kind: Literal["random"] = "random"


@ROUTERS.register("random", params=RandomParams)
class RandomRouter:
    """A uniformly random replica (from the run's routing stream)."""

    def __init__(self, params: RandomParams, rng: np.random.Generator) -> None:
        self._rng = rng

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        return int(self._rng.integers(len(replicas)))


class LeastOutstandingParams(_Params):
    kind: Literal["least_outstanding"] = "least_outstanding"


@ROUTERS.register("least_outstanding", params=LeastOutstandingParams)
class LeastOutstanding:
    """The replica with the fewest requests in flight (then the lowest KV usage)."""

    def __init__(self, params: LeastOutstandingParams, rng: np.random.Generator) -> None:
        pass

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        return _least_loaded(replicas)


class LeastKvParams(_Params):
    kind: Literal["least_kv"] = "least_kv"


@ROUTERS.register("least_kv", params=LeastKvParams)
class LeastKv:
    """The replica with the lowest KV-cache usage (then the fewest requests in flight)."""

    def __init__(self, params: LeastKvParams, rng: np.random.Generator) -> None:
        pass

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        return _least(replicas, lambda r: (r.kv_usage, r.num_outstanding))


class PowerOfTwoParams(_Params):
    kind: Literal["power_of_two"] = "power_of_two"


@ROUTERS.register("power_of_two", params=PowerOfTwoParams)
class PowerOfTwo:
    """Two distinct random candidates; the one with fewer requests in flight wins (Mitzenmacher)."""

    def __init__(self, params: PowerOfTwoParams, rng: np.random.Generator) -> None:
        self._rng = rng

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        if len(replicas) == 1:
            return 0
        a, b = (int(x) for x in self._rng.choice(len(replicas), size=2, replace=False))
        return a if _load(replicas[a]) <= _load(replicas[b]) else b


class SessionAffinityParams(_Params):
    kind: Literal["session_affinity"] = "session_affinity"
    max_kv_usage: float = Field(
        0.9, gt=0, le=1, description="A session leaves its replica when that replica's KV usage exceeds this."
    )


@ROUTERS.register("session_affinity", params=SessionAffinityParams)
class SessionAffinity:
    """A session sticks to its replica while it has room; new or displaced sessions go to the least loaded."""

    def __init__(self, params: SessionAffinityParams, rng: np.random.Generator) -> None:
        self.max_kv_usage = params.max_kv_usage
        self._home: dict[int, int] = {}  # session id -> replica id

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        session = request.session_id
        if session >= 0 and session in self._home:
            for i, r in enumerate(replicas):
                if r.replica_id == self._home[session] and r.kv_usage <= self.max_kv_usage:
                    return i
        i = _least_loaded(replicas)
        if session >= 0:
            self._home[session] = replicas[i].replica_id
        return i


class PrefixAwareParams(_Params):
    kind: Literal["prefix_aware"] = "prefix_aware"
    cache_threshold: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Route by prefix only when the best match covers more than this fraction of the prompt.",
    )
    balance_abs_threshold: int = Field(
        64, ge=0, description="Imbalanced when the most and least loaded replicas differ by more than this."
    )
    balance_rel_threshold: float = Field(
        1.5, ge=1, description="... and the most loaded has more than this many times the least loaded's requests."
    )
    eviction_interval_s: float = Field(
        120.0, gt=0, description="Seconds between the router's evictions from its prefix tree (sgl-router's 120)."
    )
    max_tree_tokens: int = Field(
        MAX_TREE_TOKENS,
        ge=1,
        description="Prompt tokens the router remembers per replica before it evicts the least recently used "
        "(sgl-router's max_tree_size of 67,108,864 characters at about 4 characters a token).",
    )


@ROUTERS.register("prefix_aware", params=PrefixAwareParams)
class PrefixAware:
    """SGLang router's cache-aware policy (sgl-router ``src/policies/cache_aware.rs``): the replica its own
    approximate prefix tree says holds the longest prefix of the prompt while the replicas are balanced.

    The load of a replica is its requests in flight. When the replicas are imbalanced (the most loaded has more
    than ``balance_abs_threshold`` requests over the least loaded *and* more than ``balance_rel_threshold`` times
    its load), the request goes to the least loaded replica. Otherwise to the replica whose remembered prompts
    share the longest prefix with it, if that covers more than ``cache_threshold`` of the prompt, else to the
    replica whose tree is smallest ("most available cache capacity"; ties, and ties among equal matches, which
    sgl-router resolves by its tree's iteration order, by load). Either way the prompt is then remembered for the
    chosen replica (``tree.insert`` on both branches).

    The tree is the router's, not the engines' caches: sgl-router inserts a prompt as it routes it, so a prefix
    counts on its replica from then on (before it is prefilled there), and until the router evicts it (every
    ``eviction_interval_s``, the least recently used prompts of a replica remembering more than
    ``max_tree_tokens``), whether or not the engine still caches it. sgl-router's tree holds the prompts' text;
    servesim's holds their blocks by the workload's prefix hashes (a prompt without hashes is remembered as
    its own, shared with none). Defaults are sgl-router's command line's (``cache_threshold`` 0.3,
    ``balance_abs_threshold`` 64, ``balance_rel_threshold`` 1.5, ``eviction_interval`` 120 s, ``max_tree_size``
    67,108,864 characters, counted here as tokens at about 4 characters a token: OpenAI's rule of thumb for
    English text, help.openai.com "What are tokens and how to count them?").
    """

    def __init__(self, params: PrefixAwareParams, rng: np.random.Generator) -> None:
        self.params = params
        self.tree = PrefixTree()
        self._next_eviction_s = params.eviction_interval_s

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        p = self.params
        if now_s >= self._next_eviction_s:  # sgl-router's eviction thread, every eviction_interval seconds
            self.tree.evict(p.max_tree_tokens)  # once: with no insert in between, a second finds nothing to forget
            missed = math.floor((now_s - self._next_eviction_s) / p.eviction_interval_s)
            self._next_eviction_s += (missed + 1) * p.eviction_interval_s
        tree = self.tree
        loads = [r.num_outstanding for r in replicas]
        most, least = max(loads), min(loads)
        if most - least > p.balance_abs_threshold and most > p.balance_rel_threshold * least:
            chosen = _least_loaded(replicas)
        else:
            matched = [tree.matched_tokens(r.replica_id, request) for r in replicas]
            best = max(matched)
            if best > p.cache_threshold * request.num_prompt_tokens:
                tied = [i for i, m in enumerate(matched) if m == best]
            else:
                sizes = [tree.size_tokens(r.replica_id) for r in replicas]
                smallest = min(sizes)
                tied = [i for i, size in enumerate(sizes) if size == smallest]
            chosen = tied[0] if len(tied) == 1 else tied[_least_loaded([replicas[i] for i in tied])]
        tree.insert(replicas[chosen].replica_id, request, now_s)
        return chosen


class PrefixTree:
    """sgl-router's approximate radix tree over the prompts routed to each replica, by prompt block: the workload's
    prefix hashes are chained (a block's hash names its whole prefix), so a replica's remembered blocks are a set of
    hashes, each with when it was last inserted, its depth and its tokens. Eviction takes the least recently used
    first and, at one time, the deepest (sgl-router evicts leaves), so a remembered block's prefix is always
    remembered: the blocks of a prompt a replica holds are the first ``_held`` of them."""

    def __init__(self) -> None:
        self._used: dict[int, dict[int, float]] = {}  # replica -> block hash -> when last inserted
        self._shape: dict[int, dict[int, tuple[int, int]]] = {}  # replica -> block hash -> (depth, tokens)
        self._size: dict[int, int] = {}

    def size_tokens(self, replica_id: int) -> int:
        """Prompt tokens remembered for ``replica_id`` (sgl-router's tenant_char_count, in tokens)."""
        return self._size.get(replica_id, 0)

    def matched_tokens(self, replica_id: int, request: RequestView) -> int:
        """Tokens of the longest prefix of ``request``'s prompt remembered for ``replica_id``."""
        shape = self._shape.get(replica_id)
        hashes = request.prefix_hashes
        if not shape or hashes is None or not len(hashes):
            return 0
        return min(_held(shape, hashes) * request.hash_block_tokens, request.num_prompt_tokens)

    def insert(self, replica_id: int, request: RequestView, now_s: float) -> None:
        """Remember ``request``'s prompt for ``replica_id`` (its blocks' last use now)."""
        used = self._used.setdefault(replica_id, {})
        shape = self._shape.setdefault(replica_id, {})
        hashes = request.prefix_hashes
        prompt = request.num_prompt_tokens
        if hashes is None or not len(hashes):  # no content identity: a prompt of its own, as one block
            keys, new = [_own_key(request.request_id)], [(0, prompt)]
        else:
            held, width = _held(shape, hashes), request.hash_block_tokens
            keys = hashes.tolist()
            new = [(depth, max(0, min(width, prompt - depth * width))) for depth in range(held, len(keys))]
        used.update(dict.fromkeys(keys, now_s))
        shape.update(zip(keys[len(keys) - len(new) :], new, strict=True))
        self._size[replica_id] = self._size.get(replica_id, 0) + sum(tokens for _, tokens in new)

    def evict(self, max_tokens: int) -> None:
        """Forget each replica's least recently used blocks, deepest first, until it remembers ``max_tokens``."""
        for replica_id, used in self._used.items():
            size = self._size[replica_id]
            if size <= max_tokens:
                continue
            shape = self._shape[replica_id]
            for key in sorted(used, key=lambda k: (used[k], -shape[k][0])):
                del used[key]
                size -= shape.pop(key)[1]
                if size <= max_tokens:
                    break
            self._size[replica_id] = size


def _held(shape: dict[int, tuple[int, int]], hashes: np.ndarray) -> int:
    """How many of the prompt's first blocks (``hashes``, chained) a replica remembers: they are prefix-closed, so
    the first one it lacks is found by bisection."""
    lo, hi = 0, len(hashes)
    while lo < hi:
        mid = (lo + hi) // 2
        if int(hashes[mid]) in shape:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _own_key(request_id: int) -> int:
    """A key for a prompt without prefix hashes, apart from every 64-bit hash (Python ints are unbounded)."""
    return (1 << 64) + request_id
