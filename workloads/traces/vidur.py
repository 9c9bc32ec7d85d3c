"""Vidur / Sarathi-Serve / Etalon length files, and Vidur's processed Splitwise traces.

CSV columns ``num_prefill_tokens`` (prompt) and ``num_decode_tokens`` (output); an
optional ``arrived_at`` column (seconds since the first request, sorted) makes the trace
timed, otherwise it has lengths only. Other columns (``num_total_tokens``, ``pd_ratio``)
are ignored.
"""

from __future__ import annotations

import numpy as np

from workloads.traces.files import (
    RowChecker,
    TextSource,
    check_not_empty,
    check_sorted,
    read_csv_table,
    report_broken,
    require_columns,
    seconds_column,
    token_column,
)
from workloads.traces.trace import Trace

COLUMNS = ("num_prefill_tokens", "num_decode_tokens")
TIME_COLUMN = "arrived_at"


def read_vidur(source: TextSource, skip_bad_rows: bool = False) -> Trace:
    """Parse a Vidur-style CSV; ValueError naming the file and line for a bad row."""
    table = read_csv_table(source)
    require_columns(table, COLUMNS, "Vidur length")
    check_not_empty(table)
    checker = RowChecker(source.name, table.lines, skip_bad_rows)
    broken = report_broken(table, checker)
    prompt = token_column(table, "num_prefill_tokens", checker, broken)
    output = token_column(table, "num_decode_tokens", checker, broken)
    arrival = None
    if TIME_COLUMN in table.columns:
        arrival = seconds_column(table, TIME_COLUMN, checker, broken)
        check_sorted(arrival, np.flatnonzero(~checker.bad), checker, TIME_COLUMN)
    keep = checker.finish()
    return Trace(
        name=source.name,
        format="vidur",
        num_prompt_tokens=prompt[keep],
        num_output_tokens=output[keep],
        arrival_s=None if arrival is None else arrival[keep],
        num_skipped_rows=int((~keep).sum()),
    )
