"""Time distributions for think and tool times, in seconds (each draw >= 0)."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FixedSeconds(_Frozen):
    """Always the same time."""

    kind: Literal["fixed"] = "fixed"
    seconds: float = Field(ge=0, description="The time, seconds.")


class UniformSeconds(_Frozen):
    """Uniform on [min_s, max_s]."""

    kind: Literal["uniform"] = "uniform"
    min_s: float = Field(ge=0, description="Shortest time, seconds.")
    max_s: float = Field(ge=0, description="Longest time, seconds.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformSeconds:
        if self.min_s > self.max_s:
            raise ValueError(f"min_s ({self.min_s}) exceeds max_s ({self.max_s})")
        return self


class ExponentialSeconds(_Frozen):
    """Exponential with mean ``mean_s`` (memoryless: a user who may come back at any moment)."""

    kind: Literal["exponential"] = "exponential"
    mean_s: float = Field(gt=0, description="Mean time, seconds.")


class LognormalSeconds(_Frozen):
    """Lognormal with median ``median_s`` and log-space standard deviation ``sigma`` (heavy right tail)."""

    kind: Literal["lognormal"] = "lognormal"
    median_s: float = Field(gt=0, description="Median time, seconds.")
    sigma: float = Field(ge=0, description="Standard deviation of the log time.")


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
