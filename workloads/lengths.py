"""Token-length distributions: prompt and output lengths per request.

A ``TokenDistribution`` draws one kind of length (positive integers): ``fixed``, ``uniform``,
``normal``, ``lognormal``, ``zipf``, ``quantiles`` (a quantile function through given
percentiles) or ``empirical`` (resampled from a column of a file). A ``LengthConfig`` draws
(prompt, output) pairs: ``independent`` (one distribution each), or jointly from a file's rows
(``dataset`` for a named trace, ``empirical`` for any trace name or path), which keeps their
correlation.

Every length is at most ``MAX_TOKENS`` (10**9, see ``workloads.validators``). A ``normal``
or ``lognormal`` without ``max_tokens`` must keep its 1-in-10^15 tail (mean + 8 std; median
x e^(8 sigma)) within that limit, or it is refused (give ``max_tokens`` to cut the tail);
the one draw in more than 10^15 that could still land beyond is cut to the limit.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from workloads.datasets import DEFAULT_LENGTH_DATASET, load_length_dataset
from workloads.traces import FormatName, read_length_column, read_trace
from workloads.validators import FINITE, MAX_TOKENS, TAIL_SIGMAS, MeanTokens, Tokens, lognormal_tail, tail_beyond

MAX_ZIPF_SUPPORT = 10_000_000


class _Frozen(BaseModel):
    model_config = FINITE


class FixedTokens(_Frozen):
    """Every request gets the same length."""

    kind: Literal["fixed"] = "fixed"
    tokens: Tokens = Field(description="The length, in tokens.")


class UniformTokens(_Frozen):
    """Integer lengths uniform on [min_tokens, max_tokens]."""

    kind: Literal["uniform"] = "uniform"
    min_tokens: Tokens = Field(description="Smallest length, inclusive.")
    max_tokens: Tokens = Field(description="Largest length, inclusive.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformTokens:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) exceeds max_tokens ({self.max_tokens})")
        return self


class _Clipped(_Frozen):
    min_tokens: Tokens = Field(1, description="Lengths below are raised to this.")
    max_tokens: Tokens | None = Field(
        None, description="Lengths above are cut to this (None: the tail must stay within 10**9 tokens)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> _Clipped:
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) exceeds max_tokens ({self.max_tokens})")
        if self.max_tokens is None:
            field, value, tail = self._tail()
            tail_beyond(
                type(self).__name__,
                (field,),
                value,
                tail,
                MAX_TOKENS,
                " tokens",
                f"{self.kind} lengths",  # type: ignore[attr-defined]
                f"give max_tokens to cut them, or a smaller {field}",
            )
        return self

    def _tail(self) -> tuple[str, float, float]:
        """(the spread's field, its value, the 1-in-10^15 tail length)."""
        raise NotImplementedError

    def clip(self, values: np.ndarray) -> np.ndarray:
        upper = self.max_tokens if self.max_tokens is not None else MAX_TOKENS
        return np.clip(np.rint(values), self.min_tokens, upper).astype(np.int64)


class NormalTokens(_Clipped):
    """Normal lengths with mean ``mean_tokens`` and standard deviation ``std_tokens``.

    Rounded to integers and clipped to [min_tokens, max_tokens] (clipping moves the
    moments when the bounds are within a few standard deviations of the mean).
    """

    kind: Literal["normal"] = "normal"
    mean_tokens: MeanTokens = Field(description="Mean length, in tokens.")
    std_tokens: float = Field(ge=0, description="Standard deviation, in tokens.")

    def _tail(self) -> tuple[str, float, float]:
        return "std_tokens", self.std_tokens, self.mean_tokens + TAIL_SIGMAS * self.std_tokens


class LognormalTokens(_Clipped):
    """Lengths whose logarithm is normal: median ``median_tokens``, log-space std ``sigma``.

    Rounded to integers and clipped to [min_tokens, max_tokens].
    """

    kind: Literal["lognormal"] = "lognormal"
    median_tokens: MeanTokens = Field(description="Median length, in tokens.")
    sigma: float = Field(ge=0, description="Standard deviation of the log length.")

    def _tail(self) -> tuple[str, float, float]:
        return "sigma", self.sigma, lognormal_tail(self.median_tokens, self.sigma)


class ZipfTokens(_Frozen):
    """A bounded Zipf (power-law) length: P(k) proportional to k ** -exponent on [min_tokens, max_tokens]."""

    kind: Literal["zipf"] = "zipf"
    exponent: float = Field(gt=0, description="Power-law exponent; larger makes short lengths more likely.")
    min_tokens: Tokens = Field(1, description="Smallest length, inclusive.")
    max_tokens: Tokens = Field(description="Largest length, inclusive.")

    @model_validator(mode="after")
    def _bounded(self) -> ZipfTokens:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) exceeds max_tokens ({self.max_tokens})")
        if self.max_tokens - self.min_tokens >= MAX_ZIPF_SUPPORT:
            raise ValueError(f"max_tokens - min_tokens must be below {MAX_ZIPF_SUPPORT:,}")
        return self

    def pmf(self) -> tuple[np.ndarray, np.ndarray]:
        """(support, probabilities)."""
        support = np.arange(self.min_tokens, self.max_tokens + 1, dtype=np.int64)
        weights = support.astype(np.float64) ** -self.exponent
        if not weights.sum() > 0:  # every weight underflowed (a steep exponent): relative to the first
            weights = (support / self.min_tokens) ** -self.exponent
        return support, weights / weights.sum()


