"""Open a report in a real headless Chromium (playwright driving a local browser) and inspect it.

Used by the tests and the benchmark; needs the ``playwright`` package (the ``reports``
extra) and a Chromium on the machine (``reports.static.find_browser``). playwright's own
browser download is never used.

``launch_browser()`` yields a ``ReportBrowser`` whose ``open(path)`` yields a
``ReportPage``: the playwright page plus every console error, page error and non-local
request seen since loading, and the render time the report measured itself.
``open_report(path)`` does both for a single report.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.static import find_browser

# Flags that let Chromium run headless in a container without reaching out to the network.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


@dataclass
class ReportPage:
    """A loaded report: the playwright ``page`` and what the browser reported while loading it."""

    page: Any
    load_s: float
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    network_requests: list[str] = field(default_factory=list)

    def figure_names(self) -> list[str]:
        return self.page.eval_on_selector_all(".figure", "els => els.map(e => e.dataset.name)")

    def trace_counts(self) -> dict[str, int]:
        """Traces plotly drew per figure (``gd._fullData``), by figure name."""
        return self.page.evaluate(
            "() => Object.fromEntries([...document.querySelectorAll('.figure')]"
            ".map(e => [e.dataset.name, (e._fullData || []).length]))"
        )

    def rendered_trace_groups(self) -> dict[str, int]:
        """SVG trace groups present in each figure's DOM (``g.trace``), by figure name."""
        return self.page.evaluate(
            "() => Object.fromEntries([...document.querySelectorAll('.figure')]"
            ".map(e => [e.dataset.name, e.querySelectorAll('.main-svg g.trace').length]))"
        )

    def main_svg_counts(self) -> dict[str, int]:
        return self.page.evaluate(
            "() => Object.fromEntries([...document.querySelectorAll('.figure')]"
            ".map(e => [e.dataset.name, e.querySelectorAll('.main-svg').length]))"
        )

    def render_ms(self) -> float:
        """Milliseconds from the report's first script to the last figure drawn (measured in the page)."""
        return float(self.page.evaluate("() => window.servesimReport.renderMs"))

    def hover_point(self, figure: str, trace: int, point: int) -> str:
        """Move the mouse over one data point of a figure and return the hover label's text.

        The pixel position comes from the figure's own axes (``l2p``); the mouse really moves
        there, so this exercises plotly's hover as a user would.
        """
        sel = f'.figure[data-name="{figure}"]'
        xy = self.page.evaluate(
            """([sel, trace, point]) => {
                const gd = document.querySelector(sel);
                const cd = gd.calcdata[trace][point];
                const t = gd._fullData[trace];
                const xa = gd._fullLayout[t.xaxis.replace('x', 'xaxis')];
                const ya = gd._fullLayout[t.yaxis.replace('y', 'yaxis')];
                const box = gd.querySelector('.main-svg').getBoundingClientRect();
                let px, py;
                if (t.type === 'bar') {
                    const pos = cd.p, size = cd.s, base = cd.b || 0;
                    if (t.orientation === 'h') { px = xa.c2p(base + size / 2); py = ya.c2p(pos); }
                    else { px = xa.c2p(pos); py = ya.c2p(base + size / 2); }
                } else { px = xa.c2p(cd.x); py = ya.c2p(cd.y); }
                const pageY = window.scrollY + box.top + ya._offset + py;
                window.scrollTo(0, Math.max(0, pageY - window.innerHeight / 2));
                const now = gd.querySelector('.main-svg').getBoundingClientRect();
                return [now.left + xa._offset + px, now.top + ya._offset + py];
            }""",
            [sel, trace, point],
        )
        self.page.mouse.move(xy[0] - 3, xy[1] - 3)
        self.page.mouse.move(xy[0], xy[1])
        label = self.page.locator(f"{sel} .hoverlayer .hovertext")
        label.first.wait_for(state="attached", timeout=5000)
        return " ".join(t or "" for t in label.evaluate_all("els => els.map(e => e.textContent)"))


class ReportBrowser:
    """A headless Chromium that opens reports one page at a time (launch it with ``launch_browser``)."""

    def __init__(self, context: Any) -> None:
        self.context = context

    @contextlib.contextmanager
    def open(self, path: Path | str, timeout_s: float = 60.0) -> Iterator[ReportPage]:
        """Load ``path`` from ``file://`` and wait until the report says every figure is drawn."""
        url = Path(path).resolve().as_uri()
        page = self.context.new_page()
        result = ReportPage(page, 0.0)
        page.on("console", lambda m: result.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: result.page_errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith(LOCAL_SCHEMES) else result.network_requests.append(r.url))
        try:
            t0 = time.perf_counter()
            page.goto(url, wait_until="load", timeout=timeout_s * 1000)
            page.wait_for_function("document.body.dataset.rendered === 'true'", timeout=timeout_s * 1000)
            result.load_s = time.perf_counter() - t0
            yield result
        finally:
            page.close()


@contextlib.contextmanager
def launch_browser(viewport: tuple[int, int] = (1300, 900)) -> Iterator[ReportBrowser]:
    """Start headless Chromium (the local executable, a throw-away profile) for the duration of the block."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="servesim-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=find_browser(),
            headless=True,
            args=list(CHROMIUM_FLAGS),
            viewport={"width": viewport[0], "height": viewport[1]},
        )
        try:
            yield ReportBrowser(context)
        finally:
            context.close()


@contextlib.contextmanager
def open_report(path: Path | str, timeout_s: float = 60.0) -> Iterator[ReportPage]:
    """Launch a browser, open one report, and close both afterwards."""
    with launch_browser() as browser, browser.open(path, timeout_s) as page:
        yield page
