"""Multilinear interpolation over a rectilinear grid of measured times.

In ``log`` space the interpolant is linear in log(time) over log(1 + coordinate) on each
axis (a piecewise power law, the natural shape of op times that grow from a fixed cost to
a linear or quadratic regime); in ``linear`` space it is linear in time over coordinates.
Either way it is exact on grid points and, along each axis, lies between the values at
the two enclosing grid lines, so it is monotone wherever the data is. Outside the grid
it answers None: extrapolating is the caller's decision.

Pure Python on the hot path (``bisect`` over lists): a cost model evaluates a handful of
ops per simulated step, where numpy's per-call overhead would dominate.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Literal

Space = Literal["log", "linear"]


class GridInterpolator:
    """Interpolates ``values[coords]`` over the grid ``axis_values`` (each sorted, distinct)."""

    def __init__(
        self, axis_values: Sequence[Sequence[int]], values: Mapping[tuple[int, ...], float], space: Space = "log"
    ) -> None:
        assert axis_values and all(len(a) >= 1 for a in axis_values)
        self.space = space
        self.axis_values = [list(a) for a in axis_values]
        self.lows = [a[0] for a in self.axis_values]
        self.highs = [a[-1] for a in self.axis_values]
        self._u = [[self._fwd_x(x) for x in a] for a in self.axis_values]
        self._v = {k: self._fwd_t(t) for k, t in values.items()}
        assert all(t > 0 for t in values.values()) or space == "linear"

    def _fwd_x(self, x: float) -> float:
        return math.log1p(x) if self.space == "log" else float(x)

    def _fwd_t(self, t: float) -> float:
        return math.log(t) if self.space == "log" else t

    def _inv_t(self, v: float) -> float:
        return math.exp(v) if self.space == "log" else v

    def contains(self, at: Sequence[float]) -> bool:
        """True when every coordinate lies within its axis's measured range."""
        return all(lo <= x <= hi for x, lo, hi in zip(at, self.lows, self.highs, strict=True))

    def clamp(self, at: Sequence[float]) -> tuple[float, ...]:
        """The nearest point of the grid's box (each coordinate clipped to its axis range)."""
        return tuple(min(max(x, lo), hi) for x, lo, hi in zip(at, self.lows, self.highs, strict=True))

    def __call__(self, at: Sequence[float]) -> float | None:
        """Interpolated time at ``at``, or None outside the grid."""
        if not self.contains(at):
            return None
        # per axis: the enclosing grid indices (i, i + 1) and the weight of i + 1
        brackets: list[tuple[int, int, float]] = []
        for x, axis, u in zip(at, self.axis_values, self._u, strict=True):
            j = bisect.bisect_left(axis, x)
            if j < len(axis) and axis[j] == x:
                brackets.append((j, j, 0.0))
                continue
            lo, hi = j - 1, j
            w = (self._fwd_x(x) - u[lo]) / (u[hi] - u[lo])
            brackets.append((lo, hi, w))
        total = 0.0
        for corner in range(1 << len(brackets)):
            weight = 1.0
            key = []
            for d, (lo, hi, w) in enumerate(brackets):
                if corner >> d & 1:
                    weight *= w
                    key.append(self.axis_values[d][hi])
                else:
                    weight *= 1.0 - w
                    key.append(self.axis_values[d][lo])
            if weight:
                total += weight * self._v[tuple(key)]
        return self._inv_t(total)
