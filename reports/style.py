"""Shared look of every figure: colours per label, the base layout, notes on a figure.

Colours: a policy's registry name always gets the same colour (``POLICY_COLOURS``), in
every report, so ``vllm`` looks the same in a run report and in a comparison. Other
labels (variants such as ``sarathi-token_budget=512``) take the next unused colour of
``PALETTE`` in the order they are first seen, so colours are stable within a report.
"""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go

# Colour-blind-friendly categorical palette (Okabe-Ito order, then Tableau extras).
PALETTE: tuple[str, ...] = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#8C564B",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
    "#1F3A93",
    "#9E1A1A",
)

# Policy names (the batch-policy registry keys) pinned to a palette colour.
POLICY_COLOURS: dict[str, str] = {
    "vllm": PALETTE[0],
    "sarathi": PALETTE[1],
    "continuous": PALETTE[2],
    "static": PALETTE[3],
    "dynamic": PALETTE[4],
    "priority": PALETTE[5],
    "no_kv_cache": PALETTE[6],
}

# Phases of a request (timeline) and token kinds, used in the run report.
PHASE_COLOURS: dict[str, str] = {
    "queueing": "#BBBBBB",
    "prefill": "#E69F00",
    "transfer": "#CC79A7",
    "decode": "#0072B2",
    "rejected": "#D62728",
}
SLO_COLOUR = "#D62728"
ARRIVAL_COLOUR = "#555555"

FIGURE_HEIGHT_PX = 380
NOTE_FONT_SIZE = 11


class ColourMap:
    """Stable colours for a report's labels: policy names pinned, the rest in first-seen order."""

    def __init__(self, labels: Iterable[str] = ()) -> None:
        self._colours: dict[str, str] = {}
        for label in labels:
            self[label]

    def __getitem__(self, label: str) -> str:
        if label not in self._colours:
            self._colours[label] = POLICY_COLOURS.get(label) or self._next_free()
        return self._colours[label]

    def _next_free(self) -> str:
        used = set(self._colours.values())
        reserved = set(POLICY_COLOURS.values())
        for colour in PALETTE:
            if colour not in used and colour not in reserved:
                return colour
        for colour in PALETTE:
            if colour not in used:
                return colour
        return PALETTE[len(self._colours) % len(PALETTE)]


def base_layout(title: str, height_px: int = FIGURE_HEIGHT_PX, **extra) -> dict:
    """The layout every figure starts from: a plain white style without plotly's large template."""
    layout = {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "template": "none",
        "height": height_px,
        "margin": {"l": 70, "r": 30, "t": 50, "b": 60},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "hovermode": "closest",
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
    }
    layout.update(extra)
    return layout


def style_axes(fig: go.Figure) -> None:
    """Light grid lines and visible axis lines on every axis of ``fig``."""
    axis = {"showgrid": True, "gridcolor": "#E5E5E5", "zeroline": False, "showline": True, "linecolor": "#999999"}
    fig.update_xaxes(**axis)
    fig.update_yaxes(**axis)


def add_note(fig: go.Figure, text: str) -> None:
    """Write ``text`` under the plot area (how the data was sampled, what is missing) and keep it in meta.

    The note is also stored as ``layout.meta.note`` so tests and static exports can read it.
    """
    lines = text.count("<br>") + 1
    margin_b = max(fig.layout.margin.b or 60, 66 + 14 * lines)
    fig.update_layout(margin={"b": margin_b})
    fig.add_annotation(
        text=text,
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        yshift=-(margin_b - 4),
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        align="left",
        font={"size": NOTE_FONT_SIZE, "color": "#555555"},
    )
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    meta["note"] = text
    fig.update_layout(meta=meta)


def empty_figure(title: str, message: str) -> go.Figure:
    """A figure with no traces that says why (no finished request, no engine step, ...)."""
    fig = go.Figure(layout=base_layout(title, height_px=200))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(
        text=message, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 14, "color": "#555555"}
    )
    fig.update_layout(meta={"note": message, "empty": True})
    return fig
