"""Statistics of a workload: what `servesim workload describe` prints.

``describe(stream)`` summarises a RequestStream; ``describe_trace(trace)`` a parsed trace,
including a lengths-only one (which has no arrival statistics). Plain dicts of numbers,
ready for JSON.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workloads import hashing
from workloads.stream import RequestStream
from workloads.traces import Trace

PERCENTILES = (50, 90, 99)


def length_stats(values: np.ndarray) -> dict[str, float]:
    """mean, p50, p90, p99 (numpy's linear interpolation), min and max of a length column."""
    if len(values) == 0:
        return {}
    out = {"mean": float(values.mean())}
    for q, v in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True):
        out[f"p{q}"] = float(v)
    out["min"], out["max"] = float(values.min()), float(values.max())
    return out


def arrival_stats(root_arrival_s: np.ndarray) -> dict[str, float | int | None]:
    """Span, mean rate and burstiness of the independent (root) arrivals.

    mean rate = number of arrivals / (last - first arrival), as the traces README counts
    it; burstiness = coefficient of variation (std / mean) of the gaps between
    consecutive arrivals: 1 for Poisson, 0 for evenly spaced, above 1 for bursty.
    """
    n = len(root_arrival_s)
    out: dict[str, float | int | None] = {"num_arrivals": n}
    if n == 0:
        return out
    first, last = float(root_arrival_s[0]), float(root_arrival_s[-1])
    out |= {"first_s": first, "last_s": last, "span_s": last - first}
    out["mean_rate_per_s"] = n / (last - first) if last > first else None
    gaps = np.diff(root_arrival_s)
    out["gap_cv"] = float(gaps.std() / gaps.mean()) if len(gaps) > 1 and gaps.mean() > 0 else None
    return out


def prefix_stats(hash_values: np.ndarray | None, block_tokens: int) -> dict[str, float | int | None] | None:
    """Block references, distinct blocks, and the fraction of references that repeat an earlier
    block: the hit rate of an unbounded prefix cache (an upper bound for a real one)."""
    if hash_values is None:
        return None
    total, distinct = hashing.repeat_stats(hash_values)
    return {
        "block_tokens": block_tokens,
        "num_blocks": total,
        "num_distinct_blocks": distinct,
        "repeat_fraction": (total - distinct) / total if total else None,
    }


def _sessions(session_id: np.ndarray | None) -> dict[str, float | int] | None:
    if session_id is None:
        return None
    labelled = session_id[session_id >= 0]
    if len(labelled) == 0:
        return None
    turns = np.bincount(labelled)
    turns = turns[turns > 0]
    return {
        "num_sessions": len(turns),
        "mean_turns": float(turns.mean()),
        "p50_turns": float(np.percentile(turns, 50)),
        "max_turns": int(turns.max()),
        "num_requests_without_session": int((session_id < 0).sum()),
    }


def _labels(codes: np.ndarray | None, names: tuple[str, ...]) -> dict[str, int] | None:
    if codes is None:
        return None
    counts = np.bincount(codes)
    return {(names[k] if names else str(k)): int(c) for k, c in enumerate(counts) if c}


def _summary(
    prompt: np.ndarray,
    output: np.ndarray,
    root_arrival_s: np.ndarray | None,
    parent: np.ndarray | None,
    think_s: np.ndarray | None,
    session_id: np.ndarray | None,
    hash_values: np.ndarray | None,
    block_tokens: int,
    priority: np.ndarray | None,
    slo: tuple[np.ndarray | None, tuple[str, ...]],
    tenant: tuple[np.ndarray | None, tuple[str, ...]],
    meta: dict[str, Any],
) -> dict[str, Any]:
    dependent = np.zeros(len(prompt), dtype=bool) if parent is None else parent >= 0
    out: dict[str, Any] = {
        "num_requests": len(prompt),
        "num_dependent_requests": int(dependent.sum()),
        "arrivals": None if root_arrival_s is None else arrival_stats(root_arrival_s),
        "prompt_tokens": length_stats(prompt),
        "output_tokens": length_stats(output),
        "sessions": _sessions(session_id),
        "think_s": length_stats(think_s[dependent]) if think_s is not None and dependent.any() else None,
        "prefix_blocks": prefix_stats(hash_values, block_tokens),
        "priority": None,
        "slo_class": _labels(*slo),
        "tenant": _labels(*tenant),
    }
    if priority is not None:
        values, counts = np.unique(priority, return_counts=True)
        out["priority"] = {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)}
    out["meta"] = {k: v for k, v in meta.items() if isinstance(v, (int, float, str))}
    return out


def describe(stream: RequestStream) -> dict[str, Any]:
    """Statistics of a request stream (arrival statistics over its root requests)."""
    roots = stream.arrival_s if stream.parent is None else stream.arrival_s[stream.parent < 0]
    return _summary(
        stream.num_prompt_tokens,
        stream.num_output_tokens,
        roots,
        stream.parent,
        stream.think_s,
        stream.session_id,
        stream.hash_values,
        stream.hash_block_tokens,
        stream.priority,
        (stream.slo_class, stream.slo_class_names),
        (stream.tenant, stream.tenant_names),
        stream.meta,
    )


def describe_trace(trace: Trace) -> dict[str, Any]:
    """Statistics of a parsed trace; a lengths-only trace has ``arrivals`` None."""
    if trace.has_arrivals:
        return describe(trace.to_stream(meta={"source": trace.name, "format": trace.format}))
    stream_like = trace.to_stream(np.zeros(len(trace)), meta={"source": trace.name, "format": trace.format})
    out = describe(stream_like)
    out["arrivals"] = None
    return out
