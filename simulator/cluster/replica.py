"""A routable replica: the engines of one model instance on ``tp x pp`` GPUs.

With pp = 1 it holds one engine. With pp > 1 it holds ``pp`` virtual engines (vLLM's
design): each schedules its own share of the requests over its own share of the KV
blocks, and their steps flow through the shared pipeline stages, so up to ``pp``
micro-batches are in flight. New requests go to the engine with the fewest outstanding.
With attention data parallelism it holds ``dp_attention`` lockstep engines, one per rank, and
the serving engine's own rule places requests on them (``choose_engine``:
``simulator/cluster/dp_attention.py``).

The replica is what a router sees (``policies.ReplicaState``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import simpy

from simulator.engine.loop import Engine, Role
from simulator.request import Request


def fewest_outstanding(candidates: Sequence[Engine], req: Request) -> Engine:
    """The engine with the fewest requests waiting, running or on their way (the first among equals)."""
    return min(candidates, key=lambda e: e.num_outstanding)


class Replica:
    """One model instance behind the router."""

    def __init__(
        self,
        replica_id: int,
        group: str,
        role: Role,
        engines: list[Engine],
        env: simpy.Environment,
        choose_engine: Callable[[Sequence[Engine], Request], Engine] = fewest_outstanding,
    ) -> None:
        assert engines
        self._choose = choose_engine
        self.replica_id = replica_id
        self.group = group
        self.role = role
        self.engines = engines
        self.kv_link = simpy.Resource(env, capacity=1)  # outgoing KV transfers, one at a time
        self._total_blocks = sum(e.kv.num_total_blocks for e in engines)
        # routers ask every replica on every arrival: read the block counts without the engine's hops
        self._single = engines[0] if len(engines) == 1 else None
        self._used_now = [e.used_blocks_now for e in engines]

    # -- ReplicaState ---------------------------------------------------------------------

    @property
    def num_waiting(self) -> int:
        return sum(e.num_waiting for e in self.engines)

    @property
    def num_running(self) -> int:
        return sum(e.num_running for e in self.engines)

    @property
    def num_outstanding(self) -> int:
        """Requests routed here and not yet ended, each engine's input queue included (``Engine.num_outstanding``):
        a request that arrived while a step ran is the replica's load before the engine's next plan takes it in."""
        if self._single is not None:
            return self._single.num_outstanding
        return sum(e.num_outstanding for e in self.engines)

    @property
    def kv_usage(self) -> float:
        if self._single is not None:
            return self._used_now[0]() / self._total_blocks
        return sum(f() for f in self._used_now) / self._total_blocks

    def prefix_hit_tokens(self, request: Request) -> int:
        return max(e.kv.peek_hit_tokens(request) for e in self.engines)

    @property
    def max_request_tokens(self) -> int:
        """The longest request (prompt + output) one of its engines can ever hold in KV."""
        return max(e.kv_capacity_tokens for e in self.engines)

    # -- placement ------------------------------------------------------------------------

    def enqueue(self, req: Request) -> None:
        self._choose(self.engines, req).enqueue(req)

    def offer_transfer(self, req: Request) -> None:
        total = req.num_prompt_tokens + req.num_output_tokens
        fits = [e for e in self.engines if e.kv_capacity_tokens >= total]
        self._choose(fits, req).offer_transfer(req)
