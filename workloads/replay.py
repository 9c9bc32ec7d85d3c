"""Trace replay: a trace file (catalogue name or path) and the options that shape its replay.

Options apply in this order: read (``skip_bad_rows``), ``window_s`` (trace seconds,
shifted to start at 0), ``num_requests`` with ``sample``, ``time_scale``, ``duration_s``
(replay seconds), then the length caps. A session (a root request and the requests that
depend on it) is kept or dropped whole by the window and the duration, which look at its
first request's arrival. A lengths-only trace (no timestamps) needs ``arrival``; its
rows are then sent at the arrival process's times.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workloads.arrivals import OFFLINE_DURATION, ArrivalConfig, OfflineArrivals, arrival_times
from workloads.classes import RequestClass, assign_classes, check_classes
from workloads.rng import Stream, rng_for
from workloads.stream import RequestStream
from workloads.traces import FormatName, Trace, read_trace
from workloads.validators import MAX_SECONDS, field_error, one_stop_rule


class TraceWorkload(BaseModel):
    """Requests replayed from a trace file.

    Give ``num_requests`` or ``duration_s``, not both; with neither, every request of the
    trace (after the window) is replayed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["trace"] = "trace"
    source: str = Field(
        min_length=1,
        description="A named trace (azure-code, azure-conv, mooncake-conversation, sharegpt-8k-multiturn, "
        "...) or a file path, relative to the scenario file's folder.",
    )
    format: FormatName = Field("auto", description="The file's format (auto: recognised from its header).")
    window_s: tuple[float, float] | None = Field(
        None, description="Keep requests arriving in [start, end) seconds of the trace, shifted to start at 0."
    )
    num_requests: int | None = Field(
        None, ge=1, description="Replay this many requests (see sample); None: every request the trace holds."
    )
    sample: Literal["first", "random"] = Field(
        "first",
        description="first: the first num_requests in trace order; random: whole sessions (or requests) "
        "picked at random until num_requests, keeping their times.",
    )
    time_scale: float = Field(
        1.0, gt=0, description="Replay at this many times the trace's rate (times and think times divided by it)."
    )
    duration_s: float | None = Field(
        None, gt=0, description="Keep requests arriving by this replay time, seconds; None: no time limit."
    )
    max_prompt_tokens: int | None = Field(None, ge=1, description="Cut longer prompts to this length.")
    max_output_tokens: int | None = Field(None, ge=1, description="Cut longer outputs to this length.")
    arrival: ArrivalConfig | None = Field(
        None, description="Arrival process for a lengths-only trace (a trace with timestamps refuses it)."
    )
    hash_block_tokens: int | None = Field(
        None,
        ge=1,
        description="Tokens per prefix block: of a generic file's hash_ids (required with them), and of the "
        "content blocks built for agent-rounds sessions (default 16).",
    )
    skip_bad_rows: bool = Field(
        False, description="Drop bad rows (counted and reported) instead of stopping at the first."
    )
    classes: tuple[RequestClass, ...] | None = Field(
        None, description="Request classes drawn per session (or request); refused if the trace has its own labels."
    )
    sessions_from_prefix_blocks: int | None = Field(
        None,
        ge=1,
        description="For a trace with prefix hashes but no session ids (Mooncake): requests sharing their first "
        "N prefix blocks form one session (Mooncake's block 0 is a system prompt every request shares, so 2 "
        "groups the turns of a conversation). Routers such as session_affinity then see sessions.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_stop_rule(cls, data: Any) -> Any:
        return one_stop_rule(data)

    @field_validator("window_s")
    @classmethod
    def _window(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0 <= value[0] < value[1]:
            raise ValueError(f"window_s must be [start, end) with 0 <= start < end, got {list(value)}")
        return value

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: tuple[RequestClass, ...] | None) -> tuple[RequestClass, ...] | None:
        return check_classes(value)

    @model_validator(mode="after")
    def _offline_has_a_count(self) -> TraceWorkload:
        if isinstance(self.arrival, OfflineArrivals) and self.duration_s is not None:
            raise field_error(
                "TraceWorkload",
                ("duration_s",),
                OFFLINE_DURATION.format(count="num_requests (or neither: every row of the trace)"),
                self.duration_s,
            )
        return self


def generate_trace(cfg: TraceWorkload, seed: int, base_dir: Path | None = None) -> RequestStream:
    """The replayed requests of ``cfg``; random streams SAMPLING, ARRIVALS (lengths-only) and CLASSES."""
    trace = read_trace(cfg.source, cfg.format, base_dir, cfg.skip_bad_rows, cfg.hash_block_tokens)
    meta: dict[str, Any] = {"kind": "trace", "source": trace.name, "format": trace.format}
    if trace.has_arrivals:
        trace, arrival = _replay_timed(cfg, trace, seed)
    else:
        trace, arrival = _replay_lengths_only(cfg, trace, seed)
    trace, meta["num_capped_prompts"], meta["num_capped_outputs"] = _cap(cfg, trace)
    columns = _classes(cfg, trace, seed)
    stream = trace.to_stream(arrival, meta)
    if columns:
        stream = _with_columns(stream, columns)
    if cfg.sessions_from_prefix_blocks is not None:
        stream = sessions_from_prefixes(stream, cfg.sessions_from_prefix_blocks)
    return stream


def sessions_from_prefixes(stream: RequestStream, num_blocks: int) -> RequestStream:
    """Label requests that share their first ``num_blocks`` prefix hashes as one session (ids in first-seen order).

    Hashes are chained, so the hash of block ``num_blocks - 1`` stands for the whole prefix; a
    shorter prompt is keyed by its last block.
    """
    name = stream.meta.get("source", "the trace")
    if stream.session_id is not None:
        raise ValueError(f"{name} has its own session ids; remove sessions_from_prefix_blocks")
    if stream.hash_values is None or stream.hash_offsets is None:
        raise ValueError(f"{name} has no prefix hashes to derive sessions from")
    starts, ends = stream.hash_offsets[:-1], stream.hash_offsets[1:]
    empty = ends == starts
    picks = np.minimum(starts + num_blocks, ends) - 1
    keys = np.where(empty, -1 - np.arange(len(stream)), stream.hash_values[np.maximum(picks, 0)])
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # dense ids in order of first appearance
    return dataclasses.replace(stream, session_id=order[inverse].astype(np.int64))


def _replay_timed(cfg: TraceWorkload, trace: Trace, seed: int) -> tuple[Trace, np.ndarray]:
    if cfg.arrival is not None:
        raise ValueError(
            f"{trace.name} has its own arrival times; remove workload.arrival (to pair its lengths with "
            "an arrival process, use a synthetic workload with lengths: {kind: empirical, source: ...})"
        )
    assert trace.arrival_s is not None
    if cfg.window_s is not None:
        start, end = cfg.window_s
        root_time = trace.arrival_s[trace.group_of()]
        trace = _keep(trace, (root_time >= start) & (root_time < end), f"window_s {list(cfg.window_s)}")
        trace = _replace_arrival(trace, trace.arrival_s - start)  # type: ignore[operator]
    if cfg.num_requests is not None:
        trace = _sample(cfg, trace, seed)
    if cfg.time_scale != 1.0:
        think = None if trace.think_s is None else trace.think_s / cfg.time_scale
        trace = dataclasses.replace(trace, arrival_s=trace.arrival_s / cfg.time_scale, think_s=think)  # type: ignore[operator]
        longest = max(
            float(np.max(trace.arrival_s, initial=0.0)), float(np.max(think, initial=0.0)) if think is not None else 0.0
        )
        if longest > MAX_SECONDS:
            raise ValueError(
                f"workload.time_scale {cfg.time_scale:g}: {trace.name} replayed at that rate runs to {longest:.3g} s, "
                f"more than {MAX_SECONDS:,.0f} s (one year); use a time_scale of at least "
                f"{cfg.time_scale * longest / MAX_SECONDS:.3g}"
            )
    if cfg.duration_s is not None:
        root_time = trace.arrival_s[trace.group_of()]  # type: ignore[index]
        trace = _keep(trace, root_time <= cfg.duration_s, f"duration_s {cfg.duration_s}")
    assert trace.arrival_s is not None
    return trace, trace.arrival_s


def _replay_lengths_only(cfg: TraceWorkload, trace: Trace, seed: int) -> tuple[Trace, np.ndarray]:
    if cfg.arrival is None:
        raise ValueError(
            f"{trace.name} has lengths only (no timestamps); give workload.arrival, "
            "e.g. {kind: poisson, rate_per_s: 5}"
        )
    if cfg.window_s is not None:
        raise ValueError(f"{trace.name} has lengths only; window_s needs timestamps")
    if cfg.time_scale != 1.0:
        raise ValueError(f"{trace.name} has lengths only; time_scale needs timestamps (change the arrival rate)")
    num = cfg.num_requests if cfg.duration_s is None else None
    if num is None and cfg.duration_s is None:
        num = len(trace)
    times = arrival_times(cfg.arrival, rng_for(seed, Stream.ARRIVALS), num, cfg.duration_s)
    if len(times) > len(trace):
        raise ValueError(
            f"{trace.name} has {len(trace):,} rows but {len(times):,} requests were asked for; to draw lengths "
            "with replacement use a synthetic workload with lengths: {kind: empirical, source: ...}"
        )
    if cfg.sample == "first":
        rows = np.arange(len(times))
    else:
        rows = rng_for(seed, Stream.SAMPLING).choice(len(trace), size=len(times), replace=False)
    return trace.select(rows), times


def _sample(cfg: TraceWorkload, trace: Trace, seed: int) -> Trace:
    """``num_requests`` rows: the first ones, or whole random groups (the last one cut short)."""
    n = cfg.num_requests
    assert n is not None
    if n > len(trace):
        raise ValueError(f"{trace.name} holds {len(trace):,} requests (after the window); {n:,} were asked for")
    if cfg.sample == "first":
        return trace.select(np.arange(n))
    group = trace.group_of()
    roots = np.flatnonzero(trace.is_root)
    sizes = np.bincount(np.searchsorted(roots, group), minlength=len(roots))
    order = rng_for(seed, Stream.SAMPLING).permutation(len(roots))
    taken = np.cumsum(sizes[order])
    num_whole = int(np.searchsorted(taken, n, side="right"))
    chosen = np.zeros(len(trace), dtype=bool)
    chosen[np.isin(group, roots[order[:num_whole]])] = True
    missing = n - int(chosen.sum())
    if missing:  # the first `missing` requests of the next group: a group's prefix in index order is closed
        members = np.flatnonzero(group == roots[order[num_whole]])
        chosen[members[:missing]] = True
    return trace.select(np.flatnonzero(chosen))


def _keep(trace: Trace, mask: np.ndarray, what: str) -> Trace:
    if not mask.any():
        raise ValueError(f"{trace.name}: no request left after {what}")
    return trace.select(np.flatnonzero(mask))


def _replace_arrival(trace: Trace, arrival: np.ndarray) -> Trace:
    return dataclasses.replace(trace, arrival_s=arrival)


def _cap(cfg: TraceWorkload, trace: Trace) -> tuple[Trace, int, int]:
    prompt, output = trace.num_prompt_tokens, trace.num_output_tokens
    num_prompt = 0 if cfg.max_prompt_tokens is None else int((prompt > cfg.max_prompt_tokens).sum())
    num_output = 0 if cfg.max_output_tokens is None else int((output > cfg.max_output_tokens).sum())
    if num_prompt or num_output:
        trace = trace.with_lengths(
            np.minimum(prompt, cfg.max_prompt_tokens or prompt.max()),
            np.minimum(output, cfg.max_output_tokens or output.max()),
        )
    return trace, num_prompt, num_output


def _classes(cfg: TraceWorkload, trace: Trace, seed: int) -> dict[str, Any]:
    if cfg.classes is None:
        return {}
    labelled = [c for c in ("priority", "slo_class", "tenant") if getattr(trace, c) is not None]
    if labelled:
        raise ValueError(f"{trace.name} already labels its requests ({', '.join(labelled)}); remove workload.classes")
    _, group = np.unique(trace.group_of(), return_inverse=True)
    return assign_classes(cfg.classes, group, rng_for(seed, Stream.CLASSES))


def _with_columns(stream: RequestStream, columns: dict[str, Any]) -> RequestStream:
    return dataclasses.replace(stream, **columns)
