"""The report of the N-GPU question (``servesim plan --gpus N``), built from its folder (plan.json, points.parquet).

Sections: the chosen layout with its simulated check and the notes; the Pareto front of
tokens/s/GPU against tokens/s/user (every layout's operating points that meet the SLOs, the
front joined, the checked points and the chosen one marked); the front as a table.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from reports.page import Report, Section, cards_html
from reports.style import add_note, base_layout, empty_figure, style_axes

GPUS_SCHEMA = "servesim.plan-gpus/1"  # simulator.planning.layouts.best's plan.json schema
KIND_COLOURS = {False: "#1f77b4", True: "#ff7f0e"}  # aggregated, disaggregated


def _num(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _chosen_html(plan: dict[str, Any]) -> str:
    c = plan.get("chosen")
    parts = []
    if c is None:
        parts.append("<p><b>No layout was confirmed by simulation to meet the SLOs.</b></p>")
    else:
        parts.append(
            cards_html(
                [
                    ("layout", html.escape(c["layout"])),
                    ("max_num_seqs", str(c["max_num_seqs"])),
                    ("rate (req/s)", _num(c["rate_per_s"], 2)),
                    ("tokens/s/GPU", _num(c["tokens_per_s_per_gpu"])),
                    ("tokens/s/user", _num(c["tokens_per_s_per_user"])),
                    ("simulated p99 TTFT (ms)", _num(c.get("sim_p99_ttft_ms"))),
                    ("simulated p99 TPOT (ms)", _num(c.get("sim_p99_tpot_ms"), 2)),
                ]
            )
        )
    if plan.get("notes"):
        items = "".join(f"<li>{html.escape(n)}</li>" for n in plan["notes"])
        parts.append(f'<div class="notes">Notes<ul>{items}</ul></div>')
    return "".join(parts)


def pareto_gpus_figure(plan: dict[str, Any], points: pd.DataFrame) -> go.Figure:
    """tokens/s/GPU against tokens/s/user: the operating points meeting the SLOs, the front, checks, the choice."""
    title = f"tokens/s/GPU against tokens/s/user on {plan.get('num_gpus')} GPUs (operating points meeting the SLOs)"
    meeting = points[points["meets_slo"]] if len(points) and "meets_slo" in points else points
    if not len(meeting):
        return empty_figure(title, "No layout meets the SLOs: nothing to place on the front.")
    fig = go.Figure(
        layout=base_layout(title, xaxis_title="output tokens/s per user", yaxis_title="output tokens/s per GPU")
    )
    for disaggregated, group in meeting.groupby("disaggregated"):
        fig.add_trace(
            go.Scatter(
                x=group["tokens_per_s_per_user"],
                y=group["tokens_per_s_per_gpu"],
                mode="markers",
                name="disaggregated" if disaggregated else "aggregated",
                marker={"color": KIND_COLOURS[bool(disaggregated)], "size": 6, "opacity": 0.5},
                text=group["layout"] + " at concurrency " + group["concurrency"].astype(str),
                hovertemplate="%{text}<br>%{x:,.1f} tok/s/user<br>%{y:,.1f} tok/s/GPU<extra></extra>",
            )
        )
    front = sorted(plan.get("pareto_front") or [], key=lambda r: r["tokens_per_s_per_user"])
    if front:
        fig.add_trace(
            go.Scatter(
                x=[r["tokens_per_s_per_user"] for r in front],
                y=[r["tokens_per_s_per_gpu"] for r in front],
                mode="lines+markers",
                name="Pareto front",
                line={"color": "#555555", "dash": "dash"},
                text=[r["layout"] for r in front],
                hovertemplate="%{text}<br>%{x:,.1f} tok/s/user<br>%{y:,.1f} tok/s/GPU<extra></extra>",
            )
        )
    checked = plan.get("checked") or []
    if checked:
        fig.add_trace(
            go.Scatter(
                x=[r["tokens_per_s_per_user"] for r in checked],
                y=[r["tokens_per_s_per_gpu"] for r in checked],
                mode="markers",
                name="simulated: met / missed",
                marker={
                    "symbol": ["circle-open" if r.get("sim_meets_slo") else "x-open" for r in checked],
                    "size": 12,
                    "color": ["#2ca02c" if r.get("sim_meets_slo") else "#d62728" for r in checked],
                },
                text=[r["layout"] for r in checked],
                hovertemplate="%{text} (simulated)<extra></extra>",
            )
        )
    chosen = plan.get("chosen")
    if chosen is not None:
        fig.add_trace(
            go.Scatter(
                x=[chosen["tokens_per_s_per_user"]],
                y=[chosen["tokens_per_s_per_gpu"]],
                mode="markers",
                name="chosen",
                marker={"symbol": "star", "size": 18, "color": "#2ca02c"},
                text=[chosen["layout"]],
                hovertemplate="%{text} (chosen)<extra></extra>",
            )
        )
    style_axes(fig)
    add_note(fig, "Analytic operating points (no queueing); circles and crosses: checked by simulation.")
    return fig


def _front_table(plan: dict[str, Any]) -> str:
    heads = ("layout", "max_num_seqs", "concurrency", "TTFT ms", "TPOT ms", "req/s", "tok/s/GPU", "tok/s/user")
    rows = []
    for r in plan.get("pareto_front") or []:
        cells = (
            html.escape(r["layout"]),
            str(r["max_num_seqs"]),
            str(r["concurrency"]),
            _num(r["ttft_ms"]),
            _num(r["tpot_ms"], 2),
            _num(r["rate_per_s"], 2),
            _num(r["tokens_per_s_per_gpu"]),
            _num(r["tokens_per_s_per_user"]),
        )
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def build_gpus_report(plan: dict[str, Any], points: pd.DataFrame) -> Report:
    """The report of an N-GPU question's folder contents."""
    slo = plan.get("slo") or {}
    bounds = ", ".join(
        f"p99 {n.upper()} {slo[f'{n}_p99_ms']:g} ms" for n in ("ttft", "tpot", "e2el") if slo.get(f"{n}_p99_ms")
    )
    subtitle = (
        f"{plan.get('model_name') or 'model'} on {plan.get('num_gpus')} x {plan.get('hardware') or 'GPU'} · "
        f"prompt {plan.get('mean_prompt_tokens', 0):,.0f} / output {plan.get('mean_output_tokens', 0):,.0f} tokens · "
        f"SLOs {bounds or 'none'} · {plan.get('layouts')} layouts, {plan.get('operating_points')} operating points"
    )
    sections = [
        Section("Chosen layout", html=_chosen_html(plan)),
        Section(
            "Pareto front",
            intro="Most output tokens/s per GPU against tokens/s per user (1 / TPOT), over every layout, batch limit "
            "and token budget; the best points checked by simulation in order until one meets the SLOs.",
            figures=[("pareto_gpus", pareto_gpus_figure(plan, points))],
        ),
        Section("The front", html=_front_table(plan)),
    ]
    return Report("servesim plan: the best deployment on N GPUs", subtitle, sections)
