"""The sweep report, built from a sweep folder (sweep.json, sweep.parquet).

A summary of the sweep, one row per point (its parameters and headline metrics), and, when
the load is one of the varied parameters (the arrival rate, a trace's time scale, a closed
loop's concurrency), p99 TTFT and TPOT against it with one line per combination of the
other parameters; otherwise throughput and p99 TTFT per point.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from reports.data import LATENCY_NAMES
from reports.page import Report, Section, cards_html
from reports.style import ColourMap, add_note, base_layout, empty_figure, style_axes
from simulator.config.files import read_json_object
from simulator.planning.sweeps.sweep import SHOWN_METRICS

RATE = "workload.arrival.rate_per_s"
# the parameters that set a point's load, in the order a report prefers them: (path, axis title, hover unit)
LOAD_AXES = (
    (RATE, "request rate (req/s)", "req/s"),
    ("workload.time_scale", "trace time scale (x the trace's own rate)", "x"),
    ("workload.concurrency", "concurrency (users)", "users"),
)


def load_axis(meta: dict[str, Any], table: pd.DataFrame) -> tuple[str, str, str] | None:
    """(path, axis title, unit) of the first swept load parameter, or None when no load is swept.

    A swept arrival rate of a sessions workload is its session start rate.
    """
    swept = meta.get("parameters", [])
    for path, title, unit in LOAD_AXES:
        if path in swept:
            kinds = set(table["workload_kind"].dropna()) if "workload_kind" in table.columns else set()
            if path == RATE and kinds == {"sessions"}:
                return path, "session start rate (sessions/s)", "sessions/s"
            return path, title, unit
    return None


def _read_sweep(sweep_dir: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    d = Path(sweep_dir)
    if not (d / "sweep.json").is_file():
        raise ValueError(f"{d}: not a sweep folder (no sweep.json)")
    if not (d / "sweep.parquet").is_file():
        raise ValueError(f"{d}: no sweep.parquet yet (an interrupted sweep: run it again to finish it)")
    return read_json_object(d / "sweep.json", "sweep file"), pd.read_parquet(d / "sweep.parquet")


def _fmt(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return f"{value:,.{digits}f}"
    return html.escape(str(value))


def _table(meta: dict[str, Any], table: pd.DataFrame) -> str:
    params = [p for p in meta.get("parameters", []) if p in table.columns]
    metrics = [(k, h, d) for k, h, d in SHOWN_METRICS if k in table.columns]
    heads = ["point", *params, "status", *(h for _, h, _ in metrics)]
    rows = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr>"]
    for _, r in table.iterrows():
        cells = [str(r["point"]), *(html.escape(str(r[p])) for p in params), html.escape(str(r["status"]))]
        cells += [_fmt(r[k], d) for k, _, d in metrics]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "".join(rows) + "</table>"


def _series_label(row: pd.Series, others: list[str]) -> str:
    return " ".join(f"{p}={row[p]}" for p in others) or "all points"


def latency_vs_rate_figure(meta: dict[str, Any], table: pd.DataFrame, metric: str, colours: ColourMap) -> go.Figure:
    """p99 ``metric`` against the swept load, one line per combination of the other parameters."""
    path, axis_title, unit = load_axis(meta, table) or LOAD_AXES[0]
    title = f"p99 {LATENCY_NAMES[metric]} against {axis_title.split(' (')[0]}"
    column = f"p99_{metric}_ms"
    if column not in table.columns:  # no point finished: the table has no metric columns
        return empty_figure(title, "No finished point to plot.")
    ok = table[(table["status"] == "ok") & table[column].notna()]
    if ok.empty:
        return empty_figure(title, "No finished point to plot.")
    others = [p for p in meta.get("parameters", []) if p != path and p in ok.columns]
    fig = go.Figure(layout=base_layout(title, xaxis_title=axis_title, yaxis_title=f"p99 {LATENCY_NAMES[metric]} (ms)"))
    fig.update_yaxes(tickformat=",.4~g")
    for label, rows in ok.groupby(ok.apply(lambda r: _series_label(r, others), axis=1), sort=False):
        rows = rows.sort_values(path)
        fig.add_trace(
            go.Scatter(
                x=rows[path].astype(float),
                y=rows[column],
                mode="lines+markers",
                name=label,
                line={"color": colours[label]},
                hovertemplate=f"<b>{html.escape(label)}</b><br>%{{x:,.4~g}} {unit}<br>p99 {LATENCY_NAMES[metric]} = "
                "%{y:,.3f} ms<extra></extra>",
            )
        )
    style_axes(fig)
    return fig


def per_point_figure(table: pd.DataFrame, colours: ColourMap) -> go.Figure:
    """Output throughput and p99 TTFT of every finished point."""
    title = "Output throughput and p99 TTFT per point"
    ok = table[table["status"] == "ok"]
    if ok.empty:
        return empty_figure(title, "No finished point to plot.")
    labels = [str(v) for v in ok["label"]]
    fig = go.Figure(
        layout=base_layout(
            title, yaxis_title="output tokens/s", yaxis2={"title": "p99 TTFT (ms)", "overlaying": "y", "side": "right"}
        )
    )
    fig.add_trace(
        go.Bar(
            x=labels,
            y=ok["output_throughput"],
            name="output tok/s",
            marker={"color": [colours[x] for x in labels]},
            hovertemplate="%{x}<br>%{y:,.1f} output tok/s<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=ok["p99_ttft_ms"],
            yaxis="y2",
            mode="markers",
            name="p99 TTFT",
            marker={"color": "#222222", "symbol": "diamond"},
            hovertemplate="%{x}<br>p99 TTFT %{y:,.1f} ms<extra></extra>",
        )
    )
    style_axes(fig)
    add_note(fig, "Bars: output throughput (left axis); diamonds: p99 TTFT (right axis).")
    return fig


def build_sweep_report(sweep_dir: Path | str) -> Report:
    """The report of a sweep folder written by ``servesim sweep``."""
    meta, table = _read_sweep(Path(sweep_dir))
    colours = ColourMap()
    cards = [
        ("points", meta.get("num_points")),
        ("errors", meta.get("num_errors")),
        ("run now", meta.get("num_run")),
        ("reused", meta.get("num_skipped")),
        ("executor", meta.get("executor")),
        ("wall s", round(meta.get("wall_s") or 0.0, 1)),
    ]
    summary = cards_html([(k, html.escape(str(v))) for k, v in cards])
    sections = [Section("Sweep", html=summary), Section("Points", html=_table(meta, table))]
    if load_axis(meta, table) is not None:
        figures = [
            ("sweep_ttft", latency_vs_rate_figure(meta, table, "ttft", colours)),
            ("sweep_tpot", latency_vs_rate_figure(meta, table, "tpot", colours)),
        ]
        sections.append(Section("Latency against load", figures=figures, columns=2))
    else:
        sections.append(Section("Per point", figures=[("sweep_points", per_point_figure(table, colours))]))
    subtitle = (
        f"{meta.get('num_points', len(table))} points over {', '.join(meta.get('parameters', [])) or 'no parameter'}"
    )
    return Report("servesim sweep report", subtitle, sections)
