"""Azure LLM inference traces (2023, and the 2024 week-long files): absolute timestamps.

CSV columns ``TIMESTAMP`` (``YYYY-MM-DD HH:MM:SS.fffffff``, optionally with a UTC offset),
``ContextTokens`` (prompt) and ``GeneratedTokens`` (output); other columns are ignored.
Rows must be sorted by time. Arrival times become seconds since the first kept row.
"""

from __future__ import annotations

import numpy as np

from workloads.traces.files import (
    RowChecker,
    TextSource,
    check_not_empty,
    check_sorted,
    read_csv_table,
    reject_above,
    report_broken,
    require_columns,
    token_column,
)
from workloads.traces.trace import Trace
from workloads.validators import HORIZON, MAX_SECONDS

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def read_azure(source: TextSource, skip_bad_rows: bool = False) -> Trace:
    """Parse an Azure trace; ValueError naming the file and line for a bad row."""
    table = read_csv_table(source)
    require_columns(table, COLUMNS, "Azure")
    check_not_empty(table)
    checker = RowChecker(source.name, table.lines, skip_bad_rows)
    broken = report_broken(table, checker)
    prompt = token_column(table, "ContextTokens", checker, broken)
    output = token_column(table, "GeneratedTokens", checker, broken)
    raw = table.columns["TIMESTAMP"]
    import pandas as pd  # lazily: validating a scenario should not wait for pandas

    stamps = pd.to_datetime(pd.Series(raw, dtype=object), format="ISO8601", utc=True, errors="coerce")
    bad_time = stamps.isna().to_numpy() & ~broken
    checker.reject(bad_time, lambda row: f"TIMESTAMP: not a date and time ({raw[row]!r})")
    good = np.flatnonzero(~checker.bad)
    seconds = np.full(len(table), np.nan)
    if len(good):
        origin = stamps.iloc[int(good[0])]
        seconds[good] = (stamps.iloc[good] - origin).dt.total_seconds().to_numpy()
    reject_above(seconds, (MAX_SECONDS, "s", HORIZON), checker, "TIMESTAMP (time since the first row)")
    check_sorted(seconds, good, checker, "TIMESTAMP")
    keep = checker.finish()
    arrival = seconds[keep] - seconds[keep][0]
    return Trace(
        name=source.name,
        format="azure",
        num_prompt_tokens=prompt[keep],
        num_output_tokens=output[keep],
        arrival_s=arrival,
        num_skipped_rows=int((~keep).sum()),
    )
