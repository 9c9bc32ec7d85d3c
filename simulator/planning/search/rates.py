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


# -- the guided search ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    """One simulated rate as the guided search sees it.

    ``margin``: how far the rate is from the threshold in the predicate's own measure, <= 0
    on the feasible side and > 0 beyond it (the log of the binding p99 over its bound, or
    the attainment missed); None when the run tells nothing finite (an unstable queue, a run
    stopped once its verdict was known).
    """

    feasible: bool
    margin: float | None = None


# Relative margin a model probe keeps on the feasible side of the predicted threshold: the
# closing probe at (1 + rel_tol) times it then lands beyond the threshold when the model is
# right to within half the tolerance.
LEAN = 0.3
# A closing probe's step, in tolerances: just inside one, so that float rounding cannot leave the
# bracket a hair wider than the tolerance (and ask for one more probe).
CLOSE = 0.999
# A model probe stays this fraction of the bracket away from its ends (regula falsi's safeguard).
SAFEGUARD = 0.1


def _queue_crossing(rate: float, margin: float, capacity: float) -> float:
    """Where the latency of a queue of capacity ``capacity``, L(r) = L0 / (1 - r / capacity), reaches its bound,
    given its log-margin ``margin`` at ``rate``: capacity (1 - (1 - rate / capacity) e^margin)."""
    return capacity * (1 - (1 - rate / capacity) * math.exp(min(margin, 50.0)))


def _extrapolate(
    rate: float,
    m: float | None,
    seen: dict[float, Probe],
    slope_hint: float | None,
    capacity: float | None,
    below: bool,
) -> float | None:
    """The threshold predicted from one side only (every rate so far feasible, or every one infeasible).

    The secant through the two outermost rates with margins on that side; else a step of
    ``-m / slope_hint`` (the margin's slope near another replicate's threshold); else the
    queue model through ``rate`` with mu = ``capacity``; None without a margin.
    """
    if m is None:
        return None
    side = [
        (r, p.margin)
        for r, p in seen.items()
        if p.margin is not None and p.feasible == below and r != rate and ((r < rate) if below else (r > rate))
    ]
    if side:
        r2, m2 = max(side) if below else min(side)
        assert m2 is not None
        if (m - m2) * (rate - r2) > 0:  # the margin grows with the rate between them
            return rate + (rate - r2) * (-m) / (m - m2)
    if slope_hint is not None and slope_hint > 0:
        return rate - m / slope_hint
    if capacity is not None and capacity > rate:
        guess = _queue_crossing(rate, m, capacity)
        if guess > 0:  # from far above a loose capacity the model crosses below 0: no guess then
            return guess
    return None


def _predict(lo: float, hi: float, margin: dict[float, float | None]) -> float | None:
    """Where the margin crosses 0 in (lo, hi), from the margins simulated; None when there is no model.

    Both ends' margins known: linear interpolation (regula falsi; the root does not depend on
    the margin's scale). Only the feasible side's: the secant through the two highest
    feasible rates with margins, extrapolated; with one only, a queue's latency,
    L(r) = L0 / (1 - r / mu), with mu = hi (the threshold lies below an infeasible rate).
    """
    m_lo, m_hi = margin.get(lo), margin.get(hi)
    if m_lo is None:
        return None
    if m_hi is not None and m_hi > m_lo:
        return lo + (hi - lo) * (-m_lo) / (m_hi - m_lo)
    below = [r for r, m in margin.items() if r < lo and m is not None and m < m_lo]
    if below:
        r2 = max(below)
        m2 = margin[r2]
        assert m2 is not None
        return lo + (lo - r2) * (-m_lo) / (m_lo - m2)
    return _queue_crossing(lo, min(m_lo, 0.0), hi)


def guided_max_rate(
    probe: Callable[[float], Probe],
    start_rate_per_s: float,
    rel_tol: float,
    *,
    floor: float,
    ceiling: float,
    integer: bool = False,
    upper_hint: float | None = None,
    first_step: float = 1.0,
    known: dict[float, Probe] | None = None,
    capacity_hint: float | None = None,
    slope_hint: float | None = None,
) -> RateBracket:
    """``max_feasible_rate``'s answer with fewer evaluations, steered by margins and an upper bound.

    The same contract as ``max_feasible_rate`` (a verified-feasible ``lo``, a verified-
    infeasible ``hi`` within ``rel_tol``, rates in ``[floor, ceiling]`` only, one call per
    rate, always ends); what differs is where it probes:

    - ``known``: rates already simulated (another predicate's search on the same runs); the
      bracket starts from the largest known feasible rate and the smallest infeasible one above
      it, and ``start`` is tried first when it lies inside;
    - expansion from ``start``: up by ``first_step`` (relative; doubling each time) or, once,
      straight to ``upper_hint`` (an analytic bound: the threshold lies below it if the bound
      holds; if the simulation says otherwise the search simply carries on upwards); down by
      the margin's ratio or ``first_step``; with ``capacity_hint`` (the most the system can
      serve: an analytic bound), straight to the threshold a queue of that capacity would have
      given the margin there;
    - inside a bracket: a probe at the predicted threshold (``_predict``), leaning
      ``LEAN x rel_tol`` to the feasible side and kept ``SAFEGUARD`` of the bracket from its
      ends; when the prediction lies within one tolerance of an end, the probe one tolerance
      from that end (which closes the bracket if the model is right); bisection when there
      is no model, when two probes in a row landed on one side or failed to halve the
      bracket, and when one bisection closes it.
    """
    if not (math.isfinite(start_rate_per_s) and start_rate_per_s > 0):
        raise ValueError(f"the search must start at a positive rate, and a finite one (got {start_rate_per_s})")
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be between 0 and 1 (got {rel_tol})")
    if integer:
        floor, ceiling = float(max(1, math.ceil(floor))), float(math.floor(ceiling))
    if not (0 < floor <= start_rate_per_s <= ceiling and math.isfinite(ceiling)):
        raise ValueError(f"the search must start inside [{floor:g}, {ceiling:g}] (got {start_rate_per_s:g})")
    seen: dict[float, Probe] = dict(known or {})
    calls = 0

    def ev(rate: float) -> Probe:
        nonlocal calls
        if rate not in seen:
            calls += 1
            seen[rate] = probe(rate)
        return seen[rate]

    def snap(x: float, lo: float, hi: float | None) -> float | None:
        """``x`` as a rate the search may try strictly between ``lo`` and ``hi`` (and in range); None if none."""
        top = ceiling if hi is None else hi
        if integer:
            x = float(round(x))
            if x <= lo:
                x = lo + 1
            if x >= top:
                x = top - 1 if hi is not None else top
        x = min(max(x, floor), ceiling)
        if not (lo < x < top or (hi is None and x == top and x > lo)):
            return None
        return x

    # the bracket from what is known (in range), else from the start
    inside = {r: p for r, p in seen.items() if floor <= r <= ceiling}
    feasible_known = [r for r, p in inside.items() if p.feasible]
    lo = max(feasible_known) if feasible_known else 0.0
    above = [r for r, p in inside.items() if not p.feasible and r > lo]
    hi: float | None = min(above) if above else None
    if lo < start_rate_per_s and (hi is None or start_rate_per_s < hi) and start_rate_per_s not in seen:
        if ev(start_rate_per_s).feasible:  # the start is the best guess: try it first
            lo = start_rate_per_s
        else:
            hi = start_rate_per_s
    step = first_step
    used_hint = upper_hint is None or not math.isfinite(upper_hint)
    # expansion upwards: every rate so far feasible
    while hi is None:
        if lo >= ceiling:
            return RateBracket(lo, None, calls, converged=False)
        m = seen[lo].margin if lo in seen else None
        guess = _extrapolate(lo, m, seen, slope_hint, capacity_hint, below=True)
        if not used_hint and upper_hint > lo:  # type: ignore[operator]
            x, used_hint = min(upper_hint, ceiling), True  # type: ignore[type-var]
        elif guess is not None:  # one step to the predicted threshold
            x = max(guess - LEAN * rel_tol * lo, lo * (1 + CLOSE * rel_tol))
            if capacity_hint is not None and capacity_hint > lo:
                x = min(x, capacity_hint)
        else:
            x = lo * (1 + step)
            step *= 2
        x = snap(min(x, ceiling), lo, None)
        if x is None:
            return RateBracket(lo, None, calls, converged=False)
        if ev(x).feasible:
            lo = x
        else:
            hi = x
    # expansion downwards: every rate so far infeasible
    while lo == 0.0:
        if hi <= floor:
            return RateBracket(0.0, hi, calls, converged=False)
        m = seen[hi].margin if hi in seen else None
        down = hi / (1 + step)
        guess = _extrapolate(hi, m, seen, slope_hint, capacity_hint, below=False)
        if guess is not None:
            x = min(guess - LEAN * rel_tol * hi, hi / (1 + CLOSE * rel_tol))
        elif m is not None and m > 0:
            x = max(down, hi * math.exp(-m) / (1 + rel_tol))
        else:
            x = down
        step *= 2
        x = max(x, floor, hi / 2**8)  # a poor model never steps down more than 2^8 at once
        if integer:
            x = float(max(math.floor(x), 1))
        if not x < hi:
            return RateBracket(0.0, hi, calls, converged=False)
        if ev(x).feasible:
            lo = x
        else:
            hi = x
    # the bracket
    widths = [hi - lo]
    margin = {r: p.margin for r, p in seen.items()}  # Illinois: an end kept twice has its margin halved
    kept: list[str] = []
    while hi - lo > rel_tol * lo and (not integer or hi - lo > 1):
        w = hi - lo
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        guess = None
        biased = len(kept) >= 2 and kept[-1] == kept[-2]  # two probes on one side: the model leans that way
        if not (w <= 2 * rel_tol * lo or biased or (len(widths) >= 3 and widths[-1] > widths[-3] / 2)):
            guess = _predict(lo, hi, margin)
        if guess is None:
            x = mid
        elif guess <= lo * (1 + rel_tol):  # the threshold within a tolerance of lo: close from above
            x = lo + max(1.0, math.floor(rel_tol * lo)) if integer else lo * (1 + CLOSE * rel_tol)
        elif guess >= hi / (1 + rel_tol) and margin.get(hi) is None:
            x = mid  # a model of the feasible side alone that puts the threshold at hi is wrong there
        elif guess >= hi / (1 + rel_tol):  # within a tolerance of hi: close from below
            x = hi - max(1.0, math.floor(rel_tol * hi)) if integer else hi / (1 + CLOSE * rel_tol)
        else:
            x = min(max(guess - LEAN * rel_tol * lo, lo + SAFEGUARD * w), hi - SAFEGUARD * w)
        y = snap(x, lo, hi)
        if y is None:
            y = snap(mid, lo, hi)
            if y is None:
                break  # as narrow as float (or whole-number) resolution allows
        p = ev(y)
        margin[y] = p.margin
        if p.feasible:
            lo = y
            kept.append("hi")
        else:
            hi = y
            kept.append("lo")
        if len(kept) >= 2 and kept[-1] == kept[-2]:
            end = hi if kept[-1] == "hi" else lo
            if margin.get(end) is not None:
                margin[end] = margin[end] / 2  # type: ignore[operator]
        widths.append(hi - lo)
    return RateBracket(lo, hi, calls)
