"""The early stop: a watched run ends only when both steady-state verdicts are certainly False.

Exactness is the test: wherever the watch stops a run, the full run's ``steady_stats`` gives
``meets_slo`` and ``meets_attainment`` False; wherever it does not, the watched run is the
full run, table for table.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.metrics.summary import SLO_SLACK
from simulator.planning.search.early_stop import VerdictKnown, VerdictWatch, p99_threshold
from simulator.planning.search.steady import SloTargets, percentile_inf, steady_stats
from simulator.request import State
from tests.simulator.planning.planning_helpers import tiny_base
from workloads import RequestStream

MAX_GROWTH = 0.05


def _scenario(base: dict[str, Any], rate: float, seed: int = 0, **extra: Any) -> Any:
    base = base | {"seed": seed} | extra
    base["workload"] = base["workload"] | {"arrival": base["workload"]["arrival"] | {"rate_per_s": rate}}
    return validate_scenario(base)


def _tie_base(num_requests: int = 200) -> dict[str, Any]:
    """Constant arrivals and 25 ms steps, no client delays: TTFTs of 25 or 50 ms and TPOTs of 25 ms exactly."""
    return {
        "cost_model": {"kind": "constant", "step_time_s": 0.025},
        "kv_cache": {"num_blocks": 64, "block_size": 16},
        "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0},
        "workload": {
            "num_requests": num_requests,
            "arrival": {"kind": "constant", "rate_per_s": 10.0},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "uniform", "min_tokens": 5, "max_tokens": 60},
                "output": {"kind": "uniform", "min_tokens": 1, "max_tokens": 20},
            },
        },
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _watched(cfg: Any, slo: SloTargets, warmup: float, cooldown: float, interval: float | None, slo_only: bool = False):
    sim = build(cfg)
    watch = VerdictWatch(sim.stream, slo, warmup, cooldown, sim.stream_delay_s, interval, slo_only)
    watch.attach(sim)
    try:
        return sim.run(), None, watch
    except VerdictKnown as stop:
        return None, stop, watch


def check_point(
    cfg: Any,
    slo: SloTargets,
    warmup: float = 0.2,
    cooldown: float = 0.1,
    interval: float | None = None,
    slo_only: bool = False,
) -> tuple[VerdictKnown | None, dict[str, Any], VerdictWatch]:
    """Run ``cfg`` with and without a watch and assert the watch is exact; returns its stop and the full verdicts."""
    full = build(cfg).run()
    stats = steady_stats(full.requests, slo, warmup, cooldown, MAX_GROWTH)
    watched, stop, watch = _watched(cfg, slo, warmup, cooldown, interval, slo_only)
    if stop is not None:
        assert not stats["meets_slo"], (stop, stats)
        assert stop.attainment_known == ("attainment" in stop.reason)
        assert not (stop.attainment_known and stats["meets_attainment"]), (stop, stats)
        assert slo_only or stop.attainment_known
        assert stop.num_admitted <= len(full.requests)
    else:
        assert watched is not None
        pd.testing.assert_frame_equal(watched.requests, full.requests, check_exact=True)
        pd.testing.assert_frame_equal(watched.steps, full.steps, check_exact=True)
        assert watched.summary.keys() == full.summary.keys()
        assert all(_same(watched.summary[k], full.summary[k]) for k in full.summary), "the watch changed the run"
    return stop, stats, watch


# -- the p99 rule -----------------------------------------------------------------------


def test_p99_threshold_is_nondecreasing_and_certain():
    thresholds = [p99_threshold(n) for n in range(1, 20001)]
    assert all(b >= a for a, b in itertools.pairwise(thresholds))  # a population's upper bound is safe
    assert p99_threshold(1) == 1 and p99_threshold(100) == 2 and p99_threshold(1400) == 15
    rng = np.random.default_rng(0)
    limit = 100.0 * (1 + SLO_SLACK)
    for _ in range(2000):
        n = int(rng.integers(1, 400))
        k = p99_threshold(n)
        below = rng.uniform(0, limit, n - k)
        above = np.where(rng.random(k) < 0.3, np.inf, np.nextafter(limit, np.inf) + rng.exponential(1.0, k) * 1e-9)
        values = rng.permutation(np.concatenate([below, above]))
        assert percentile_inf(values, 99) > limit
        # one fewer does not settle it: the rest may sit at zero and those just past the bound
        fewer = np.concatenate([np.zeros(n - k + 1), np.full(k - 1, np.nextafter(limit, np.inf))])
        assert percentile_inf(fewer, 99) <= limit


# -- overloaded points stop early --------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "rate", "slo"),
    [
        ({}, 300.0, SloTargets(50, 15, 0.9)),
        ({}, 200.0, SloTargets(None, 10.5, 0.9)),
        ({}, 400.0, SloTargets(None, None, 0.9, e2el_p99_ms=150)),
        ({"client": {"stream_delay_s": 0.01}}, 300.0, SloTargets(50, None, 0.99)),
        ({"policy": {"kind": "vllm_v0"}}, 300.0, SloTargets(50, 15, 0.9)),
        ({"groups": [{"role": "prefill"}, {"role": "decode"}]}, 300.0, SloTargets(50, 15, 0.9)),
    ],
    ids=["ttft+tpot", "tpot-only", "e2el-only", "stream-delay", "vllm-v0", "disaggregated"],
)
def test_overloaded_tiny_points_stop_early_with_false_verdicts(extra, rate, slo):
    cfg = _scenario(tiny_base(400), rate, **extra)
    stop, stats, _ = check_point(cfg, slo)
    assert stop is not None, stats
    assert stop.num_admitted < 400
    assert not stats["meets_slo"] and not stats["meets_attainment"]


def test_overloaded_llama_point_stops_early():
    # llama-3.1-8b on one H100 serves about 6 requests/s of the default ShareGPT lengths: 18/s is 3x that
    cfg = validate_scenario(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "seed": 0,
            "workload": {"num_requests": 400, "arrival": {"kind": "poisson", "rate_per_s": 18.0}},
            "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        }
    )
    stop, stats, _ = check_point(cfg, SloTargets(1000, 100, 0.9))
    assert stop is not None, stats
    assert stop.num_admitted < 0.6 * 400
    assert "p99 TTFT already above 1000 ms" in stop.reason


# -- feasible and borderline points ------------------------------------------------------


@pytest.mark.parametrize("interval", [None, 0.025, 0.0125])
def test_tie_sweep_is_exact(interval):
    """Requests land exactly on the bounds (TTFT 50 ms, TPOT 25 ms); the sweep crosses the threshold."""
    slo = SloTargets(50, 25, 0.9)
    stopped, passed = 0, 0
    for rate in (10.0, 20.0, 40.0, 45.0, 50.0, 60.0, 70.0, 80.0):
        cfg = _scenario(_tie_base(), rate, seed=1)
        stop, stats, _ = check_point(cfg, slo, interval=interval)
        stopped += stop is not None
        passed += bool(stats["meets_slo"])
    assert stopped and passed
    # the ties are there: requests at the bounds, and they met them
    requests = build(_scenario(_tie_base(), 40.0, seed=1)).run().requests
    assert (np.abs(requests["ttft_s"] * 1000 - 50) < 1e-9).sum() > 10
    assert (np.abs(requests["tpot_s"] * 1000 - 25) < 1e-9).sum() > 10


def test_feasible_points_run_unchanged():
    slo = SloTargets(50, 15, 0.9)
    for rate in (5.0, 50.0, 100.0):
        stop, stats, watch = check_point(_scenario(tiny_base(300), rate), slo)
        assert stop is None and stats["meets_slo"]
        assert watch.num_checks > 0


def test_randomized_sweep_is_exact():
    rng = random.Random(7)
    outcomes = {True: 0, False: 0}
    for _ in range(60):
        base = tiny_base(int(rng.choice((60, 150, 250))), step_time_s=rng.choice((0.01, 0.02)))
        if rng.random() < 0.3:
            base["workload"]["lengths"]["output"] = {"kind": "uniform", "min_tokens": 1, "max_tokens": 3}
        extra: dict[str, Any] = {}
        if rng.random() < 0.3:
            extra["client"] = {"stream_delay_s": rng.choice((0.002, 0.02)), "ingest_delay_s": 0.0}
        ttft = rng.choice((None, 30.0, 50.0, 80.0))
        tpot = rng.choice((None, 12.0, 15.0, 25.0))
        e2el = rng.choice((None, None, 200.0, 400.0))
        if ttft is tpot is e2el is None:
            ttft = 50.0
        slo = SloTargets(ttft, tpot, rng.choice((0.5, 0.9, 0.99, 1.0)), e2el)
        rate = rng.uniform(60.0, 260.0) / (base["cost_model"]["step_time_s"] / 0.01)
        warmup, cooldown = rng.choice(((0.2, 0.1), (0.0, 0.0), (0.3, 0.2)))
        interval = rng.choice((None, 0.005, 0.03))
        stop, _, _ = check_point(
            _scenario(base, rate, seed=rng.randrange(1000), **extra), slo, warmup, cooldown, interval
        )
        outcomes[stop is not None] += 1
    assert outcomes[True] >= 5 and outcomes[False] >= 5, outcomes


# -- the pieces --------------------------------------------------------------------------


def test_observers_see_each_request_as_it_is_admitted():
    sim = build(_scenario(tiny_base(30), 20.0))
    seen = []
    sim.observe(lambda req: seen.append((req.request_id, req.state, sim.env.now >= req.arrival_s)))
    sim.run()
    assert [rid for rid, _, _ in seen] == list(range(30))
    assert all(state is State.QUEUED and after for _, state, after in seen)


def test_the_watch_ends_with_the_run():
    sim = build(_scenario(tiny_base(100), 20.0))
    watch = VerdictWatch(sim.stream, SloTargets(50, 15, 0.9), 0.2, 0.1, sim.stream_delay_s)
    watch.attach(sim)
    sim.run()
    assert sim.env.peek() == math.inf
    assert 0 < watch.num_checks <= 400 + 1


def test_verdict_known_keeps_its_data_through_simpy():
    # SimPy re-creates an exception escaping a process from its args
    e = VerdictKnown(12, 3.5, "why")
    copy = type(e)(*e.args)
    assert (copy.num_admitted, copy.now_s, copy.reason) == (12, 3.5, "why")
    assert "12 requests admitted" in str(copy)


def test_applies_only_to_open_streams_with_a_latency_bound():
    one = np.ones(3, dtype=np.int64)
    open_stream = RequestStream(np.array([0.0, 1.0, 2.0]), one, one)
    sessions = RequestStream(
        np.array([0.0, 1.0, 2.0]), one, one, parent=np.array([-1, 0, 1]), think_s=np.array([0.0, 1.0, 1.0])
    )
    assert VerdictWatch.applies(open_stream) and VerdictWatch.applies(open_stream, SloTargets(10, None, 0.9))
    assert not VerdictWatch.applies(sessions)
    assert not VerdictWatch.applies(open_stream, SloTargets(None, None, 0.9))
    with pytest.raises(ValueError, match="early stop needs"):
        VerdictWatch(sessions, SloTargets(10, None, 0.9), 0.0, 0.0, 0.0)


def test_an_slo_only_watch_stops_at_the_p99_verdict_and_no_later():
    """``slo_only`` (a probe's watch): exact on ``meets_slo`` (the attainment verdict only where it says it is
    known), never later than the watch of both verdicts, and sooner where the attainment needs more failures."""
    rng = random.Random(11)
    sooner = 0
    for _ in range(40):
        base = tiny_base(int(rng.choice((150, 250))), step_time_s=rng.choice((0.01, 0.02)))
        slo = SloTargets(rng.choice((None, 30.0, 50.0)), rng.choice((12.0, 15.0, 25.0)), rng.choice((0.5, 0.9)))
        rate = rng.uniform(60.0, 260.0) / (base["cost_model"]["step_time_s"] / 0.01)
        cfg = _scenario(base, rate, seed=rng.randrange(1000))
        stop, stats, _ = check_point(cfg, slo, slo_only=True)
        both, _, _ = check_point(cfg, slo)
        if both is not None:
            assert stop is not None and stop.num_admitted <= both.num_admitted
            sooner += stop.num_admitted < both.num_admitted
        elif stop is not None:
            assert not stop.attainment_known and stats["meets_attainment"] is not None
    assert sooner
