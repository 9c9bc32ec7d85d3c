"""Latency CDFs (TTFT, TPOT, ITL, E2E) of one run or of several overlaid, with SLO lines.

Curves are down-sampled (``sampling.cdf_curve``); the percentile markers come from the
run's summary, which was computed from every value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from reports.data import LATENCY_LONG_NAMES, LATENCY_NAMES, RunData
from reports.sampling import DEFAULT_CDF_POINTS, cdf_curve
from reports.style import SLO_COLOUR, ColourMap, add_note, base_layout, empty_figure, style_axes

MARKED_PERCENTILES = (50, 90, 99)
UNIT_OF = {"ttft": "requests", "tpot": "requests", "itl": "token gaps", "e2el": "requests"}
HOVER_NOUN = {
    "ttft": "requests",
    "tpot": "requests with more than one token",
    "itl": "token gaps",
    "e2el": "requests",
}


def scale_buttons(axis: str = "x") -> list[dict]:
    """Buttons above the plot's top-right corner switching ``axis`` between linear and log."""
    return [
        {
            "type": "buttons",
            "direction": "left",
            "x": 1,
            "y": 1.04,
            "xanchor": "right",
            "yanchor": "bottom",
            "pad": {"r": 4, "t": 0},
            "showactive": True,
            "buttons": [
                {"label": f"linear {axis}", "method": "relayout", "args": [{f"{axis}axis.type": "linear"}]},
                {"label": f"log {axis}", "method": "relayout", "args": [{f"{axis}axis.type": "log"}]},
            ],
        }
    ]


def _slo_lines(fig: go.Figure, metric: str, runs: Sequence[RunData]) -> list[float]:
    bounds = sorted({r.slo_ms[metric] for r in runs if metric in r.slo_ms})
    for bound in bounds:
        fig.add_vline(
            x=bound,
            line={"color": SLO_COLOUR, "dash": "dash", "width": 1.5},
            annotation={"text": f"SLO {bound:g} ms", "font": {"color": SLO_COLOUR, "size": 11}},
            annotation_position="bottom right",
        )
    return bounds


def latency_cdf_figure(
    runs: Sequence[RunData],
    metric: str,
    colours: ColourMap,
    names: Sequence[str] | None = None,
    dashes: Sequence[str] | None = None,
    max_points: int = DEFAULT_CDF_POINTS,
) -> go.Figure:
    """The CDF of ``metric`` for each run (one line each), with the SLO bound when one was set.

    With a single run, a second trace marks p50/p90/p99 (from the summary: full data).
    ``names`` are legend names (default: run labels); ``dashes`` line dash per run.
    Runs without any value of the metric are left out and named in the note.
    """
    title = f"{LATENCY_NAMES[metric]} CDF: {LATENCY_LONG_NAMES[metric]} (ms)"
    names = list(names) if names is not None else [r.label for r in runs]
    curves = []
    missing = []
    for i, run in enumerate(runs):
        values_s, counts = run.latency_values_s(metric)
        curve = cdf_curve(values_s * 1000.0, counts, max_points)
        if curve.num_values == 0:
            missing.append(names[i])
        else:
            curves.append((i, run, curve))
    if not curves:
        why = "no finished request" if metric != "tpot" else "no finished request with more than one output token"
        if metric == "itl":
            why = "no request produced two tokens"
        fig = empty_figure(title, f"Nothing to plot: {why}.")
        return fig
    fig = go.Figure(layout=base_layout(title, height_px=360))
    fig.update_layout(legend={"orientation": "v", "x": 0.99, "xanchor": "right", "y": 0.04, "yanchor": "bottom"})
    fig.update_layout(legend_bgcolor="rgba(255,255,255,0.8)")
    noun = UNIT_OF[metric]
    for i, run, curve in curves:
        fig.add_trace(
            go.Scatter(
                x=curve.x,
                y=curve.fraction,
                mode="lines" if len(curve.x) > 1 else "markers",
                line={"color": colours[run.label], "shape": "hv", "dash": dashes[i] if dashes else "solid"},
                marker={"color": colours[run.label], "size": 8},
                name=names[i],
                hovertemplate=(
                    f"<b>{names[i]}</b><br>{LATENCY_NAMES[metric]} = %{{x:,.3f}} ms<br>"
                    f"%{{y:.2%}} of {HOVER_NOUN[metric]} at or below<extra></extra>"
                ),
            )
        )
    if len(runs) == 1:
        run = runs[0]
        qs = [q for q in MARKED_PERCENTILES if run.percentile_ms(metric, q) is not None]
        xs = [run.percentile_ms(metric, q) for q in qs]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[q / 100 for q in qs],
                mode="markers+text",
                text=[f"p{q}" for q in qs],
                textposition="middle left",
                marker={"symbol": "diamond", "size": 9, "color": "#222222"},
                name="percentiles (all data)",
                customdata=np.array(qs),
                hovertemplate=(
                    f"p%{{customdata}} {LATENCY_NAMES[metric]} = %{{x:,.3f}} ms (from all values)<extra></extra>"
                ),
            )
        )
    _slo_lines(fig, metric, runs)
    fig.update_layout(
        xaxis_title=f"{LATENCY_NAMES[metric]} (ms)",
        yaxis_title=f"fraction of {noun}",
        yaxis={"range": [0, 1.02], "tickformat": ".0%"},
        updatemenus=scale_buttons("x"),
    )
    style_axes(fig)
    if len(curves) == 1:
        note = f"Plotted: {curves[0][2].method}."
    else:
        how = (
            "every distinct value"
            if all(c.exact for _, _, c in curves)
            else f"at most {max_points:,} points at evenly spaced ranks of all values, each on the exact CDF"
        )
        sizes = {c.num_values for _, _, c in curves}
        size = f"{sizes.pop():,} values each" if len(sizes) == 1 else "value counts differ per run"
        note = f"Plotted per curve: {how} ({size})."
    if missing:
        note += f" No values for: {', '.join(missing)}."
    add_note(fig, note)
    return fig
