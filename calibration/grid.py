"""Grids of shapes to measure: presets by device and size, and the held-out points between them.

Token counts go in powers of two (the shapes engines see most, and where the roofline's
regime changes show); held-out points sit at the geometric middle of every other pair
of neighbours, measured only to check how well interpolation reproduces unmeasured shapes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from simulator.cost.profile import GridSpec

_PRESETS: dict[tuple[str, str], dict[str, tuple[int, ...]]] = {
    ("cpu", "quick"): {
        "num_tokens": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        "prefill_new_tokens": (1, 16, 64, 256, 512),
        "prefill_cached_tokens": (0, 64, 256, 1024),
        "decode_seqs": (1, 2, 4, 8, 16, 32),
        "decode_context_tokens": (16, 64, 256, 1024),
        "sampled_tokens": (1, 2, 4, 8, 16, 32),
        "packed_tokens": (1, 8, 32, 128, 512),
        "packed_kv_tokens": (64, 512, 2048, 8192),
    },
    ("cpu", "full"): {
        "num_tokens": (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048),
        "prefill_new_tokens": (1, 8, 32, 64, 128, 256, 512, 1024, 2048),
        "prefill_cached_tokens": (0, 32, 128, 512, 1024, 2048, 4096),
        "decode_seqs": (1, 2, 4, 8, 16, 32, 64),
        "decode_context_tokens": (16, 64, 128, 256, 512, 1024, 2048, 4096),
        "sampled_tokens": (1, 2, 4, 8, 16, 32, 64),
        "packed_tokens": (1, 4, 16, 64, 256, 1024, 2048),
        "packed_kv_tokens": (64, 256, 1024, 4096, 16384),
    },
    ("cuda", "quick"): {
        "num_tokens": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192),
        "prefill_new_tokens": (1, 16, 128, 512, 2048, 8192),
        "prefill_cached_tokens": (0, 512, 2048, 8192),
        "decode_seqs": (1, 4, 16, 64, 256),
        "decode_context_tokens": (128, 512, 2048, 8192),
        "sampled_tokens": (1, 4, 16, 64, 256),
        "packed_tokens": (1, 16, 128, 1024, 4096),
        "packed_kv_tokens": (256, 2048, 16384, 65536),
    },
    ("cuda", "full"): {
        "num_tokens": tuple(sorted({*(2**i for i in range(15)), *(3 * 2**i for i in range(13))})),
        "prefill_new_tokens": (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
        "prefill_cached_tokens": (0, 256, 1024, 2048, 4096, 8192, 16384, 32768),
        "decode_seqs": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        "decode_context_tokens": (16, 128, 512, 1024, 2048, 4096, 8192, 16384, 32768),
        "sampled_tokens": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        "packed_tokens": (1, 16, 64, 256, 1024, 4096, 8192),
        "packed_kv_tokens": (256, 1024, 4096, 16384, 65536, 131072),
    },
}
GRID_NAMES = ("quick", "full")


def grid_spec(name: str, device_kind: str, max_context_tokens: int) -> GridSpec:
    """The preset grid, with context axes cut at the model's max context."""
    if name not in GRID_NAMES:
        raise ValueError(f"unknown grid {name!r}; one of {', '.join(GRID_NAMES)}")
    axes = dict(_PRESETS[(device_kind, name)])
    for key in ("prefill_new_tokens", "decode_context_tokens"):
        axes[key] = tuple(x for x in axes[key] if x <= max_context_tokens) or (max_context_tokens,)
    cached_cap = max_context_tokens - axes["prefill_new_tokens"][-1]
    axes["prefill_cached_tokens"] = tuple(x for x in axes["prefill_cached_tokens"] if x <= max(cached_cap, 0)) or (0,)
    return GridSpec(name=name, **axes)


def _middle(a: int, b: int) -> int:
    """Geometric middle of a and b in log(1 + x), rounded; strictly between them when possible."""
    m = round(math.expm1((math.log1p(a) + math.log1p(b)) / 2))
    return min(max(m, a + 1), b - 1)


def held_out_values(values: Sequence[int]) -> list[int]:
    """Middles of every other neighbouring pair (pairs at least 2 apart)."""
    return [_middle(a, b) for i, (a, b) in enumerate(itertools.pairwise(values)) if i % 2 == 0 and b - a >= 2]


def held_out_pairs(xs: Sequence[int], ys: Sequence[int]) -> list[tuple[int, int]]:
    """Held-out points of a 2-D grid: middles along both axes, paired diagonally."""
    hx, hy = held_out_values(xs), held_out_values(ys)
    if not hx or not hy:
        return []
    return [(hx[i % len(hx)], hy[i % len(hy)]) for i in range(max(len(hx), len(hy)))]
