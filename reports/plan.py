"""The capacity-plan report, built from a plan folder (plan.json, points.parquet).

Sections: the chosen configuration and the plan's notes; every candidate ranked, with its
figures and intervals; capacity curves (p99 TTFT and TPOT against the per-replica request
rate, averaged over replicates, with the SLO lines and each candidate's planned maximum);
and cost per hour against the operating point's p99 latency, with the Pareto frontier.
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
from reports.style import SLO_COLOUR, ColourMap, add_note, base_layout, empty_figure, style_axes
from simulator.config.files import read_json_object
from simulator.planning.plans.figures import (
    OPERATING_POINT_COLUMNS,
    candidate_columns,
    candidate_figure_cells,
    figure_text,
)


def _unit(plan: dict[str, Any]) -> str:
    """The unit of the plan's load: req/s, sessions/s or users (plan.json's ``load``; req/s before it existed)."""
    load = plan.get("load")
    return str(load.get("unit", "req/s")) if isinstance(load, dict) else "req/s"


def _read_plan(plan_dir: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """plan.json (its candidates are the report's table) and the simulated points, if any."""
    d = Path(plan_dir)
    if not (d / "plan.json").is_file():
        raise ValueError(f"{d}: not a plan folder (no plan.json)")
    plan = read_json_object(d / "plan.json", "plan file")
    candidates = plan.get("candidates")
    if not isinstance(candidates, list) or not all(isinstance(c, dict) and "name" in c for c in candidates):
        raise ValueError(f"{d / 'plan.json'}: corrupted plan file, no list of named candidates")
    chosen = plan.get("chosen")
    if chosen is not None and chosen not in {c["name"] for c in candidates}:
        raise ValueError(
            f"{d / 'plan.json'}: corrupted plan file, chosen candidate {chosen!r} is not among the candidates"
        )
    points = pd.read_parquet(d / "points.parquet") if (d / "points.parquet").is_file() else pd.DataFrame()
    return plan, points


def _chosen_html(plan: dict[str, Any]) -> str:
    by_name = {c["name"]: c for c in plan["candidates"]}
    parts = []
    chosen = plan.get("chosen")
    if chosen is None:
        parts.append("<p><b>No candidate meets the SLOs at the target rate.</b></p>")
    else:
        c = by_name[chosen]
        op = c.get("operating_point") or {}
        cards = [
            ("chosen", html.escape(chosen)),
            ("hardware", html.escape(str(c.get("hardware_name")))),
            ("replicas", figure_text(c.get("replicas"), 0)),
            ("GPUs", figure_text(c.get("num_gpus"), 0)),
            ("USD per hour", figure_text(c.get("cost_per_hour_usd"))),
            ("USD per M output tokens", figure_text(op.get("cost_per_million_output_tokens_usd"))),
            (f"max {_unit(plan)} per replica", figure_text(c.get("max_rate_per_s"))),
            ("p99 TTFT at target (ms)", figure_text(op.get("p99_ttft_ms"), 1)),
            ("p99 TPOT at target (ms)", figure_text(op.get("p99_tpot_ms"), 2)),
        ]
        parts.append(cards_html(cards))
    if plan.get("notes"):
        items = "".join(f"<li>{html.escape(n)}</li>" for n in plan["notes"])
        parts.append(f'<div class="notes">Notes<ul>{items}</ul></div>')
    return "".join(parts)


def _candidates_table(plan: dict[str, Any], colours: ColourMap) -> str:
    figure_heads = [h for h, _, _ in candidate_columns(_unit(plan)) + OPERATING_POINT_COLUMNS]
    heads = ["candidate", "rank", "status", *figure_heads, "Pareto", "reason"]
    rows = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    order = sorted(plan["candidates"], key=lambda c: (c.get("rank") is None, c.get("rank") or 0, c["name"]))
    for c in order:
        swatch = f'<span class="swatch" style="background:{colours[c["name"]]}"></span>'
        name = html.escape(c["name"]) + (" (chosen)" if c.get("chosen") else "")
        cells = [
            swatch + name,
            "-" if c.get("rank") is None else str(c["rank"]),
            html.escape(c.get("status", "")),
            *(text for _, text in candidate_figure_cells(c)),
            "yes" if c.get("pareto") else "",
            html.escape(c.get("reason") or ""),
        ]
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return "".join(rows) + "</table>"


def _search_html(plan: dict[str, Any]) -> str:
    """Per candidate: its analytic bound, the loads each replicate's search simulated, and why it was pruned."""
    unit = html.escape(_unit(plan))
    heads = ["candidate", "status", f"bound ({unit})", f"estimate ({unit})", "its limit", "loads tried", "requests"]
    rows = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for c in plan["candidates"]:
        search = c.get("search") or {}
        bound = search.get("bound") or {}

        def num(x: Any) -> str:
            return "-" if x is None else f"{x:,.4g}"

        tried = search.get("rates_tried") or []
        tried_text = "<br>".join(
            f"replicate {r}: " + ", ".join(f"{x:,.4g}" for x in rates) for r, rates in enumerate(tried)
        )
        status = c.get("status", "")
        if status == "pruned":
            tried_text = html.escape(c.get("reason") or "") + ("<br>" + tried_text if tried_text else "")
        cells = [
            html.escape(c["name"]),
            html.escape(status),
            num(bound.get("upper_rate_per_s")),
            num(bound.get("estimate_rate_per_s")),
            html.escape(str(bound.get("reason") or "-")),
            tried_text or "-",
            f"{search.get('simulated_requests', 0):,}",
        ]
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return "".join(rows) + "</table>"


def capacity_curve_figure(plan: dict[str, Any], points: pd.DataFrame, metric: str, colours: ColourMap) -> go.Figure:
    """p99 ``metric`` against the per-replica load, one line per candidate, with the SLO and each max load."""
    name = LATENCY_NAMES[metric]
    unit = _unit(plan)
    what = {"users": "users", "sessions/s": "session rate"}.get(unit, "request rate")
    title = f"p99 {name} against {what} per replica"
    column = f"p99_{metric}_ms"
    if points.empty or column not in points:
        return empty_figure(title, "No simulated rates in this plan.")
    fig = go.Figure(
        layout=base_layout(
            title,
            xaxis_title="users per replica" if unit == "users" else f"{what} per replica ({unit})",
            yaxis_title=f"p99 {name} (ms)",
        )
    )
    finite = points[np.isfinite(points[column])]
    if "phase" in finite:  # a pool's own search (``--pd-ratio``) ran another cluster than the candidate's
        finite = finite[~finite["phase"].astype(str).str.startswith("pool_")]
    for c in plan["candidates"]:
        rows = finite[finite["candidate"] == c["name"]]
        if rows.empty:
            continue
        mean = rows.groupby("rate_per_s")[column].mean().sort_index()
        fig.add_trace(
            go.Scatter(
                x=mean.index.to_numpy(),
                y=mean.to_numpy(),
                mode="lines+markers",
                name=c["name"],
                line={"color": colours[c["name"]]},
                legendgroup=c["name"],
                hovertemplate=f"<b>{c['name']}</b><br>%{{x:,.4~g}} {unit} per replica<br>p99 {name} = %{{y:,.3f}} ms"
                "<extra></extra>",
            )
        )
        best = (c.get("max_rate_per_s") or {}).get("value")
        if best:
            fig.add_vline(x=best, line={"color": colours[c["name"]], "dash": "dot", "width": 1})
    slo = (plan.get("slo") or {}).get(f"{metric}_p99_ms")
    if slo is not None:
        fig.add_hline(
            y=slo,
            line={"color": SLO_COLOUR, "dash": "dash"},
            annotation_text=f"SLO {slo:g} ms",
            annotation_position="top left",
        )
    note = (
        "Each point: the mean over replicates of the p99 measured after warm-up (all search and curve rates). "
        "Dotted lines: each candidate's planned maximum rate."
    )
    if slo is not None:
        fig.update_yaxes(range=[0, 3 * slo])  # overloaded rates run off the top: zoom out to read them
        note += f"<br>The axis stops at 3x the SLO ({3 * slo:g} ms); overloaded rates lie above it."
    style_axes(fig)
    add_note(fig, note)
    return fig


def pareto_figure(plan: dict[str, Any], colours: ColourMap) -> go.Figure:
    """Cost per hour against the operating point's p99 latency; the Pareto frontier joined."""
    key = plan.get("pareto_latency", "p99_ttft_ms")  # the operating-point field the frontier uses
    metric = key.removeprefix("p99_").removesuffix("_ms")
    name = LATENCY_NAMES.get(metric, metric)
    title = f"Cost per hour against p99 {name} at the target rate"
    feasible = [c for c in plan["candidates"] if c.get("status") == "feasible" and c.get("operating_point")]
    if not feasible:
        return empty_figure(title, "No feasible candidate: nothing to place on the frontier.")
    fig = go.Figure(
        layout=base_layout(title, xaxis_title=f"p99 {name} at the operating point (ms)", yaxis_title="USD per hour")
    )
    for c in feasible:
        lat = c["operating_point"][key]
        cost = c["cost_per_hour_usd"]
        err_x = (
            None
            if lat.get("low") is None or lat.get("high") is None
            else {
                "type": "data",
                "symmetric": False,
                "array": [lat["high"] - lat["value"]],
                "arrayminus": [lat["value"] - lat["low"]],
            }
        )
        fig.add_trace(
            go.Scatter(
                x=[lat["value"]],
                y=[cost["value"]],
                mode="markers",
                name=c["name"],
                error_x=err_x,
                marker={
                    "color": colours[c["name"]],
                    "size": 16 if c.get("chosen") else 11,
                    "symbol": "star" if c.get("chosen") else "circle",
                },
                hovertemplate=f"<b>{c['name']}</b>{' (chosen)' if c.get('chosen') else ''}<br>p99 {name} = "
                "%{x:,.2f} ms<br>%{y:,.2f} USD/hour<extra></extra>",
            )
        )
    frontier = [next(c for c in feasible if c["name"] == n) for n in plan.get("pareto_frontier", [])]
    if frontier:
        frontier.sort(key=lambda c: c["operating_point"][key]["value"])
        fig.add_trace(
            go.Scatter(
                x=[c["operating_point"][key]["value"] for c in frontier],
                y=[c["cost_per_hour_usd"]["value"] for c in frontier],
                mode="lines",
                name="Pareto frontier",
                line={"color": "#555555", "dash": "dash"},
                hoverinfo="skip",
            )
        )
    style_axes(fig)
    add_note(fig, "Star: the chosen (cheapest feasible) candidate. Error bars: the latency's interval over replicates.")
    return fig


def build_plan_report(plan_dir: Path | str) -> Report:
    """The report of a plan folder written by ``servesim plan`` (``plan --gpus N``: ``plan_gpus``)."""
    from reports.plan_gpus import GPUS_SCHEMA, build_gpus_report

    d = Path(plan_dir)
    if (d / "plan.json").is_file():
        plan = read_json_object(d / "plan.json", "plan file")
        if plan.get("schema") == GPUS_SCHEMA:
            points = pd.read_parquet(d / "points.parquet") if (d / "points.parquet").is_file() else pd.DataFrame()
            return build_gpus_report(plan, points)
    plan, points = _read_plan(d)
    colours = ColourMap(c["name"] for c in plan["candidates"])
    slo = plan.get("slo") or {}
    bounds = ", ".join(
        f"p99 {n.upper()} {slo[f'{n}_p99_ms']} ms"
        for n in ("ttft", "tpot", "e2el")
        if slo.get(f"{n}_p99_ms") is not None
    )
    subtitle = (
        f"target {plan.get('target_rate_per_s', 0):g} {_unit(plan)} · SLOs {bounds or 'none'}, "
        f"attainment {slo.get('attainment')} · "
        f"{len(plan['candidates'])} candidates · {plan.get('replicates', 1)} replicate(s)"
    )
    curves = [("capacity_ttft", "ttft"), ("capacity_tpot", "tpot")]
    if slo.get("e2el_p99_ms") is not None:
        curves.append(("capacity_e2el", "e2el"))
    sections = [
        Section("Chosen configuration", html=_chosen_html(plan)),
        Section(
            "Candidates",
            intro="Ranked by cost per hour; figures are value [low, high] over replicates.",
            html=_candidates_table(plan, colours),
        ),
        Section(
            "Capacity curves",
            intro="Latency against the load one replica carries; a candidate is sized where its curves cross "
            "the SLO lines.",
            figures=[(key, capacity_curve_figure(plan, points, metric, colours)) for key, metric in curves],
            columns=2,
        ),
        Section("Cost against latency", figures=[("pareto", pareto_figure(plan, colours))]),
    ]
    if any("search" in c for c in plan["candidates"]):
        exhaustive = (plan.get("search") or {}).get("exhaustive", False)
        sections.append(
            Section(
                "The search",
                intro=(
                    "The exhaustive search: every candidate, doubling or halving from the start, then bisection."
                    if exhaustive
                    else "Guided search: each candidate starts from its analytic estimate, steered by the margins "
                    "of the runs and its analytic bound (the most one copy can serve, from the cost model's step "
                    "times at its batch and KV limits); later replicates start from the first one's answer; a "
                    "candidate that must cost more than the cheapest feasible deployment (its best case, one copy, "
                    "or loads its replicates miss averaging at most the load its copies must carry) is pruned."
                )
                + f" Requests simulated in all: {plan.get('simulated_requests', 0):,}.",
                html=_search_html(plan),
            )
        )
    return Report("servesim capacity plan", subtitle, sections)
