"""Assemble figures and HTML panels into one self-contained, offline report page.

plotly.js is inlined once in the page (``plotlyjs="inline"``, the default) or written once
beside it as ``plotly-<version>.min.js`` (``plotlyjs="beside"``, for folders of many
reports). Nothing is fetched from the network. Figures are embedded as JSON (numpy arrays
as base64 typed arrays, which plotly.js decodes) and drawn on load; when every figure has
been drawn the page sets ``document.body.dataset.rendered = "true"`` and
``window.servesimReport.renderMs``, which tests and the benchmark read.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs, get_plotlyjs_version

PlotlyJs = Literal["inline", "beside"]

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222;
       background: #f6f6f4; }
header { background: #1f2a38; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; font-weight: 600; }
header p { margin: 0; color: #c9d1db; font-size: 13px; }
main { max-width: 1280px; margin: 0 auto; padding: 12px 24px 40px; }
section { background: #fff; border: 1px solid #e2e2de; border-radius: 6px; margin: 16px 0; padding: 12px 18px; }
section h2 { font-size: 17px; margin: 4px 0 10px; font-weight: 600; }
section p.intro { color: #555; font-size: 13px; margin: 0 0 8px; }
.scenario { color: #444; font-size: 14px; margin: 4px 0 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin-bottom: 12px; }
.card { border: 1px solid #e2e2de; border-radius: 5px; padding: 8px 12px; min-width: 150px; background: #fafaf8; }
.card .k { font-size: 12px; color: #666; }
.card .v { font-size: 18px; font-weight: 600; margin-top: 2px; }
.notes { background: #fff8e5; border: 1px solid #f0d98c; border-radius: 5px; padding: 8px 14px;
         margin: 8px 0 12px; font-size: 14px; }
.notes ul { margin: 4px 0 0 0; padding-left: 20px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border-bottom: 1px solid #e6e6e2; padding: 4px 10px; text-align: right; white-space: nowrap; }
th:first-child { text-align: left; }
tr:first-child th { background: #f1f1ee; white-space: normal; vertical-align: bottom; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
.tablewrap { overflow-x: auto; }
.grid { display: grid; grid-template-columns: repeat(var(--columns), minmax(0, 1fr)); gap: 8px 18px; }
@media (max-width: 1000px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.figure { width: 100%; min-width: 0; margin: 6px 0 14px; }
footer { color: #777; font-size: 12px; text-align: center; padding: 10px; }
"""

PLOT_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False, "showLink": False}


@dataclass(slots=True)
class Section:
    """A titled block of the page: optional intro text, raw HTML (already escaped) and figures by name.

    ``columns`` lays the figures out in a grid of that many columns (narrow windows fall back to one).
    """

    title: str
    intro: str = ""
    html: str = ""
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)
    columns: int = 1


@dataclass(slots=True)
class Report:
    """A report before it is written: title, subtitle and sections."""

    title: str
    subtitle: str
    sections: list[Section]

    @property
    def figures(self) -> list[tuple[str, go.Figure]]:
        """Every (name, figure) in page order; names are unique within a report."""
        return [pair for section in self.sections for pair in section.figures]


def cards_html(cards: list[tuple[str, str]], metric_keys: list[str] | None = None) -> str:
    """A row of headline cards: (title, value as HTML) each, optionally tagged ``data-metric``."""
    keys = metric_keys or [""] * len(cards)
    out = []
    for (title, value), key in zip(cards, keys, strict=True):
        attr = f' data-metric="{key}"' if key else ""
        out.append(f'<div class="card"{attr}><div class="k">{title}</div><div class="v">{value}</div></div>')
    return '<div class="cards">' + "".join(out) + "</div>"


def plotlyjs_filename() -> str:
    return f"plotly-{get_plotlyjs_version()}.min.js"


def _script_tag(mode: PlotlyJs, out_path: Path) -> str:
    if mode == "inline":
        return f"<script>{get_plotlyjs()}</script>"
    if mode == "beside":
        target = out_path.parent / plotlyjs_filename()
        if not target.is_file():
            target.write_text(get_plotlyjs(), encoding="utf-8")
        return f'<script src="{html.escape(target.name)}"></script>'
    raise ValueError(f"plotlyjs must be 'inline' or 'beside', not {mode!r}")


def render_html(report: Report, out_path: Path, plotlyjs: PlotlyJs = "inline") -> str:
    """The whole page as a string (writes plotly.js beside ``out_path`` when asked to)."""
    parts: list[str] = []
    plots: list[str] = []
    n = 0
    for section in report.sections:
        parts.append(f"<section><h2>{html.escape(section.title)}</h2>")
        if section.intro:
            parts.append(f'<p class="intro">{section.intro}</p>')
        if section.html:
            parts.append(f'<div class="tablewrap">{section.html}</div>')
        if section.figures:
            parts.append(f'<div class="grid" style="--columns: {max(1, section.columns)}">')
        for name, fig in section.figures:
            div_id = f"fig-{n}"
            n += 1
            parts.append(f'<div class="figure" id="{div_id}" data-name="{html.escape(name)}"></div>')
            spec = pio.to_json(fig, validate=False)
            plots.append(f'draw("{div_id}", {spec});')
        if section.figures:
            parts.append("</div>")
        parts.append("</section>")
    body = "\n".join(parts)
    draw_script = (
        "<script>\n"
        "(function () {\n"
        "  const t0 = performance.now();\n"
        "  const pending = [];\n"
        f"  const config = {json.dumps(PLOT_CONFIG)};\n"
        "  function draw(id, spec) {\n"
        "    pending.push(Plotly.newPlot(id, spec.data, spec.layout, config));\n"
        "  }\n" + "\n".join("  " + p for p in plots) + "\n  Promise.all(pending).then(function () {\n"
        "    window.servesimReport = {figures: pending.length, renderMs: performance.now() - t0};\n"
        '    document.body.dataset.rendered = "true";\n'
        "  });\n"
        "})();\n"
        "</script>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(report.title)}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<style>{CSS}</style>\n{_script_tag(plotlyjs, out_path)}\n</head>\n<body>\n"
        f"<header><h1>{html.escape(report.title)}</h1><p>{report.subtitle}</p></header>\n"
        f"<main>\n{body}\n</main>\n"
        f"<footer>servesim report · plotly.js {get_plotlyjs_version()} "
        f"{'embedded' if plotlyjs == 'inline' else 'beside this file'}; works offline</footer>\n"
        f"{draw_script}\n</body>\n</html>\n"
    )


def write_html(report: Report, out_path: Path | str, plotlyjs: PlotlyJs = "inline") -> Path:
    """Write the page to ``out_path`` (parent folders created) and return the path."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(report, out, plotlyjs), encoding="utf-8")
    return out
