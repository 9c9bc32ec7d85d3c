"""`servesim report`, the report `servesim run` writes, static export and progress bars, run as a user runs them."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reports
from tests.reports.report_fixtures import simulate, small_workload

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")
SMALL = ["--num-requests", "30", "--rate", "6"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def servesim(*args, cwd=None):
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def servesim_in_a_terminal(*args, cwd=None, timeout_s: float = 120) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal (so ``isatty()`` is true); return (status, output)."""
    leader, follower = pty.openpty()
    env = os.environ | {"COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([SERVESIM, *map(str, args)], stdout=follower, stderr=follower, cwd=cwd, env=env)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    return proc.wait(timeout=10), b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    """Two run folders of one policy at two rates (simulated in-process: quicker than the CLI)."""
    base = tmp_path_factory.mktemp("cli")
    workload = small_workload(30, 4.0)
    return [
        simulate(base / f"vllm-{rate:g}", workload=workload | {"arrival": {"kind": "poisson", "rate_per_s": rate}},
                 slo={"ttft_ms": 400})
        for rate in (4.0, 8.0)
    ]  # fmt: skip


def test_run_writes_its_report_beside_the_tables_unless_told_not_to(tmp_path):
    out = tmp_path / "r"
    proc = servesim("run", "--quiet", *SMALL, "--out", out)
    assert proc.returncode == 0, proc.stderr
    page = (out / "report.html").read_text()
    assert page.count("* plotly.js v") == 1 and "servesim run report: vllm" in page
    assert f"report: {out / 'report.html'}" in proc.stdout
    assert str(out) in page, "the report names its run folder"
    proc = servesim("run", "--quiet", *SMALL, "--out", tmp_path / "bare", "--no-report")
    assert proc.returncode == 0 and not (tmp_path / "bare" / "report.html").exists()
    assert (tmp_path / "bare" / "summary.json").is_file() and "report:" not in proc.stdout


def test_report_of_one_run_folder(run_dirs):
    proc = servesim("report", "--quiet", run_dirs[0])
    assert proc.returncode == 0, proc.stderr
    assert (run_dirs[0] / "report.html").is_file() and "report:" in proc.stdout
    page = (run_dirs[0] / "report.html").read_text()
    assert all(f'data-name="{name}"' in page for name in reports.RUN_FIGURES)


def test_report_of_several_run_folders_is_a_comparison(run_dirs, tmp_path):
    proc = servesim("report", "--quiet", *run_dirs, "--labels", "mine,mine", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "comparison.html").read_text()  # the default name for several runs
    assert "servesim comparison report" in page and "mine @ 4 req/s" in page and "mine @ 8 req/s" in page
    # one variant at two rates: a latency-versus-load curve
    assert 'data-name="ttft_vs_load"' in page


def test_plotlyjs_beside_is_written_once(run_dirs, tmp_path):
    proc = servesim("report", "--quiet", run_dirs[0], "--out", tmp_path / "a.html", "--plotlyjs", "beside")
    assert proc.returncode == 0, proc.stderr
    reports.write_run_report(run_dirs[1], tmp_path / "b.html", plotlyjs="beside")
    scripts = list(tmp_path.glob("plotly-*.min.js"))
    assert len(scripts) == 1 and scripts[0].read_text().startswith("/**\n* plotly.js v")
    for name in ("a.html", "b.html"):
        page = (tmp_path / name).read_text()
        assert f'<script src="{scripts[0].name}"></script>' in page and "* plotly.js v" not in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "no/such/run"], "not a run folder"),
        (["report", "{run}", "{run}", "--labels", "only-one"], "--labels: give one non-empty label per run folder"),
        (["run", "--no-report", "--static", *SMALL], "cannot be combined with --no-report"),
    ],
)
def test_bad_input_is_one_line_and_status_2(run_dirs, args, message):
    proc = servesim(*[a.replace("{run}", str(run_dirs[0])) for a in args])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_static_png_export_from_run(tmp_path):
    """`--static` renders every figure through kaleido with the local Chromium, offline."""
    out = tmp_path / "r"
    proc = servesim("run", "--quiet", *SMALL, "--out", out, "--static")
    assert proc.returncode == 0, proc.stderr
    pngs = sorted((out / "report_figures").glob("*.png"))
    assert [p.name for p in pngs] == [f"{i:02d}_{name}.png" for i, name in enumerate(reports.RUN_FIGURES)]
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5_000


def test_static_svg_export_from_report(run_dirs, tmp_path):
    out = tmp_path / "cmp.html"
    proc = servesim("report", "--quiet", *run_dirs, "--out", out, "--static", "svg")
    assert proc.returncode == 0, proc.stderr
    svgs = sorted((tmp_path / "cmp_figures").glob("*.svg"))
    assert len(svgs) == 7
    text = svgs[0].read_text()
    assert text.startswith("<svg") and "TTFT" in text
    assert f"figures: {tmp_path / 'cmp_figures'}" in proc.stdout


def test_static_export_names_a_missing_browser(run_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("SERVESIM_BROWSER", str(tmp_path / "no-chromium"))
    figures = reports.build_run_report(run_dirs[0]).figures[:1]
    with pytest.raises(ValueError, match=r"SERVESIM_BROWSER.*not an executable browser"):
        reports.export_figures(figures, tmp_path / "figs", "png")
    with pytest.raises(ValueError, match="static format must be one of png, svg"):
        reports.export_figures(figures, tmp_path / "figs", "gif")


def test_progress_is_silent_when_not_a_terminal(run_dirs):
    proc = servesim("report", run_dirs[0])
    assert proc.returncode == 0 and proc.stderr == ""


def test_progress_bars_in_a_terminal_and_quiet_silences_them(run_dirs, tmp_path):
    status, output = servesim_in_a_terminal("run", *SMALL, "--out", tmp_path / "r")
    assert status == 0, output
    assert "simulating" in output and "writing report" in output
    status, output = servesim_in_a_terminal("report", "--quiet", run_dirs[0], "--out", tmp_path / "y.html")
    assert status == 0 and "building report" not in output and "report:" in output


def test_report_on_a_run_whose_config_was_hand_edited_names_the_file(run_dirs, tmp_path):
    import json

    bad = tmp_path / "bad"
    shutil.copytree(run_dirs[0], bad)
    config = json.loads((bad / "config.json").read_text())
    del config["resolved_groups"][0]["tp"]
    (bad / "config.json").write_text(json.dumps(config))
    proc = servesim("report", bad, "--out", tmp_path / "r.html", "--quiet")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{bad / 'config.json'}: corrupted run config" in proc.stderr
