"""The largest rate a predicate accepts: a doubling (or halving) search, then bisection.

Contract of ``max_feasible_rate``:

- ``is_feasible(rate)`` is treated as monotone: feasible below some threshold, infeasible
  above; the search brackets the threshold between a rate it saw feasible (``lo``) and
  one it saw infeasible (``hi``) and narrows the bracket until ``hi - lo <= rel_tol x lo``;
- the answer is ``lo``, a rate actually verified feasible (0 when even
  ``start / 2**max_halvings`` is not), never an interpolation;
- ``hi`` is None when no rate up to ``start x 2**max_doublings`` was infeasible;
- the predicate is called at most once per distinct rate here; callers that evaluate
  several predicates on the same simulations memoize by rate (the doubling phase visits
  the same rates for every predicate).

With common random numbers (the same seed at every rate, so arrival times are one sample
path scaled by 1 / rate) the simulated predicate is monotone in practice, which is what
makes bisection agree with a brute-force scan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateBracket:
    """The search's answer: the largest rate verified feasible and the smallest seen infeasible."""

    max_rate_per_s: float
    upper_rate_per_s: float | None
    num_evaluations: int


def max_feasible_rate(
    is_feasible: Callable[[float], bool],
    start_rate_per_s: float,
    rel_tol: float = 0.02,
    max_doublings: int = 16,
    max_halvings: int = 16,
) -> RateBracket:
    """Bracket then bisect the feasibility threshold of ``is_feasible``; see the module contract."""
    if not start_rate_per_s > 0:
        raise ValueError(f"the search must start at a positive rate (got {start_rate_per_s})")
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be between 0 and 1 (got {rel_tol})")
    seen: dict[float, bool] = {}

    def feasible(rate: float) -> bool:
        if rate not in seen:
            seen[rate] = bool(is_feasible(rate))
        return seen[rate]

    lo: float
    hi: float | None
    if feasible(start_rate_per_s):
        lo, hi = start_rate_per_s, None
        for _ in range(max_doublings):
            if feasible(lo * 2):
                lo *= 2
            else:
                hi = lo * 2
                break
        if hi is None:
            return RateBracket(lo, None, len(seen))
    else:
        lo, hi = 0.0, start_rate_per_s
        for _ in range(max_halvings):
            if feasible(hi / 2):
                lo = hi / 2
                break
            hi /= 2
        if lo == 0.0:
            return RateBracket(0.0, hi, len(seen))
    while hi - lo > rel_tol * lo:
        mid = (lo + hi) / 2
        if feasible(mid):
            lo = mid
        else:
            hi = mid
    return RateBracket(lo, hi, len(seen))
