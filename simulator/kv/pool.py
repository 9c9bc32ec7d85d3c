"""What every KV pool of an engine offers: the ``KvPool`` Protocol, and leases.

A pool owns the engine's KV blocks. The engine asks it what an allocation would take
(``num_new_blocks``, ``num_freeable_blocks``, ``prefix_hit_tokens``), has it allocate,
commit, free and check, and never touches its counts itself. Two pools implement it:
``BlockManager`` (counted blocks) and ``PrefixCache`` (block ids, hashes, LRU reuse and
an optional host tier).

A **lease** holds blocks for KV that has not arrived yet: a decode engine of a
disaggregated cluster takes one when it accepts a transfer and hands it to the request
(``adopt``) when the KV lands. Running out of blocks for a lease is a normal outcome
(``lease`` returns None), never an exception.

A pool declares ``counted_growth``: whether its blocks are plain counts, so that the
fast-forward seam may take a window's block growth in one subtraction (``take_growth``)
and settle each request's count later (``settle_growth``); a pool of block ids
allocates each request's blocks instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from simulator.request import Request


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(slots=True, eq=False)
class Lease:
    """Blocks reserved for KV on its way: as many as ``num_kv_tokens`` tokens need (their ids in a pool of ids)."""

    num_blocks: int
    num_kv_tokens: int
    block_ids: list[int] | None = None


class KvPool(Protocol):
    """One engine's KV blocks."""

    counted_growth: ClassVar[bool]
    block_size: int
    num_total_blocks: int

    @property
    def num_free_blocks(self) -> int:
        """Blocks an allocation can take (free ones, and cached ones it may evict)."""
        ...

    @property
    def num_used_blocks(self) -> int: ...
    @property
    def num_cached_blocks(self) -> int:
        """Unreferenced blocks kept for reuse."""
        ...

    @property
    def num_unused_blocks(self) -> int:
        """Blocks an allocation can take without evicting anything cached."""
        ...

    def blocks_for(self, num_tokens: int) -> int: ...
    def num_new_blocks(self, req: Request, num_kv_tokens: int) -> int:
        """Blocks ``req`` must newly get to hold ``num_kv_tokens`` tokens (a cached prefix counted)."""
        ...

    def num_freeable_blocks(self, req: Request) -> int:
        """Blocks that return to the pool if ``req`` releases its KV (shared ones do not)."""
        ...

    def prefix_hit_tokens(self, req: Request) -> int:
        """Prompt tokens ``req`` would reuse if admitted now (remembered for this step's plan)."""
        ...

    def peek_hit_tokens(self, req: Request) -> int:
        """Like ``prefix_hit_tokens``, for routers: no planning side effect."""
        ...

    def new_plan(self) -> None:
        """A policy is about to plan a step: forget the hits planned for the last one."""
        ...

    def acquire_prefix(self, req: Request) -> tuple[int, int]:
        """Take the cached prefix planned for ``req``: (tokens reused, blocks to reload from host)."""
        ...

    def allocate(self, req: Request, num_kv_tokens: int) -> None:
        """Grow ``req``'s blocks to cover ``num_kv_tokens`` (the caller checked they are there)."""
        ...

    def commit(self, req: Request) -> None:
        """Register ``req``'s newly completed prompt blocks for reuse."""
        ...

    def free(self, req: Request) -> int:
        """Release every block ``req`` holds; returns how many."""
        ...

    def lease(self, num_kv_tokens: int, max_blocks: int) -> Lease | None:
        """Reserve blocks for ``num_kv_tokens`` tokens of incoming KV; None if that takes more than ``max_blocks``."""
        ...

    def adopt(self, req: Request, lease: Lease) -> None:
        """Give ``req`` (holding nothing) the blocks of ``lease``."""
        ...

    def take_growth(self, num_blocks: int) -> None:
        """Counted pools: take ``num_blocks`` for requests whose counts ``settle_growth`` brings up later."""
        ...

    def settle_growth(self, req: Request, num_kv_tokens: int) -> None:
        """Counted pools: ``req`` holds ``num_kv_tokens`` tokens, its new blocks already taken by ``take_growth``."""
        ...

    def check(self, holders: Iterable[Request | Lease]) -> None:
        """Assert the pool's invariants given every request and lease that holds blocks."""
        ...
