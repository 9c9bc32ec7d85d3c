"""Prediction intervals from servesim's measured error: split-conformal bounds, their coverage, where they widen."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from simulator.metrics.intervals import (
    LEVEL,
    METRICS,
    conformal_bounds,
    coverage,
    fit_prediction_error,
    needed,
    shipped_prediction_error,
)


def test_bounds_take_the_finite_sample_ranks():
    scores = list(range(1, 10))  # n = 9: at 80 % each side misses 10 %: ranks floor(10 x 0.1) = 1, ceil(10 x 0.9) = 9
    assert conformal_bounds(scores, 0.8) == (1.0, 9.0)
    assert needed(0.8) == 9
    with pytest.raises(ValueError, match="8 calibration points cannot bound a 80% interval"):
        conformal_bounds(scores[:8], 0.8)
    scores = list(range(1, 100))  # n = 99: ranks 10 and 90
    assert conformal_bounds(scores, 0.8) == (10.0, 90.0)


def test_held_out_coverage_is_the_level():
    rng = np.random.default_rng(7)
    ratios = np.exp(rng.normal(0.2, 0.3, size=4000))  # measured / predicted, a biased and noisy model
    error = fit_prediction_error({"mean_tpot_ms": [("vllm", r) for r in ratios[:2000]]})
    predicted = rng.uniform(5, 50, size=2000)
    rows = [("vllm", p, p * r) for p, r in zip(predicted, ratios[2000:], strict=True)]
    assert coverage(error, "mean_tpot_ms", rows) == pytest.approx(LEVEL, abs=0.03)
    iv = error.interval("mean_tpot_ms", 10.0, "vllm")
    assert iv is not None and iv.low > 10.0 * math.exp(0.2 - 0.6) and iv.high < 10.0 * math.exp(0.2 + 0.6)


def test_an_interval_widens_where_the_model_is_less_accurate():
    rng = np.random.default_rng(3)
    pairs = [("vllm", r) for r in np.exp(rng.normal(0.0, 0.1, size=60))]
    pairs += [("trtllm", r) for r in np.exp(rng.normal(0.0, 0.5, size=60))]
    pairs += [("sglang", r) for r in np.exp(rng.normal(0.0, 0.3, size=5))]  # too few for bounds of its own
    error = fit_prediction_error({"mean_ttft_ms": pairs})
    exact, rough = error.interval("mean_ttft_ms", 100.0, "vllm"), error.interval("mean_ttft_ms", 100.0, "trtllm")
    assert exact is not None and rough is not None
    assert rough.high / rough.low > 2 * (exact.high / exact.low)
    assert error.interval("mean_ttft_ms", 100.0, "sglang").basis.startswith("pooled")
    assert error.interval("mean_ttft_ms", 0.0, "vllm") is None and error.interval("p99_itl_ms", 1.0, "vllm") is None


def test_the_shipped_bounds_cover_both_metrics_and_say_where_they_come_from():
    error = shipped_prediction_error()
    assert error is not None and error.level == LEVEL
    for metric in METRICS:
        assert {"pooled", "vllm"} <= set(error.bounds[metric])
        b = error.bounds[metric]["pooled"]
        assert b["lo"] < b["hi"] and b["n"] >= needed(LEVEL)
    assert error.meta["points"] == "InferenceX" and error.meta["aiconfigurator_core"].startswith("0.12")
    assert set(error.meta["coverage_held_out"]) == set(METRICS)


def test_run_shows_and_records_the_intervals(tmp_path, capsys):
    from servesim.cli import main

    out = tmp_path / "run"
    assert main(["run", "--num-requests", "40", "--no-report", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mean TPOT" in printed and "80% interval" in printed and "x servesim's prediction: vllm" in printed
    summary = json.loads((out / "summary.json").read_text())
    low, high = summary["mean_tpot_ms_interval"]
    assert low < high and summary["interval_level"] == LEVEL
    error = shipped_prediction_error()
    b = error.bounds["mean_tpot_ms"]["vllm"]
    assert low == pytest.approx(summary["mean_tpot_ms"] * math.exp(b["lo"]))


def test_other_cost_models_get_no_interval(tmp_path):
    """The bounds measured the silicon model's error; a roofline run's error is not known."""
    from servesim.cli import main

    scenario = tmp_path / "roofline.yaml"
    scenario.write_text("cost_model: {kind: roofline}\nworkload: {num_requests: 20}\n")
    out = tmp_path / "run"
    assert main(["run", str(scenario), "--no-report", "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "mean_tpot_ms_interval" not in summary and "interval_level" not in summary


def test_a_plans_operating_point_gets_the_engines_intervals():
    from types import SimpleNamespace

    from simulator.planning.plans.result import _prediction_intervals
    from simulator.planning.points.stats import Interval

    operating = {"mean_ttft_ms": Interval(100.0), "mean_tpot_ms": Interval(20.0), "p99_tpot_ms": Interval(30.0)}
    error = shipped_prediction_error()
    for policy, engine in (("sglang", "sglang"), ("vllm_v0", "vllm")):
        candidate = SimpleNamespace(resolved={}, config={"policy": {"kind": policy}})
        got = _prediction_intervals(candidate, operating)
        stratum = engine if engine in error.bounds["mean_tpot_ms"] else "pooled"
        b = error.bounds["mean_tpot_ms"][stratum]
        assert got["mean_tpot_ms"] == pytest.approx([20.0 * math.exp(b["lo"]), 20.0 * math.exp(b["hi"])])
        assert got["basis"].startswith(stratum) and "p99_tpot_ms" not in got
    roofline = SimpleNamespace(resolved={}, config={"policy": "vllm", "cost_model": "roofline"})
    assert _prediction_intervals(roofline, operating) == {}


def test_plan_prints_the_chosen_candidates_intervals_as_run_does():
    from servesim.commands.plan import chosen_interval_lines

    point = {
        "mean_ttft_ms": {"value": 100.0},
        "mean_tpot_ms": {"value": 10.0},
        "prediction_intervals": {"mean_tpot_ms": [9.0, 16.0], "level": 0.8, "basis": "vllm, 45 InferenceX points"},
    }
    plan = {"candidates": [{"chosen": False}, {"chosen": True, "operating_point": point}]}
    assert chosen_interval_lines(plan) == [
        "operating point: mean TPOT 10.0 ms, 80% interval 9.0-16.0 ms (measured runs were 0.90-1.60x servesim's "
        "prediction: vllm, 45 InferenceX points)"
    ]
    assert chosen_interval_lines({"candidates": [{"chosen": True, "operating_point": None}]}) == []
