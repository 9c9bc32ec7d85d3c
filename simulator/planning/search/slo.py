"""A plan's SLO bounds from the scenario's ``slo:`` block, kept apart from the planning machinery so that
``servesim plan`` checks its question before that loads."""

from __future__ import annotations

import math
from typing import Any

from simulator.config.scenario import validate_scenario

# the scenario's slo field -> the PlanRequest field it sets
SLO_FIELDS = (("ttft_ms", "slo_ttft_p99_ms"), ("tpot_ms", "slo_tpot_p99_ms"), ("e2el_ms", "slo_e2el_p99_ms"))


def scenario_slo(base: dict[str, Any], source: str) -> dict[str, float]:
    """The bounds of the scenario's ``slo:`` block as PlanRequest fields (``slo_ttft_p99_ms``, ...), set ones only.

    A plan judges the p99 of each latency against the bound the scenario gives for a single
    request (``servesim run``'s goodput bound), and SLO attainment against the same bounds.
    """
    slo = validate_scenario(base, source).slo
    out = {}
    for name, key in SLO_FIELDS:
        value = getattr(slo, name)
        if value is not None:
            if not math.isfinite(value):
                raise ValueError(f"{source}: slo.{name}: must be a finite number of ms (got {value})")
            out[key] = float(value)
    return out
