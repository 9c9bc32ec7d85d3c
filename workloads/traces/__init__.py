"""Trace readers: files of recorded requests, named in the catalogue or given by path.

``read_trace(source)`` reads a named trace (``azure-conv``, ``mooncake-conversation``,
``sharegpt-8k-multiturn``, ... see ``TRACE_CATALOG``; old names in ``TRACE_ALIASES`` still
work; the file is found or downloaded by ``workloads.traces.fetch``) or a file (plain or
``.gz``) in one of the formats below, chosen by ``format`` or recognised from the header /
first record:

- ``azure``: Azure LLM inference traces (``TIMESTAMP,ContextTokens,GeneratedTokens``).
- ``vidur``: Vidur / Sarathi-Serve length files (``num_prefill_tokens,num_decode_tokens``,
  optional ``arrived_at`` seconds).
- ``mooncake``: Mooncake JSON lines (``timestamp`` ms, ``input_length``, ``output_length``,
  ``hash_ids`` of 512-token blocks).
- ``agent_rounds``: TraceLab agent sessions (one LLM call per line).
- ``generic``: servesim's own CSV / JSON-lines format (see ``workloads.traces.generic``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from workloads.traces.agent_rounds import read_agent_rounds
from workloads.traces.azure import read_azure
from workloads.traces.catalog import TRACE_ALIASES, TRACE_CATALOG, NamedTrace, canonical_name
from workloads.traces.fetch import trace_path
from workloads.traces.files import (
    RowChecker,
    TextSource,
    check_not_empty,
    read_csv_table,
    read_jsonl_table,
    read_text_source,
    report_broken,
    token_column,
)
from workloads.traces.generic import read_generic
from workloads.traces.mooncake import read_mooncake
from workloads.traces.trace import Trace
from workloads.traces.vidur import read_vidur

FormatName = Literal["auto", "azure", "vidur", "mooncake", "agent_rounds", "generic"]
FORMATS: tuple[str, ...] = get_args(FormatName)[1:]


def _reader(fmt: str, block_tokens: int | None) -> Callable[[TextSource, bool], Trace]:
    if fmt == "azure":
        return read_azure
    if fmt == "vidur":
        return read_vidur
    if fmt == "mooncake":
        return read_mooncake
    if fmt == "agent_rounds":
        return functools.partial(read_agent_rounds, block_tokens=block_tokens)
    assert fmt == "generic", fmt
    return functools.partial(read_generic, block_tokens=block_tokens)


def detect_format(source: TextSource) -> str:
    """The format of a file from its CSV header or first JSON record; ValueError if unrecognised."""
    first = next((line for line in source.text.splitlines() if line.strip()), "")
    if not first:
        raise ValueError(f"{source.name}: line 1: empty file")
    if source.is_jsonl or first.lstrip().startswith("{"):
        try:
            keys = set(json.loads(first))
        except (ValueError, TypeError, RecursionError):  # not JSON, not an object, nested too deeply
            raise ValueError(f"{source.name}: line 1: not a JSON object; cannot tell the trace format") from None
        if {"input_length", "output_length", "hash_ids"} <= keys:
            return "mooncake"
        if {"round_index", "input_tokens_total"} <= keys:
            return "agent_rounds"
        if {"prompt_tokens", "output_tokens"} & keys:
            return "generic"
    else:
        header = {h.strip() for h in first.split(",")}
        if {"TIMESTAMP", "ContextTokens"} <= header:
            return "azure"
        if "num_prefill_tokens" in header:
            return "vidur"
        if {"prompt_tokens", "output_tokens"} & header:
            return "generic"
    raise ValueError(
        f"{source.name}: line 1: cannot tell the trace format from {first[:80]!r}; "
        f"set format to one of {', '.join(FORMATS)}"
    )


def resolve_source(source: str, base_dir: Path | None = None) -> tuple[TextSource, NamedTrace | None]:
    """The text of a named trace (found or downloaded, see ``fetch``) or a file path (relative to ``base_dir``)."""
    source = canonical_name(source)
    if source in TRACE_CATALOG:
        entry = TRACE_CATALOG[source]
        return read_text_source(trace_path(source, entry), display=source), entry
    path = Path(source).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.exists() and "/" not in source and "." not in source:
        raise ValueError(f"unknown trace {source!r}; named: {', '.join(TRACE_CATALOG)} (or give a file path)")
    return read_text_source(path, display=str(path)), None


@functools.lru_cache(maxsize=32)
def _read_named(name: str, fmt: str, skip_bad_rows: bool, block_tokens: int | None) -> Trace:
    source, _ = resolve_source(name)
    trace = _reader(fmt, block_tokens)(source, skip_bad_rows)
    for value in trace.__dataclass_fields__:
        column = getattr(trace, value)
        if isinstance(column, np.ndarray):
            column.flags.writeable = False  # shared by every caller in this process
    return trace


def read_trace(
    source: str,
    format: str = "auto",
    base_dir: Path | None = None,
    skip_bad_rows: bool = False,
    block_tokens: int | None = None,
) -> Trace:
    """Read a trace by catalogue name or path.

    ``format`` is one of ``FORMATS`` or ``auto``; ``skip_bad_rows`` drops bad rows (counted
    in ``num_skipped_rows``) instead of raising; ``block_tokens`` is the prefix-block size
    of a generic file's ``hash_ids`` and of agent-rounds content blocks. Raises ValueError
    naming the file and line for bad input. Named traces are parsed once per process
    (their arrays are read-only).
    """
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"unknown trace format {format!r}; known: auto, {', '.join(FORMATS)}")
    source = canonical_name(source)
    if source in TRACE_CATALOG:
        fmt = TRACE_CATALOG[source].format if format == "auto" else format
        return _read_named(source, fmt, skip_bad_rows, block_tokens)
    text, _ = resolve_source(source, base_dir)
    fmt = detect_format(text) if format == "auto" else format
    return _reader(fmt, block_tokens)(text, skip_bad_rows)


def read_length_column(source: str, column: str, base_dir: Path | None = None) -> np.ndarray:
    """The integer values (each >= 1) of one named column of a CSV or JSON-lines file.

    For any file with a length column, whatever its format; ValueError naming the file
    and line for a missing column, an empty file or a bad value.
    """
    text, _ = resolve_source(source, base_dir)
    jsonl = text.is_jsonl or text.text.lstrip().startswith("{")
    table = read_jsonl_table(text, [column]) if jsonl else read_csv_table(text)
    check_not_empty(table)
    if jsonl and all(v is None for v in table.columns[column]):
        table.columns.pop(column)
    if column not in table.columns:
        have = "" if jsonl else f" (found {', '.join(table.columns)})"
        raise ValueError(f"{text.name}: line 1: no column {column!r}{have}")
    checker = RowChecker(text.name, table.lines, skip=False)
    values = token_column(table, column, checker, report_broken(table, checker))
    checker.finish()
    return values


__all__ = [
    "FORMATS",
    "TRACE_ALIASES",
    "TRACE_CATALOG",
    "FormatName",
    "Trace",
    "canonical_name",
    "detect_format",
    "read_length_column",
    "read_trace",
    "resolve_source",
]
