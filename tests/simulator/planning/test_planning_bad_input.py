"""Bad input to `servesim plan` and `servesim sweep`: one clear line, exit 2, nothing written.

And the cases that used to end in wrong numbers: a rate search started far from the target,
a grid too large to build, and a tampered point file in a resumable sweep.
"""

import json
import math
import time

import pandas as pd
import pytest

from simulator.planning.points.executors import InProcessExecutor
from simulator.planning.points.store import PointStore
from simulator.planning.search.evaluate import CandidateRun, SearchTask, search_task
from simulator.planning.search.rates import max_feasible_rate
from simulator.planning.search.settings import SearchSettings
from simulator.planning.search.steady import SloTargets
from simulator.planning.sweeps.grid import MAX_POINTS, SweepSpec, expand
from simulator.planning.sweeps.sweep import run_sweep
from tests.simulator.planning.planning_helpers import servesim, tiny_base, write_yaml


def _closed_loop() -> dict:
    base = tiny_base()
    return base | {"workload": {"kind": "closed_loop", "concurrency": 4, "lengths": base["workload"]["lengths"]}}


def _one_clear_line(proc, out, *needles):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0]
    assert not out.exists() or not any(out.iterdir()), "nothing is written"
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--target-rate", "inf"), ("--target-rate: Input should be a finite number",)),
        (("--target-rate", "nan"), ("--target-rate: Input should be a finite number",)),
        (("--target-rate", "0"), ("--target-rate: Input should be greater than 0",)),
        (("--target-rate", "1e-300"), ("--target-rate 1e-300 req/s: outside", "of simulated time")),
        (("--target-rate", "1e300"), ("--target-rate 1e+300 req/s: outside",)),
        # doubling from 1e-6 used to stop 16 steps later at 0.065 req/s and size the plan from it
        (("--target-rate", "40", "--start-rate", "1e-6"), ("--start-rate 1e-06 req/s: outside [6.34e-05, 1e+09]",)),
        (("--target-rate", "40", "--start-rate", "1e-4"), ("--start-rate 0.0001: outside the search range", "2^16")),
        (("--start-rate", "1e-300"), ("--start-rate 1e-300 req/s: outside",)),
        (("--start-rate", "inf"), ("--start-rate: Input should be a finite number",)),
        (("--start-rate", "-1"), ("--start-rate: Input should be greater than 0",)),
        (("--rel-tol", "1e-300"), ("--rel-tol: Input should be greater than or equal to 0.000001",)),
        (("--requests-per-point", "100000000000"), ("--requests-per-point: Input should be less than or equal",)),
        (("--attainment", "nan"), ("--attainment: Input should be a finite number",)),
        (("--confidence", "inf"), ("--confidence: Input should be a finite number",)),
        (("--max-growth", "nan"), ("--max-growth: Input should be a finite number",)),
        (("--warmup-fraction=-inf",), ("--warmup-fraction: Input should be a finite number",)),
        (("--slo-ttft-ms", "inf"), ("--slo-ttft-ms/--slo-ttft-p99-ms: Input should be a finite number",)),
        (("--slo-e2el-ms", "0"), ("--slo-e2el-ms/--slo-e2el-p99-ms: Input should be greater than 0",)),
        (("--replicates", "0"), ("--replicates: Input should be greater than or equal to 1",)),
        (("--workers", "0"), ("--workers must be at least 1",)),
    ],
)
def test_plan_refuses_a_bad_number_before_writing_anything(tmp_path, args, needles):
    scenario = write_yaml(tmp_path / "s.yaml", tiny_base())
    out = tmp_path / "plan"
    start = time.perf_counter()
    # the old SLO flag (an alias now), so that only the number under test is wrong
    proc = servesim("plan", scenario, "--slo-ttft-p99-ms", 50, *args, "--out", out, "--quiet", timeout=120)
    _one_clear_line(proc, out, *needles)
    assert time.perf_counter() - start < 60  # refused up front, not after a search


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--target-rate", "2.5"), ("--target-rate 2.5: the load of a closed-loop workload is its number of users",)),
        (("--start-rate", "1e-6"), ("--start-rate 1e-06: the load of a closed-loop workload",)),
        (("--target-rate", "100000"), ("--target-rate 100000 users: outside [1, 6.55e+04]",)),
    ],
)
def test_a_closed_loop_plan_counts_whole_users(tmp_path, args, needles):
    scenario = write_yaml(tmp_path / "s.yaml", _closed_loop())
    out = tmp_path / "plan"
    proc = servesim("plan", scenario, "--slo-ttft-p99-ms", 50, *args, "--out", out, "--quiet", timeout=120)
    _one_clear_line(proc, out, *needles)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"workload.arrival.rate_per_s": 3}, "c.yaml: candidate 'x': workload.arrival.rate_per_s is the load the plan"),
        ({"slo.ttft_ms": 10}, "c.yaml: candidate 'x': the SLOs are the plan's, not a candidate's"),
        ({"workload.arrival": {"kind": "piecewise", "segments": [{"duration_s": 1, "rate_per_s": 1}]}}, "no rate to"),
    ],
)
def test_a_candidate_cannot_set_what_the_plan_decides(tmp_path, overrides, needle):
    scenario = write_yaml(tmp_path / "s.yaml", tiny_base())
    cands = write_yaml(tmp_path / "c.yaml", {"candidates": [{"name": "x", "overrides": overrides}]})
    out = tmp_path / "plan"
    proc = servesim("plan", scenario, "--candidates", cands, "--out", out, "--quiet", cwd=tmp_path, timeout=60)
    _one_clear_line(proc, out, needle)


