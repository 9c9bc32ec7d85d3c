"""The largest rate a predicate accepts: a doubling (or halving) search, then bisection.

Contract of ``max_feasible_rate``:

- ``is_feasible(rate)`` is treated as monotone: feasible below some threshold, infeasible
  above; the search brackets the threshold between a rate it saw feasible (``lo``) and
  one it saw infeasible (``hi``) and narrows the bracket until ``hi - lo <= rel_tol x lo``
  (or, for whole-number loads, until ``hi - lo <= 1``);
- it only ever tries rates in ``[floor, ceiling]`` (by default ``start / 2**max_halvings``
  to ``start x 2**max_doublings``): doubling from ``start`` stops at the ceiling, halving
  at the floor, whatever ``start`` is;
- the answer is ``lo``, a rate actually verified feasible (0 when even the floor is not),
  never an interpolation;
- ``hi`` is None when every rate up to the ceiling was feasible (``lo`` is then the
  ceiling: a lower bound, ``converged`` False);
- the predicate is called at most once per distinct rate here; callers that evaluate
  several predicates on the same simulations memoize by rate (the doubling phase visits
  the same rates for every predicate);
- it always ends: the bracket at least halves with every evaluation, and bisection stops
  when the midpoint is no longer strictly inside the bracket (float resolution).

With common random numbers (the same seed at every rate, so arrival times are one sample
path scaled by 1 / rate) the simulated predicate is monotone in practice, which is what
makes bisection agree with a brute-force scan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateBracket:
    """The search's answer: the largest rate verified feasible and the smallest seen infeasible.

    ``converged``: the bracket closed to the tolerance (False when unbounded, i.e. every rate
    up to the ceiling was feasible, or infeasible down to the floor).
    """

    max_rate_per_s: float
    upper_rate_per_s: float | None
    num_evaluations: int
    converged: bool = True


def max_feasible_rate(
    is_feasible: Callable[[float], bool],
    start_rate_per_s: float,
    rel_tol: float = 0.02,
    max_doublings: int = 16,
    max_halvings: int = 16,
    *,
    floor: float | None = None,
    ceiling: float | None = None,
    integer: bool = False,
) -> RateBracket:
    """Bracket then bisect the feasibility threshold of ``is_feasible``; see the module contract."""
    if not (math.isfinite(start_rate_per_s) and start_rate_per_s > 0):
        raise ValueError(f"the search must start at a positive rate, and a finite one (got {start_rate_per_s})")
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be between 0 and 1 (got {rel_tol})")
    floor = start_rate_per_s / 2.0**max_halvings if floor is None else floor
    ceiling = start_rate_per_s * 2.0**max_doublings if ceiling is None else ceiling
    if integer:
        floor, ceiling = float(max(1, math.ceil(floor))), float(math.floor(ceiling))
    if not (0 < floor <= start_rate_per_s <= ceiling and math.isfinite(ceiling)):
        raise ValueError(f"the search must start inside [{floor:g}, {ceiling:g}] (got {start_rate_per_s:g})")
    if integer and start_rate_per_s != round(start_rate_per_s):
        raise ValueError(f"a whole-number search must start at a whole number (got {start_rate_per_s:g})")
    seen: dict[float, bool] = {}

    def feasible(rate: float) -> bool:
        if rate not in seen:
            seen[rate] = bool(is_feasible(rate))
        return seen[rate]

    lo: float
    hi: float | None
    if feasible(start_rate_per_s):
        lo, hi = start_rate_per_s, None
        while lo < ceiling:
            up = min(lo * 2, ceiling)
            if feasible(up):
                lo = up
            else:
                hi = up
                break
        if hi is None:
            return RateBracket(lo, None, len(seen), converged=False)
    else:
        lo, hi = 0.0, start_rate_per_s
        while hi > floor:
            down = max(math.floor(hi / 2) if integer else hi / 2, floor)
            if feasible(down):
                lo = down
                break
            hi = down
        if lo == 0.0:
            return RateBracket(0.0, hi, len(seen), converged=False)
    while hi - lo > rel_tol * lo and (not integer or hi - lo > 1):
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        if not lo < mid < hi:
            break  # as narrow as float (or whole-number) resolution allows
        if feasible(mid):
            lo = mid
        else:
            hi = mid
    return RateBracket(lo, hi, len(seen))
