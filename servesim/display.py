"""Terminal output: summary tables and progress bars (rich)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

# Wide enough for the comparison tables when output goes to a file or pipe (rich assumes 80).
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
stderr = Console(stderr=True)


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("completed", "Successful requests"),
    ("failed", "Failed requests"),
    ("rejected", "Rejected requests"),
    ("duration", "Duration (s)"),
    ("total_input_tokens", "Total input tokens"),
    ("total_output_tokens", "Total generated tokens"),
    ("request_throughput", "Request throughput (req/s)"),
    ("request_goodput", "Request goodput (req/s)"),
    ("slo_attainment", "SLO attainment"),
    ("output_throughput", "Output token throughput (tok/s)"),
    ("max_output_tokens_per_s", "Peak output token throughput (tok/s)"),
    ("max_concurrent_requests", "Peak concurrent requests"),
    ("total_token_throughput", "Total token throughput (tok/s)"),
    ("preemptions", "Preemptions"),
    ("mean_kv_usage", "Mean KV-cache usage"),
    ("max_kv_usage", "Peak KV-cache usage"),
)
LATENCY_ROWS = (
    ("ttft", "Time to first token"),
    ("tpot", "Time per output token (excl. 1st)"),
    ("itl", "Inter-token latency"),
    ("e2el", "End-to-end latency"),
)


def interval_lines(intervals) -> list[str]:
    """One line per prediction interval: ``mean TPOT 13.3 ms, 80% interval 12.0-22.1 ms (measured runs were
    0.90-1.66x servesim's prediction: vllm, 45 InferenceX points)``."""
    names = {"mean_ttft_ms": "mean TTFT", "mean_tpot_ms": "mean TPOT"}
    return [
        f"{names.get(iv.metric, iv.metric)} {iv.value:,.1f} ms, {iv.level:.0%} interval "
        f"{iv.low:,.1f}-{iv.high:,.1f} ms (measured runs were {iv.low / iv.value:.2f}-{iv.high / iv.value:.2f}x "
        f"servesim's prediction: {iv.basis})"
        for iv in intervals
    ]


def summary_table(summary: Mapping[str, Any], title: str = "servesim run") -> Table:
    """The headline metrics as a two-column table in the spirit of `vllm bench serve`."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in SUMMARY_ROWS:
        if key in summary:
            table.add_row(label, _fmt(summary[key], 3 if "usage" in key or "attainment" in key else 2))
    for key, label in LATENCY_ROWS:
        table.add_section()
        table.add_row(f"[bold]{label} (ms)[/bold]", "")
        for stat in ("mean", "median", "p90", "p99"):
            table.add_row(
                f"  {stat.capitalize() if stat in ('mean', 'median') else stat.upper()}",
                _fmt(summary.get(f"{stat}_{key}_ms")),
            )
    return table


def progress_enabled(enabled: bool) -> bool:
    """Bars are drawn only when asked for (no ``--quiet``) and stderr is a terminal."""
    return enabled and sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(description: str, enabled: bool, eta: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A progress callback ``(done, total)`` drawing a bar on stderr when ``enabled`` and a terminal.

    ``eta`` adds the estimated time left (for bars over sweep points, whose cost is even).
    """
    if not progress_enabled(enabled):
        yield lambda done, total: None
        return
    columns: tuple = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    if eta:
        columns = (*columns, TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield update


@contextlib.contextmanager
def step_progress(description: str, enabled: bool) -> Iterator[Callable[[int, int, str], None]]:
    """A callback ``(done, total, what)`` for work in named steps (report figures, runs of a sweep).

    Draws ``description: what`` with a bar on stderr when ``enabled`` and stderr is a
    terminal; otherwise the callback does nothing. Sweeps call it once per finished run.
    """
    if not progress_enabled(enabled):
        yield lambda done, total, what: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[what]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task(description, total=None, what="")

        def update(done: int, total: int, what: str) -> None:
            progress.update(task, completed=done, total=total, what=what)

        yield update


def table_from_rows(
    title: str, columns: list[tuple[str, str]], rows: list[Mapping[str, Any]], digits: int = 2
) -> Table:
    """A table of ``rows`` showing ``columns`` as (key, header); every column but the first right-aligned."""
    table = Table(title=title, title_justify="left")
    for i, (_, header) in enumerate(columns):
        table.add_column(header, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(_fmt(row.get(key), digits) for key, _ in columns))
    return table


def warn_suspect_profile(profile: Any, source: object) -> None:
    """Say on stderr, one line each, what makes a calibration profile suspect (``CalibrationProfile.warnings``)."""
    for warning in profile.warnings:  # plain lines: a console would wrap them
        print(f"servesim: warning: profile {source} is suspect: {warning}", file=sys.stderr)
