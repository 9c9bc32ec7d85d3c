"""Time distributions for think and tool times, in seconds (each draw >= 0).

Every time is at most a year (``workloads.validators.MAX_SECONDS``); an exponential or a
lognormal must keep its 1-in-10^15 tail (34.5 means; median x e^(8 sigma)) within it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from workloads.validators import (
    FINITE,
    MAX_SECONDS,
    TAIL_MEANS,
    PositiveSeconds,
    Seconds,
    lognormal_tail,
    tail_beyond,
)


class _Frozen(BaseModel):
    model_config = FINITE


class FixedSeconds(_Frozen):
    """Always the same time."""

    kind: Literal["fixed"] = "fixed"
    seconds: Seconds = Field(description="The time, seconds.")


class UniformSeconds(_Frozen):
    """Uniform on [min_s, max_s]."""

    kind: Literal["uniform"] = "uniform"
    min_s: Seconds = Field(description="Shortest time, seconds.")
    max_s: Seconds = Field(description="Longest time, seconds.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformSeconds:
        if self.min_s > self.max_s:
            raise ValueError(f"min_s ({self.min_s}) exceeds max_s ({self.max_s})")
        return self


class ExponentialSeconds(_Frozen):
    """Exponential with mean ``mean_s`` (memoryless: a user who may come back at any moment)."""

    kind: Literal["exponential"] = "exponential"
    mean_s: PositiveSeconds = Field(description="Mean time, seconds.")

    @model_validator(mode="after")
    def _tail(self) -> ExponentialSeconds:
        tail = TAIL_MEANS * self.mean_s
        tail_beyond(
            "ExponentialSeconds",
            ("mean_s",),
            self.mean_s,
            tail,
            MAX_SECONDS,
            " s",
            "exponential times",
            "give a smaller mean_s",
        )
        return self


class LognormalSeconds(_Frozen):
    """Lognormal with median ``median_s`` and log-space standard deviation ``sigma`` (heavy right tail)."""

    kind: Literal["lognormal"] = "lognormal"
    median_s: PositiveSeconds = Field(description="Median time, seconds.")
    sigma: float = Field(ge=0, description="Standard deviation of the log time.")

    @model_validator(mode="after")
    def _tail(self) -> LognormalSeconds:
        tail = lognormal_tail(self.median_s, self.sigma)
        tail_beyond(
            "LognormalSeconds",
            ("sigma",),
            self.sigma,
            tail,
            MAX_SECONDS,
            " s",
            "lognormal times",
            "give a smaller sigma or median_s",
        )
        return self


TimeDistribution = Annotated[
    FixedSeconds | UniformSeconds | ExponentialSeconds | LognormalSeconds, Field(discriminator="kind")
]


def draw_seconds(dist: TimeDistribution, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` times in seconds (float64, >= 0)."""
    if isinstance(dist, FixedSeconds):
        return np.full(n, dist.seconds, dtype=np.float64)
    if isinstance(dist, UniformSeconds):
        return rng.uniform(dist.min_s, dist.max_s, size=n)
    if isinstance(dist, ExponentialSeconds):
        return rng.exponential(dist.mean_s, size=n)
    return rng.lognormal(np.log(dist.median_s), dist.sigma, size=n)