def test_plan_without_any_slo_names_both_places_to_give_one(tmp_path):
    scenario = write_yaml(tmp_path / "s.yaml", {k: v for k, v in tiny_base().items() if k != "slo"})
    out = tmp_path / "plan"
    proc = servesim("plan", scenario, "--out", out, "--quiet", timeout=60)
    _one_clear_line(proc, out, "give at least one SLO: a slo: block in the scenario", "--slo-ttft-ms")


def test_a_search_started_far_below_the_target_finds_what_the_default_start_finds():
    slo = SloTargets(ttft_p99_ms=50.0, tpot_p99_ms=None, attainment=0.9)
    run = CandidateRun(0, 0, tiny_base(), None, 0, slo, SearchSettings(requests_per_point=200, rel_tol=0.02))
    default = search_task(SearchTask(run, 40.0, 40.0))
    low = search_task(SearchTask(run, 40.0 / 2**16, 40.0))
    assert default["error"] is None and low["error"] is None
    for result in (default, low):
        lo, hi = result["max_rate_per_s"], result["upper_rate_per_s"]
        assert hi is not None and hi - lo <= 0.02 * lo
    assert low["max_rate_per_s"] == pytest.approx(default["max_rate_per_s"], rel=0.05)
    assert low["floor_rate_per_s"] == default["floor_rate_per_s"] == pytest.approx(40 / 2**16)


def test_the_search_stays_in_its_range_and_always_ends():
    tried = []

    def feasible(rate):
        tried.append(rate)
        return rate < 1e6  # above the ceiling: unbounded

    b = max_feasible_rate(feasible, 1e-3, floor=1e-4, ceiling=100.0)
    assert b.max_rate_per_s == 100.0 and b.upper_rate_per_s is None and not b.converged
    assert all(1e-4 <= r <= 100.0 for r in tried)
    tried.clear()
    b = max_feasible_rate(lambda r: tried.append(r) or False, 50.0, floor=0.3, ceiling=100.0)
    assert b.max_rate_per_s == 0.0 and min(tried) == 0.3
    # a tolerance finer than float resolution still ends: bisection stops when no midpoint is left
    b = max_feasible_rate(lambda r: r <= math.pi, 1.0, rel_tol=1e-300)
    assert b.max_rate_per_s <= math.pi < b.upper_rate_per_s and b.num_evaluations < 100
    # whole numbers: the bracket closes to one
    b = max_feasible_rate(lambda r: r <= 37, 4.0, floor=1, ceiling=1000, integer=True)
    assert (b.max_rate_per_s, b.upper_rate_per_s) == (37, 38)
    with pytest.raises(ValueError, match="positive rate"):
        max_feasible_rate(lambda r: True, math.inf)


def test_a_huge_sweep_grid_is_refused_before_it_is_built(tmp_path):
    axes = {
        "seed": list(range(1000)),
        "policy.max_num_seqs": list(range(1, 1001)),
        "workload.num_requests": list(range(5, 1005)),
    }
    grid = write_yaml(tmp_path / "g.yaml", {"base": tiny_base(), "grid": axes})
    out = tmp_path / "out"
    start = time.perf_counter()
    proc = servesim("sweep", grid, "--out", out, "--quiet", timeout=60)
    line = _one_clear_line(proc, out, "g.yaml: grid:", "seed (1,000) x policy.max_num_seqs (1,000)")
    assert "1,000,000,000 points, above the limit of 100,000" in line
    assert time.perf_counter() - start < 20
    with pytest.raises(ValueError, match="above the limit"):
        expand({"seed": list(range(MAX_POINTS)), "policy.max_num_seqs": [1, 2]}, [])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--replicates", 5000), "--replicates 5000: must be between 1 and 1000"),
        (("--workers", 0), "--workers must be at least 1 (got 0)"),
        (("--executor", "ray", "--workers", -2), "--workers must be at least 1 (got -2)"),
    ],
)
def test_sweep_flags_are_checked_before_the_folder_is_made(tmp_path, args, needle):
    grid = write_yaml(tmp_path / "g.yaml", {"base": tiny_base()})
    out = tmp_path / "out"
    _one_clear_line(servesim("sweep", grid, *args, "--out", out, "--quiet"), out, needle)
    assert not out.exists()


