"""Interactive plotly reports built from result tables (run folders), never from live simulator objects.

Public entry points:

- ``write_run_report(run, out_path, *, label=None, static=None, plotlyjs="inline", progress=None) -> Path``
- ``write_comparison_report(runs, labels=None, out_path="comparison.html", *, static=None, ...) -> Path``
- ``write_report(runs, out_path, labels=None, ...)``: one run -> run report, several -> comparison
- ``write_plan_report(plan_dir, out_path)`` / ``write_sweep_report(sweep_dir, out_path)``: the
  reports of ``servesim plan`` and ``servesim sweep`` output folders
- ``build_run_report`` / ``build_comparison_report``: the ``Report`` (sections and named figures)
  without writing it, e.g. to embed figures elsewhere
- ``export_figures(named_figures, out_dir, fmt)``: PNG or SVG through kaleido and a local Chromium

A run is a run folder path, a ``simulator.metrics.results.RunResult`` or a ``reports.data.RunData``.
Reports are single HTML files that open from ``file://`` with no network.
"""

from reports.build import (
    RUN_FIGURES,
    build_comparison_report,
    build_run_report,
    static_dir,
    write_comparison_report,
    write_plan_report,
    write_report,
    write_run_report,
    write_sweep_report,
)
from reports.data import RunData, load_run
from reports.page import Report, Section, write_html
from reports.static import export_figures, find_browser

__all__ = [
    "RUN_FIGURES",
    "Report",
    "RunData",
    "Section",
    "build_comparison_report",
    "build_run_report",
    "export_figures",
    "find_browser",
    "load_run",
    "static_dir",
    "write_comparison_report",
    "write_html",
    "write_plan_report",
    "write_report",
    "write_run_report",
    "write_sweep_report",
]
