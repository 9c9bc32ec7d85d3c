"""Confidence intervals over independent replicates (runs with independent seeds).

An ``Interval`` is a point value (the mean of the replicates) and, with two or more
replicates, a two-sided interval at the requested confidence:

- ``t``: mean +/- t_{(1+c)/2, n-1} x s / sqrt(n), with s the sample standard deviation;
- ``bootstrap``: the percentile bootstrap of the mean (2,000 resamples from a fixed seed,
  so the same replicates always give the same interval).

Replicate seeds are derived from the scenario's seed with ``replicate_seed``: replicate 0
is the scenario seed itself (one replicate reproduces ``servesim run``), the others come
from a SeedSequence keyed by (seed, replicate), independent of each other and of other
plain seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

CiMethod = Literal["t", "bootstrap"]
CI_METHODS: tuple[str, ...] = ("t", "bootstrap")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240613


def replicate_seed(seed: int, replicate: int) -> int:
    """The seed of ``replicate`` (0, 1, ...) of a scenario seeded with ``seed``."""
    if replicate == 0:
        return seed
    state = np.random.SeedSequence(seed, spawn_key=(0x5EED, replicate)).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 32 | int(state[1])


@dataclass(frozen=True, slots=True)
class Interval:
    """A value with an optional confidence interval; ``low``/``high`` are None with fewer than two replicates."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 1

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies inside [low, high] (False when there is no interval)."""
        return self.low is not None and self.high is not None and self.low <= x <= self.high

    def map(self, fn: Callable[[float], float]) -> Interval:
        """The interval of a monotone increasing function of this quantity."""
        f = lambda x: None if x is None else fn(x)  # noqa: E731
        return Interval(f(self.value), f(self.low), f(self.high), self.n)

    def to_json(self) -> dict[str, float | int | None]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}

    def columns(self, name: str) -> dict[str, float | None]:
        """Table cells: ``name``, ``name_low``, ``name_high``."""
        return {name: self.value, f"{name}_low": self.low, f"{name}_high": self.high}


def _as_floats(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def interval(
    values: Sequence[float | None], confidence: float = 0.95, method: str = "t", floor: float | None = None
) -> Interval:
    """The mean of ``values`` with a ``confidence`` interval by ``method``.

    A None or NaN among the values makes the whole figure undefined (value None); +inf
    propagates (an unbounded figure has an unbounded mean). ``floor`` clips the lower bound
    of a quantity that cannot go below it (a t-interval of a rate can reach below 0).
    ValueError for a bad method or confidence.
    """
    iv = _interval(values, confidence, method)
    if floor is not None and iv.low is not None and iv.low < floor:
        return Interval(iv.value, floor, iv.high, iv.n)
    return iv


def t_quantile(df: int, q: float) -> float:
    """Student's t quantile ``q`` at ``df`` degrees of freedom: scipy.stats.t.ppf(q, df), the same floats.

    At 2 degrees of freedom (the default 3 replicates) it is the closed form (2q - 1) / sqrt(2q(1 - q)), whose
    floats equal scipy.special.stdtrit's (tested): importing scipy.special costs about 0.25 s, spent in the
    plan's process between two stages while the workers wait. Otherwise scipy.special.stdtrit, imported when
    first needed (scipy.stats.t.ppf is stdtrit(df, q), t_gen._ppf, at loc 0 and scale 1; scipy.stats's import
    costs about a second).
    """
    if df == 2:
        return (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


def _interval(values: Sequence[float | None], confidence: float, method: str) -> Interval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (got {confidence})")
    if method not in CI_METHODS:
        raise ValueError(f"unknown interval method {method!r}; known: {', '.join(CI_METHODS)}")
    arr = _as_floats(values)
    n = len(arr)
    if n == 0 or np.isnan(arr).any():
        return Interval(None, None, None, n)
    mean = float(arr.mean())
    if n == 1:
        return Interval(mean, None, None, 1)
    if not np.isfinite(arr).all():
        return Interval(mean, float(arr.min()), float(arr.max()), n)
    if method == "t":
        sd = float(arr.std(ddof=1))
        half = t_quantile(n - 1, (1 + confidence) / 2) * sd / math.sqrt(n)
        return Interval(mean, mean - half, mean + half, n)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = arr[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(mean, float(low), float(high), n)
