"""``constant``: every step costs the same (plus an optional per-token term).

A model with no hardware in it: for theory checks (a replica with one request at a time
and a constant step time is an M/D/1 queue) and for timelines worked out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from simulator.cost.shape import COST_MODELS, BatchShape, OpCost, StepTime


class ConstantParams(BaseModel):
    """Parameters of the ``constant`` cost model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["constant"] = "constant"
    step_time_s: float = Field(0.01, gt=0, description="Seconds every step takes.")
    per_token_s: float = Field(0.0, ge=0, description="Extra seconds per token computed in the step.")


@COST_MODELS.register("constant", params=ConstantParams)
class ConstantCostModel:
    """step time = step_time_s + per_token_s x tokens computed."""

    def __init__(
        self, params: ConstantParams, model=None, hardware=None, tp: int = 1, pp: int = 1, ep: int = 1
    ) -> None:
        self.step_time_s = params.step_time_s
        self.per_token_s = params.per_token_s

    def step_time(self, shape: BatchShape) -> StepTime:
        return StepTime(self.step_time_s + self.per_token_s * shape.num_new_tokens)

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        """Decode steps of ``num_seqs`` sequences: the same time whatever the context."""
        t = self.step_time(BatchShape((), (), num_seqs, 0, num_seqs)).total_s
        return [t] * len(context_tokens)

    def breakdown(self, shape: BatchShape) -> StepTime:
        total = self.step_time(shape).total_s
        return StepTime(total, {"cpu_overhead": OpCost(total)})
