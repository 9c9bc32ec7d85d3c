"""Paged KV blocks with prefix caching: content hashes, reference counts, LRU reuse.

A full block of prompt tokens is identified by a chained key: the workload's prefix-block
hash (``RequestStream.hash_values``, one per ``hash_block_tokens`` tokens, equal k-th
hashes meaning equal first k workload blocks) of the workload block holding the KV block's
last token, with the KV block's index. Equal keys therefore mean equal token prefixes.

Blocks are in exactly one of three places (``check`` asserts it):

- free: holding nothing;
- used: referenced by one or more requests (``ref > 0``);
- cached: unreferenced but keeping a registered hash, in an LRU list; evicted (its hash
  forgotten, optionally moved to a host-memory tier) only when a block is needed and none
  is free.

An admitted request reuses its longest cached prefix (taking references) and computes
only the rest; its prompt blocks are registered as they fill. Only prompt blocks are
shared: generated tokens carry no workload hash.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import ClassVar

from simulator.kv.host import HostPool
from simulator.kv.pool import Holding, Holdings, Lease, ceil_div
from simulator.request import Request

BlockKey = tuple[int, int]  # (workload chained hash, KV block index)


def block_keys(req: Request, block_size: int) -> tuple[BlockKey, ...]:
    """Keys of ``req``'s full prompt blocks that its workload hashes identify (cached on the request)."""
    if req.block_keys is not None:
        return req.block_keys
    keys: list[BlockKey] = []
    hashes = req.prefix_hashes
    if hashes is not None and len(hashes) and req.hash_block_tokens > 0:
        width = req.hash_block_tokens
        for j in range(req.num_prompt_tokens // block_size):
            w = ((j + 1) * block_size - 1) // width
            if w >= len(hashes):
                break
            keys.append((int(hashes[w]), j))
    req.block_keys = tuple(keys)
    return req.block_keys


class PrefixCache(Holdings):
    """A replica's KV block pool with prefix caching and an optional host-memory tier (a ``KvPool``).

    ``num_host_blocks`` is the prefix cache's host tier (evicted prefixes kept for reuse);
    ``swap`` is the engine's swap space for preempted requests.
    """

    counted_growth: ClassVar[bool] = False  # blocks have ids: each request's growth is allocated
    commits: ClassVar[bool] = True  # ``commit`` registers prompt blocks in the prefix index
    caches: ClassVar[bool] = True  # unreferenced prefix blocks stay cached

    def __init__(
        self, num_blocks: int, block_size: int, num_host_blocks: int = 0, swap: HostPool | None = None
    ) -> None:
        assert num_blocks >= 1 and block_size >= 1
        super().__init__(swap)
        self.num_total_blocks = num_blocks
        self.block_size = block_size
        self._ref = [0] * num_blocks
        self._key: list[BlockKey | None] = [None] * num_blocks
        self._free: deque[int] = deque(range(num_blocks))
        self._cached: OrderedDict[int, None] = OrderedDict()  # unreferenced, hashed; least recent first
        self._by_key: dict[BlockKey, int] = {}
        self.num_host_blocks = num_host_blocks
        self._host: OrderedDict[BlockKey, None] = OrderedDict()  # keys whose KV sits in host memory
        self._planned: dict[int, tuple[int, int]] = {}  # request id -> (gpu hit blocks, host hit blocks)
        self.num_queried_blocks = 0
        self.num_hit_blocks = 0
        self.num_host_hit_blocks = 0
        self.num_queried_tokens = 0
        self.num_hit_tokens = 0

    # -- counts --------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        """Blocks an allocation can take: free ones plus cached ones it may evict."""
        return len(self._free) + len(self._cached)

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    @property
    def num_unused_blocks(self) -> int:
        """Blocks an allocation can take without evicting a cached prefix."""
        return len(self._free)

    @property
    def num_used_blocks(self) -> int:
        return self.num_total_blocks - self.num_free_blocks

    def blocks_for(self, num_tokens: int) -> int:
        return ceil_div(num_tokens, self.block_size)

    # -- planning (read-only) ------------------------------------------------------------

    def _match(self, req: Request) -> tuple[int, int, int]:
        """(GPU hits, of which counted against the free pool, host hits) for ``req``'s longest cached prefix.

        At least one prompt token is always left to compute, so a fully cached prompt
        still produces its first token. A hit block that nobody references leaves the free
        pool when reused; so, conservatively, does one with a single holder, which the same
        plan may preempt (its blocks then counted as freed): planning stays exact when the
        victim shares the prefix, and is at worst one block cautious per such hit otherwise.
        """
        keys = block_keys(req, self.block_size)
        limit = (req.num_prompt_tokens - 1) // self.block_size
        gpu = unreferenced = host = 0
        for key in keys[:limit]:
            bid = self._by_key.get(key)
            if bid is None:
                break
            gpu += 1
            unreferenced += self._ref[bid] <= 1
        for key in keys[gpu:limit]:
            if key not in self._host:
                break
            host += 1
        return gpu, unreferenced, host

    def new_plan(self) -> None:
        """Forget the hits planned for the previous step: only this step's plan is acquired."""
        self._planned.clear()

    def _has_kv(self, req: Request) -> bool:
        """``req`` holds KV already (device blocks, swap space, or computed tokens): it reuses no prefix."""
        return bool(self.num_blocks(req) or req.num_computed_tokens or self.swap.holds(req))

    def prefix_hit_tokens(self, req: Request) -> int:
        """Tokens ``req`` would reuse if admitted now; remembered so that admission takes exactly these."""
        if self._has_kv(req):
            return 0
        gpu, _, host = self._match(req)
        self._planned[req.request_id] = (gpu, host)
        return (gpu + host) * self.block_size

    def peek_hit_tokens(self, req: Request) -> int:
        """Tokens a router would see cached here for ``req`` (no planning side effect)."""
        gpu, _, host = self._match(req)
        return (gpu + host) * self.block_size

    def num_new_blocks(self, req: Request, num_kv_tokens: int) -> int:
        want = ceil_div(num_kv_tokens, self.block_size)
        if self._has_kv(req):
            return max(0, want - self.num_blocks(req))
        gpu, consuming, _ = self._match(req)
        return max(0, want - gpu) + consuming

    def num_freeable_blocks(self, req: Request) -> int:
        h = self._held.get(req.request_id)
        if h is None or not h.block_ids:
            return 0
        return sum(1 for bid in h.block_ids if self._ref[bid] == 1)

    # -- engine actions ------------------------------------------------------------------

    def acquire_prefix(self, req: Request) -> tuple[int, int]:
        """Take the prefix planned for ``req`` this step: references on GPU hits, host hits to reload.

        Returns (tokens reused, host blocks to reload). Preemptions since planning only add
        cached blocks and nothing is evicted before admissions, so the planned hits exist.
        """
        gpu, host = self._planned.pop(req.request_id, (0, 0))
        keys = block_keys(req, self.block_size)
        h = self._held.get(req.request_id)
        if h is None:
            h = self._held[req.request_id] = Holding(block_ids=[])
        ids = h.block_ids
        assert ids is not None
        self.num_queried_blocks += (req.num_prompt_tokens - 1) // self.block_size if keys else 0
        self.num_queried_tokens += req.num_prompt_tokens
        for key in keys[:gpu]:
            bid = self._by_key[key]
            if self._ref[bid] == 0:
                del self._cached[bid]
            self._ref[bid] += 1
            ids.append(bid)
        h.num_blocks = len(ids)
        h.num_hashed_blocks = gpu
        for key in keys[gpu : gpu + host]:
            # reloaded: it becomes a GPU block again below (a request admitted in the same step may have
            # taken it already; each then reloads its own copy)
            self._host.pop(key, None)
        self.num_hit_blocks += gpu + host
        self.num_host_hit_blocks += host
        tokens = (gpu + host) * self.block_size
        self.num_hit_tokens += tokens
        h.num_kv_tokens = gpu * self.block_size
        return tokens, host

    def _take_block(self) -> int:
        if self._free:
            return self._free.popleft()
        bid, _ = self._cached.popitem(last=False)  # least recently used
        key = self._key[bid]
        assert key is not None
        del self._by_key[key]
        self._key[bid] = None
        if self.num_host_blocks:
            self._host[key] = None
            if len(self._host) > self.num_host_blocks:
                self._host.popitem(last=False)
        return bid

    def allocate(self, req: Request, num_kv_tokens: int) -> None:
        h = self._held.get(req.request_id)
        if h is None:
            h = self._held[req.request_id] = Holding(block_ids=[])
        ids = h.block_ids
        assert ids is not None
        need = ceil_div(num_kv_tokens, self.block_size) - len(ids)
        assert need <= self.num_free_blocks, f"allocate {need} blocks with {self.num_free_blocks} free"
        for _ in range(need):
            bid = self._take_block()
            self._ref[bid] = 1
            ids.append(bid)
        h.num_blocks = len(ids)
        if num_kv_tokens > h.num_kv_tokens:
            h.num_kv_tokens = num_kv_tokens

    def allocate_step(self, scheduled: Iterable[tuple[Request, int]]) -> None:
        """``allocate`` for each ``(req, n)`` of a step to cover its computed tokens plus ``n``, in order."""
        for req, n in scheduled:
            num_kv_tokens = req.num_computed_tokens + n
            assert num_kv_tokens <= req.num_tokens, "plan computes beyond the sequence"
            self.allocate(req, num_kv_tokens)

    def block_ids(self, req: Request) -> list[int]:
        """The ids of ``req``'s blocks, in token order (its page table)."""
        h = self._held.get(req.request_id)
        return (h.block_ids or []) if h is not None else []

    def commit(self, req: Request) -> None:
        """Register the prompt blocks ``req`` has filled since the last call."""
        keys = block_keys(req, self.block_size)
        full = min(req.num_computed_tokens, req.num_prompt_tokens) // self.block_size
        h = self._held.get(req.request_id)
        if h is None:
            return
        ids = h.block_ids
        assert ids is not None
        for j in range(h.num_hashed_blocks, min(full, len(keys))):
            key = keys[j]
            if key not in self._by_key:  # the same content computed twice stays private the second time
                bid = ids[j]
                self._key[bid] = key
                self._by_key[key] = bid
        if full > h.num_hashed_blocks:
            h.num_hashed_blocks = full

    def free(self, req: Request) -> int:
        """Drop ``req``'s references; its unshared hashed blocks become cached (tail blocks evicted first)."""
        h = self._held.pop(req.request_id, None)
        ids = (h.block_ids or []) if h is not None else []
        n = len(ids)
        for bid in reversed(ids):
            self._ref[bid] -= 1
            assert self._ref[bid] >= 0, "block freed twice"
            if self._ref[bid] == 0:
                if self._key[bid] is not None:
                    self._cached[bid] = None
                else:
                    self._free.append(bid)
        return n

    def lease(self, num_kv_tokens: int, max_blocks: int) -> Lease | None:
        need = ceil_div(num_kv_tokens, self.block_size)
        if need > max_blocks:
            return None
        assert need <= self.num_free_blocks, f"lease {need} blocks with {self.num_free_blocks} free"
        ids = []
        for _ in range(need):
            bid = self._take_block()
            self._ref[bid] = 1
            ids.append(bid)
        return Lease(need, num_kv_tokens, ids)

    def adopt(self, req: Request, lease: Lease) -> None:
        assert not self.num_blocks(req), "a request adopts a lease holding nothing here"
        assert lease.block_ids is not None
        self._held[req.request_id] = lease

    def take_growth(self, num_blocks: int) -> None:
        raise TypeError("a prefix cache allocates each request's blocks (counted_growth is False)")

    def settle_growth(self, req: Request, num_kv_tokens: int) -> None:
        raise TypeError("a prefix cache allocates each request's blocks (counted_growth is False)")

    def check(self, holders: Iterable[Request], leases: Iterable[Lease]) -> None:
        """Assert: free + used + cached == total; references match the holdings (requests' and leases'); the hash
        index is consistent; no holding outlives its request."""
        leases = list(leases)
        self._check_holders(holders, leases)
        refs = [0] * self.num_total_blocks
        for h in (*self._held.values(), *leases):
            ids = h.block_ids or []
            assert h.num_blocks == len(ids)
            for bid in ids:
                refs[bid] += 1
        assert refs == self._ref, "block references do not match their holders"
        used = sum(1 for x in self._ref if x > 0)
        assert len(self._free) + used + len(self._cached) == self.num_total_blocks
        assert all(self._ref[b] == 0 and self._key[b] is None for b in self._free)
        assert all(self._ref[b] == 0 and self._key[b] is not None for b in self._cached)
        assert all(self._key[b] == k for k, b in self._by_key.items())
        assert len(self._host) <= self.num_host_blocks
