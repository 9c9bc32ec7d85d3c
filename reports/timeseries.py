"""Engine time series per replica: queue depth, running batch, tokens per step, KV usage, preemptions.

Built from the steps table (one row per engine step, the state recorded after the step)
and the requests table (arrivals, overlaid as a rate). A replica with few steps is drawn
step by step; otherwise steps are grouped into equal time bins and the figure says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.data import RunData
from reports.sampling import DEFAULT_TIME_BINS, TimeBins, binned_level, binned_mean, binned_sum, rate_per_bin, time_bins
from reports.style import ARRIVAL_COLOUR, PALETTE, add_note, base_layout, empty_figure, style_axes

MAX_EXACT_STEPS = 4000  # per replica; above this, steps are binned
ARRIVALS_PER_BIN = 20
KV_CACHED_COLUMN = "num_kv_blocks_cached"


@dataclass(frozen=True, slots=True)
class Series:
    """One quantity drawn per replica: its column, row, how bins summarise it and how it reads."""

    column: str
    name: str
    row: int
    kind: str  # "level" (duration-weighted mean, held when no step), "mean" (per step), "sum" (per bin)
    unit: str
    colour: str
    dash: str = "solid"


SERIES = (
    Series("num_waiting", "waiting", 1, "level", "requests", PALETTE[0]),
    Series("num_running", "running", 2, "level", "requests", PALETTE[2]),
    Series("num_prefill_tokens", "prefill tokens", 3, "mean", "tokens per step", PALETTE[4]),
    Series("num_decode_tokens", "decode tokens", 4, "mean", "tokens per step", PALETTE[0]),
    Series("num_kv_blocks_used", "KV active", 5, "level", "blocks", PALETTE[3]),
    Series(KV_CACHED_COLUMN, "KV cached", 5, "level", "blocks", PALETTE[3], "dot"),
    Series("num_preempted", "preempted", 6, "sum", "requests", PALETTE[1]),
)
ROW_TITLES = (
    "queue depth (waiting requests) and arrival rate (dotted, right axis)",
    "running batch (requests)",
    "prefill tokens per step",
    "decode tokens per step",
    "KV cache usage (solid: active blocks; dotted: cached blocks)",
    "preemptions",
)


def series_for(run: RunData) -> list[Series]:
    """The per-replica series this run's steps table supports (cached KV only when recorded)."""
    return [s for s in SERIES if s.column in run.steps.columns]


