"""Host memory that holds the KV of requests swapped out of the device (vLLM's swap space).

Owned by an engine's KV pool (``Holdings.swap``); what each request keeps here is keyed by
its request id.
"""

from __future__ import annotations

from collections.abc import Set

from simulator.request import Request


class HostPool:
    """Blocks of host memory holding the KV of requests swapped out of the device."""

    def __init__(self, num_blocks: int) -> None:
        self.num_total_blocks = num_blocks
        self.num_free_blocks = num_blocks
        self._held: dict[int, int] = {}  # request id -> blocks

    def holds(self, req: Request) -> bool:
        return req.request_id in self._held

    def num_blocks(self, req: Request) -> int:
        return self._held.get(req.request_id, 0)

    def store(self, req: Request, num_blocks: int) -> None:
        assert 0 < num_blocks <= self.num_free_blocks and req.request_id not in self._held
        self.num_free_blocks -= num_blocks
        self._held[req.request_id] = num_blocks

    def load(self, req: Request) -> int:
        """Release ``req``'s host blocks (its KV goes back to the device); returns how many (0: none)."""
        n = self._held.pop(req.request_id, 0)
        self.num_free_blocks += n
        assert self.num_free_blocks <= self.num_total_blocks, "host blocks freed twice"
        return n

    def check(self, holder_ids: Set[int]) -> None:
        """Assert free + held == total and that every holder is one of ``holder_ids``."""
        assert self.num_free_blocks + sum(self._held.values()) == self.num_total_blocks, "host blocks leaked"
        assert self._held.keys() <= holder_ids, "swap space held by a request that left"
