"""Which candidates a plan may leave out: those that cannot be the cheapest deployment.

A candidate costs ``replicas x gpus_per_replica x price`` per hour. Against a threshold (the
cheapest feasible deployment found, or a tuned family's cheapest), it is out when either:

- its analytic best case (``bound``) already needs enough replicas to cost more; or
- one copy already costs more; or
- its replicates' max loads are shown to average below the *probe load*: the least per-copy
  max load with which the copies costing no more than the threshold serve the target
  (``ReplicaScaling.least_rate_for``). Each replicate is simulated at the probe load, and, while
  the verdict is open, at loads one tolerance and more around it (``probe_verdict``); a load a
  replicate misses is above its max load (feasibility falls with load: common random numbers
  make it monotone in practice, as the rate search assumes), so when the least loads missed
  average at most the probe load, any search's max load (the mean of the replicates' loads
  met, each below its least load missed) averages below it, and the deployment needs more
  copies than the threshold pays for. A clearly dearer candidate
  misses the probe load on every replicate: one point each, a point far above its capacity
  stopped early (``early_stop``); one that straddles it costs a few points more, not a search.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from simulator.planning.points.capacity import ReplicaScaling

ONE_COPY_OVER = 0.0  # ``probe_load``: one copy alone costs more than the threshold
# The most rounds of points a probe verdict takes (the first at the probe load): with steps of one, two,
# four... tolerances outwards and bisection inside, enough to close any replicate's bracket to the tolerance
# within a factor of two of the probe load.
MAX_PROBE_ROUNDS = 8


def copies_within(cost_per_copy_usd: float, threshold_usd: float) -> int:
    """How many copies cost no more than ``threshold_usd`` (a product equal to it, to rounding, counts)."""
    return math.floor(threshold_usd / cost_per_copy_usd * (1 + 1e-9))


def probe_load(
    cost_per_copy_usd: float,
    threshold_usd: float,
    target: float,
    scaling: ReplicaScaling,
    floor: float,
    ceiling: float,
    integer: bool,
) -> float | None:
    """The load whose miss on every replicate proves the candidate dearer than ``threshold_usd``.

    ``ONE_COPY_OVER`` when one copy already costs more (no simulation needed); None when no
    threshold is known, or when the probe would fall outside the search range
    [``floor``, ``ceiling``] (no point the search could make tells it). Integer loads
    (closed-loop users) probe the next whole user count: a miss there caps the max below
    the least load.
    """
    if not math.isfinite(threshold_usd):
        return None
    k = copies_within(cost_per_copy_usd, threshold_usd)
    if k < 1:
        return ONE_COPY_OVER
    load = scaling.least_rate_for(target, k)
    if integer:
        load = float(max(1, math.ceil(load)))
    if not floor <= load <= ceiling:
        return None
    return load


@dataclass(frozen=True, slots=True)
class ProbeVerdict:
    """Where a candidate's probe at one load stands.

    ``dearer``: True when its replicates' least loads missed average at most the load (shown
    dearer), False when they cannot (a replicate's max load is unknown beyond the search range,
    a point failed or the brackets closed above it), None while ``pending`` (replicate, load)
    points are still to simulate. ``rows``: each replicate's probe rows so far, in the order
    simulated; ``missed``: each replicate's least load missed (inf if none yet).
    """

    dearer: bool | None
    pending: list[tuple[int, float]]
    rows: list[list[dict[str, Any]]]
    missed: list[float]


def probe_verdict(
    load: float,
    replicates: int,
    row_of: Callable[[int, float], dict[str, Any] | None],
    rel_tol: float,
    floor: float,
    ceiling: float,
    integer: bool,
) -> ProbeVerdict:
    """Replay a candidate's probe at ``load`` from the rows known (``row_of(replicate, load)``, None if not simulated).

    Round 0 simulates every replicate at ``load``. While the verdict is open, each replicate
    whose bracket [largest load met, least load missed] is wider than ``rel_tol`` takes one more
    point (``next_probe_load``): the points depend only on the replicate's own rows, so the
    replay, and with it the verdict and the rows a pruned candidate records, is the same
    whichever candidates were planned first.
    """
    loads: list[list[float]] = [[load] for _ in range(replicates)]
    rows: list[list[dict[str, Any]]] = [[] for _ in range(replicates)]
    for _ in range(MAX_PROBE_ROUNDS):
        new = {r: row_of(r, seq[-1]) for r, seq in enumerate(loads) if len(rows[r]) < len(seq)}
        pending = [(r, loads[r][-1]) for r, row in new.items() if row is None]
        if pending:
            return ProbeVerdict(None, pending, rows, _missed(rows))
        for r, row in new.items():
            rows[r].append(row)  # type: ignore[arg-type]
        brackets = [_bracket(seq) for seq in rows]
        missed = [hi for _, hi in brackets]
        if any(row.get("error") is not None or row.get("meets_slo") is None for row in new.values()):  # type: ignore[union-attr]
            return ProbeVerdict(False, [], rows, missed)
        if sum(missed) <= load * replicates:
            return ProbeVerdict(True, [], rows, missed)
        if sum(lo for lo, _ in brackets) >= load * replicates:
            return ProbeVerdict(False, [], rows, missed)
        grew = False
        for r, seq in enumerate(rows):
            x = next_probe_load(seq, rel_tol, floor, ceiling, integer)
            if x is not None:
                loads[r].append(x)
                grew = True
        if not grew:
            return ProbeVerdict(False, [], rows, missed)
    return ProbeVerdict(False, [], rows, _missed(rows))


def next_probe_load(
    rows: Sequence[dict[str, Any]], rel_tol: float, floor: float, ceiling: float, integer: bool
) -> float | None:
    """A replicate's next probe load from its rows so far; None when its bracket is closed (or out of range).

    Every load met: one tolerance above the largest, then two, four... (a least load missed is
    needed, the nearer the better); every load missed: likewise below the least; both: bisection,
    until the bracket is within ``rel_tol`` (whole-number loads: one user).
    """
    lo, hi = _bracket(rows)
    if lo > 0 and math.isfinite(hi):
        if hi - lo <= rel_tol * lo or (integer and hi - lo <= 1):
            return None
        x = (lo + hi) // 2 if integer else (lo + hi) / 2
    elif lo > 0:  # every load met (each step doubles: one per row so far)
        x = lo * (1 + rel_tol * 2 ** (len(rows) - 1))
        x = float(max(math.ceil(x), lo + 1)) if integer else x
    else:
        x = hi / (1 + rel_tol * 2 ** (len(rows) - 1))
        x = float(min(math.floor(x), hi - 1)) if integer else x
    if not (floor <= x <= ceiling and lo < x < hi):
        return None
    return x


def _missed(rows: list[list[dict[str, Any]]]) -> list[float]:
    return [_bracket(seq)[1] for seq in rows]


def _bracket(rows: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """A replicate's (largest load met, 0 if none; least load missed, inf if none)."""
    met = [r["rate_per_s"] for r in rows if r.get("meets_slo") is True]
    missed = [r["rate_per_s"] for r in rows if r.get("meets_slo") is False]
    return max(met, default=0.0), min(missed, default=math.inf)
