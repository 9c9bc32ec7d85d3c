"""The ``silicon`` cost model: measured kernel tables shipped with servesim (see ``tables`` and ``model``)."""

from simulator.cost.silicon.model import SiliconCostModel, SiliconParams

__all__ = ["SiliconCostModel", "SiliconParams"]
