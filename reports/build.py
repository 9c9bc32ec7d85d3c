"""Build and write the run report and the comparison report.

Both read runs through ``reports.data.load_run`` (a run folder, a ``RunResult`` or a
``RunData``), so callers hand over result tables, never live simulator objects.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import plotly.graph_objects as go

from reports.breakdown import breakdown_figure
from reports.cdf import latency_cdf_figure
from reports.compare import has_load_curves, latency_vs_load_figure, legend_names, throughput_bars_figure
from reports.data import LATENCY_NAMES, RunData, RunLike, default_labels, load_run
from reports.headline import comparison_table_html, run_headline_html, scenario_line, what_happened
from reports.page import PlotlyJs, Report, Section, write_html
from reports.static import export_figures
from reports.style import ColourMap
from reports.throughput import throughput_figure
from reports.timeline import request_timeline_figure
from reports.timeseries import engine_timeseries_figure

ProgressFn = Callable[[int, int, str], None]
StaticFormat = Literal["png", "svg"]

RUN_FIGURES = (
    "ttft_cdf",
    "tpot_cdf",
    "itl_cdf",
    "e2el_cdf",
    "engine_timeseries",
    "throughput",
    "request_timeline",
    "step_breakdown",
)


def _tick(progress: ProgressFn | None, done: int, total: int, what: str) -> None:
    if progress is not None:
        progress(done, total, what)


def build_run_report(run: RunLike | RunData, label: str | None = None, progress: ProgressFn | None = None) -> Report:
    """The run report of one run: headline, latency CDFs, engine time series, throughput, timeline, breakdown."""
    data = load_run(run, label)
    colours = ColourMap([data.label])
    total = len(RUN_FIGURES)
    figures: dict[str, go.Figure] = {}
    builders: list[tuple[str, Callable[[], go.Figure]]] = [
        *((f"{m}_cdf", lambda m=m: latency_cdf_figure([data], m, colours)) for m in LATENCY_NAMES),
        ("engine_timeseries", lambda: engine_timeseries_figure(data)),
        ("throughput", lambda: throughput_figure(data)),
        ("request_timeline", lambda: request_timeline_figure(data)),
        ("step_breakdown", lambda: breakdown_figure(data)),
    ]
    for i, (name, make) in enumerate(builders):
        _tick(progress, i, total, name)
        figures[name] = make()
    _tick(progress, total, total, "done")
    where = f" · {html.escape(str(data.source))}" if data.source is not None else ""
    sections = [
        Section("Summary", html=run_headline_html(data)),
        Section(
            "Latency distributions",
            intro="Empirical CDFs of every finished request (ITL: every gap between two tokens). "
            "Dashed red lines: SLO bounds from the scenario.",
            figures=[(f"{m}_cdf", figures[f"{m}_cdf"]) for m in LATENCY_NAMES],
            columns=2,
        ),
        Section(
            "Engine over time",
            intro="What each replica was doing, step by step, with the arrival rate for reference.",
            figures=[("engine_timeseries", figures["engine_timeseries"]), ("throughput", figures["throughput"])],
        ),
        Section(
            "Request timeline",
            intro="Where a sample of requests spent their time.",
            figures=[("request_timeline", figures["request_timeline"])],
        ),
        Section(
            "Where step time goes",
            intro="The run's cost model, op by op, on the step shapes of this run.",
            figures=[("step_breakdown", figures["step_breakdown"])],
        ),
    ]
    return Report(f"servesim run report: {data.label}", scenario_line(data) + where, sections)


def build_comparison_report(
    runs: Sequence[RunLike | RunData], labels: Sequence[str] | None = None, progress: ProgressFn | None = None
) -> Report:
    """Variants overlaid: summary table, CDFs, latency versus load (when several rates), throughput bars.

    ``labels`` name each run's variant (runs sharing a label at different rates form one
    load curve); by default the policy name, or the run folder's name when two runs would
    otherwise share a policy and a rate.
    """
    if not runs:
        raise ValueError("a comparison needs at least one run")
    loaded = [load_run(r) for r in runs]
    if labels is None:
        labels = default_labels(loaded)
    if len(labels) != len(loaded):
        raise ValueError(f"{len(labels)} labels given for {len(loaded)} runs")
    data = [load_run(r, lab) for r, lab in zip(loaded, labels, strict=True)]
    colours = ColourMap(r.label for r in data)
    names, dashes = legend_names(data)
    curves = has_load_curves(data)
    steps = [f"{m}_cdf" for m in LATENCY_NAMES] + (["ttft_vs_load", "tpot_vs_load"] if curves else []) + ["bars"]
    total = len(steps)
    figures: dict[str, go.Figure] = {}
    for i, name in enumerate(steps):
        _tick(progress, i, total, name)
        if name.endswith("_cdf"):
            figures[name] = latency_cdf_figure(data, name.removesuffix("_cdf"), colours, names, dashes)
        elif name.endswith("_vs_load"):
            figures[name] = latency_vs_load_figure(data, name.removesuffix("_vs_load"), colours)
        else:
            figures[name] = throughput_bars_figure(data, names, colours)
    _tick(progress, total, total, "done")
    notes = []
    for run, name in zip(data, names, strict=True):
        notes += [f"<b>{html.escape(name)}</b>: {n}" for n in what_happened(run)]
    notes_html = (
        '<div class="notes"><b>What happened</b><ul>' + "".join(f"<li>{n}</li>" for n in notes) + "</ul></div>"
        if notes
        else ""
    )
    load_section = (
        Section(
            "Latency versus load",
            intro="p50 and p99 against the request rate, per variant; dashed red lines: SLO bounds.",
            figures=[("ttft_vs_load", figures["ttft_vs_load"]), ("tpot_vs_load", figures["tpot_vs_load"])],
        )
        if curves
        else Section(
            "Latency versus load",
            intro="Each variant ran at a single request rate, so there is no curve to draw; "
            "run variants at several rates to see latency against load.",
        )
    )
    sections = [
        Section("Summary", html=comparison_table_html(data, names, colours) + notes_html),
        Section(
            "Latency distributions",
            intro="Empirical CDFs per run, overlaid. Dashed red lines: SLO bounds.",
            figures=[(f"{m}_cdf", figures[f"{m}_cdf"]) for m in LATENCY_NAMES],
            columns=2,
        ),
        load_section,
        Section("Throughput and goodput", figures=[("bars", figures["bars"])]),
    ]
    variants_text = ", ".join(dict.fromkeys(r.label for r in data))
    subtitle = html.escape(
        f"{len(data)} runs · variants: {variants_text} · {data[0].model_name} on {data[0].hardware_name}"
    )
    return Report("servesim comparison report", subtitle, sections)


def _finish(report: Report, out_path: Path | str, static: StaticFormat | None, plotlyjs: PlotlyJs) -> Path:
    out = write_html(report, out_path, plotlyjs)
    if static is not None:
        export_figures(report.figures, static_dir(out), static)
    return out


def static_dir(report_path: Path) -> Path:
    """Where ``--static`` images of a report go: ``<report stem>_figures/`` beside it."""
    return report_path.parent / f"{report_path.stem}_figures"


def write_run_report(
    run: RunLike | RunData,
    out_path: Path | str,
    *,
    label: str | None = None,
    static: StaticFormat | None = None,
    plotlyjs: PlotlyJs = "inline",
    progress: ProgressFn | None = None,
) -> Path:
    """Write the run report of ``run`` (a run folder, RunResult or RunData) to ``out_path``; return the path.

    ``static="png"`` or ``"svg"`` also exports every figure to ``<stem>_figures/`` (kaleido
    with a local Chromium). ``progress(done, total, what)`` is called as figures are built.
    """
    return _finish(build_run_report(run, label, progress), out_path, static, plotlyjs)


def write_comparison_report(
    runs: Sequence[RunLike | RunData],
    labels: Sequence[str] | None = None,
    out_path: Path | str = "comparison.html",
    *,
    static: StaticFormat | None = None,
    plotlyjs: PlotlyJs = "inline",
    progress: ProgressFn | None = None,
) -> Path:
    """Write the comparison report of ``runs`` (run folders, RunResults or RunData) to ``out_path``."""
    return _finish(build_comparison_report(runs, labels, progress), out_path, static, plotlyjs)


def write_report(
    runs: Sequence[RunLike | RunData],
    out_path: Path | str,
    labels: Sequence[str] | None = None,
    *,
    static: StaticFormat | None = None,
    plotlyjs: PlotlyJs = "inline",
    progress: ProgressFn | None = None,
) -> Path:
    """A run report for one run, a comparison report for several (what ``servesim report`` does)."""
    if len(runs) == 1:
        label = labels[0] if labels else None
        return write_run_report(runs[0], out_path, label=label, static=static, plotlyjs=plotlyjs, progress=progress)
    return write_comparison_report(runs, labels, out_path, static=static, plotlyjs=plotlyjs, progress=progress)


def write_plan_report(
    plan_dir: Path | str, out_path: Path | str, *, static: StaticFormat | None = None, plotlyjs: PlotlyJs = "inline"
) -> Path:
    """Write the report of a plan folder (``servesim plan``'s output) to ``out_path``."""
    from reports.plan import build_plan_report

    return _finish(build_plan_report(plan_dir), out_path, static, plotlyjs)


def write_sweep_report(
    sweep_dir: Path | str, out_path: Path | str, *, static: StaticFormat | None = None, plotlyjs: PlotlyJs = "inline"
) -> Path:
    """Write the report of a sweep folder (``servesim sweep``'s output) to ``out_path``."""
    from reports.sweep import build_sweep_report

    return _finish(build_sweep_report(sweep_dir), out_path, static, plotlyjs)
