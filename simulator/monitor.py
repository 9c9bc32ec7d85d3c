"""Time-weighted level monitors (queue length, requests in system, KV blocks in use)."""

from __future__ import annotations


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

    def segments(self, starts_s, ends_s, levels) -> None:
        """The level is ``levels[j]`` over [starts_s[j], ends_s[j]] for consecutive intervals (numpy arrays).

        Equivalent to ``set(starts_s[j], levels[j]); set(ends_s[j], levels[j])`` for each j,
        summed in one go (the area may differ from the step-by-step sum by rounding).
        """
        if len(levels) == 0:
            return
        self._area += self.level * (float(starts_s[0]) - self._last_s)
        self._area += float((levels * (ends_s - starts_s)).sum())
        self._last_s = float(ends_s[-1])
        self.level = float(levels[-1])
        peak = float(levels.max())
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
