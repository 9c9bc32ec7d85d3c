"""servesim's own trace format, CSV or JSON lines, for traces users write themselves.

Columns (CSV header names, or JSON keys; anything else is refused as a likely typo):

==================  ========  =============================================================
column              required  meaning
==================  ========  =============================================================
``prompt_tokens``   yes       prompt length, integer >= 1
``output_tokens``   yes       output length, integer >= 1
``arrival_s``       no        send time in seconds (>= 0), rows sorted by it; without this
                              column the file has lengths only and needs an arrival process
``session_id``      no        text; rows with the same id form a session, in file order
``think_s``         no        seconds >= 0: the row is sent this long after the previous row
                              of its session completes (leave ``arrival_s`` empty on it)
``hash_ids``        no        prefix block ids, one per ``hash_block_tokens`` tokens of prompt
                              (``ceil(prompt_tokens / hash_block_tokens)`` of them; JSON: a
                              list, CSV: space-separated); two requests share their first k
                              blocks iff their first k ids are equal
``priority``        no        integer, lower is more important
``slo_class``       no        text label, e.g. ``interactive``
``tenant``          no        text label
==================  ========  =============================================================

An optional column, once present, needs a value on every row, except ``session_id``
(empty: no session) and ``arrival_s`` / ``think_s`` (exactly one of the two per row).
"""

from __future__ import annotations

import numpy as np

from workloads.traces.files import (
    RawTable,
    RowChecker,
    TextSource,
    check_not_empty,
    check_sorted,
    int_column,
    is_missing,
    read_csv_table,
    read_jsonl_table,
    report_broken,
    require_columns,
    seconds_column,
    text_column,
    token_column,
)
from workloads.traces.mooncake import read_block_ids
from workloads.traces.trace import Trace, encode_labels, take_ragged

REQUIRED = ("prompt_tokens", "output_tokens")
OPTIONAL = ("arrival_s", "session_id", "think_s", "hash_ids", "priority", "slo_class", "tenant")


def _check_known_columns(table: RawTable) -> None:
    known = set(REQUIRED + OPTIONAL)
    for column, values in table.columns.items():
        if column in known:
            continue
        line = table.header_line or int(table.lines[next(i for i, v in enumerate(values) if v is not None)])
        raise ValueError(
            f"{table.name}: line {line}: unknown column {column!r} (the generic format has "
            f"{', '.join(REQUIRED + OPTIONAL)})"
        )


def read_generic(source: TextSource, skip_bad_rows: bool = False, block_tokens: int | None = None) -> Trace:
    """Parse a generic CSV or JSONL trace; ValueError naming the file and line for a bad row."""
    table = read_jsonl_table(source) if source.is_jsonl else read_csv_table(source)
    check_not_empty(table)
    if not table.header_line:
        for column in REQUIRED:
            table.columns.setdefault(column, [None] * len(table))
    require_columns(table, REQUIRED, "generic")
    _check_known_columns(table)
    has = set(table.columns)
    if "think_s" in has and "arrival_s" not in has:
        raise ValueError(
            f"{source.name}: line 1: a think_s column needs an arrival_s column for the sessions' first rows"
        )
    if "hash_ids" in has and block_tokens is None:
        raise ValueError(f"{source.name}: has hash_ids; set hash_block_tokens (tokens per block) in the workload")
    checker = RowChecker(source.name, table.lines, skip_bad_rows)
    broken = report_broken(table, checker)
    prompt = token_column(table, "prompt_tokens", checker, broken)
    output = token_column(table, "output_tokens", checker, broken)

    arrival = think = None
    dependent = np.zeros(len(table), dtype=bool)
    if "think_s" in has:
        dependent = np.array([not is_missing(v) for v in table.columns["think_s"]]) & ~broken
        think = seconds_column(table, "think_s", checker, broken, optional=~dependent)
    if "arrival_s" in has:
        given = np.array([not is_missing(v) for v in table.columns["arrival_s"]])
        checker.reject(given & dependent, "give arrival_s or think_s, not both")
        arrival = seconds_column(table, "arrival_s", checker, broken, optional=dependent)
    sessions = text_column(table, "session_id", broken) if "session_id" in has else [None] * len(table)
    checker.reject(dependent & np.array([s is None for s in sessions]), "think_s needs a session_id")

    labels: dict[str, list] = {}
    for column in ("slo_class", "tenant"):
        if column in has:
            values = text_column(table, column, broken)
            checker.reject(~broken & np.array([v is None for v in values]), f"{column}: missing value")
            labels[column] = values
    priority = int_column(table, "priority", checker, broken, minimum=None) if "priority" in has else None
    ids = None
    if "hash_ids" in has:
        assert block_tokens is not None
        ids = read_block_ids(table.columns["hash_ids"], prompt, block_tokens, checker, checker.bad.copy(), "hash_ids")
    if arrival is not None:
        check_sorted(arrival, np.flatnonzero(~checker.bad & ~dependent), checker, "arrival_s")

    # A dependent row follows the previous kept row of its session.
    parent = np.full(len(table), -1, dtype=np.int64)
    last_of: dict[str, int] = {}
    orphan = np.zeros(len(table), dtype=bool)
    for i in np.flatnonzero(~checker.bad):
        s = sessions[i]
        if dependent[i]:
            assert s is not None
            if s not in last_of:
                orphan[i] = True
                continue
            parent[i] = last_of[s]
        if s is not None:
            last_of[s] = i
    checker.reject(orphan, lambda row: f"think_s given but no earlier row of session {sessions[row]!r}")
    keep = checker.finish()

    rows = np.flatnonzero(keep)
    new_index = np.full(len(table), -1, dtype=np.int64)
    new_index[rows] = np.arange(len(rows))
    fields: dict = {}
    if "think_s" in has and dependent[rows].any():
        fields["parent"] = np.where(parent[rows] >= 0, new_index[np.maximum(parent[rows], 0)], -1)
        fields["think_s"] = np.where(dependent[rows], think[rows], 0.0)  # type: ignore[index]
    if arrival is not None:
        fields["arrival_s"] = np.where(dependent[rows], np.nan, arrival[rows])
    if any(sessions[i] is not None for i in rows):
        named = [sessions[i] for i in rows]
        codes, _ = encode_labels([s for s in named if s is not None])
        session_id = np.full(len(rows), -1, dtype=np.int64)
        session_id[[k for k, s in enumerate(named) if s is not None]] = codes
        fields["session_id"] = session_id
    for column, values in labels.items():
        codes, names = encode_labels([values[i] for i in rows])
        fields[column], fields[f"{column}_names"] = codes, names
    if priority is not None:
        fields["priority"] = priority[rows]
    if ids is not None:
        assert block_tokens is not None
        fields["block_keys"], fields["block_offsets"] = take_ragged(*ids, rows)
        fields["block_tokens"] = block_tokens
    return Trace(
        name=source.name,
        format="generic",
        num_prompt_tokens=prompt[rows],
        num_output_tokens=output[rows],
        num_skipped_rows=int((~keep).sum()),
        **fields,
    )
