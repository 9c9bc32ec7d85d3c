"""The rate search, steady-state statistics, intervals and the Pareto frontier."""

import math

import numpy as np
import pandas as pd
import pytest

from simulator.planning.points.pareto import pareto_front
from simulator.planning.points.stats import Interval, interval, replicate_seed, t_quantile
from simulator.planning.search.evaluate import CandidateRun, SearchTask, search_task, simulate_rate
from simulator.planning.search.rates import max_feasible_rate
from simulator.planning.search.settings import SearchSettings
from simulator.planning.search.steady import SloTargets, percentile_inf, steady_stats
from tests.simulator.planning.planning_helpers import md1_base, tiny_base


@pytest.mark.parametrize("start", [0.01, 0.7, 3.0, 1000.0])
def test_search_brackets_a_threshold_from_any_start(start):
    calls = []

    def feasible(rate):
        calls.append(rate)
        return rate <= 3.3

    b = max_feasible_rate(feasible, start, rel_tol=0.01)
    assert b.max_rate_per_s <= 3.3 < b.upper_rate_per_s
    assert b.upper_rate_per_s - b.max_rate_per_s <= 0.01 * b.max_rate_per_s
    assert len(calls) == len(set(calls)) == b.num_evaluations


def test_search_reports_infeasible_and_unbounded():
    b = max_feasible_rate(lambda r: False, 1.0, max_halvings=5)
    assert b.max_rate_per_s == 0.0 and b.upper_rate_per_s == 1.0 / 32 and b.num_evaluations == 6
    b = max_feasible_rate(lambda r: True, 1.0, max_doublings=4)
    assert b.max_rate_per_s == 16.0 and b.upper_rate_per_s is None
    with pytest.raises(ValueError, match="positive rate"):
        max_feasible_rate(lambda r: True, 0.0)


def _run(base, slo, **search):
    settings = SearchSettings(**({"requests_per_point": 400, "curve_points": 0} | search))
    return CandidateRun(0, 0, base, None, 7, slo, settings)


@pytest.mark.parametrize(
    ("max_num_seqs", "ttft_p99_ms", "requests", "grid"),
    [
        # one request at a time: waits follow Lindley's recursion, exactly monotone in the rate
        (1, 400.0, 400, np.arange(2.75, 4.25, 0.05)),
        # continuous batching of up to 4: no closed form and no monotonicity guarantee
        (4, 150.0, 1000, np.arange(13.0, 19.0, 0.2)),
    ],
)
def test_bisection_agrees_with_a_brute_force_scan(max_num_seqs, ttft_p99_ms, requests, grid):
    base = tiny_base() | {"policy": {"kind": "vllm_v0", "max_num_seqs": max_num_seqs}}
    slo = SloTargets(ttft_p99_ms=ttft_p99_ms, tpot_p99_ms=None, attainment=0.9)
    run = _run(base, slo, rel_tol=0.01, requests_per_point=requests)
    found = search_task(SearchTask(run, start_rate_per_s=1.0))
    lo, hi = found["max_rate_per_s"], found["upper_rate_per_s"]
    assert found["error"] is None and 0 < lo < hi
    # brute force over a fixed grid, independent of where the bisection landed
    verdicts = np.array([simulate_rate(run, float(r))["meets_slo"] for r in grid])
    step = float(grid[1] - grid[0])
    assert verdicts[0] and not verdicts[-1]
    scan_max = float(grid[np.flatnonzero(verdicts).max()])
    first_miss = float(grid[np.flatnonzero(~verdicts).min()])
    print(
        f"max_num_seqs={max_num_seqs}: bisection {lo:.3f} [{lo:.3f}, {hi:.3f}], scan {scan_max:.3f} (step {step:.3f})"
    )
    # the two brackets of the threshold, [lo, hi] and [scan_max, first_miss], overlap: exactly
    # where feasibility is monotone, within one grid step where batching blurs it
    slack = 0.0 if max_num_seqs == 1 else step
    if max_num_seqs == 1:
        assert list(verdicts) == sorted(verdicts, reverse=True)
    assert lo < first_miss + slack and scan_max < hi + slack
    assert abs(lo - scan_max) <= step + (hi - lo)
    # every search point is recorded, in the order it was simulated
    assert [p["eval_order"] for p in found["points"]] == list(range(len(found["points"])))


