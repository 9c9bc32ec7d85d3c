"""The plan and sweep reports, written by the commands and checked in headless Chromium."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports.browser import launch_browser
from tests.simulator.planning.planning_helpers import md1_base, write_yaml

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")


def servesim(*args):
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def browser():
    with launch_browser() as b:
        yield b


def test_plan_writes_a_report_with_curves_and_frontier(tmp_path, browser):
    scenario = write_yaml(tmp_path / "s.yaml", md1_base(output_tokens=4, step_time_s=0.02))
    cands = write_yaml(
        tmp_path / "c.yaml",
        {
            "candidates": [
                {"name": "fast", "overrides": {"hardware": "h100-sxm"}},
                {"name": "slow", "overrides": {"hardware": "l40s", "cost_model.step_time_s": 0.03}},
            ]
        },
    )
    out = tmp_path / "plan"
    proc = servesim(
        "plan",
        scenario,
        "--candidates",
        cands,
        "--slo-ttft-p99-ms",
        300,
        "--slo-tpot-p99-ms",
        40,
        "--target-rate",
        10,
        "--requests-per-point",
        200,
        "--curve-points",
        3,
        "--workers",
        1,
        "--out",
        out,
        "--quiet",
        "--rank-all",  # every candidate planned: a curve each
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "report.html").is_file() and f"report: {out / 'report.html'}" in proc.stdout
    with browser.open(out / "report.html") as page:
        assert page.console_errors == [] and page.page_errors == [] and page.network_requests == []
        # one curve per candidate on each capacity figure; each feasible candidate plus the frontier
        assert page.trace_counts() == {"capacity_ttft": 2, "capacity_tpot": 2, "pareto": 3}
        text = page.page.inner_text("body")
        assert "Chosen configuration" in text and "slow" in text
        page.page.screenshot(path=str(tmp_path / "plan.png"), full_page=True)
    again = servesim("report", out, "--out", tmp_path / "again.html")
    assert again.returncode == 0 and (tmp_path / "again.html").stat().st_size > 1_000_000


def test_sweep_writes_a_report_with_latency_against_rate(tmp_path, browser):
    write_yaml(tmp_path / "base.yaml", md1_base(output_tokens=2, step_time_s=0.02))
    grid = write_yaml(
        tmp_path / "grid.yaml",
        {"base": "base.yaml", "grid": {"policy.max_num_seqs": [1, 4], "workload.arrival.rate_per_s": [2, 6, 10]}},
    )
    out = tmp_path / "sweep"
    proc = servesim("sweep", grid, "--out", out, "--workers", 1, "--quiet")
    assert proc.returncode == 0, proc.stderr
    with browser.open(out / "report.html") as page:
        assert page.console_errors == [] and page.network_requests == []
        assert page.trace_counts() == {"sweep_ttft": 2, "sweep_tpot": 2}  # one line per max_num_seqs
        assert "policy.max_num_seqs" in page.page.inner_text("body")


def test_sweep_report_of_a_sweep_where_every_point_failed(tmp_path):
    # an errored point has no metric columns: the figures say so instead of raising KeyError
    import json

    import pandas as pd

    from reports.sweep import RATE, build_sweep_report

    (tmp_path / "sweep.json").write_text(json.dumps({"parameters": [RATE], "num_points": 2, "num_errors": 2}))
    pd.DataFrame(
        {"point": [0, 1], RATE: [2.0, 4.0], "status": ["error", "error"], "error": ["does not fit", "does not fit"]}
    ).to_parquet(tmp_path / "sweep.parquet")
    report = build_sweep_report(tmp_path)
    assert [title for title, _ in report.figures] and all(not fig.data for _, fig in report.figures)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"candidates": [{"rank": 1}]}, "no list of named candidates"),
        ({"candidates": [{"name": "a"}], "chosen": "b"}, "chosen candidate 'b' is not among the candidates"),
    ],
)
def test_report_on_a_hand_edited_plan_file_names_it(tmp_path, plan, message):
    import json

    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = servesim("report", tmp_path)
    assert proc.returncode == 2 and "plan.json" in proc.stderr and message in proc.stderr, proc.stderr
