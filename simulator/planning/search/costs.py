"""Cost models shared by the analytic bounds of a plan's candidates and replicates, and by the load points a
process simulates (``search.shared``).

A bound builds its deployment's cost model (reading its tables: about 0.05 s of a bound's 0.13 s) and
prices the same token-row grid for every replicate of a candidate (``bound._rows_lower_bounds``). Step
times are pure functions of the batch shape, so a model shared by every bound of one deployment, and the
rows priced once per model and grid, give the same floats.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.build import GroupSetup, make_cost_model
from simulator.cost.shape import CostModel

RowsBounds = tuple[np.ndarray, np.ndarray]


class CostModels:
    """Cost models kept one per distinct (parameters, model, hardware, tp, pp, ep, attention DP), at most
    ``max_models`` (the least recently used dropped; None: no limit), and what was priced on them. A profiled
    group's model is never kept (it counts its own lookups and fallbacks, which a run reports)."""

    def __init__(self, max_models: int | None = None) -> None:
        self._models: OrderedDict[tuple[Any, ...], CostModel] = OrderedDict()
        self._max_models = max_models
        self._rows: dict[tuple[int, tuple[int, ...]], RowsBounds] = {}

    def make(
        self,
        params: Any,
        model: Any,
        hardware: Any,
        tp: int = 1,
        pp: int = 1,
        profile: Any = None,
        ep: int = 1,
        dp_attention: int = 1,
    ) -> CostModel:
        """``make_cost_model``'s model (same arguments), the one kept for these arguments where there is one."""
        if profile is not None:
            return make_cost_model(params, model, hardware, tp, pp, profile, ep, dp_attention)
        key = (*(x.model_dump_json() for x in (params, model, hardware)), tp, pp, ep, dp_attention)
        cost = self._models.get(key)
        if cost is None:
            cost = self._models[key] = make_cost_model(params, model, hardware, tp, pp, None, ep, dp_attention)
            while self._max_models is not None and len(self._models) > self._max_models:
                _, dropped = self._models.popitem(last=False)
                self._rows = {k: v for k, v in self._rows.items() if k[0] != id(dropped)}
        self._models.move_to_end(key)
        return cost

    def model(self, s: GroupSetup) -> CostModel:
        """Group ``s``'s cost model (its attention-DP layout left aside, as the bounds price a replica)."""
        return self.make(s.cost_model, s.model, s.hardware, s.tp, s.pp, s.profile, s.ep)

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
