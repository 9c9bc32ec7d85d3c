"""The Pareto frontier of points to minimize in two dimensions."""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For each (x, y), whether no other point is at least as good in both and better in one.

    Both coordinates are minimized (cost, latency). Duplicates are all on the frontier.
    O(n^2): frontiers here have a handful of candidates.
    """
    flags = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox <= x and oy <= y) and (ox < x or oy < y) for j, (ox, oy) in enumerate(points) if j != i)
        flags.append(not dominated)
    return flags
