"""Request timeline (Gantt): a window of consecutive requests and the phases each went through.

Phases from the requests table: queueing (arrival -> first scheduled), prefill (first
scheduled -> first token; re-prefill after a preemption falls inside it and is flagged),
transfer (``transfer_start_s`` -> ``transfer_end_s``, only when the table has those
columns, as disaggregated runs will) and decode (first token, or transfer end, -> finish).
A rejected request shows its wait and a cross at the rejection. The table records no
per-chunk times, so a chunked prefill appears as one bar.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from reports.data import RunData
from reports.style import PHASE_COLOURS, add_note, base_layout, empty_figure, style_axes

MAX_TIMELINE_REQUESTS = 80
TRANSFER_COLUMNS = ("transfer_start_s", "transfer_end_s")


def sample_window(requests: pd.DataFrame, max_requests: int = MAX_TIMELINE_REQUESTS) -> tuple[pd.DataFrame, str]:
    """Up to ``max_requests`` consecutive requests (by arrival) and a sentence saying how they were chosen.

    All requests when they fit. Otherwise the window is centred on the request that waited
    longest for its first token (or for its rejection), where queueing is easiest to see.
    """
    ordered = requests.sort_values(["arrival_s", "request_id"], kind="stable").reset_index(drop=True)
    n = len(ordered)
    if n <= max_requests:
        return ordered, f"all {n:,} requests"
    end = ordered["first_token_s"].fillna(ordered["finished_s"]).to_numpy(dtype=np.float64)
    wait = np.nan_to_num(end - ordered["arrival_s"].to_numpy(dtype=np.float64), nan=-1.0)
    anchor = int(np.argmax(wait))
    lo = min(max(0, anchor - max_requests // 2), n - max_requests)
    window = ordered.iloc[lo : lo + max_requests]
    rid = int(ordered["request_id"].iloc[anchor])
    how = (
        f"{max_requests} consecutive requests of {n:,} (arrival order), centred on request {rid}, "
        "the longest wait for a first token"
    )
    return window, how


def request_timeline_figure(run: RunData, max_requests: int = MAX_TIMELINE_REQUESTS) -> go.Figure:
    """Horizontal bars per phase for a window of requests; hover gives each phase's times in s and ms.

    One bar trace per phase that some request of the window went through, plus a marker
    trace for rejections when there are any.
    """
    title = "Request timeline: queueing, prefill, transfer, decode"
    requests = run.requests
    if len(requests) == 0:
        return empty_figure(title, "The run has no request.")
    window, how = sample_window(requests, max_requests)
    has_transfer = all(c in window.columns for c in TRANSFER_COLUMNS)
    ids = window["request_id"].to_numpy()
    replica = window["replica_id"].to_numpy()
    multi = len({int(r) for r in requests["replica_id"] if int(r) >= 0}) > 1
    labels = [f"req {i}" + (f" · r{r}" if multi and r >= 0 else "") for i, r in zip(ids, replica, strict=True)]
    arrival = window["arrival_s"].to_numpy(dtype=np.float64)
    scheduled = window["first_scheduled_s"].to_numpy(dtype=np.float64)
    first = window["first_token_s"].to_numpy(dtype=np.float64)
    finished = window["finished_s"].to_numpy(dtype=np.float64)
    rejected = (window["status"] == "rejected").to_numpy()
    preempt = window["num_preemptions"].to_numpy()
    queue_end = np.where(rejected, finished, scheduled)
    decode_start = first
    phases: list[tuple[str, np.ndarray, np.ndarray]] = [("queueing", arrival, queue_end), ("prefill", scheduled, first)]
    if has_transfer:
        t0 = window["transfer_start_s"].to_numpy(dtype=np.float64)
        t1 = window["transfer_end_s"].to_numpy(dtype=np.float64)
        phases.append(("transfer", t0, t1))
        decode_start = np.where(np.isnan(t1), first, np.fmax(first, t1))
    phases.append(("decode", decode_start, finished))
    height = 170 + 14 * len(window)
    fig = go.Figure(layout=base_layout(title, height_px=height))
    for name, start, stop in phases:
        ok = ~np.isnan(start) & ~np.isnan(stop)
        if not ok.any():
            continue  # e.g. no request reached prefill: no empty trace
        dur = np.where(ok, stop - start, np.nan)
        note = np.where(preempt > 0, [f"<br>preempted {p}x (re-prefill included)" for p in preempt], "")
        if name != "prefill":
            note = np.full(len(window), "")
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=np.asarray(labels)[ok],
                x=dur[ok],
                base=start[ok],
                name=name,
                marker={"color": PHASE_COLOURS[name], "line": {"width": 0}},
                customdata=np.stack([start[ok], stop[ok], dur[ok] * 1000.0, note[ok]], axis=1),
                hovertemplate=(
                    f"%{{y}}<br>{name}: %{{customdata[2]:,.3f}} ms<br>"
                    "from %{customdata[0]:,.4f} s to %{customdata[1]:,.4f} s%{customdata[3]}<extra></extra>"
                ),
            )
        )
    if rejected.any():
        reasons = window["reject_reason"].astype(str).to_numpy()
        fig.add_trace(
            go.Scatter(
                x=finished[rejected],
                y=np.asarray(labels)[rejected],
                mode="markers",
                marker={"symbol": "x", "size": 10, "color": PHASE_COLOURS["rejected"]},
                name="rejected",
                customdata=reasons[rejected],
                hovertemplate="%{y}<br>rejected at %{x:,.4f} s: %{customdata}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        xaxis_title="time (s)",
        yaxis={
            "autorange": "reversed",
            "type": "category",
            "categoryorder": "array",
            "categoryarray": labels,
            "automargin": True,
        },
    )
    style_axes(fig)
    note = f"Shown: {how}.<br>"
    if not has_transfer:
        note += "No transfer phase in this run (no KV-transfer columns). "
    note += "A chunked prefill appears as one bar (the requests table has no per-chunk times)."
    add_note(fig, note)
    return fig
