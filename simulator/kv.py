"""Paged KV-cache accounting: how many blocks exist, and who holds how many.

Without prefix caching a block pool is counts: every request holds
``ceil(num_kv_tokens / block_size)`` private blocks, recorded on the request itself
(``Request.num_blocks``, ``Request.num_kv_tokens``). Invariants (``check``): free + used == total; no request holds
more blocks than exist; nothing is freed twice (freeing zeroes the holder's count).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from simulator.request import Request
from simulator.specs import HardwareSpec, ModelSpec


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class BlockManager:
    """Counts of paged KV blocks on one replica."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        assert num_blocks >= 1 and block_size >= 1
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
        return max(0, ceil_div(num_kv_tokens, self.block_size) - req.num_blocks)

    def allocate(self, req: Request, num_kv_tokens: int) -> None:
        """Grow ``req``'s blocks to cover ``num_kv_tokens``; the caller checked they are free."""
        need = self.num_new_blocks(req, num_kv_tokens)
        assert need <= self.num_free_blocks, f"allocate {need} blocks with {self.num_free_blocks} free"
        self.num_free_blocks -= need
        req.num_blocks += need
        if num_kv_tokens > req.num_kv_tokens:
            req.num_kv_tokens = num_kv_tokens

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
        return req.num_blocks

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
        n = req.num_blocks
        req.num_blocks = 0
        req.num_kv_tokens = 0
        self.num_free_blocks += n
        assert self.num_free_blocks <= self.num_total_blocks, "blocks freed twice"
        return n

    def check(self, holders: Iterable[Request]) -> None:
        """Assert the accounting invariants given every request that holds blocks."""
        held = sum(r.num_blocks for r in holders)
        assert 0 <= self.num_free_blocks <= self.num_total_blocks
        assert held == self.num_used_blocks, f"held {held} != used {self.num_used_blocks}"


class HostPool:
    """Blocks of host memory holding the KV of requests swapped out of the device."""

    def __init__(self, num_blocks: int) -> None:
        self.num_total_blocks = num_blocks
        self.num_free_blocks = num_blocks

    def store(self, req: Request, num_blocks: int) -> None:
        assert num_blocks <= self.num_free_blocks and req.num_host_blocks == 0
        self.num_free_blocks -= num_blocks
        req.num_host_blocks = num_blocks

    def load(self, req: Request) -> int:
        """Release ``req``'s host blocks (its KV goes back to the device); returns how many."""
        n = req.num_host_blocks
        req.num_host_blocks = 0
        self.num_free_blocks += n
        assert self.num_free_blocks <= self.num_total_blocks, "host blocks freed twice"
        return n


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-GPU memory budget of one replica and the KV blocks it leaves."""

    usable_bytes: float
    weight_bytes: float
    reserve_bytes: float
    kv_bytes: float
    block_bytes: float
    num_blocks: int


def default_reserve_bytes(model: ModelSpec, tp: int, max_batched_tokens: int = 8192, max_seqs: int = 256) -> float:
    """Activation peak and runtime memory besides weights and KV, per GPU (an estimate).

    1 GiB for the CUDA context, cuBLAS workspaces and graphs, plus the activations of a
    step of ``max_batched_tokens`` tokens (residual, QKV and MLP intermediates in bf16)
    and fp32 logits for ``max_seqs`` sampled rows. Calibration measures the real figure.
    """
    act = max_batched_tokens * (4 * model.hidden_size + 3 * model.intermediate_size / tp) * 2
    logits = max_seqs * model.vocab_size / tp * 4
    return float(2**30 + act + logits)


def plan_memory(
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    block_size: int,
    gpu_memory_utilization: float,
    reserve_bytes: float | None = None,
    pp: int = 1,
    weight_bytes: float | None = None,
    memory_bytes: float | None = None,
) -> MemoryPlan:
    """KV blocks per replica: (memory x utilization - weights/(tp pp) - reserve) / bytes per block, per GPU.

    Every GPU holds its share of the weights and the KV of its layers for every token, so
    the block count is the same on all of them (the fullest pipeline stage decides).

    ``weight_bytes`` and ``memory_bytes`` replace the figures computed from the specs when
    given (a calibration profile measured them on the device: weights as loaded, total
    device memory). Raises ValueError with the figures when the weights do not leave room
    for one block.
    """
    device_bytes = hardware.memory_bytes if memory_bytes is None else memory_bytes
    usable = device_bytes * gpu_memory_utilization
    weights = (model.weight_bytes_total() if weight_bytes is None else weight_bytes) / (tp * pp)
    reserve = default_reserve_bytes(model, tp) if reserve_bytes is None else reserve_bytes
    block_bytes = model.kv_bytes_per_token_per_gpu(tp, pp) * block_size
    kv_bytes = usable - weights - reserve
    num_blocks = int(kv_bytes // block_bytes) if kv_bytes > 0 else 0
    if num_blocks < 1:
        gib = 2**30
        where = f"{model.name} on {hardware.name} with tp={tp}, pp={pp}"
        budget = (
            f"weights take {weights / gib:,.1f} GiB per GPU and the reserve {reserve / gib:,.1f} GiB, of "
            f"{usable / gib:,.1f} GiB usable (memory x gpu_memory_utilization)"
        )
        if kv_bytes <= 0:
            raise ValueError(
                f"{model.name} does not fit on {hardware.name} with tp={tp}, pp={pp}: {budget}, which leaves "
                "nothing for the KV cache; use a larger tp or pp, or a device with more memory"
            )
        raise ValueError(
            f"{where}: one KV block of {block_size:,} tokens takes {block_bytes / gib:,.3g} GiB per GPU, more than "
            f"the {kv_bytes / gib:,.3g} GiB left for the KV cache ({budget}); use a smaller kv_cache.block_size "
            "(vLLM's default is 16)"
        )
    return MemoryPlan(usable, weights, reserve, kv_bytes, block_bytes, num_blocks)
