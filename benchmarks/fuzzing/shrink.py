"""Delta-minimization of a failing scenario mapping: the smallest scenario that still fails the same way.

``shrink(data, fails)`` repeats passes over the mapping until none makes progress: drop an optional key (the
schema's default then applies), replace a number by a smaller one (0, 1, half, one less), a list by a shorter
one, and descend into nested mappings. A candidate is kept when ``fails(candidate)`` still returns the same
signature as the original failure (exception type and the first line of its message, with numbers masked), so a
shrink never swaps one bug for another. The number of ``fails`` calls is bounded (``max_calls``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

Signature = str | None  # None: the candidate does not fail

NUMBER = re.compile(r"\d+(\.\d+)?(e-?\d+)?")
KEEP = frozenset({"kind"})  # a discriminator is never dropped (another kind is another scenario)


def signature(exc: BaseException) -> str:
    """What identifies a failure across shrinks: its type and first line, numbers masked."""
    first = (str(exc).strip().splitlines() or [""])[0]
    masked = NUMBER.sub("N", first)
    return f"{type(exc).__name__}: {masked}"


def _smaller_numbers(value: float | int) -> list[Any]:
    if isinstance(value, bool):
        return [False] if value else []
    if isinstance(value, int):
        out = [0, 1, value // 2, value - 1]
        return [v for v in dict.fromkeys(out) if abs(v) < abs(value)]
    out = [0.0, 1.0, round(value / 2, 6)]
    return [v for v in dict.fromkeys(out) if abs(v) < abs(value)]


def _candidates(value: Any) -> Iterator[Any]:
    """Simpler variants of ``value``, simplest first (a mapping's are variants of one entry at a time)."""
    if isinstance(value, dict):
        for key in list(value):
            if key not in KEEP:
                yield {k: v for k, v in value.items() if k != key}
        for key, item in value.items():
            for simpler in _candidates(item):
                yield value | {key: simpler}
    elif isinstance(value, list):
        for i in range(len(value)):
            yield value[:i] + value[i + 1 :]
        for i, item in enumerate(value):
            for simpler in _candidates(item):
                yield [*value[:i], simpler, *value[i + 1 :]]
    elif isinstance(value, int | float):
        yield from _smaller_numbers(value)


def shrink(data: dict[str, Any], fails: Callable[[dict[str, Any]], Signature], max_calls: int = 400) -> dict[str, Any]:
    """The smallest variant of ``data`` that fails as ``data`` does (``fails(data)`` must not be None)."""
    target = fails(data)
    assert target is not None, "shrink needs a failing scenario"
    best, calls = data, 0
    improved = True
    while improved and calls < max_calls:
        improved = False
        for candidate in _candidates(best):
            if calls >= max_calls:
                break
            calls += 1
            if fails(candidate) == target:
                best, improved = candidate, True
                break  # restart from the simpler scenario: its own candidates come first
    return best
