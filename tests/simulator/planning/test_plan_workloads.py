"""`servesim sweep` and `servesim plan` over every workload kind: trace replay, sessions, closed loop.

A sweep varies the load knob of each kind (a trace's time scale, the session start rate, the
closed loop's users); a plan searches it (a trace's request rate through its time scale,
sessions per second, users) and reads the SLOs from the scenario's own ``slo:`` block.
"""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from simulator.planning.plans.candidates import scenario_only
from simulator.planning.plans.plan import execute_plan, prepare_plan
from simulator.planning.points.executors import InProcessExecutor, RayExecutor
from simulator.planning.search.evaluate import (
    CandidateRun,
    SearchTask,
    rate_config,
    run_load,
    search_task,
    simulate_rate,
)
from simulator.planning.search.load import CLOSED_LOOP_REQUESTS_PER_USER, stream_rate
from simulator.planning.search.settings import PlanRequest, SearchSettings
from simulator.planning.search.steady import SloTargets
from simulator.planning.sweeps.grid import load_grid
from simulator.planning.sweeps.sweep import run_sweep
from tests.simulator.planning.planning_helpers import RAY_TEST_ENV, servesim, write_yaml
from workloads import generate

TRACE_ROWS, TRACE_RATE = 300, 4.0
LENGTHS = {"kind": "independent", "prompt": {"kind": "fixed", "tokens": 20}, "output": {"kind": "fixed", "tokens": 4}}
COMMON = {
    "policy": {"kind": "vllm_v0", "max_num_seqs": 4},
    "cost_model": {"kind": "constant", "step_time_s": 0.01, "per_token_s": 1e-5},
    "kv_cache": {"num_blocks": 256, "block_size": 16},
    "slo": {"ttft_ms": 150, "tpot_ms": 20},
}
WORKLOADS = {
    "trace": {"kind": "trace", "source": "trace.csv"},  # relative to the scenario file
    "sessions": {
        "kind": "sessions",
        "num_sessions": 20,
        "arrival": {"kind": "poisson", "rate_per_s": 1.0},
        "turns": {"kind": "fixed", "count": 3},
        "user_tokens": {"kind": "fixed", "tokens": 20},
        "output_tokens": {"kind": "fixed", "tokens": 4},
        "think_s": {"kind": "fixed", "seconds": 0.2},
    },
    "closed_loop": {"kind": "closed_loop", "concurrency": 2, "num_requests": 40, "lengths": LENGTHS},
}
# (swept path, low load, high load, the row's load column)
LOADS = {
    "trace": ("workload.time_scale", 1.0, 8.0, "time_scale"),
    "sessions": ("workload.arrival.rate_per_s", 0.5, 8.0, "rate_per_s"),
    "closed_loop": ("workload.concurrency", 1, 8, "concurrency"),
}
UNITS = {
    "trace": ("trace_rate", "req/s"),
    "sessions": ("session_rate", "sessions/s"),
    "closed_loop": ("concurrency", "users"),
}


def _trace_times() -> np.ndarray:
    gaps = np.random.default_rng(3).exponential(1 / TRACE_RATE, TRACE_ROWS)
    return np.round(np.cumsum(gaps) - gaps[0], 6)


def _scenario(folder, kind):
    """A scenario of workload ``kind`` in ``folder`` (with the trace file it replays)."""
    times = _trace_times()
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t:.6f},20,4" for t in times]
    (folder / "trace.csv").write_text("\n".join(lines) + "\n")
    return write_yaml(folder / f"{kind}.yaml", COMMON | {"workload": WORKLOADS[kind]})


