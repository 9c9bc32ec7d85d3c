"""Cost models shared by the analytic bounds of a plan's candidates and replicates (no simulation).

A bound builds its deployment's cost model (reading its tables: about 0.05 s of a bound's 0.13 s) and
prices the same token-row grid for every replicate of a candidate (``bound._rows_lower_bounds``). Step
times are pure functions of the batch shape, so a model shared by every bound of one deployment, and the
rows priced once per model and grid, give the same floats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.build import GroupSetup, make_cost_model
from simulator.cost.shape import CostModel

RowsBounds = tuple[np.ndarray, np.ndarray]


class CostModels:
    """The cost models of a plan's bounds, one per distinct (parameters, model, hardware, tp, pp, ep), and
    what was priced on them. A profiled group's model is never shared."""

    def __init__(self) -> None:
        self._models: dict[tuple[Any, ...], CostModel] = {}
        self._rows: dict[tuple[int, tuple[int, ...]], RowsBounds] = {}

    def model(self, s: GroupSetup) -> CostModel:
        if s.profile is not None:
            return make_cost_model(s.cost_model, s.model, s.hardware, s.tp, s.pp, s.profile, s.ep)
        specs = (s.cost_model, s.model, s.hardware)
        key = (*(x.model_dump_json() for x in specs), s.tp, s.pp, s.ep)
        cost = self._models.get(key)
        if cost is None:
            cost = self._models[key] = make_cost_model(s.cost_model, s.model, s.hardware, s.tp, s.pp, None, s.ep)
        return cost

    def rows(self, cost: CostModel, grid: list[int], price: Callable[[CostModel, list[int]], RowsBounds]) -> RowsBounds:
        """``price(cost, grid)``, once per shared model and grid."""
        if not any(cost is m for m in self._models.values()):
            return price(cost, grid)
        key = (id(cost), tuple(grid))
        if key not in self._rows:
            self._rows[key] = price(cost, grid)
        return self._rows[key]


def cost_model(s: GroupSetup, shared: CostModels | None) -> CostModel:
    """The cost model of group ``s``: ``shared``'s, else a new one."""
    if shared is None:
        return make_cost_model(s.cost_model, s.model, s.hardware, s.tp, s.pp, s.profile, s.ep)
    return shared.model(s)
