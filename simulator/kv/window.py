"""Sliding-window layers' KV held per sequence: vLLM V1's hybrid KV cache manager, as counts.

A model with sliding-window layers beside full-attention ones (gpt-oss: 18 of each, window 128) needs the keys of a
sliding layer for the newest ``window`` tokens only. vLLM V1 (0.9.1 and later; read in the 0.21.0 and 0.22.0
wheels) puts each attention type's layers in KV cache groups of one size (``kv_cache_utils.py``,
``_get_kv_cache_groups_uniform_page_size``: gpt-oss, two groups of 18 layers) and gives every group's blocks out of one
pool, a block holding ``block_size`` tokens of one group's layers (``get_num_blocks``: memory / page bytes / group
size). A full-attention group holds ``ceil(tokens / block_size)`` blocks of a sequence. A sliding group frees the
blocks before ``num_computed_tokens - window + 1`` when the request is next scheduled (``SlidingWindowManager.
get_num_skipped_tokens``, ``remove_skipped_blocks`` in ``KVCacheManager.allocate_slots`` before it allocates), so a
step computing ``n`` tokens after ``N`` holds ``ceil((N + n) / block_size) - floor((N - window + 1) / block_size)``
of them, at most ``ceil((window - 1 + n) / block_size) + 1``: 9 blocks of 16 for gpt-oss's decode, the chunk's
blocks during a prompt chunk.

Here the pool's blocks are the full-attention layers' (the memory plan counts those layers per token), and each
request also holds ``SlidingWindowBlocks.blocks`` for its sliding layers, in the pool's blocks (the sliding layers'
bytes over the full ones'):

- between steps, and for a decode step, the decode bound above (a sequence shorter than the window is counted at it,
  at most that many blocks more than the engine holds);
- during a step computing prompt tokens, the chunk's span (``min(ceil((N + n) / bs), ceil((window - 1 + n) / bs) +
  1)`` a group), at least the decode bound; the blocks beyond it return to the pool when the step ends (vLLM frees
  them when the request is next scheduled, before that step's allocations).

Not modelled: vLLM's admission charge of a whole prompt to the sliding group (``scheduler_reserve_full_isl``), a
prefix cache over sliding groups (a pool with prefix caching counts every layer per token, as without windows), swap
(vLLM V1 preempts by recompute only) and disaggregated roles (their KV transfer sends every layer's keys).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from simulator.config.specs import ModelSpec
from simulator.kv.blocks import BlockManager
from simulator.kv.host import HostPool
from simulator.kv.pool import Holding, Lease, ceil_div
from simulator.request import Request


@dataclass(frozen=True, slots=True)
class SlidingWindowBlocks:
    """What a sequence's sliding-window layers hold, in blocks of the pool (the full-attention layers' blocks)."""

    window_tokens: int
    block_size: int
    sliding_bytes_per_token: int  # per GPU, every sliding layer's keys and values of one token
    pool_bytes_per_token: int  # per GPU, what a token of the pool's blocks holds (the full layers', a proposer's)

    def __post_init__(self) -> None:
        assert self.window_tokens >= 1 and self.block_size >= 1
        assert self.sliding_bytes_per_token >= 1 and self.pool_bytes_per_token >= 1

    def _pool_blocks(self, group_blocks: int) -> int:
        """Sliding-group blocks (``block_size`` tokens of every sliding layer) as pool blocks: bytes over a pool
        block's, rounded up (gpt-oss: one for one, its 18 sliding layers as wide as its 18 full ones)."""
        return -(-group_blocks * self.sliding_bytes_per_token // self.pool_bytes_per_token)

    @property
    def per_seq(self) -> int:
        """Held between steps and during a decode step: ``ceil(window / block_size) + 1`` a sliding group."""
        return self._pool_blocks(ceil_div(self.window_tokens, self.block_size) + 1)

    def during(self, num_computed_tokens: int, num_new_tokens: int) -> int:
        """Held during a step computing a chunk of ``num_new_tokens`` tokens (of a prompt, or of a recompute) after
        ``num_computed_tokens``."""
        bs = self.block_size
        span = min(
            ceil_div(num_computed_tokens + num_new_tokens, bs),
            ceil_div(self.window_tokens - 1 + num_new_tokens, bs) + 1,
        )
        return max(self.per_seq, self._pool_blocks(span))

    def most_blocks(self, num_tokens: int, max_chunk_tokens: int | None = None) -> int:
        """At most the blocks a sequence of ``num_tokens`` tokens holds at once, its chunks at most
        ``max_chunk_tokens`` (None: the whole sequence): its blocks and the window span of a longest chunk, the span
        of a chunk after others being at most ``ceil((window - 1 + chunk) / block_size) + 1`` (vLLM refuses to start
        unless a ``max_model_len`` sequence fits with the span of ``min(window - 1 + max_num_batched_tokens,
        max_model_len)`` tokens, ``SlidingWindowSpec.max_memory_usage_bytes``)."""
        chunk = num_tokens if max_chunk_tokens is None else min(num_tokens, max_chunk_tokens)
        # a chunk ending the sequence spans the most
        return ceil_div(num_tokens, self.block_size) + self.during(num_tokens - chunk, chunk)


def sliding_window_blocks(
    model: ModelSpec, tp: int, pp: int, dp_attention: int, block_size: int, proposer: ModelSpec | None = None
) -> SlidingWindowBlocks:
    """``model``'s sliding layers as a per-sequence window of a replica's pool, per GPU (``proposer``: a speculative
    proposer, whose KV per token the pool's blocks hold beside the full layers')."""
    assert model.sliding_window is not None and model.windows_sliding_kv
    sliding = model.sliding_kv_bytes_per_token_per_gpu(tp, pp, dp_attention)
    pool = model.kv_bytes_per_token_per_gpu(tp, pp, dp_attention, windowed=True)
    if proposer is not None:
        pool += proposer.kv_bytes_per_token_per_gpu(tp)
    return SlidingWindowBlocks(model.sliding_window, block_size, round(sliding), round(pool))


class WindowedBlockManager(BlockManager):
    """A ``BlockManager`` whose requests also hold their sliding-window layers' blocks (``SlidingWindowBlocks``)."""

    windows: ClassVar[bool] = True

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        window: SlidingWindowBlocks,
        swap: HostPool | None = None,
        max_chunk_tokens: int | None = None,
    ) -> None:
        """``max_chunk_tokens``: the most tokens a step computes of one sequence (the policy's budget), which bounds
        the window span a chunk holds (``blocks_for``)."""
        assert window.block_size == block_size
        super().__init__(num_blocks, block_size, swap)
        self.window = window
        self.max_chunk_tokens = max_chunk_tokens
        self._per_seq = window.per_seq
        self._widened: dict[int, Request] = {}  # requests holding more than per_seq until their step ends

    def _window_target(self, req: Request, num_kv_tokens: int) -> int:
        c = req.num_computed_tokens
        n = num_kv_tokens - c
        if n > 1:  # a chunk of a prompt (or of a recompute): its span (a decode computes one token)
            return self.window.during(c, n)
        return self._per_seq

    def blocks_for(self, num_tokens: int) -> int:
        """At most the blocks a sequence of ``num_tokens`` tokens holds at once (``SlidingWindowBlocks.most_blocks``
        with the policy's chunk bound)."""
        return self.window.most_blocks(num_tokens, self.max_chunk_tokens)

    def num_new_blocks(self, req: Request, num_kv_tokens: int) -> int:
        h = self._held.get(req.request_id)
        held, window = (h.num_blocks, h.num_window_blocks) if h is not None else (0, 0)
        need = max(0, -(-num_kv_tokens // self.block_size) - held)
        return need + max(0, self._window_target(req, num_kv_tokens) - window)

    def allocate(self, req: Request, num_kv_tokens: int) -> None:
        self._widen(req, num_kv_tokens)
        super().allocate(req, num_kv_tokens)

    def allocate_step(self, scheduled: Iterable[tuple[Request, int]]) -> None:
        scheduled = list(scheduled)
        for req, n in scheduled:
            self._widen(req, req.num_computed_tokens + n)
        super().allocate_step(scheduled)

    def _widen(self, req: Request, num_kv_tokens: int) -> None:
        """Give ``req`` the window blocks the step needs (the caller checked they are free)."""
        h = self._held.get(req.request_id)
        if h is None:
            h = self._held[req.request_id] = Holding()
        target = self._window_target(req, num_kv_tokens)
        more = target - h.num_window_blocks
        if more > 0:
            assert more <= self.num_free_blocks, f"allocate {more} window blocks with {self.num_free_blocks} free"
            self.num_free_blocks -= more
            h.num_window_blocks = target
        if h.num_window_blocks > self._per_seq:
            self._widened[req.request_id] = req

    def end_step(self) -> None:
        """The step ended: prompt chunks' window blocks beyond the decode bound return to the pool."""
        if not self._widened:
            return
        per_seq = self._per_seq
        for rid in self._widened:
            h = self._held.get(rid)
            if h is not None and h.num_window_blocks > per_seq:
                self.num_free_blocks += h.num_window_blocks - per_seq
                h.num_window_blocks = per_seq
        self._widened.clear()

    def num_freeable_blocks(self, req: Request) -> int:
        h = self._held.get(req.request_id)
        return h.num_blocks + h.num_window_blocks if h is not None else 0

    def free(self, req: Request) -> int:
        h = self._held.pop(req.request_id, None)
        self._widened.pop(req.request_id, None)
        if h is None:
            return 0
        n = h.num_blocks + h.num_window_blocks
        self.num_free_blocks += n
        assert self.num_free_blocks <= self.num_total_blocks, "blocks freed twice"
        return n

    def swap_out(self, req: Request) -> int:
        raise AssertionError("a windowed pool is vLLM V1's, which preempts by recompute only")

    def lease(self, num_kv_tokens: int, max_blocks: int) -> Lease | None:
        raise AssertionError("a windowed pool serves mixed replicas only (no KV transfer)")

    def check(self, holders: Iterable[Request], leases: Iterable[Lease]) -> None:
        held = self._check_holders(holders, leases)
        window = sum(h.num_window_blocks for h in self._held.values())
        assert 0 <= self.num_free_blocks <= self.num_total_blocks
        assert held + window == self.num_used_blocks, f"held {held} + window {window} != used {self.num_used_blocks}"
        for h in self._held.values():
            assert h.num_window_blocks == (self._per_seq if h.num_blocks else 0), "window blocks off the decode bound"
