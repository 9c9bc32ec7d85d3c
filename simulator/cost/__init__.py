"""Cost models: a pure function from a batch shape to seconds.

Importing this package registers the built-in models in ``COST_MODELS``.
"""

from simulator.cost import aiconfigurator, constant, profiled, roofline, silicon  # noqa: F401  (registration side effect)
from simulator.cost.shape import COST_MODELS, OP_NAMES, BatchShape, CostModel, OpCost, StepTime

__all__ = ["COST_MODELS", "OP_NAMES", "BatchShape", "CostModel", "OpCost", "StepTime"]
