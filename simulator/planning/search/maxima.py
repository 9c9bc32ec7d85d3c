"""Maxima of n / t(n) over the integers, from t at the points of a geometric grid (the interval argument).

The bound (``bound``) and the estimate (``estimate``) take their maxima over batch sizes and token
counts this way: a few cost-model calls per doubling instead of one per integer.
"""

from __future__ import annotations

import math

import numpy as np

# Grid ratio: an interval [n_i, n_{i+1}] of the grid spans at most this factor, the most the
# interval argument can overstate a throughput that is flat in n (compute-bound steps). A sixteenth
# of an octave (4.4%) keeps that small for ~16 cost-model calls per doubling of n (a few ms).
GRID_RATIO = 2.0 ** (1 / 16)


def geometric_grid(hi: int, ratio: float = GRID_RATIO) -> list[int]:
    """Integers 1..hi, consecutive ones at most ``ratio`` apart (every integer while ratio x n < n + 1), hi last."""
    out = [1]
    while out[-1] < hi:
        out.append(min(hi, max(out[-1] + 1, math.floor(out[-1] * ratio))))
    return out


def interval_max(grid: list[int], times_s: list[float], work=None) -> tuple[float, int]:
    """max over integers n in [1, grid[-1]] of work(n) / t(n), bounded from t at the grid points.

    ``work`` (default: n itself) must be nondecreasing in n. On [n_i, n_{i+1}], t is at least
    the least grid value at or after n_i (the running minimum from the right, so dips seen at grid
    points count), hence work(n) / t(n) <= work(n_{i+1}) / that. Returns the bound and the grid
    point whose interval attains it.
    """
    env = np.minimum.accumulate(np.asarray(times_s, dtype=np.float64)[::-1])[::-1]
    assert (env > 0).all(), "step times must be positive"
    ends = np.asarray(grid[1:] + grid[-1:], dtype=np.float64)  # the last point's interval is itself
    ratios = (ends if work is None else work(ends)) / env
    i = int(ratios.argmax())
    return float(ratios[i]), int(ends[i])
