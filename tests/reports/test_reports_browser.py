"""Every kind of report opened in a real headless Chromium from file://, as a user would open it.

Checks per report: no console or page errors, no network request, every figure drawn
(``.main-svg``) with the expected number of traces, a hovered point shows its value with
its unit, and a full-page screenshot is kept (pytest's tmp dir and ``tests/artifacts/``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import reports
from reports.browser import ReportPage, launch_browser
from reports.data import load_run
from tests.conftest import TESTS_DIR
from tests.reports.report_fixtures import simulate, small_workload, stream_of, synthetic_result

ARTIFACTS = TESTS_DIR / "artifacts"
SLO = {"ttft_ms": 800, "tpot_ms": 60}
CONSTANT = {"cost_model": {"kind": "constant", "step_time_s": 0.05}, "kv_cache": {"num_blocks": 64, "block_size": 16}}
MAX_REPORT_BYTES = 15 * 1024 * 1024
MAX_RENDER_S = 10.0


@pytest.fixture(scope="module")
def browser():
    with launch_browser() as b:
        yield b


def keep_screenshot(page: ReportPage, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot under the test's tmp dir, copied to tests/artifacts/ (git-ignored)."""
    shot = tmp_path / f"{name}.png"
    page.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)
    return shot


def check_page(page: ReportPage, expected_traces: dict[str, int]) -> None:
    assert page.console_errors == [] and page.page_errors == []
    assert page.network_requests == [], "the report must not touch the network"
    assert page.figure_names() == list(expected_traces)
    assert all(n >= 1 for n in page.main_svg_counts().values()), page.main_svg_counts()
    assert page.trace_counts() == expected_traces
    assert page.rendered_trace_groups() == expected_traces


# Step-breakdown traces: one bar per op the cost model reports, plus the recorded mean.
ROOFLINE_TP1_TRACES = 11 + 1  # every op but all_reduce (tp=1) and kv_swap (no swapping)
CONSTANT_TRACES = 1 + 1  # the constant model reports a single op


def run_report_traces(cdf: int = 2, throughput: int = 4, timeline: int = 3, breakdown: int = ROOFLINE_TP1_TRACES):
    """Expected traces per figure of a one-replica run report."""
    return {
        "ttft_cdf": cdf,
        "tpot_cdf": cdf,
        "itl_cdf": cdf,
        "e2el_cdf": cdf,
        "engine_timeseries": 8,  # six series + KV cached blocks + the arrival rate
        "throughput": throughput,  # output and prompt tok/s, completed req/s (+ good req/s with SLOs)
        "request_timeline": timeline,  # queueing, prefill, decode (+ rejected)
        "step_breakdown": breakdown,
    }


def test_run_report_in_the_browser(browser, tmp_path):
    run_dir = simulate(tmp_path / "run", workload=small_workload(60, 8.0), slo=SLO)
    out = reports.write_run_report(run_dir, tmp_path / "run.html")
    page_text = out.read_text()
    assert page_text.count("* plotly.js v") == 1, "plotly.js is inlined exactly once"
    assert "<script src=" not in page_text
    with browser.open(out) as page:
        check_page(page, run_report_traces())
        assert page.load_s < MAX_RENDER_S
        # hover a CDF point: the label gives a request's TTFT in ms and the exact share at or below it
        ttft_ms = np.sort(load_run(run_dir).latencies()["ttft_s"].to_numpy() * 1000)
        text = page.hover_point("ttft_cdf", 0, 12)
        match = re.search(r"TTFT = ([\d,.]+) ms([\d.]+)% of requests at or below", text)
        assert match, text
        shown_ms, shown_pct = float(match[1].replace(",", "")), float(match[2])
        nearest = ttft_ms[np.argmin(np.abs(ttft_ms - shown_ms))]
        assert shown_ms == pytest.approx(nearest, abs=5e-4), "the value of a real request, to the µs"
        assert shown_pct == pytest.approx(100 * np.mean(ttft_ms <= nearest), abs=5e-3)
        p90 = load_run(run_dir).summary["p90_ttft_ms"]
        page.page.locator('.figure[data-name="ttft_cdf"] .legendtoggle').first.click()  # hide the curve
        assert f"p90 TTFT = {p90:,.3f} ms (from all values)" in page.hover_point("ttft_cdf", 1, 1)
        # hover a decode bar of the timeline: a duration in ms and times in s
        text = page.hover_point("request_timeline", 2, 5)
        assert "decode:" in text and " ms" in text and " s to " in text
        text = page.hover_point("engine_timeseries", 1, 10)
        assert "running:" in text and "requests" in text
        ops = page.page.evaluate(
            "() => document.querySelector('.figure[data-name=step_breakdown]').data.map(t => t.name)"
        )
        text = page.hover_point("step_breakdown", ops.index("mlp_gate_up"), 0)
        assert "mlp_gate_up:" in text and "ms per step" in text
        keep_screenshot(page, tmp_path, "run_report")


