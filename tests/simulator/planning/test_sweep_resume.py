"""Killing a real `servesim sweep` midway and running it again completes only the missing points."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from simulator.planning.points.executors import InProcessExecutor
from simulator.planning.sweeps.grid import load_grid
from simulator.planning.sweeps.sweep import run_sweep
from tests.simulator.planning.planning_helpers import SERVESIM, servesim, tiny_base, write_yaml

NUM_POINTS = 24


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.update(int(x) for x in text)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_killed_sweep_resumes_with_only_the_missing_points(tmp_path):
    grid = write_yaml(
        tmp_path / "grid.yaml",
        {
            "base": tiny_base(num_requests=600),
            "grid": {"workload.arrival.rate_per_s": [5.0, 10.0, 20.0, 40.0], "seed": list(range(NUM_POINTS // 4))},
        },
    )
    out = tmp_path / "out"
    cmd = [SERVESIM, "sweep", grid, "--workers", "2", "--out", out, "--quiet"]
    proc = subprocess.Popen(list(map(str, cmd)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    points = out / "points"
    deadline = time.monotonic() + 120
    while len(list(points.glob("*.json"))) < 3:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = {p.name: p.stat().st_mtime_ns for p in points.glob("*.json")}
    assert 3 <= len(done_before) < NUM_POINTS, "kill the sweep midway"
    for name in done_before:  # every file the kill left is a complete point
        assert json.loads((points / name).read_text())["status"] == "ok"
    assert json.loads((out / "sweep.json").read_text())["complete"] is False
    # the pool's workers notice their parent is gone and exit
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers and not any(_alive(pid) for pid in workers)

    again = servesim("sweep", grid, "--workers", "2", "--out", out, "--quiet", "--json")
    assert again.returncode == 0, again.stderr
    info = json.loads(again.stdout)
    assert info["num_skipped"] == len(done_before)
    assert info["num_run"] == NUM_POINTS - len(done_before)
    assert info["complete"] is True
    for name, mtime in done_before.items():  # finished points were not run again
        assert (points / name).stat().st_mtime_ns == mtime
    table = pd.read_parquet(out / "sweep.parquet")
    assert len(table) == NUM_POINTS

    # the resumed table is exactly the table of an uninterrupted sweep
    reference = run_sweep(load_grid(grid), tmp_path / "reference", InProcessExecutor()).table
    pd.testing.assert_frame_equal(table, pd.read_parquet(tmp_path / "reference" / "sweep.parquet"))
    pd.testing.assert_frame_equal(table, reference)

    # and a third run has nothing left to do
    third = servesim("sweep", grid, "--workers", "1", "--out", out, "--json")
    assert json.loads(third.stdout)["num_run"] == 0


def test_sweep_cli_prints_a_table_and_refuses_bad_grids(tmp_path):
    grid = write_yaml(
        tmp_path / "g.yaml",
        {"base": tiny_base(), "grid": {"policy.max_num_seqs": [1, 4]}, "points": [{"hardware": "l40s"}]},
    )
    proc = servesim("sweep", grid, "--workers", "1", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 points (3 distinct configs): 3 run, 0 already done" in proc.stdout
    table = pd.read_parquet(tmp_path / "runs" / "sweep-g" / "sweep.parquet")
    assert list(table["label"]) == ["policy.max_num_seqs=1", "policy.max_num_seqs=4", "hardware=l40s"]
    assert list(table["hardware_name"]) == ["H100-SXM5-80GB"] * 2 + ["L40S-48GB"]
    assert list(table["policy.max_num_seqs"]) == [1, 4, 256]  # the resolved value where a point leaves it
    bad = write_yaml(tmp_path / "bad.yaml", {"grid": {"policy.max_num_seqs": [0]}})
    proc = servesim("sweep", bad, "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bad.yaml: point 0 (policy.max_num_seqs=0): policy: max_num_seqs: Input should be greater" in proc.stderr
    proc = servesim("sweep", grid, "--executor", "local", "--address", "x:1", cwd=tmp_path)
    assert proc.returncode == 2 and "--address applies to --executor ray only" in proc.stderr
    os.remove(bad)
