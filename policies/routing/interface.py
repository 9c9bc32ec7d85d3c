"""What a router sees (read-only replica states and the clock) and what it decides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from policies.interface import RequestView


class ReplicaState(Protocol):
    """Read-only load of one replica, as a router sees it."""

    @property
    def replica_id(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    @property
    def num_running(self) -> int: ...
    @property
    def num_outstanding(self) -> int:
        """Requests routed here and not yet ended (waiting, running, or arriving by KV transfer)."""
        ...

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks referenced by requests (cached, unreferenced blocks excluded)."""
        ...

    def prefix_hit_tokens(self, request: RequestView) -> int:
        """Prompt tokens of ``request`` this replica's prefix cache holds now (0 without prefix caching)."""
        ...


class Router(Protocol):
    """Chooses one of ``replicas`` (never empty) for ``request`` at ``now_s``; returns its index."""

    def route(self, request: RequestView, replicas: Sequence[ReplicaState], now_s: float) -> int: ...
