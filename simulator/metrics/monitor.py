"""Time-weighted level monitors (queue length, requests in system, KV blocks in use)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import mul


class LevelMonitor:
    """Integrates a piecewise-constant level over time: its time average and its maximum."""

    __slots__ = ("_area", "_last_s", "level", "max_level", "start_s")

    def __init__(self, start_s: float = 0.0, level: float = 0.0) -> None:
        self.start_s = start_s
        self._last_s = start_s
        self._area = 0.0
        self.level = level
        self.max_level = level

    def set(self, now_s: float, level: float) -> None:
        """The level becomes ``level`` at ``now_s`` (times never go backwards)."""
        self._area += self.level * (now_s - self._last_s)
        self._last_s = now_s
        self.level = level
        if level > self.max_level:
            self.max_level = level

    def segments(self, clock_s: Sequence[float], durations_s: Sequence[float], levels: Sequence[float] | float) -> None:
        """The level is ``levels[j]`` (or ``levels`` throughout) from ``clock_s[j]`` for ``durations_s[j]``.

        ``clock_s`` holds the consecutive intervals' boundaries (one more than the
        intervals). ``levels`` is monotone (a window's KV blocks only grow), so its
        peak is at one end. Equivalent to
        ``set(clock_s[j], levels[j]); set(clock_s[j + 1], levels[j])`` for each j, summed in
        one go (the area may differ from the step-by-step sum by rounding).
        """
        if not durations_s:
            return
        self._area += self.level * (clock_s[0] - self._last_s)
        if isinstance(levels, (int, float)):
            self._area += levels * (clock_s[-1] - clock_s[0])
            last = peak = float(levels)
        else:
            self._area += sum(map(mul, levels, durations_s))
            last = float(levels[-1])
            peak = max(float(levels[0]), last)
        self._last_s = clock_s[-1]
        self.level = last
        if peak > self.max_level:
            self.max_level = peak

    def add(self, now_s: float, delta: float) -> None:
        self.set(now_s, self.level + delta)

    def time_average(self, until_s: float) -> float:
        """Mean level over [start_s, until_s]; 0 for an empty interval."""
        span = until_s - self.start_s
        if span <= 0:
            return 0.0
        return (self._area + self.level * (until_s - self._last_s)) / span
