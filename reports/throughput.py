"""Throughput over time: output and prompt tokens per second, completed and good requests per second.

Output tokens are counted when the engine emits them: every decode token at the end of its
step (steps table) plus every request's first token at ``first_token_s`` (requests table).
A request preempted by recompute samples one more token when its re-prefill completes;
the steps table does not say in which step, so those tokens are counted in the note but
not placed in time.
Prompt tokens are the prefill tokens computed per step (recomputation after a preemption
included). Completions count at ``finished_s``; good completions are those meeting every
SLO (the summary's goodput rule).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.data import RunData
from reports.sampling import rate_per_bin, time_bins
from reports.style import PALETTE, PHASE_COLOURS, add_note, base_layout, empty_figure, style_axes

MAX_BINS = 300
MIN_BINS = 10
REQUESTS_PER_BIN = 50


def throughput_bin_count(num_requests: int) -> int:
    """About ``REQUESTS_PER_BIN`` requests per bin, between ``MIN_BINS`` and ``MAX_BINS`` bins."""
    return int(min(MAX_BINS, max(MIN_BINS, num_requests // REQUESTS_PER_BIN)))


def unplaced_output_tokens(run: RunData) -> int:
    """Generated tokens that are neither a decode token of a step nor a request's first token."""
    generated = int(run.requests["num_generated_tokens"].sum())
    first = int(run.requests["first_token_s"].notna().sum())
    decode = int(run.steps["num_decode_tokens"].sum()) if len(run.steps) else 0
    return generated - first - decode


def throughput_figure(run: RunData) -> go.Figure:
    """Tokens/s (left axis) and requests/s (right axis) per time bin over the whole run."""
    title = "Throughput over time"
    steps = run.steps
    requests = run.requests
    first_tokens = requests["first_token_s"].to_numpy(dtype=np.float64)
    first_tokens = first_tokens[~np.isnan(first_tokens)]
    if len(steps) == 0 and len(first_tokens) == 0:
        return empty_figure(title, "Nothing to plot: no engine step ran and no token was produced.")
    bins = time_bins(run.end_s, throughput_bin_count(len(requests)))
    step_end = (steps["start_s"] + steps["duration_s"]).to_numpy(dtype=np.float64)
    decode = rate_per_bin(step_end, bins, steps["num_decode_tokens"].to_numpy(dtype=np.float64))
    output = decode + rate_per_bin(first_tokens, bins)
    prompt = rate_per_bin(step_end, bins, steps["num_prefill_tokens"].to_numpy(dtype=np.float64))
    finished = run.finished["finished_s"].to_numpy(dtype=np.float64)
    completed = rate_per_bin(finished, bins)
    x = bins.centres_s
    edges = np.stack([bins.edges_s[:-1], bins.edges_s[1:]], axis=1)
    span = "<br>bin %{customdata[0]:,.2f}–%{customdata[1]:,.2f} s<extra></extra>"
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.update_layout(base_layout(title, height_px=420))
    for y, name, colour, dash in (
        (output, "output tokens/s", PHASE_COLOURS["decode"], "solid"),
        (prompt, "prompt tokens/s (prefill)", PHASE_COLOURS["prefill"], "solid"),
    ):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=name,
                mode="lines",
                line={"color": colour, "dash": dash, "shape": "hvh", "width": 1.4},
                customdata=edges,
                hovertemplate=f"{name}: %{{y:,.1f}} tok/s" + span,
            ),
            secondary_y=False,
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=completed,
            name="completed req/s",
            mode="lines",
            line={"color": PALETTE[2], "shape": "hvh", "width": 1.4},
            customdata=edges,
            hovertemplate="completed: %{y:,.2f} req/s" + span,
        ),
        secondary_y=True,
    )
    good = run.meets_slo()
    if good is not None:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=rate_per_bin(finished[good], bins),
                name="good req/s (met SLOs)",
                mode="lines",
                line={"color": PALETTE[3], "dash": "dash", "shape": "hvh", "width": 1.4},
                customdata=edges,
                hovertemplate="good (met every SLO): %{y:,.2f} req/s" + span,
            ),
            secondary_y=True,
        )
    fig.update_yaxes(title_text="tokens/s", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="requests/s", secondary_y=True, rangemode="tozero", showgrid=False)
    fig.update_xaxes(title_text="time (s)")
    style_axes(fig)
    fig.update_yaxes(showgrid=False, secondary_y=True)
    s = run.summary
    note = (
        f"Rates per {bins.width_s:,.3g} s bin ({bins.num_bins} bins). Whole-run averages: "
        f"{s.get('output_throughput') or 0:,.1f} output tok/s, {s.get('request_throughput') or 0:,.2f} req/s"
    )
    if s.get("request_goodput") is not None:
        note += f", goodput {s['request_goodput']:,.2f} req/s"
    note += "."
    unplaced = unplaced_output_tokens(run)
    if unplaced > 0:
        note += (
            f"<br>{unplaced:,} output tokens sampled at the end of re-prefills after preemption are not placed "
            "in time (the steps table does not record which step sampled them)."
        )
    add_note(fig, note)
    return fig