def test_steady_state_tells_a_growing_queue_from_a_stable_one():
    slo = SloTargets(ttft_p99_ms=1e9, tpot_p99_ms=None, attainment=0.9)
    run = _run(md1_base(), slo, requests_per_point=2000)  # D = 0.1 s, capacity 10/s
    stable = simulate_rate(run, 5.0)
    overloaded = simulate_rate(run, 15.0)
    assert abs(stable["growth_fraction"]) < 0.02 and stable["stable"] and stable["meets_slo"]
    # served at 10/s while 15/s arrive: a third of the offered load piles up
    assert overloaded["growth_fraction"] == pytest.approx(1 / 3, abs=0.03)
    assert not overloaded["stable"] and not overloaded["meets_slo"] and not overloaded["meets_attainment"]


def test_warmup_and_rejections_in_the_window():
    n = 10
    req = pd.DataFrame(
        {
            "request_id": range(n),
            "arrival_s": np.arange(n, dtype=float),
            "finished_s": np.arange(n) + 0.5,
            "status": ["finished"] * (n - 1) + ["rejected"],
            "ttft_s": [9.0] + [0.1] * (n - 2) + [np.nan],
            "tpot_s": [np.nan] * n,
            "e2el_s": [9.5] + [0.5] * (n - 2) + [np.nan],
        }
    )
    slo = SloTargets(ttft_p99_ms=200.0, tpot_p99_ms=10.0, attainment=0.8)
    s = steady_stats(req, slo, warmup_fraction=0.1, cooldown_fraction=0.0, max_growth_fraction=0.05)
    # the slow first request is warm-up; the rejected last one is measured and infinitely slow
    assert s["num_measured"] == 9 and s["p50_ttft_ms"] == pytest.approx(100.0)
    assert s["p99_ttft_ms"] == math.inf and s["slo_attainment"] == pytest.approx(8 / 9)
    assert not s["meets_slo"] and s["meets_attainment"]
    assert percentile_inf(np.array([1.0, 2.0, 3.0]), 50) == 2.0


def test_intervals():
    values = [1.0, 2.0, 3.0, 4.0]
    t = interval(values, 0.95, "t")
    half = 3.182446305284263 * np.std(values, ddof=1) / 2  # t_{0.975, 3} s / sqrt(4)
    assert (t.value, t.low, t.high) == pytest.approx((2.5, 2.5 - half, 2.5 + half))
    b = interval(values, 0.95, "bootstrap")
    assert b == interval(values, 0.95, "bootstrap") and b.low < 2.5 < b.high and b.high - b.low < t.high - t.low
    assert interval([2.0]).low is None and interval([1.0, None]).value is None
    assert interval([0.1, 5.0], floor=0.0).low == 0.0
    with pytest.raises(ValueError, match="unknown interval method"):
        interval(values, 0.95, "jackknife")
    assert replicate_seed(42, 0) == 42
    seeds = {replicate_seed(s, r) for s in range(3) for r in range(1, 20)}
    assert len(seeds) == 57 and not seeds & {0, 1, 2}


def test_t_intervals_are_scipy_stats_bit_for_bit():
    # interval reads the t quantile from scipy.special (a lighter import than scipy.stats): the same floats
    from scipy import stats

    rng = np.random.default_rng(7)
    for n in range(2, 12):
        values = rng.lognormal(2.0, 0.3, n).tolist()
        for confidence in (0.8, 0.9, 0.95, 0.99):
            sd = float(np.std(values, ddof=1))
            half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
            mean = float(np.mean(values))
            assert interval(values, confidence, "t") == Interval(mean, mean - half, mean + half, n)


def test_t_quantile_closed_form_is_stdtrits_floats():
    # the 2-degree closed form stands for scipy.special.stdtrit (spares its import): the same floats
    from scipy.special import stdtrit

    for q in np.linspace(0.5, 0.99999, 5001)[1:]:
        assert t_quantile(2, float(q)) == float(stdtrit(2, q))
    assert t_quantile(5, 0.975) == float(stdtrit(5, 0.975))


def test_pareto_front():
    points = [(1.0, 10.0), (2.0, 5.0), (2.0, 6.0), (3.0, 5.0), (0.5, 20.0), (1.0, 10.0)]
    assert pareto_front(points) == [True, True, False, False, True, True]
