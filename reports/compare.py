"""Comparison figures: latency versus load per variant, and throughput / goodput bars.

Runs sharing a label are one variant; when a variant was run at several request rates
its p50 and p99 (from each run's summary: full data) are drawn against the rate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.cdf import scale_buttons
from reports.data import LATENCY_LONG_NAMES, LATENCY_NAMES, RunData
from reports.style import SLO_COLOUR, ColourMap, add_note, base_layout, empty_figure, style_axes

DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def variants(runs: Sequence[RunData]) -> dict[str, list[RunData]]:
    """Runs grouped by label (first-seen order), each group sorted by offered rate."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        groups.setdefault(run.label, []).append(run)
    for group in groups.values():
        group.sort(key=lambda r: (r.offered_rate_per_s is None, r.offered_rate_per_s or 0.0))
    return groups


def has_load_curves(runs: Sequence[RunData]) -> bool:
    """True when some variant was run at two or more distinct rates."""
    return any(
        len({r.offered_rate_per_s for r in group if r.offered_rate_per_s is not None}) >= 2
        for group in variants(runs).values()
    )


def legend_names(runs: Sequence[RunData]) -> tuple[list[str], list[str]]:
    """Legend name and dash per run: ``label`` alone, or ``label @ R req/s`` with a dash per rate."""
    if not has_load_curves(runs):
        return [r.label for r in runs], ["solid"] * len(runs)
    rates = sorted({r.offered_rate_per_s for r in runs if r.offered_rate_per_s is not None})
    names, dashes = [], []
    for r in runs:
        rate = r.offered_rate_per_s
        names.append(f"{r.label} @ {rate:g} req/s" if rate is not None else r.label)
        dashes.append(DASHES[rates.index(rate) % len(DASHES)] if rate is not None else "solid")
    return names, dashes


def latency_vs_load_figure(runs: Sequence[RunData], metric: str, colours: ColourMap) -> go.Figure:
    """p50 (dashed) and p99 (solid) of ``metric`` against request rate, one pair of lines per variant."""
    name = LATENCY_NAMES[metric]
    title = f"{name} versus load: p50 and p99 of {LATENCY_LONG_NAMES[metric]} (ms)"
    groups = variants(runs)
    fig = go.Figure(layout=base_layout(title, height_px=420))
    for label, group in groups.items():
        pts = [r for r in group if r.offered_rate_per_s is not None]
        rates = np.array([r.offered_rate_per_s for r in pts], dtype=np.float64)
        for q, dash, symbol in ((50, "dash", "circle"), (99, "solid", "square")):
            values = np.array(
                [np.nan if r.percentile_ms(metric, q) is None else r.percentile_ms(metric, q) for r in pts]
            )
            completed = np.array([int(r.summary.get("completed") or 0) for r in pts])
            fig.add_trace(
                go.Scatter(
                    x=rates,
                    y=values,
                    mode="lines+markers",
                    name=f"{label} p{q}",
                    legendgroup=label,
                    line={"color": colours[label], "dash": dash, "width": 2 if q == 99 else 1.5},
                    marker={"symbol": symbol, "size": 7, "color": colours[label]},
                    customdata=completed,
                    hovertemplate=(
                        f"<b>{label}</b><br>rate %{{x:,.4~g}} req/s<br>p{q} {name} = %{{y:,.3f}} ms"
                        "<br>%{customdata:,} requests finished<extra></extra>"
                    ),
                )
            )
    bounds = sorted({r.slo_ms[metric] for r in runs if metric in r.slo_ms})
    for bound in bounds:
        fig.add_hline(
            y=bound,
            line={"color": SLO_COLOUR, "dash": "dash", "width": 1.5},
            annotation={"text": f"SLO {bound:g} ms", "font": {"color": SLO_COLOUR, "size": 11}},
            annotation_position="top left",
        )
    fig.update_layout(
        xaxis_title="request rate (req/s)",
        yaxis_title=f"{name} (ms)",
        updatemenus=scale_buttons("y"),
        legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
        margin={"r": 190},
    )
    fig.update_yaxes(rangemode="tozero")
    style_axes(fig)
    add_note(
        fig,
        "Percentiles from each run's summary (all requests). Rate: the configured arrival rate, "
        "or the measured one when the workload sets none. Dashed p50, solid p99.",
    )
    return fig


def throughput_bars_figure(runs: Sequence[RunData], names: Sequence[str], colours: ColourMap) -> go.Figure:
    """Bars per run, coloured by variant: request throughput, goodput (when any SLO is set), output tok/s.

    One bar trace per panel: throughput and output tokens always, goodput when a run set an SLO.
    """
    title = "Throughput and goodput per variant"
    if not runs:
        return empty_figure(title, "No run to compare.")
    any_slo = any(r.slo_ms for r in runs)
    panels: list[tuple[str, str, list[float], str]] = [
        (
            "request throughput (req/s)",
            "req/s",
            [float(r.summary.get("request_throughput") or 0.0) for r in runs],
            "throughput: %{y:,.3f} req/s",
        )
    ]
    if any_slo:
        panels.append(
            (
                "goodput (req/s meeting every SLO)",
                "req/s",
                [float(r.summary.get("request_goodput") or 0.0) if r.slo_ms else np.nan for r in runs],
                "goodput: %{y:,.3f} req/s<br>SLO attainment %{customdata:.1%}",
            )
        )
    panels.append(
        (
            "output token throughput (tok/s)",
            "tok/s",
            [float(r.summary.get("output_throughput") or 0.0) for r in runs],
            "output: %{y:,.1f} tok/s",
        )
    )
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels], horizontal_spacing=0.07)
    fig.update_layout(base_layout(title, height_px=460))
    fig.update_annotations(font_size=12)
    bar_colours = [colours[r.label] for r in runs]
    attainment = np.array(
        [np.nan if r.summary.get("slo_attainment") is None else r.summary["slo_attainment"] for r in runs],
        dtype=np.float64,
    )
    for col, (panel, unit, values, hover) in enumerate(panels, start=1):
        fig.add_trace(
            go.Bar(
                x=list(names),
                y=values,
                name=panel,
                showlegend=False,
                marker={"color": bar_colours},
                customdata=attainment,
                hovertemplate="%{x}<br>" + hover + "<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(title_text=unit, row=1, col=col, rangemode="tozero")
    fig.update_xaxes(tickangle=-35 if len(runs) > 2 else 0, automargin=False)
    fig.update_layout(margin={"b": 170}, bargap=0.3)
    style_axes(fig)
    note = "Whole-run averages from each summary; bar colour: variant."
    if not any_slo:
        note += " No run set an SLO, so there is no goodput."
    add_note(fig, note)
    return fig
