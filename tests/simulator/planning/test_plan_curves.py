"""Capacity curves: the grid's loads moved to runs the plan already has, and those runs' rows bit for bit what a
new curve run gives."""

import math

import pytest

from simulator.planning.plans.curves import full_runs, snap
from simulator.planning.search.evaluate import STAT_KEYS

SILICON_BASE = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "workload": {
        "num_requests": 300,
        "arrival": {"kind": "poisson", "rate_per_s": 10.0},
        "lengths": {
            "kind": "independent",
            "prompt": {"kind": "lognormal", "median_tokens": 512, "sigma": 0.8, "max_tokens": 4096},
            "output": {"kind": "lognormal", "median_tokens": 128, "sigma": 0.8, "max_tokens": 1024},
        },
    },
    "slo": {"ttft_ms": 500, "tpot_ms": 40},
}
COMPARED = (*STAT_KEYS, "stable", "meets_slo", "meets_attainment", "request_throughput", "output_throughput")


def test_snap_moves_a_grid_load_to_the_nearest_known_one_within_half_a_spacing():
    known = [1.9, 2.2, 3.5, 4.4, 10.0]
    # 2 takes 1.9 (nearer than 2.2); 3.5 is half a spacing from 3 and 4 (not less): neither takes it; 4 takes 4.4
    assert snap([1.0, 2.0, 3.0, 4.0], 1.0, known) == [(1.0, False), (1.9, True), (3.0, False), (4.4, True)]
    assert snap([1.0, 2.0], 1.0, [1.5]) == [(1.0, False), (2.0, False)]
    assert snap([1.0, 2.0], 1.0, [1.4, 1.6]) == [(1.4, True), (1.6, True)]
    assert snap([2.0, 4.0], 2.0, [2.5]) == [(2.5, True), (4.0, False)]  # each known load stands for one grid load


def test_full_runs_are_loads_every_replicate_ran_to_the_end_without_overrides():
    def row(r, load, phase="search", stopped=False, candidate=0):
        return {"candidate": candidate, "replicate": r, "rate_per_s": load, "phase": phase, "stopped_early": stopped}

    rows = [
        row(0, 1.0),
        row(1, 1.0, "probe"),
        row(0, 2.0),
        row(1, 2.0, stopped=True),  # stopped early: no statistics
        row(0, 3.0),  # one replicate only
        row(0, 4.0, "operating"),
        row(1, 4.0, "operating"),
        row(0, 5.0, candidate=1),
        row(1, 5.0, candidate=1),
        row(0, 6.0, "curve"),
        row(1, 6.0, "curve"),
    ]
    assert sorted(full_runs(rows, 0, 2, plain_operating=True)) == [1.0, 4.0]
    assert sorted(full_runs(rows, 0, 2, plain_operating=False)) == [1.0]
    assert [r["replicate"] for r in full_runs(rows, 0, 2, True)[4.0]] == [0, 1]


def _same(a: dict, b: dict) -> bool:
    return all(
        a[k] == b[k] or (isinstance(a[k], float) and isinstance(b[k], float) and math.isnan(a[k]) and math.isnan(b[k]))
        for k in COMPARED
    )


@pytest.mark.slow
@pytest.mark.parametrize("exhaustive", [False, True])
def test_curve_rows_of_runs_already_made_equal_new_runs(exhaustive):
    """The chosen candidate's curve has the same loads at every replicate; the loads it took from the search or
    the operating point (``num_simulated`` 0) have rows equal to a new curve run's, and a guided search's full
    run (its verdict watch attached) equals a plain run at its load."""
    from simulator.planning.plans.candidates import CandidateSet, CandidateSpec
    from simulator.planning.plans.outcome import candidate_run
    from simulator.planning.plans.plan import execute_plan, prepare_plan
    from simulator.planning.points.executors import InProcessExecutor
    from simulator.planning.search.evaluate import RatesTask, rates_task
    from simulator.planning.search.settings import PlanRequest

    cset = CandidateSet("test", [CandidateSpec("h100", {})], {})
    request = PlanRequest.model_validate(
        {
            "target_rate_per_s": 60.0,
            "replicates": 2,
            "slo_ttft_p99_ms": 500,
            "slo_tpot_p99_ms": 40,
            "search": {"requests_per_point": 300, "curve_points": 8, "exhaustive": exhaustive},
        }
    )
    inputs = prepare_plan(SILICON_BASE, None, "s", cset, request)
    result = execute_plan(inputs, request, InProcessExecutor())
    points = result.points
    curve = points[points["phase"] == "curve"]
    loads = [sorted(curve[curve["replicate"] == r]["rate_per_s"]) for r in range(2)]
    assert loads[0] == loads[1] and len(loads[0]) == 8
    reused = curve[curve["num_simulated"] == 0]
    assert len(reused) >= 2  # the operating point's load at least, at both replicates
    operating = set(points[points["phase"] == "operating"]["rate_per_s"])
    c = inputs.candidates[0]

    def new_run(r: int, load: float) -> dict:
        return rates_task(RatesTask(candidate_run(c, r, None, request), [("curve", load, {})]))[0]

    for row in reused.to_dict("records"):
        assert _same(row, new_run(row["replicate"], row["rate_per_s"]))
    assert set(reused["rate_per_s"]) & operating
    searched = points[(points["phase"] == "search") & ~points["stopped_early"].astype(bool)]
    row = searched.sort_values("rate_per_s").to_dict("records")[-1]  # the fastest full search run
    assert _same(row, new_run(row["replicate"], row["rate_per_s"]))
    # the work counts each run once
    assert result.plan["simulated_requests"] == int(points["num_simulated"].sum())
