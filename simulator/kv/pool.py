"""What every KV pool of an engine offers: the ``KvPool`` Protocol, and leases.

A pool owns the engine's KV blocks. The engine asks it what an allocation would take
(``num_new_blocks``, ``num_freeable_blocks``, ``prefix_hit_tokens``), has it allocate,
commit, free and check, and never touches its counts itself. Two pools implement it:
``BlockManager`` (counted blocks) and ``PrefixCache`` (block ids, hashes, LRU reuse and
an optional host tier).

A pool keeps what each request holds, keyed by request id (``Holding``): the request
itself carries counters and timestamps only, so a request moving between engines (a KV
transfer) holds blocks in each pool independently. A pool also owns the engine's swap
space in host memory (``HostPool``): a preempted request's KV may go there
(``swap_out``) and come back (``swap_in``).

A **lease** is a holding no request owns yet: blocks for KV that has not arrived. A
decode engine of a disaggregated cluster takes one when it accepts a transfer and gives
it to the request (``adopt``) when the KV lands. Running out of blocks for a lease is a
normal outcome (``lease`` returns None), never an exception.

A pool declares ``counted_growth``: whether its blocks are plain counts, so that the
fast-forward seam may take a window's block growth in one subtraction (``take_growth``)
and settle each request's count later (``settle_growth``); a pool of block ids
allocates each request's blocks instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Protocol

from simulator.kv.host import HostPool
from simulator.request import Request


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(slots=True, eq=False)
class Holding:
    """The device blocks one request (or a lease) holds: enough for ``num_kv_tokens`` tokens of KV."""

    num_blocks: int = 0
    num_kv_tokens: int = 0
    block_ids: list[int] | None = None  # in a pool of block ids
    num_hashed_blocks: int = 0  # prompt blocks registered in the prefix cache's index
    num_window_blocks: int = 0  # a windowed pool's blocks for the sliding-window layers (simulator/kv/window.py)


Lease = Holding  # a holding that no request owns yet


class Holdings(ABC):
    """What a pool's requests hold, keyed by request id, and the swap space in host memory (shared by both pools)."""

    windows: ClassVar[bool] = False  # a request also holds sliding-window blocks (simulator/kv/window.py)

    def __init__(self, swap: HostPool | None) -> None:
        self._held: dict[int, Holding] = {}
        self.swap = swap if swap is not None else HostPool(0)

    def end_step(self) -> None:  # noqa: B027 (a hook the windowed pool fills in, nothing to do here)
        """A step ended (a windowed pool returns its prompt chunks' extra window blocks; nothing here)."""

    @property
    def held(self) -> dict[int, Holding]:
        """The holdings by request id (a hot loop settling many at once writes them: ``DecodeBatch.catch_up``)."""
        return self._held

    def num_blocks(self, req: Request) -> int:
        """Device blocks ``req`` holds here."""
        h = self._held.get(req.request_id)
        return h.num_blocks if h is not None else 0

    def num_kv_tokens(self, req: Request) -> int:
        """Tokens of KV ``req``'s blocks here are allocated for."""
        h = self._held.get(req.request_id)
        return h.num_kv_tokens if h is not None else 0

    def is_swapped(self, req: Request) -> bool:
        """``req``'s KV sits in host swap space (preempted by swap)."""
        return self.swap.holds(req)

    def num_swapped_blocks(self, req: Request) -> int:
        return self.swap.num_blocks(req)

    @abstractmethod
    def free(self, req: Request) -> int:
        """Release every device block ``req`` holds; returns how many."""

    def swap_out(self, req: Request) -> int:
        """Free ``req``'s device blocks, keeping its KV in swap space if there is room; returns the blocks kept there.

        0: nothing held, or no room; the KV is gone (the caller recomputes it).
        """
        n = self.free(req)
        if 0 < n <= self.swap.num_free_blocks:
            self.swap.store(req, n)
            return n
        return 0

    def swap_in(self, req: Request) -> int:
        """Release ``req``'s swap space (its KV goes back to the device); returns how many blocks (0: not swapped)."""
        return self.swap.load(req)

    def _check_holders(self, holders: Iterable[Request], leases: Iterable[Holding]) -> int:
        """Assert no holding outlives its holder; returns the device blocks held by requests and leases."""
        holders = list(holders)
        ids = {r.request_id for r in holders}
        orphans = [rid for rid, h in self._held.items() if h.num_blocks and rid not in ids]
        assert not orphans, f"blocks held by requests that left: {orphans[:5]}"
        self.swap.check(ids)
        return sum(h.num_blocks for h in self._held.values()) + sum(lease.num_blocks for lease in leases)


class KvPool(Protocol):
    """One engine's KV blocks."""

    counted_growth: ClassVar[bool]
    commits: ClassVar[bool]  # whether ``commit`` does anything (the executor skips the call when not)
    windows: ClassVar[bool]  # whether ``end_step`` does anything: requests hold sliding-window blocks
    caches: ClassVar[bool]  # whether it may keep cached blocks (False: ``num_cached_blocks`` is always 0)
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
    def num_blocks(self, req: Request) -> int:
        """Device blocks ``req`` holds here."""
        ...

    def num_kv_tokens(self, req: Request) -> int: ...
    def is_swapped(self, req: Request) -> bool:
        """``req``'s KV sits in host swap space."""
        ...

    def num_swapped_blocks(self, req: Request) -> int: ...
    def swap_out(self, req: Request) -> int:
        """Free ``req``'s blocks, keeping its KV in swap space if there is room; returns the blocks kept (0: gone)."""
        ...

    def swap_in(self, req: Request) -> int:
        """Bring ``req``'s swapped KV back; returns how many blocks (0: not swapped)."""
        ...

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

    def allocate_step(self, scheduled: Iterable[tuple[Request, int]]) -> None:
        """``allocate(req, req.num_computed_tokens + n)`` for each ``(req, n)`` of a step, in order."""
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
        """Give ``req`` (holding nothing here) the blocks of ``lease``."""
        ...

    def take_growth(self, num_blocks: int) -> None:
        """Counted pools: take ``num_blocks`` for requests whose counts ``settle_growth`` brings up later."""
        ...

    def settle_growth(self, req: Request, num_kv_tokens: int) -> None:
        """Counted pools: ``req`` holds ``num_kv_tokens`` tokens, its new blocks already taken by ``take_growth``."""
        ...

    @property
    def held(self) -> dict[int, Holding]:
        """The holdings by request id (counted pools: ``DecodeBatch.catch_up`` settles the growth of many in one
        pass, as ``settle_growth`` each)."""
        ...

    def end_step(self) -> None:
        """A step ended: blocks held for that step only return to the pool."""
        ...

    def check(self, holders: Iterable[Request], leases: Iterable[Lease]) -> None:
        """Assert the pool's invariants: ``holders`` are the requests that may hold blocks or swap space here."""
        ...