def engine_timeseries_figure(run: RunData, max_exact_steps: int = MAX_EXACT_STEPS) -> go.Figure:
    """Six stacked panels sharing the time axis, one set of traces per replica, plus the arrival rate.

    Traces: one per series per replica (``len(series_for(run))`` each) and one arrival rate.
    """
    title = "Engine over time, per replica"
    steps = run.steps
    if len(steps) == 0:
        return empty_figure(title, "No engine step was recorded: no request was ever scheduled.")
    replicas = sorted(int(i) for i in steps["replica_id"].unique())
    end_s = run.end_s
    binned = int(steps["replica_id"].value_counts().max()) > max_exact_steps
    bins = time_bins(end_s, DEFAULT_TIME_BINS)
    arrival_bins = time_bins(end_s, int(np.clip(run.num_requests // ARRIVALS_PER_BIN, 10, 300)))
    fig = make_subplots(
        rows=len(ROW_TITLES),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        subplot_titles=ROW_TITLES,
        specs=[[{"secondary_y": True}]] + [[{}]] * (len(ROW_TITLES) - 1),
    )
    fig.update_layout(base_layout(title, height_px=1150))
    fig.update_annotations(font_size=12)
    series = series_for(run)
    multi = len(replicas) > 1
    for k, rid in enumerate(replicas):
        s = steps[steps["replica_id"] == rid].sort_values("start_s", kind="stable")
        capacity = run.num_kv_blocks(rid)
        for j, spec in enumerate(series):
            colour = PALETTE[k % len(PALETTE)] if multi else spec.colour
            trace = (_binned_trace if binned else _exact_trace)(s, spec, bins, capacity)
            trace.update(
                line={"color": colour, "dash": spec.dash, "width": 1.4},
                legendgroup=f"replica {rid}",
                name=f"replica {rid}" if multi else spec.name,
                showlegend=(j == 0) if multi else True,
            )
            if multi:
                trace.update(hovertemplate=f"<b>replica {rid}</b><br>" + trace.hovertemplate)
            fig.add_trace(trace, row=spec.row, col=1)
    arrivals = run.requests["arrival_s"].to_numpy(dtype=np.float64)
    fig.add_trace(
        go.Scatter(
            x=arrival_bins.centres_s,
            y=rate_per_bin(arrivals, arrival_bins),
            mode="lines",
            line={"color": ARRIVAL_COLOUR, "dash": "dot", "width": 1.2, "shape": "hvh"},
            name="arrival rate (all replicas)",
            customdata=np.stack([arrival_bins.edges_s[:-1], arrival_bins.edges_s[1:]], axis=1),
            hovertemplate=(
                "arrivals: %{y:,.2f} req/s<br>bin %{customdata[0]:,.2f}–%{customdata[1]:,.2f} s<extra></extra>"
            ),
        ),
        row=1,
        col=1,
        secondary_y=True,
    )
    kv_unit = "% of blocks" if all(run.num_kv_blocks(r) for r in replicas) else "blocks"
    for row, label in enumerate(("requests", "requests", "tokens", "tokens", kv_unit, "preempted"), start=1):
        fig.update_yaxes(title_text=label, row=row, col=1, rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="arrivals (req/s)", row=1, col=1, secondary_y=True, rangemode="tozero")
    fig.update_xaxes(title_text="time (s)", row=len(ROW_TITLES), col=1)
    style_axes(fig)
    fig.update_yaxes(showgrid=False, row=1, col=1, secondary_y=True)
    fig.update_layout(
        legend={"orientation": "v", "y": 1, "yanchor": "top", "x": 1.07, "xanchor": "left"},
        margin={"r": 200},
    )
    if binned:
        note = (
            f"Down-sampled: {len(steps):,} steps grouped into {bins.num_bins:,} bins of {bins.width_s:,.3g} s. "
            "Queue, batch and KV: duration-weighted mean per bin (hover: min–max), a bin without a step "
            "keeps the last state;<br>tokens: mean per step of the steps ending in the bin; preemptions: summed "
            f"per bin. Arrival rate: arrivals per {arrival_bins.width_s:,.3g} s bin."
        )
    else:
        note = (
            f"Every engine step plotted ({len(steps):,}), at its end time, with the state recorded after it. "
            f"Arrival rate: arrivals per {arrival_bins.width_s:,.3g} s bin."
        )
    if KV_CACHED_COLUMN not in steps.columns:
        note += "<br>KV: active blocks only (this run's steps table has no cached-block column)."
    add_note(fig, note)
    return fig


def _scale(spec: Series, capacity: int | None) -> tuple[float, str]:
    """KV series become % of the replica's blocks when its capacity is known."""
    if spec.unit == "blocks" and capacity:
        return 100.0 / capacity, "% of blocks"
    return 1.0, spec.unit


def _exact_trace(s: pd.DataFrame, spec: Series, bins: TimeBins, capacity: int | None) -> go.Scatter:
    del bins  # every step is drawn
    t = (s["start_s"] + s["duration_s"]).to_numpy()
    scale, unit = _scale(spec, capacity)
    raw = s[spec.column].to_numpy()
    return go.Scatter(
        x=t,
        y=raw * scale,
        mode="lines",
        line_shape="hv",
        customdata=np.stack([s["duration_s"].to_numpy() * 1000.0, raw], axis=1),
        hovertemplate=(
            "t = %{x:,.4f} s (end of a %{customdata[0]:,.2f} ms step)<br>"
            + f"{spec.name}: %{{y:,.2f}} {unit}"
            + (" (%{customdata[1]:,} blocks)" if unit.startswith("%") else "")
            + "<extra></extra>"
        ),
    )


def _binned_trace(s: pd.DataFrame, spec: Series, bins: TimeBins, capacity: int | None) -> go.Scatter:
    t = (s["start_s"] + s["duration_s"]).to_numpy()
    scale, unit = _scale(spec, capacity)
    values = s[spec.column].to_numpy(dtype=np.float64) * scale
    head = "t = %{x:,.2f} s"
    if spec.kind == "level":
        lv = binned_level(t, s["duration_s"].to_numpy(), values, bins)
        return go.Scatter(
            x=bins.centres_s,
            y=lv.mean,
            mode="lines",
            customdata=np.stack([lv.low, lv.high, lv.count], axis=1),
            hovertemplate=head
            + f" (bin mean)<br>{spec.name}: %{{y:,.2f}} {unit}"
            + " (min %{customdata[0]:,.2f}, max %{customdata[1]:,.2f}; %{customdata[2]:,} steps)<extra></extra>",
        )
    if spec.kind == "mean":
        return go.Scatter(
            x=bins.centres_s,
            y=binned_mean(t, values, bins),
            mode="lines",
            hovertemplate=head + f"<br>{spec.name}: %{{y:,.1f}} {unit} (mean in the bin)<extra></extra>",
        )
    return go.Scatter(
        x=bins.centres_s,
        y=binned_sum(t, values, bins),
        mode="lines",
        line_shape="hvh",
        hovertemplate=head + f"<br>{spec.name}: %{{y:,}} {unit} in the bin<extra></extra>",
    )
