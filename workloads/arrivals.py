"""Arrival processes: when requests arrive, in seconds from the start of the schedule."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoissonArrivals(_Frozen):
    """Exponential inter-arrival times at ``rate_per_s`` (vLLM's ``--burstiness 1``)."""

    kind: Literal["poisson"] = "poisson"
    rate_per_s: float = Field(gt=0, description="Mean requests per second.")
    normalize: bool = Field(
        True,
        description="Rescale a fixed number of arrivals so the last lands at N / rate, as "
        "`vllm bench serve` does (ignored for a duration-bounded workload).",
    )


class GammaArrivals(_Frozen):
    """Gamma inter-arrival times with vLLM's burstiness convention.

    shape = burstiness, scale = 1 / (rate x burstiness): the mean gap stays 1 / rate and
    the coefficient of variation is 1 / sqrt(burstiness); burstiness < 1 is burstier than
    Poisson, 1 is Poisson.
    """

    kind: Literal["gamma"] = "gamma"
    rate_per_s: float = Field(gt=0, description="Mean requests per second.")
    burstiness: float = Field(1.0, gt=0, description="Gamma shape; 1 is Poisson, smaller is burstier.")
    normalize: bool = Field(True, description="As for poisson.")


ArrivalConfig = Annotated[PoissonArrivals | GammaArrivals, Field(discriminator="kind")]


def _gaps(cfg: ArrivalConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    if isinstance(cfg, PoissonArrivals):
        return rng.exponential(1.0 / cfg.rate_per_s, size=n)
    return rng.gamma(shape=cfg.burstiness, scale=1.0 / (cfg.rate_per_s * cfg.burstiness), size=n)


def arrival_times(
    cfg: ArrivalConfig, rng: np.random.Generator, num_requests: int | None, duration_s: float | None
) -> np.ndarray:
    """Arrival times of ``num_requests`` requests, or of every request before ``duration_s``.

    Follows `vllm bench serve`: the first request waits one gap too; with ``normalize``
    and a request count the times are scaled so the last one lands at N / rate.
    """
    if num_requests is not None:
        times = np.cumsum(_gaps(cfg, num_requests, rng))
        if cfg.normalize and num_requests > 0 and times[-1] > 0:
            times *= (num_requests / cfg.rate_per_s) / times[-1]
        return times
    assert duration_s is not None
    chunks = []
    last = 0.0
    expected = int(cfg.rate_per_s * duration_s) + 16
    while last <= duration_s:
        times = last + np.cumsum(_gaps(cfg, max(expected // 4, 64), rng))
        chunks.append(times)
        last = float(times[-1])
    times = np.concatenate(chunks)
    return times[times <= duration_s]
