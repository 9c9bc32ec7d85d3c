"""Token-length distributions: prompt and output lengths per request."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from workloads.datasets import load_length_dataset


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FixedTokens(_Frozen):
    """Every request gets the same length."""

    kind: Literal["fixed"] = "fixed"
    tokens: int = Field(ge=1, description="The length, in tokens.")


class UniformTokens(_Frozen):
    """Integer lengths uniform on [min_tokens, max_tokens]."""

    kind: Literal["uniform"] = "uniform"
    min_tokens: int = Field(ge=1, description="Smallest length, inclusive.")
    max_tokens: int = Field(ge=1, description="Largest length, inclusive.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformTokens:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) exceeds max_tokens ({self.max_tokens})")
        return self


class LognormalTokens(_Frozen):
    """Lengths whose logarithm is normal: median ``median_tokens``, log-space std ``sigma``.

    Rounded to integers and clipped to [min_tokens, max_tokens].
    """

    kind: Literal["lognormal"] = "lognormal"
    median_tokens: float = Field(gt=0, description="Median length, in tokens.")
    sigma: float = Field(ge=0, description="Standard deviation of the log length.")
    min_tokens: int = Field(1, ge=1, description="Lengths below are raised to this.")
    max_tokens: int | None = Field(None, ge=1, description="Lengths above are cut to this.")


TokenDistribution = Annotated[FixedTokens | UniformTokens | LognormalTokens, Field(discriminator="kind")]


class IndependentLengths(_Frozen):
    """Prompt and output lengths drawn independently from their own distributions."""

    kind: Literal["independent"] = "independent"
    prompt: TokenDistribution = Field(description="Distribution of prompt lengths.")
    output: TokenDistribution = Field(description="Distribution of output lengths.")


class DatasetLengths(_Frozen):
    """(prompt, output) pairs sampled jointly, with replacement, from a shipped length dataset."""

    kind: Literal["dataset"] = "dataset"
    name: str = Field("sharegpt", description="A shipped dataset name (see `servesim presets`).")


LengthConfig = Annotated[IndependentLengths | DatasetLengths, Field(discriminator="kind")]


def _draw(dist: TokenDistribution, n: int, rng: np.random.Generator) -> np.ndarray:
    if isinstance(dist, FixedTokens):
        return np.full(n, dist.tokens, dtype=np.int64)
    if isinstance(dist, UniformTokens):
        return rng.integers(dist.min_tokens, dist.max_tokens + 1, size=n, dtype=np.int64)
    values = np.rint(rng.lognormal(np.log(dist.median_tokens), dist.sigma, size=n))
    upper = dist.max_tokens if dist.max_tokens is not None else np.inf
    return np.clip(values, dist.min_tokens, upper).astype(np.int64)


def draw_lengths(cfg: LengthConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of ``n`` requests."""
    if isinstance(cfg, IndependentLengths):
        return _draw(cfg.prompt, n, rng), _draw(cfg.output, n, rng)
    prompt, output = load_length_dataset(cfg.name)
    rows = rng.integers(0, len(prompt), size=n)
    return prompt[rows], output[rows]
