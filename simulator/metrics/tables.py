"""Assembling a run's result: the request, step and replica tables and the summary.

What the engines measured (the recorder's rows, each engine's KV level monitors, step and
swap counts) becomes a ``RunResult``. The replicas are read through ``ReplicaRecord``, so
this floor needs nothing of the cluster that ran them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from simulator.metrics.monitor import LevelMonitor
from simulator.metrics.recorder import MetricsRecorder
from simulator.metrics.results import RunResult
from simulator.metrics.summary import request_latencies, summarize
from workloads import RequestStream


class _Pool(Protocol):
    @property
    def num_total_blocks(self) -> int: ...


class EngineRecord(Protocol):
    """What one engine measured."""

    @property
    def kv(self) -> _Pool: ...
    @property
    def kv_monitor(self) -> LevelMonitor: ...
    @property
    def cached_monitor(self) -> LevelMonitor: ...
    @property
    def num_steps(self) -> int: ...
    @property
    def num_swaps_out(self) -> int: ...


class ReplicaRecord(Protocol):
    """A replica as its result row reads it."""

    @property
    def replica_id(self) -> int: ...
    @property
    def group(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def engines(self) -> Sequence[EngineRecord]: ...


def per_replica_rows(replicas: Sequence[ReplicaRecord], duration: float) -> list[dict[str, Any]]:
    """One row per replica: its group and role, KV usage and cached share over the run, steps and swaps."""
    rows = []
    for r in replicas:
        total = sum(e.kv.num_total_blocks for e in r.engines)
        rows.append(
            {
                "replica_id": r.replica_id,
                "group": r.group,
                "role": r.role,
                "num_kv_blocks": total,
                "mean_kv_usage": sum(e.kv_monitor.time_average(duration) for e in r.engines) / total,
                "max_kv_usage": sum(e.kv_monitor.max_level for e in r.engines) / total,
                "mean_kv_cached_fraction": sum(e.cached_monitor.time_average(duration) for e in r.engines) / total,
                "num_steps": sum(e.num_steps for e in r.engines),
                "swaps_out": sum(e.num_swaps_out for e in r.engines),
            }
        )
    return rows


def run_result(
    recorder: MetricsRecorder,
    stream: RequestStream,
    replicas: Sequence[ReplicaRecord],
    resolved_config: dict[str, Any],
    slo: dict[str, float | None],
    stream_delay_s: float,
) -> RunResult:
    """The run's tables and summary, from what the recorder and the replicas' engines measured."""
    rec = recorder
    requests = rec.requests_frame()
    lat = request_latencies(requests, stream_delay_s)
    done_rows = np.flatnonzero((requests["status"] == "finished").to_numpy())
    for column in ("ttft_s", "tpot_s", "e2el_s"):  # NaN for requests that did not finish
        values = np.full(len(requests), np.nan)
        values[done_rows] = lat[column].to_numpy()
        requests[column] = values
    ids = requests["request_id"].to_numpy()
    for column in ("priority", "session_id", "parent"):
        values = getattr(stream, column)
        if values is not None:
            requests[column] = values[ids]
    for column, names in (("slo_class", stream.slo_class_names), ("tenant", stream.tenant_names)):
        codes = getattr(stream, column)
        if codes is not None:
            requests[column] = np.asarray(names, dtype=object)[codes[ids]] if names else codes[ids]
    itl_values, itl_counts = rec.itl_pairs()
    duration = float(requests["finished_s"].max()) if len(requests) else 0.0
    per_replica = per_replica_rows(replicas, duration)
    total_blocks = sum(row["num_kv_blocks"] for row in per_replica)
    done = requests[requests["status"] == "finished"]
    prompt_tokens = int(done["num_prompt_tokens"].sum())
    transfers = (done["transfer_end_s"] - done["transfer_start_s"]).dropna().to_numpy()
    extra: dict[str, Any] = {
        "mean_kv_usage": sum(r["mean_kv_usage"] * r["num_kv_blocks"] for r in per_replica) / total_blocks,
        "max_kv_usage": max(r["max_kv_usage"] for r in per_replica),
        "mean_requests_in_system": rec.in_system.time_average(duration),
        "num_steps": sum(r["num_steps"] for r in per_replica),
        "swaps_out": sum(r["swaps_out"] for r in per_replica),
        "num_kv_blocks": total_blocks,
        "num_replicas": len(replicas),
        "prefix_cache_hit_rate_tokens": (int(done["num_cached_tokens"].sum()) / prompt_tokens)
        if prompt_tokens
        else 0.0,
    }
    if len(transfers):
        extra["mean_kv_transfer_ms"] = float(transfers.mean() * 1000)
        extra["p99_kv_transfer_ms"] = float(np.percentile(transfers, 99) * 1000)
    summary = summarize(requests, itl_values, itl_counts, slo, stream_delay_s, extra, rec.token_emissions())
    return RunResult(
        resolved_config,
        summary,
        requests,
        rec.steps_frame(),
        itl_values,
        itl_counts,
        pd.DataFrame(per_replica),
    )
