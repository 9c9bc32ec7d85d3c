"""Turn a workload config and a seed into a RequestStream."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workloads.arrivals import arrival_times
from workloads.config import WorkloadConfig
from workloads.lengths import draw_lengths
from workloads.rng import Stream, rng_for
from workloads.stream import RequestStream


def generate(cfg: WorkloadConfig, seed: int, base_dir: Path | None = None) -> RequestStream:
    """The requests of ``cfg``; the same config and seed give the same stream, bit for bit.

    Relative file paths in ``cfg`` are resolved against ``base_dir`` (the scenario file's folder).
    """
    times = arrival_times(cfg.arrival, rng_for(seed, Stream.ARRIVALS), cfg.resolved_num_requests, cfg.duration_s)
    prompt, output = draw_lengths(cfg.lengths, len(times), rng_for(seed, Stream.LENGTHS))
    return RequestStream(times.astype(np.float64), prompt, output)