class QuantileTokens(_Frozen):
    """Lengths from a quantile function: ``tokens[i]`` is the ``probabilities[i]`` quantile, the log length linear in
    the probability between two knots (a piecewise log-uniform density), rounded.

    A distribution given by its published percentiles: the default scenario's ShareGPT-like lengths are one
    (``workloads.default_lengths``).
    """

    kind: Literal["quantiles"] = "quantiles"
    probabilities: list[float] = Field(
        min_length=2, max_length=1000, description="Cumulative probabilities of the knots, from 0 to 1, increasing."
    )
    tokens: list[Tokens] = Field(
        min_length=2, max_length=1000, description="The length at each probability, non-decreasing."
    )

    @model_validator(mode="after")
    def _knots(self) -> QuantileTokens:
        p, t = self.probabilities, self.tokens
        if len(p) != len(t):
            raise ValueError(f"probabilities ({len(p)}) and tokens ({len(t)}) must have as many entries")
        if p[0] != 0 or p[-1] != 1:
            raise ValueError(f"probabilities must run from 0 to 1 (got {p[0]:g} to {p[-1]:g})")
        if any(b <= a for a, b in itertools.pairwise(p)):
            raise ValueError("probabilities must increase")
        if any(b < a for a, b in itertools.pairwise(t)):
            raise ValueError("tokens must not decrease")
        return self

    def quantile(self, u: np.ndarray) -> np.ndarray:
        """The lengths at cumulative probabilities ``u`` (int64)."""
        log_t = np.interp(u, self.probabilities, np.log(np.asarray(self.tokens, dtype=np.float64)))
        return np.clip(np.rint(np.exp(log_t)), self.tokens[0], self.tokens[-1]).astype(np.int64)


class EmpiricalTokens(_Frozen):
    """Lengths resampled (with replacement) from one column of a file.

    ``column`` is ``prompt`` or ``output`` for any trace servesim reads (catalogue name or
    path, in any of its formats), or the header / key of an integer column of any CSV or
    JSON-lines file.
    """

    kind: Literal["empirical"] = "empirical"
    source: str = Field(description="A named trace (e.g. azure-conv, see `servesim workload list`) or a file path.")
    column: str = Field(description="prompt, output, or the name of a column of the file.")
    format: FormatName = Field("auto", description="Trace format for prompt/output columns (auto: recognised).")


TokenDistribution = Annotated[
    FixedTokens | UniformTokens | NormalTokens | LognormalTokens | ZipfTokens | QuantileTokens | EmpiricalTokens,
    Field(discriminator="kind"),
]


