"""The ``silicon`` cost model: the roofline's op decomposition, each op's time from measured kernel tables.

``database`` finds a GPU's tables (NVIDIA's silicon database in the aiconfigurator-core dependency, or a folder
``servesim calibrate`` wrote) and picks the engine's framework and version; ``convert`` derives the arrays
``tables`` interpolates (kept in the user's cache); ``model`` is the cost model.
"""

from simulator.cost.silicon.model import SiliconCostModel, SiliconParams

__all__ = ["SiliconCostModel", "SiliconParams"]