def test_comparison_report_in_the_browser(browser, tmp_path):
    runs = [
        simulate(tmp_path / f"{policy}-{rate:g}", policy={"kind": policy}, workload=small_workload(25, rate), slo=SLO)
        for policy in ("vllm", "no_kv_cache")
        for rate in (2.0, 6.0)
    ]
    out = reports.write_comparison_report(runs, None, tmp_path / "comparison.html")
    with browser.open(out) as page:
        check_page(
            page,
            {
                "ttft_cdf": 4,
                "tpot_cdf": 4,
                "itl_cdf": 4,
                "e2el_cdf": 4,
                "ttft_vs_load": 4,
                "tpot_vs_load": 4,
                "bars": 3,
            },
        )
        p99 = load_run(runs[1]).summary["p99_ttft_ms"]
        text = page.hover_point("ttft_vs_load", 1, 1)
        assert "vllm" in text and f"p99 TTFT = {p99:,.3f} ms" in text and "rate 6 req/s" in text
        text = page.hover_point("bars", 0, 0)
        assert "throughput:" in text and "req/s" in text
        keep_screenshot(page, tmp_path, "comparison_report")


@pytest.mark.parametrize(
    ("name", "fields", "stream", "traces", "says"),
    [
        (
            "rejected",
            {"max_model_len": 600},
            ([0, 0.1, 0.2], [100, 700, 50], [5, 5, 5]),
            run_report_traces(throughput=3, timeline=4, breakdown=CONSTANT_TRACES),
            "1 of 3 requests were rejected",
        ),
        (
            "single",
            {},
            ([0.0], [64], [8]),
            run_report_traces(throughput=3, breakdown=CONSTANT_TRACES),
            "single request",
        ),
        (
            "none_finished",
            {"max_model_len": 600},
            ([0, 0.5], [900, 800], [5, 5]),
            None,
            "No request finished (2 of 2 rejected)",
        ),
    ],
)
def test_edge_case_reports_render_and_say_what_happened(browser, tmp_path, name, fields, stream, traces, says):
    run_dir = simulate(tmp_path / name, **CONSTANT, **fields, stream=stream_of(*stream))
    out = reports.write_run_report(run_dir, tmp_path / f"{name}.html")
    # when nothing ran, figures are empty and say why; the timeline shows the waits and the rejections
    expected = traces or (dict.fromkeys(reports.RUN_FIGURES, 0) | {"request_timeline": 2})
    with browser.open(out) as page:
        check_page(page, expected)
        assert says in page.page.inner_text(".notes")
        if traces is None:
            assert "Nothing to plot" in page.page.inner_text('.figure[data-name="ttft_cdf"]')
            text = page.hover_point("request_timeline", 1, 0)
            assert "rejected at" in text and "exceeds the max model length" in text
        keep_screenshot(page, tmp_path, f"edge_{name}")


def test_large_run_report_is_small_and_renders_fast(browser, tmp_path):
    """A report of a 100,000-request run (synthetic tables of that shape) stays under 15 MB and 10 s."""
    result = synthetic_result(100_000)
    out = reports.write_run_report(result, tmp_path / "large.html")
    size = out.stat().st_size
    assert size < MAX_REPORT_BYTES, f"{size / 1e6:.1f} MB"
    with browser.open(out, timeout_s=MAX_RENDER_S * 3) as page:
        check_page(page, run_report_traces())
        assert page.load_s < MAX_RENDER_S, f"loaded and drawn in {page.load_s:.1f} s"
        assert page.render_ms() < MAX_RENDER_S * 1000
        text = page.hover_point("itl_cdf", 0, 300)  # away from the p50 marker, which would take the hover
        assert "ITL = " in text and "of token gaps at or below" in text
        keep_screenshot(page, tmp_path, "large_run_report")
