"""The built-in routers. Each returns an index into the candidate replicas it is given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from policies.interface import RequestView
from policies.routing.interface import ReplicaState
from policies.routing.registry import ROUTERS


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


@ROUTERS.register("prefix_aware", params=PrefixAwareParams)
class PrefixAware:
    """SGLang router's cache-aware policy: the longest cached prefix while the replicas are balanced.

    The load of a replica is its requests in flight. When the replicas are imbalanced (the
    most loaded has more than ``balance_abs_threshold`` requests over the least loaded *and*
    more than ``balance_rel_threshold`` times its load), the request goes to the least
    loaded replica; otherwise to the replica holding the longest prefix of its prompt, if
    that covers more than ``cache_threshold`` of the prompt, else to the least loaded
    (SGLang sends it to the replica with the most free cache; ties by load). Defaults are
    sgl-router's (``cache_threshold`` 0.3, ``balance_abs_threshold`` 64,
    ``balance_rel_threshold`` 1.5, its cache-aware policy config, sglang v0.4-v0.5).
    """

    def __init__(self, params: PrefixAwareParams, rng: np.random.Generator) -> None:
        self.params = params

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int:
        p = self.params
        loads = [r.num_outstanding for r in replicas]
        most, least = max(loads), min(loads)
        if most - least > p.balance_abs_threshold and most > p.balance_rel_threshold * least:
            return _least_loaded(replicas)
        best = _least(replicas, lambda r: (-r.prefix_hit_tokens(request), *_load(r)))
        hit = replicas[best].prefix_hit_tokens(request)
        if hit > p.cache_threshold * request.num_prompt_tokens:
            return best
        return _least_loaded(replicas)
