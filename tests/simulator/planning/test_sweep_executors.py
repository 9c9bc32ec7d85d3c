"""A sweep of more than 100 points gives the same table in this process, on a process pool and on Ray."""

import time

import pandas as pd
import pytest

from simulator.planning.points.executors import InProcessExecutor, LocalPoolExecutor, RayExecutor, make_executor
from simulator.planning.sweeps.grid import SweepSpec, expand
from simulator.planning.sweeps.sweep import run_sweep
from tests.simulator.planning.planning_helpers import RAY_TEST_ENV, shout, tiny_base

GRID = {
    "workload.arrival.rate_per_s": [2.0, 5.0, 10.0, 20.0, 40.0],
    "policy.max_num_seqs": [1, 2, 8, 32],
    "seed": [0, 1, 2, 3, 4, 5],
}


def _spec(replicates: int = 1, grid=GRID, points=()) -> SweepSpec:
    return SweepSpec("test grid", tiny_base(), None, expand(grid, list(points)), replicates)


def _sweep(executor, out, spec=None):
    start = time.perf_counter()
    try:
        outcome = run_sweep(spec or _spec(), out, executor)
    finally:
        executor.close()
    return outcome, time.perf_counter() - start


@pytest.mark.slow
def test_the_table_is_identical_on_every_executor(tmp_path, monkeypatch):
    for name, value in RAY_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    serial, serial_s = _sweep(InProcessExecutor(), tmp_path / "serial")
    _, pool_s = _sweep(LocalPoolExecutor(2), tmp_path / "pool")
    _, ray_s = _sweep(RayExecutor(workers=2), tmp_path / "ray")
    print(f"120 points: in-process {serial_s:.1f} s, pool x2 {pool_s:.1f} s, ray x2 {ray_s:.1f} s")
    assert serial.num_points == 120 and serial.num_run == 120 and serial.num_errors == 0
    tables = [pd.read_parquet(d / "sweep.parquet") for d in (tmp_path / "serial", tmp_path / "pool", tmp_path / "ray")]
    for other in tables[1:]:
        pd.testing.assert_frame_equal(tables[0], other)
    table = tables[0]
    assert list(table["point"]) == list(range(120)) and table["key"].is_unique
    assert (table["status"] == "ok").all() and (table["completed"] == 25).all()
    # the parameters are real inputs: seeds change the results, rates change the load
    first = table[(table["policy.max_num_seqs"] == 8) & (table["workload.arrival.rate_per_s"] == 10.0)]
    assert first["p99_ttft_ms"].nunique() == 6
    by_rate = table.groupby("workload.arrival.rate_per_s")["mean_ttft_ms"].mean()
    assert by_rate.is_monotonic_increasing
    assert {"tp", "num_gpus", "hardware_name", "cost_per_hour_usd", "config_json", "request_goodput"} <= set(table)


def test_replicates_give_intervals_and_errors_are_rows(tmp_path):
    spec = _spec(replicates=3, grid={"policy.max_num_seqs": [1, 8]}, points=[{"model": "llama-3.1-70b"}])
    # a 70B model on one 80 GB GPU does not fit once the KV cache is sized from memory
    spec = SweepSpec(spec.source, {**spec.base, "kv_cache": {"block_size": 16}}, None, spec.points, 3)
    outcome, _ = _sweep(make_executor("local", 1), tmp_path, spec)
    table = outcome.table
    assert list(table["status"]) == ["ok", "ok", "error"]
    assert "does not fit" in table["error"].iloc[2]
    ok = table.iloc[0]
    assert ok["p99_ttft_ms_low"] <= ok["p99_ttft_ms"] <= ok["p99_ttft_ms_high"]
    assert ok["p99_ttft_ms_low"] < ok["p99_ttft_ms_high"]  # independent seeds differ
    # the same grid with one replicate is a different set of points (a different key)
    again, _ = _sweep(make_executor("local", 1), tmp_path, _spec(grid={"policy.max_num_seqs": [1, 8]}))
    assert again.num_skipped == 0 and again.num_run == 2


def test_make_executor_checks_its_options():
    with pytest.raises(ValueError, match="--address applies to --executor ray only"):
        make_executor("local", 2, "ray://x:1")
    with pytest.raises(ValueError, match="--workers must be at least 1"):
        make_executor("local", 0)
    with pytest.raises(ValueError, match="unknown executor 'dask'"):
        make_executor("dask")
    assert isinstance(make_executor("local", 1), InProcessExecutor)


def test_a_local_pool_starts_every_worker_at_once():
    """A first stage of one task (a lone search) does not leave the other workers to start in a later stage."""
    pool = LocalPoolExecutor(2)
    try:
        assert [r for _, r in pool.map_unordered(abs, [-3])] == [3]
        assert len(pool._pool._processes) == 2
    finally:
        pool.close()


@pytest.mark.slow
def test_a_local_pool_worker_ends_at_once_on_close_with_its_output_flushed(capfd):
    """Closing the pool ends each worker without tearing down its heap (``os._exit``): exit status 0, and what a
    task printed still reaches the terminal."""
    pool = LocalPoolExecutor(2)
    try:
        assert sorted(r for _, r in pool.map_unordered(shout, ["a", "b"])) == ["a", "b"]
        processes = list(pool._pool._processes.values())
    finally:
        pool.close()
    assert [p.exitcode for p in processes] == [0, 0]
    out = capfd.readouterr().out
    assert "worker says a" in out and "worker says b" in out