def _grid(folder, kind):
    path, low, high, _ = LOADS[kind]
    _scenario(folder, kind)
    return write_yaml(folder / f"grid-{kind}.yaml", {"base": f"{kind}.yaml", "grid": {path: [low, high]}})


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_sweep_varies_the_load_of_every_workload_kind(tmp_path, kind):
    grid = _grid(tmp_path, kind)
    out = tmp_path / "out"
    proc = servesim("sweep", grid, "--workers", 2, "--out", out, "--quiet", "--no-report", timeout=180)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_parquet(out / "sweep.parquet")
    path, low, high, column = LOADS[kind]
    assert list(table["status"]) == ["ok", "ok"] and (table["workload_kind"] == kind).all()
    assert list(table[column]) == [low, high] and list(table[path]) == [low, high]
    if kind != "sessions":  # rate_per_s is the arrival process's: none for a timed trace or a closed loop
        assert table["rate_per_s"].isna().all()
    # the knob is a real input: more load, more requests served per second
    assert table["request_throughput"].iloc[1] > 2 * table["request_throughput"].iloc[0]


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_plan_searches_the_load_of_every_workload_kind_with_the_scenario_slos(tmp_path, kind):
    scenario = _scenario(tmp_path, kind)
    out = tmp_path / "plan"
    proc = servesim(
        "plan", scenario, "--requests-per-point", 60, "--curve-points", 2, "--rel-tol", 0.1,
        "--workers", 2, "--out", out, "--quiet", "--no-report", timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((out / "plan.json").read_text())
    # no SLO flag: the scenario's own slo: block
    assert plan["slo"] | {"attainment": None} == {
        "ttft_p99_ms": 150.0,
        "tpot_p99_ms": 20.0,
        "e2el_p99_ms": None,
        "attainment": None,
    }
    load_kind, unit = UNITS[kind]
    assert plan["load"]["kind"] == load_kind and plan["load"]["unit"] == unit
    assert f"plan for {plan['target_rate_per_s']:g} {unit}" in proc.stdout
    times = _trace_times()
    own = {"trace": (TRACE_ROWS - 1) / times[-1], "sessions": 1.0, "closed_loop": 2.0}[kind]
    assert plan["target_rate_per_s"] == pytest.approx(own)
    (c,) = plan["candidates"]
    assert c["status"] == "feasible" and plan["chosen"] == "scenario"
    assert c["max_rate_per_s"]["value"] > 0 and c["replicas"]["value"] >= 1
    points = pd.read_parquet(out / "points.parquet")
    assert {"search", "operating"} <= set(points["phase"])
    if kind == "closed_loop":  # whole users everywhere
        assert (points["rate_per_s"] == points["rate_per_s"].round()).all()
        assert c["max_rate_per_s"]["value"] == round(c["max_rate_per_s"]["value"])


def _run(folder, kind, requests=60, rel_tol=0.1, slo=None) -> CandidateRun:
    scenario = _scenario(folder, kind)
    config = yaml.safe_load(scenario.read_text())
    settings = SearchSettings(requests_per_point=requests, curve_points=0, rel_tol=rel_tol)
    slo = slo or SloTargets(ttft_p99_ms=150.0, tpot_p99_ms=20.0, attainment=0.9)
    return CandidateRun(0, 0, config, str(folder), 0, slo, settings)


def test_a_trace_rate_is_its_time_scale_times_its_own_rate(tmp_path):
    run = _run(tmp_path, "trace", requests=200)
    load = run_load(run)
    assert load.count == 200 and load.path == "workload.time_scale"
    for rate in (1.0, 3.0, 25.0):
        cfg = rate_config(run, rate, load=load)
        stream = generate(cfg.workload, cfg.seed, tmp_path)
        assert len(stream) == 200 and stream_rate(stream) == pytest.approx(rate)
        assert cfg.workload.time_scale == pytest.approx(rate / load.native_rate_per_s)
    # a trace shorter than the points replays all of it
    assert run_load(_run(tmp_path, "trace", requests=1000)).count == TRACE_ROWS


def test_sessions_points_hold_about_the_requests_asked_for(tmp_path):
    run = _run(tmp_path, "sessions", requests=100)
    load = run_load(run)
    cfg = rate_config(run, 2.0, load=load)
    assert cfg.workload.num_sessions == 34 and cfg.workload.arrival.rate_per_s == 2.0  # 3 calls each
    assert len(generate(cfg.workload, cfg.seed, tmp_path)) == 102


def test_a_closed_loop_search_finds_the_most_users_a_brute_force_scan_finds(tmp_path):
    # one request at a time and a TTFT bound: every extra user waits one more service time
    run = _run(tmp_path, "closed_loop", requests=60, rel_tol=1e-6)
    run = CandidateRun(
        0, 0, run.config | {"policy": {"kind": "vllm_v0", "max_num_seqs": 1}}, run.base_dir, 0,
        SloTargets(ttft_p99_ms=200.0, tpot_p99_ms=None, attainment=0.9), run.search,
    )  # fmt: skip
    found = search_task(SearchTask(run, 2.0, 2.0))
    lo, hi = found["max_rate_per_s"], found["upper_rate_per_s"]
    assert found["error"] is None and hi == lo + 1  # whole users: the bracket closes to one user
    verdicts = [simulate_rate(run, float(users))["meets_slo"] for users in range(1, int(hi) + 3)]
    assert verdicts == sorted(verdicts, reverse=True)  # monotone in the users
    assert sum(verdicts) == lo
    cfg = rate_config(run, 7.0)
    assert cfg.workload.concurrency == 7 and cfg.workload.num_requests == max(60, 7 * CLOSED_LOOP_REQUESTS_PER_USER)


def test_plan_slo_flags_override_the_scenario_block_and_e2el_counts(tmp_path):
    scenario = _scenario(tmp_path, "closed_loop")
    data = yaml.safe_load(scenario.read_text())
    data["slo"] = {"ttft_ms": 150, "e2el_ms": 1e-3}  # an end-to-end bound nothing can meet
    write_yaml(scenario, data)
    out = tmp_path / "plan"
    proc = servesim(
        "plan", scenario, "--slo-tpot-ms", 25, "--requests-per-point", 40, "--curve-points", 0, "--rel-tol", 0.2,
        "--workers", 1, "--out", out, "--quiet", "--no-report", "--json", timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["slo"]["ttft_p99_ms"] == 150 and plan["slo"]["tpot_p99_ms"] == 25 and plan["slo"]["e2el_p99_ms"] == 1e-3
    (c,) = plan["candidates"]
    assert c["status"] == "infeasible" and c["reason"].startswith("no concurrency down to 1 users")
    points = pd.read_parquet(out / "points.parquet")
    assert (points["slo_e2el_p99_ms"] == 1e-3).all() and not points["meets_slo"].any()


@pytest.mark.slow
def test_sweeps_and_plans_of_every_kind_are_the_same_on_ray(tmp_path, monkeypatch):
    for name, value in RAY_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # relative paths: the grid's base and the trace file
    request = PlanRequest(
        slo_ttft_p99_ms=150.0,
        slo_tpot_p99_ms=20.0,
        search={"requests_per_point": 60, "curve_points": 2, "rel_tol": 0.1},
    )
    specs, plans = {}, {}
    for kind in WORKLOADS:
        specs[kind] = load_grid(_grid(tmp_path, kind).relative_to(tmp_path))
        scenario = _scenario(tmp_path, kind).relative_to(tmp_path)
        plans[kind] = prepare_plan(
            yaml.safe_load(scenario.read_text()), scenario.parent, str(scenario), scenario_only(), request
        )
    ray = RayExecutor(workers=2)
    try:
        for kind in WORKLOADS:
            on_ray = run_sweep(specs[kind], tmp_path / f"ray-{kind}", ray).table
            here = run_sweep(specs[kind], tmp_path / f"here-{kind}", InProcessExecutor()).table
            assert (on_ray["status"] == "ok").all()
            pd.testing.assert_frame_equal(on_ray, here)
            planned = execute_plan(plans[kind], request, ray)
            reference = execute_plan(plans[kind], request, InProcessExecutor())
            assert planned.plan == reference.plan and planned.plan["chosen"] == "scenario"
            pd.testing.assert_frame_equal(planned.points, reference.points)
    finally:
        ray.close()


def test_editing_the_trace_file_runs_its_points_again(tmp_path):
    spec = load_grid(_grid(tmp_path, "trace"))
    first = run_sweep(spec, tmp_path / "out", InProcessExecutor())
    assert first.num_run == 2
    same = run_sweep(load_grid(tmp_path / "grid-trace.yaml"), tmp_path / "out", InProcessExecutor())
    assert same.num_run == 0 and same.num_skipped == 2
    trace = tmp_path / "trace.csv"
    trace.write_text(trace.read_text().replace(",20,4\n", ",20,8\n"))  # longer outputs, same file name
    edited = run_sweep(load_grid(tmp_path / "grid-trace.yaml"), tmp_path / "out", InProcessExecutor())
    assert edited.num_run == 2 and edited.num_skipped == 0
    assert (edited.table["total_output_tokens"] == 2 * first.table["total_output_tokens"]).all()
