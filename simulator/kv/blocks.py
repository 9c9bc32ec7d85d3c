"""Paged KV-cache accounting as counts: how many blocks exist, and who holds how many.

Without prefix caching a block pool is counts: every request holds
``ceil(num_kv_tokens / block_size)`` private blocks (its ``Holding``, keyed by request id).
Invariants (``check``): free + used == total; no request holds more blocks than exist;
nothing is freed twice; no holding outlives its request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from simulator.kv.host import HostPool
from simulator.kv.pool import Holding, Holdings, Lease, ceil_div
from simulator.request import Request


class BlockManager(Holdings):
    """Counts of paged KV blocks on one replica (a ``KvPool``)."""

    counted_growth: ClassVar[bool] = True
    commits: ClassVar[bool] = False  # ``commit`` does nothing: no prefix index
    caches: ClassVar[bool] = False  # no block outlives its request

    def __init__(self, num_blocks: int, block_size: int, swap: HostPool | None = None) -> None:
        assert num_blocks >= 1 and block_size >= 1
        super().__init__(swap)
        self.num_total_blocks = num_blocks
        self.block_size = block_size
        self.num_free_blocks = num_blocks

    @property
    def num_used_blocks(self) -> int:
        return self.num_total_blocks - self.num_free_blocks

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold ``num_tokens`` tokens of KV."""
        return ceil_div(num_tokens, self.block_size)

    def num_new_blocks(self, req: Request, num_kv_tokens: int) -> int:
        """Blocks ``req`` must newly get to hold ``num_kv_tokens`` tokens."""
        h = self._held.get(req.request_id)
        need = -(-num_kv_tokens // self.block_size) - (h.num_blocks if h is not None else 0)
        return need if need > 0 else 0

    def allocate(self, req: Request, num_kv_tokens: int) -> None:
        """Grow ``req``'s blocks to cover ``num_kv_tokens``; the caller checked they are free."""
        h = self._held.get(req.request_id)
        if h is None:
            h = self._held[req.request_id] = Holding()
        need = max(0, ceil_div(num_kv_tokens, self.block_size) - h.num_blocks)
        assert need <= self.num_free_blocks, f"allocate {need} blocks with {self.num_free_blocks} free"
        self.num_free_blocks -= need
        h.num_blocks += need
        if num_kv_tokens > h.num_kv_tokens:
            h.num_kv_tokens = num_kv_tokens

    def allocate_step(self, scheduled: Iterable[tuple[Request, int]]) -> None:
        """``allocate`` for each ``(req, n)`` of a step to cover its computed tokens plus ``n`` (one pass)."""
        held = self._held
        bs = self.block_size
        free = self.num_free_blocks
        for req, n in scheduled:
            num_kv_tokens = req.num_computed_tokens + n
            assert num_kv_tokens <= req.num_tokens, "plan computes beyond the sequence"
            h = held.get(req.request_id)
            if h is None:
                h = held[req.request_id] = Holding()
            need = -(-num_kv_tokens // bs) - h.num_blocks
            if need > 0:
                assert need <= free, f"allocate {need} blocks with {free} free"
                free -= need
                h.num_blocks += need
            if num_kv_tokens > h.num_kv_tokens:
                h.num_kv_tokens = num_kv_tokens
        self.num_free_blocks = free

    @property
    def num_cached_blocks(self) -> int:
        """Unreferenced blocks kept for reuse (always 0: this pool does not cache)."""
        return 0

    @property
    def num_unused_blocks(self) -> int:
        """Blocks an allocation can take without evicting anything cached."""
        return self.num_free_blocks

    def num_freeable_blocks(self, req: Request) -> int:
        """Blocks that would return to the free pool if ``req`` released its KV."""
        return self.num_blocks(req)

    def prefix_hit_tokens(self, req: Request) -> int:
        """Prompt tokens whose KV is cached and would be reused if ``req`` were admitted now (none here)."""
        return 0

    def peek_hit_tokens(self, req: Request) -> int:
        """Like ``prefix_hit_tokens`` but for routers: no planning side effect (none here)."""
        return 0

    def new_plan(self) -> None:
        """A policy is about to plan a step (nothing to forget here)."""

    def acquire_prefix(self, req: Request) -> tuple[int, int]:
        """Take the cached prefix planned for ``req``: (tokens reused, blocks to reload from host)."""
        return 0, 0

    def commit(self, req: Request) -> None:
        """Register ``req``'s newly completed prompt blocks for reuse (nothing to do here)."""

    def free(self, req: Request) -> int:
        """Release every block ``req`` holds; returns how many."""
        h = self._held.pop(req.request_id, None)
        if h is None:
            return 0
        self.num_free_blocks += h.num_blocks
        assert self.num_free_blocks <= self.num_total_blocks, "blocks freed twice"
        return h.num_blocks

    def lease(self, num_kv_tokens: int, max_blocks: int) -> Lease | None:
        need = ceil_div(num_kv_tokens, self.block_size)
        if need > max_blocks:
            return None
        assert need <= self.num_free_blocks, f"lease {need} blocks with {self.num_free_blocks} free"
        self.num_free_blocks -= need
        return Lease(need, num_kv_tokens)

    def adopt(self, req: Request, lease: Lease) -> None:
        assert not self.num_blocks(req), "a request adopts a lease holding nothing here"
        self._held[req.request_id] = lease

    def take_growth(self, num_blocks: int) -> None:
        assert 0 <= num_blocks <= self.num_free_blocks, f"grow {num_blocks} blocks with {self.num_free_blocks} free"
        self.num_free_blocks -= num_blocks

    def settle_growth(self, req: Request, num_kv_tokens: int) -> None:
        h = self._held[req.request_id]
        h.num_blocks = ceil_div(num_kv_tokens, self.block_size)
        h.num_kv_tokens = num_kv_tokens

    def check(self, holders: Iterable[Request], leases: Iterable[Lease]) -> None:
        """Assert the accounting invariants given the requests that may hold blocks and the leases."""
        held = self._check_holders(holders, leases)
        assert 0 <= self.num_free_blocks <= self.num_total_blocks
        assert held == self.num_used_blocks, f"held {held} != used {self.num_used_blocks}"
