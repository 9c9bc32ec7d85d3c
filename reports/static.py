"""Static export of report figures to PNG or SVG with kaleido and a locally installed Chromium.

kaleido (v1) drives a Chrome/Chromium it finds on the machine; it never downloads one
here. The browser is, in order: ``$SERVESIM_BROWSER``, ``$BROWSER_PATH`` (kaleido's own
variable), then ``chromium``, ``chromium-browser``, ``google-chrome`` on the PATH (Debian's
``chromium`` package installs ``/usr/bin/chromium``). plotly.js is handed to kaleido from
the installed plotly package and MathJax is switched off, so the export needs no network.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FORMATS = ("png", "svg")
EXPORT_WIDTH_PX = 1100


def find_browser() -> str:
    """The Chromium executable kaleido should drive; ValueError saying how to get one when none is found."""
    for var in ("SERVESIM_BROWSER", "BROWSER_PATH"):
        path = os.environ.get(var)
        if path:
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise ValueError(f"${var} is {path!r}, which is not an executable browser")
            return path
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ValueError(
        "static export needs Chromium: install it (Debian/Ubuntu: apt-get install chromium) "
        "or point $SERVESIM_BROWSER at a Chrome/Chromium executable"
    )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "figure"


def export_figures(figures: Sequence[tuple[str, go.Figure]], out_dir: Path | str, fmt: str = "png") -> list[Path]:
    """Write each ``(name, figure)`` to ``out_dir/NN_name.fmt``; return the paths in order.

    ValueError for an unknown format, a missing kaleido or a missing browser.
    """
    if fmt not in FORMATS:
        raise ValueError(f"static format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    try:
        import kaleido
    except ImportError:
        raise ValueError("static export needs kaleido: pip install 'servesim[reports]'") from None
    browser = find_browser()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{i:02d}_{_safe(name)}.{fmt}" for i, (name, _) in enumerate(figures)]
    specs = []
    for (_, fig), path in zip(figures, paths, strict=True):
        height = fig.layout.height or 400
        specs.append(
            {
                "fig": fig.to_plotly_json(),
                "path": str(path),
                "opts": {"format": fmt, "width": EXPORT_WIDTH_PX, "height": int(height)},
            }
        )
    with tempfile.TemporaryDirectory(prefix="servesim-kaleido-") as tmp:
        js = Path(tmp) / "plotly.min.js"
        js.write_text(get_plotlyjs(), encoding="utf-8")
        kopts = {"path": browser, "mathjax": False, "plotlyjs": str(js)}
        kaleido.write_fig_from_object_sync(specs, kopts=kopts)
        # a headless browser on a loaded machine now and then drops a figure without an error: those
        # missing are rendered once more before the export is called failed
        again = [spec for spec in specs if not Path(spec["path"]).is_file()]
        if again:
            kaleido.write_fig_from_object_sync(again, kopts=kopts)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise OSError(f"static export wrote no file for: {', '.join(p.name for p in missing)}")
    return paths
