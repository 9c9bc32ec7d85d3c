"""Which candidates a plan may leave out: those that cannot be the cheapest deployment.

A candidate costs ``replicas x gpus_per_replica x price`` per hour. Against a threshold (the
cheapest feasible deployment found, or a tuned family's cheapest), it is out when either:

- its analytic best case (``bound``) already needs enough replicas to cost more; or
- one copy already costs more; or
- it misses the SLOs, on every replicate, at the *probe load*: the least per-copy max load
  with which the copies costing no more than the threshold serve the target
  (``ReplicaScaling.least_rate_for``). Feasibility falls with load (common random numbers
  make it monotone in practice, as the rate search assumes), so every replicate's max load
  is below the probe, their mean is too, and the deployment needs more copies than the
  threshold pays for. One point per replicate decides it, and a point far above a
  candidate's capacity stops early (``early_stop``), so a clearly dearer candidate costs a
  fraction of one run instead of a whole search.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from simulator.planning.capacity import ReplicaScaling

ONE_COPY_OVER = 0.0  # ``probe_load``: one copy alone costs more than the threshold


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


def misses_everywhere(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether every replicate's probe row ran and missed the p99 SLOs."""
    return bool(rows) and all(r.get("error") is None and r["meets_slo"] is False for r in rows)
