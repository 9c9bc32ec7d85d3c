"""The workload part of a scenario: how many requests, when they arrive, how long they are."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workloads.arrivals import ArrivalConfig, PoissonArrivals
from workloads.lengths import DatasetLengths, LengthConfig

DEFAULT_NUM_REQUESTS = 1000
# Llama-3.1-8B on one H100 with ShareGPT lengths saturates near 6.7 requests/s under the
# roofline model; 5 keeps it busy (about 75% load) but stable.
DEFAULT_RATE_PER_S = 5.0


class WorkloadConfig(BaseModel):
    """A synthetic workload: an arrival process and a length distribution.

    Give ``num_requests`` or ``duration_s`` (arrivals before that time), not both;
    with neither, ``num_requests`` is 1000.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_requests: int | None = Field(None, ge=1, description="How many requests arrive.")
    duration_s: float | None = Field(None, gt=0, description="Arrivals stop at this time, seconds.")
    arrival: ArrivalConfig = Field(
        default_factory=lambda: PoissonArrivals(rate_per_s=DEFAULT_RATE_PER_S), description="The arrival process."
    )
    lengths: LengthConfig = Field(default_factory=DatasetLengths, description="Prompt and output lengths.")

    @model_validator(mode="before")
    @classmethod
    def _one_stop_rule(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("num_requests") is not None and data.get("duration_s") is not None:
            raise ValueError("give num_requests or duration_s, not both")
        return data

    @property
    def resolved_num_requests(self) -> int | None:
        """The request count, or None when the workload is bounded by duration."""
        if self.duration_s is not None:
            return None
        return self.num_requests if self.num_requests is not None else DEFAULT_NUM_REQUESTS
