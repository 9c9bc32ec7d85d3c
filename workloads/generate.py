"""Turn a workload config and a seed into a RequestStream."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workloads.arrivals import arrival_times
from workloads.classes import assign_classes
from workloads.closed_loop import ClosedLoopWorkload, generate_closed_loop
from workloads.config import SyntheticWorkload, WorkloadConfig, WorkloadKind
from workloads.lengths import draw_lengths
from workloads.replay import TraceWorkload, generate_trace
from workloads.rng import Stream, rng_for
from workloads.sessions import SessionWorkload, generate_sessions
from workloads.stream import RequestStream


def generate(cfg: WorkloadConfig | WorkloadKind, seed: int, base_dir: Path | None = None) -> RequestStream:
    """The requests of ``cfg``; the same config and seed give the same stream, bit for bit.

    Relative file paths in ``cfg`` are resolved against ``base_dir`` (the scenario file's
    folder). Raises ValueError for inputs only reading them can reveal (a bad trace row,
    a lengths-only trace without an arrival process, ...).
    """
    kind = cfg.root if isinstance(cfg, WorkloadConfig) else cfg
    if isinstance(kind, TraceWorkload):
        return generate_trace(kind, seed, base_dir)
    if isinstance(kind, SessionWorkload):
        return generate_sessions(kind, seed, base_dir)
    if isinstance(kind, ClosedLoopWorkload):
        return generate_closed_loop(kind, seed, base_dir)
    return generate_synthetic(kind, seed, base_dir)


def generate_synthetic(cfg: SyntheticWorkload, seed: int, base_dir: Path | None = None) -> RequestStream:
    """Independent requests: arrival times (ARRIVALS stream), lengths (LENGTHS), classes (CLASSES)."""
    times = arrival_times(cfg.arrival, rng_for(seed, Stream.ARRIVALS), cfg.resolved_num_requests, cfg.duration_s)
    prompt, output = draw_lengths(cfg.lengths, len(times), rng_for(seed, Stream.LENGTHS), base_dir)
    columns = {}
    if cfg.classes is not None:
        columns = assign_classes(cfg.classes, np.arange(len(times)), rng_for(seed, Stream.CLASSES))
    return RequestStream(times.astype(np.float64), prompt, output, meta={"kind": "synthetic"}, **columns)