class IndependentLengths(_Frozen):
    """Prompt and output lengths drawn independently from their own distributions."""

    kind: Literal["independent"] = "independent"
    prompt: TokenDistribution = Field(description="Distribution of prompt lengths.")
    output: TokenDistribution = Field(description="Distribution of output lengths.")


class DatasetLengths(_Frozen):
    """(prompt, output) pairs sampled jointly, with replacement, from a named trace (downloaded on first use)."""

    kind: Literal["dataset"] = "dataset"
    name: str = Field(
        DEFAULT_LENGTH_DATASET,
        description="A named trace (see `servesim workload list`; the old name sharegpt still works, with a warning).",
    )


class EmpiricalLengths(_Frozen):
    """(prompt, output) pairs sampled jointly, with replacement, from the rows of any trace."""

    kind: Literal["empirical"] = "empirical"
    source: str = Field(description="A named trace or a trace file path.")
    format: FormatName = Field("auto", description="The file's trace format (auto: recognised from its header).")
    max_total_tokens: Tokens | None = Field(
        None,
        ge=2,
        description="Cut each row to at most this many tokens in all: the prompt to max_total_tokens - 1, then "
        "the output to what is left (Vidur's capping of trace lengths).",
    )


LengthConfig = Annotated[IndependentLengths | DatasetLengths | EmpiricalLengths, Field(discriminator="kind")]


def draw_tokens(dist: TokenDistribution, n: int, rng: np.random.Generator, base_dir: Path | None = None) -> np.ndarray:
    """``n`` lengths (int64, each >= 1) from ``dist``."""
    if isinstance(dist, FixedTokens):
        return np.full(n, dist.tokens, dtype=np.int64)
    if isinstance(dist, UniformTokens):
        return rng.integers(dist.min_tokens, dist.max_tokens + 1, size=n, dtype=np.int64)
    if isinstance(dist, NormalTokens):
        return dist.clip(rng.normal(dist.mean_tokens, dist.std_tokens, size=n))
    if isinstance(dist, LognormalTokens):
        return dist.clip(rng.lognormal(np.log(dist.median_tokens), dist.sigma, size=n))
    if isinstance(dist, QuantileTokens):
        return dist.quantile(rng.random(n))
    if isinstance(dist, ZipfTokens):
        support, p = dist.pmf()
        cdf = np.cumsum(p)
        index = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        return support[np.minimum(index, len(support) - 1)]
    values = _empirical_column(dist, base_dir)
    return values[rng.integers(0, len(values), size=n)]


def _empirical_column(dist: EmpiricalTokens, base_dir: Path | None) -> np.ndarray:
    if dist.column in ("prompt", "output"):
        trace = read_trace(dist.source, dist.format, base_dir)
        return trace.num_prompt_tokens if dist.column == "prompt" else trace.num_output_tokens
    return read_length_column(dist.source, dist.column, base_dir)


def length_pairs(cfg: DatasetLengths | EmpiricalLengths, base_dir: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The (prompt, output) rows a joint length config resamples."""
    if isinstance(cfg, DatasetLengths):
        return load_length_dataset(cfg.name)
    trace = read_trace(cfg.source, cfg.format, base_dir)
    prompt, output = trace.num_prompt_tokens, trace.num_output_tokens
    if cfg.max_total_tokens is not None:
        prompt = np.minimum(prompt, cfg.max_total_tokens - 1)
        output = np.maximum(np.minimum(output, cfg.max_total_tokens - prompt), 1)
    return prompt, output


def draw_lengths(
    cfg: LengthConfig, n: int, rng: np.random.Generator, base_dir: Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of ``n`` requests (int64 arrays)."""
    if isinstance(cfg, IndependentLengths):
        return draw_tokens(cfg.prompt, n, rng, base_dir), draw_tokens(cfg.output, n, rng, base_dir)
    prompt, output = length_pairs(cfg, base_dir)
    rows = rng.integers(0, len(prompt), size=n)
    return prompt[rows], output[rows]
