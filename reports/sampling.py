"""Down-sampling for plotting. Plots get a bounded number of points; statistics never do.

Every function here returns what to draw plus a ``method`` sentence that the figure shows,
so a reader always knows how the curve relates to the full data. Percentiles quoted in
reports are computed from the full data elsewhere, never from these samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULT_CDF_POINTS = 1000
DEFAULT_TIME_BINS = 1200


@dataclass(frozen=True, slots=True)
class CdfCurve:
    """Points ``(x[i], fraction[i])`` on the exact empirical CDF of the data.

    ``fraction[i]`` is the share of all values that are <= ``x[i]``. ``num_values`` counts
    the full data (pooled counts expanded); ``exact`` is True when every distinct value is
    plotted.
    """

    x: np.ndarray
    fraction: np.ndarray
    num_values: int
    exact: bool
    method: str


def cdf_curve(values: np.ndarray, counts: np.ndarray | None = None, max_points: int = DEFAULT_CDF_POINTS) -> CdfCurve:
    """The empirical CDF of ``values`` (each repeated ``counts`` times), with at most ``max_points`` points.

    When there are more distinct values than ``max_points``, the points are taken at
    evenly spaced ranks of the sorted data (always including the minimum and maximum), and
    each point's fraction is exact. NaNs are dropped.
    """
    if max_points < 2:
        raise ValueError("max_points must be at least 2")
    v = np.asarray(values, dtype=np.float64)
    c = np.ones(len(v), dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    keep = ~np.isnan(v) & (c > 0)
    v, c = v[keep], c[keep]
    if len(v) == 0:
        return CdfCurve(np.empty(0), np.empty(0), 0, True, "no values")
    if counts is None:
        sorted_v = np.sort(v)
        cum = np.arange(1, len(sorted_v) + 1, dtype=np.int64)
    else:
        order = np.argsort(v)
        sorted_v = v[order]
        cum = np.cumsum(c[order])
    last_of_value = np.r_[sorted_v[1:] != sorted_v[:-1], True]
    uniq = sorted_v[last_of_value]
    ends = cum[last_of_value]  # values <= uniq[i]
    total = int(ends[-1])
    if len(uniq) <= max_points:
        return CdfCurve(uniq, ends / total, total, True, f"every distinct value plotted ({total:,} values)")
    ranks = np.unique(np.round(np.linspace(0, total - 1, max_points)).astype(np.int64))
    idx = np.unique(np.searchsorted(ends, ranks, side="right"))
    method = f"{len(idx):,} points at evenly spaced ranks of all {total:,} values (each point exact)"
    return CdfCurve(uniq[idx], ends[idx] / total, total, False, method)


@dataclass(frozen=True, slots=True)
class TimeBins:
    """Equal-width bins over ``[0, end_s]``: ``edges_s`` has ``num_bins + 1`` entries."""

    edges_s: np.ndarray

    @property
    def num_bins(self) -> int:
        return len(self.edges_s) - 1

    @property
    def width_s(self) -> float:
        return float(self.edges_s[1] - self.edges_s[0])

    @property
    def centres_s(self) -> np.ndarray:
        return (self.edges_s[:-1] + self.edges_s[1:]) / 2

    def index(self, times_s: np.ndarray) -> np.ndarray:
        """The bin of each time (times past the end go to the last bin, before 0 to the first)."""
        i = np.floor(np.asarray(times_s, dtype=np.float64) / self.width_s).astype(np.int64)
        return np.clip(i, 0, self.num_bins - 1)


def time_bins(end_s: float, num_bins: int = DEFAULT_TIME_BINS) -> TimeBins:
    """``num_bins`` equal bins from 0 to ``end_s`` (a positive span even when ``end_s`` is 0)."""
    num_bins = max(1, int(num_bins))
    end_s = end_s if end_s > 0 and math.isfinite(end_s) else 1.0
    return TimeBins(np.linspace(0.0, end_s, num_bins + 1))


def rate_per_bin(times_s: np.ndarray, bins: TimeBins, weights: np.ndarray | None = None) -> np.ndarray:
    """Events (or summed ``weights``) per second in each bin."""
    t = np.asarray(times_s, dtype=np.float64)
    keep = ~np.isnan(t)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[keep]
    total = np.bincount(bins.index(t[keep]), weights=w, minlength=bins.num_bins)
    return total / bins.width_s


@dataclass(frozen=True, slots=True)
class BinnedLevel:
    """Per bin: the duration-weighted mean of a level, its min and max, and the number of samples.

    A bin where no sample fell carries the last sample before it (a level holds until it
    is next recorded); bins before the first sample are NaN.
    """

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    count: np.ndarray


def binned_level(times_s: np.ndarray, durations_s: np.ndarray, values: np.ndarray, bins: TimeBins) -> BinnedLevel:
    """Summarise a level sampled at ``times_s`` (each sample weighted by its duration) per bin."""
    t = np.asarray(times_s, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(durations_s, dtype=np.float64)
    n = bins.num_bins
    idx = bins.index(t)
    count = np.bincount(idx, minlength=n)
    wsum = np.bincount(idx, weights=w, minlength=n)
    vsum = np.bincount(idx, weights=v * w, minlength=n)
    plain = np.bincount(idx, weights=v, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(wsum > 0, vsum / np.where(wsum > 0, wsum, 1), plain / np.maximum(count, 1))
    mean = np.where(count > 0, mean, np.nan)
    low = np.full(n, np.nan)
    high = np.full(n, np.nan)
    if len(t):
        order = np.argsort(idx, kind="stable")
        sidx, sv = idx[order], v[order]
        starts = np.flatnonzero(np.r_[True, sidx[1:] != sidx[:-1]])
        low[sidx[starts]] = np.minimum.reduceat(sv, starts)
        high[sidx[starts]] = np.maximum.reduceat(sv, starts)
        # carry the last sample of each non-empty bin into the empty bins after it
        last = np.full(n, np.nan)
        ends = np.r_[starts[1:], len(sidx)] - 1
        last[sidx[starts]] = sv[ends]
        held = _forward_fill(last)
        empty = count == 0
        mean = np.where(empty, held, mean)
        low = np.where(empty, held, low)
        high = np.where(empty, held, high)
    return BinnedLevel(mean, low, high, count)


def _forward_fill(values: np.ndarray) -> np.ndarray:
    """Each NaN replaced by the last non-NaN value before it (leading NaNs stay)."""
    idx = np.where(~np.isnan(values), np.arange(len(values)), 0)
    np.maximum.accumulate(idx, out=idx)
    out = values[idx]
    out[: np.argmax(~np.isnan(values)) if (~np.isnan(values)).any() else len(values)] = np.nan
    return out


def binned_sum(times_s: np.ndarray, values: np.ndarray, bins: TimeBins) -> np.ndarray:
    """The sum of ``values`` per bin (0 where none)."""
    return np.bincount(bins.index(times_s), weights=np.asarray(values, dtype=np.float64), minlength=bins.num_bins)


def binned_mean(times_s: np.ndarray, values: np.ndarray, bins: TimeBins) -> np.ndarray:
    """The plain mean of ``values`` per bin (NaN where none)."""
    idx = bins.index(times_s)
    count = np.bincount(idx, minlength=bins.num_bins)
    total = np.bincount(idx, weights=np.asarray(values, dtype=np.float64), minlength=bins.num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def evenly_spaced(n: int, k: int) -> np.ndarray:
    """``min(n, k)`` indices spread evenly over ``range(n)``, first and last included."""
    if n <= k:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(np.int64))
