"""The bound's KV arithmetic: how many requests' KV fits at once, the blocks their decodes hold, and which
sequences a windowed pool refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simulator.kv.window import sliding_window_blocks

if TYPE_CHECKING:
    from simulator.build import GroupSetup


def kv_seq_cap(prompt_tokens: np.ndarray, block_size: int, num_blocks: int) -> int:
    """The most requests whose first decode's KV fits at once: the largest n whose n smallest
    ceil((prompt + 1) / block_size) sum to <= num_blocks."""
    need = np.sort(-(-(prompt_tokens + 1) // block_size))
    return int(np.searchsorted(np.cumsum(need), num_blocks, side="right"))


def decode_block_steps(prompt: np.ndarray, output: np.ndarray, block_size: int) -> np.ndarray:
    """Per request, the KV blocks its decode steps hold, summed over them: its k-th decode step (k = 1 ..
    output - 1) has prompt + k tokens in the cache, ceil((prompt + k) / block_size) blocks."""

    def ceil_sum(m: np.ndarray) -> np.ndarray:  # sum of ceil(x / block_size) for x = 1 .. m
        q, r = np.divmod(m, block_size)
        return block_size * q * (q + 1) // 2 + r * (q + 1)

    return ceil_sum(prompt + np.maximum(output - 1, 0)) - ceil_sum(prompt)


def sequence_refused(s: GroupSetup, total_tokens: np.ndarray, block_size: int) -> np.ndarray:
    """Per request of ``total_tokens`` (prompt + output), whether a group holding sliding-window layers per window
    (``GroupSetup.windowed``, vLLM V1) refuses it: its blocks with a chunk's window span about the whole cache."""
    window = sliding_window_blocks(s.model, s.tp, s.pp, s.dp_attention, block_size, s.proposer)
    budget = getattr(s.policy, "max_num_batched_tokens", None)
    need = {int(t): window.most_blocks(int(t), budget) for t in np.unique(total_tokens)}
    blocks = s.num_blocks // (s.pp * s.dp_attention)  # each engine's pool (a pipeline stage's, an attention-DP rank's)
    return np.fromiter((need[int(t)] for t in total_tokens), dtype=np.int64, count=len(total_tokens)) >= blocks