def _tamper_no_metrics(row, other):
    return json.dumps({k: row[k] for k in ("key", "status", "config_json")})


def _tamper_nan(row, other):
    return json.dumps(row | {"p99_ttft_ms": math.nan})  # json writes NaN, json.loads reads it back


def _tamper_text(row, other):
    return json.dumps(row | {"request_throughput": "fast"})


def _tamper_other_point(row, other):
    return json.dumps(other)  # another point's file under this name


def _tamper_config(row, other):
    return json.dumps(row | {"config_json": row["config_json"].replace('"seed":0', '"seed":7')})


def _tamper_status(row, other):
    return json.dumps(row | {"status": "done"})


def _tamper_not_json(row, other):
    return json.dumps(row)[:-20]


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (_tamper_no_metrics, "status ok without num_requests, completed"),
        (_tamper_nan, "p99_ttft_ms is nan, not a finite number"),
        (_tamper_text, "request_throughput is 'fast', not a finite number"),
        (_tamper_other_point, "is not its file name's"),
        (_tamper_config, "its config_json is not the configuration of the point with this key"),
        (_tamper_status, "status 'done' (expected ok or error)"),
        (_tamper_not_json, "unreadable sweep point"),
    ],
)
def test_a_tampered_point_file_is_named_and_run_again(tmp_path, tamper, problem):
    spec = SweepSpec("test", tiny_base(), None, expand({"seed": [0, 1]}, []), 1)
    reference = run_sweep(spec, tmp_path, InProcessExecutor()).table
    key, other_key = reference["key"]
    store = PointStore(tmp_path)
    path = store.path(key)
    path.write_text(tamper(store.load(key), store.load(other_key)))
    warnings: list[str] = []
    again = run_sweep(spec, tmp_path, InProcessExecutor(), warn=warnings.append)
    assert warnings == list(again.bad_points) and len(warnings) == 1
    assert warnings[0].startswith(f"{path}: ") and problem in warnings[0]
    assert warnings[0].endswith("; running the point again")
    assert (again.num_skipped, again.num_run) == (1, 1)
    # the point was simulated again: the table is the untampered one, the file a finished point
    pd.testing.assert_frame_equal(again.table, reference)
    assert store.load_point(key, reference["config_json"].iloc[0])["status"] == "ok"
    third = run_sweep(spec, tmp_path, InProcessExecutor(), warn=warnings.append)
    assert third.num_run == 0 and len(warnings) == 1


def test_sweep_cli_names_a_tampered_point_in_one_warning_line(tmp_path):
    grid = write_yaml(tmp_path / "g.yaml", {"base": tiny_base(), "grid": {"seed": [0, 1]}})
    out = tmp_path / "out"
    first = servesim("sweep", grid, "--workers", 1, "--out", out, "--quiet", "--no-report")
    assert first.returncode == 0, first.stderr
    reference = pd.read_parquet(out / "sweep.parquet")
    store = PointStore(out)
    path = store.path(reference["key"].iloc[0])
    path.write_text(_tamper_no_metrics(store.load(reference["key"].iloc[0]), None))  # used to be an ok row
    again = servesim("sweep", grid, "--workers", 1, "--out", out, "--quiet", "--no-report", "--json")
    assert again.returncode == 0, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith(f"servesim sweep: warning: {path}: not a finished sweep point (status ok without")
    info = json.loads(again.stdout)
    assert (info["num_skipped"], info["num_run"], info["num_rerun_bad"]) == (1, 1, 1)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "sweep.parquet"), reference)


def test_a_point_stored_before_the_load_columns_existed_still_fills_them(tmp_path):
    spec = SweepSpec("test", tiny_base(), None, expand({"seed": [0]}, []), 1)
    table = run_sweep(spec, tmp_path, InProcessExecutor()).table
    store = PointStore(tmp_path)
    (key,) = table["key"]
    old = {k: v for k, v in store.load(key).items() if k not in ("workload_kind", "time_scale", "concurrency")}
    store.save(key, old)
    again = run_sweep(spec, tmp_path, InProcessExecutor())
    assert again.num_run == 0 and not again.bad_points
    pd.testing.assert_frame_equal(again.table, table)
