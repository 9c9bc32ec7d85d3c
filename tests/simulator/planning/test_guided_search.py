"""The guided rate search: the plain search's contract with fewer probes, on predicates and on simulations."""

import math
import random

import numpy as np
import pytest

from simulator.planning.search.bound import capacity_bound
from simulator.planning.search.evaluate import CandidateRun, SearchTask, rate_config, search_task
from simulator.planning.search.rates import Probe, guided_max_rate, max_feasible_rate
from simulator.planning.search.settings import SearchSettings
from simulator.planning.search.steady import SloTargets
from tests.simulator.planning.planning_helpers import tiny_base
from workloads import generate


def _queue(threshold: float, capacity: float, scale: float = 1.0):
    """A predicate feasible up to ``threshold`` whose margin is a queue's log latency over its bound (scaled)."""
    calls: list[float] = []

    def probe(rate: float) -> Probe:
        calls.append(rate)
        if rate >= capacity:
            return Probe(False, None)  # unstable: nothing finite to go by
        m = scale * math.log((1 - threshold / capacity) / (1 - rate / capacity))
        feasible = rate <= threshold
        return Probe(feasible, min(m, 0.0) if feasible else max(m, 1e-12))

    return probe, calls


def _check(b, threshold: float, rel_tol: float, calls: list[float]) -> None:
    assert b.max_rate_per_s <= threshold < b.upper_rate_per_s
    assert b.upper_rate_per_s - b.max_rate_per_s <= rel_tol * b.max_rate_per_s * (1 + 1e-12)
    assert len(calls) == len(set(calls)) == b.num_evaluations


def test_the_guided_search_keeps_the_contract_from_any_start_and_hint():
    rng = random.Random(3)
    for _ in range(400):
        threshold = math.exp(rng.uniform(-4, 6))
        capacity = threshold * rng.uniform(1.01, 3.0)
        probe, calls = _queue(threshold, capacity, scale=rng.uniform(0.5, 2.0))
        start = threshold * math.exp(rng.uniform(-3, 3))
        hint = rng.choice([None, capacity * rng.uniform(0.5, 2.0)])  # a hint may be wrong either way
        b = guided_max_rate(
            probe,
            start,
            0.02,
            floor=start / 2**16,
            ceiling=start * 2**16,
            upper_hint=hint,
            first_step=rng.choice([1.0, 0.02]),
        )
        _check(b, threshold, 0.02, calls)
        assert all(start / 2**16 <= r <= start * 2**16 for r in calls)


def test_the_guided_search_works_without_margins_and_for_whole_numbers():
    for threshold in (1, 2, 7, 63, 64, 65, 500):
        for start in (1.0, 5.0, 100.0):
            calls: list[float] = []

            def probe(rate, threshold=threshold, calls=calls):
                calls.append(rate)
                assert rate == round(rate)
                return Probe(rate <= threshold, None)

            b = guided_max_rate(probe, start, 0.02, floor=1, ceiling=65536, integer=True, upper_hint=2.5 * threshold)
            assert b.max_rate_per_s <= threshold < b.upper_rate_per_s
            assert b.upper_rate_per_s - b.max_rate_per_s <= max(1, 0.02 * b.max_rate_per_s)
            assert len(calls) == len(set(calls)) == b.num_evaluations


def test_the_guided_search_reports_unbounded_and_infeasible_like_the_plain_one():
    b = guided_max_rate(lambda r: Probe(True, -1.0), 1.0, 0.02, floor=1 / 32, ceiling=16.0, upper_hint=4.0)
    assert b.max_rate_per_s == 16.0 and b.upper_rate_per_s is None and not b.converged
    b = guided_max_rate(lambda r: Probe(False, 2.0), 1.0, 0.02, floor=1 / 32, ceiling=16.0)
    assert b.max_rate_per_s == 0.0 and b.upper_rate_per_s == 1 / 32 and not b.converged


def test_known_points_are_reused_and_the_start_is_tried_first():
    probe, calls = _queue(10.0, 14.0)
    known = {r: probe(r) for r in (4.0, 8.0, 12.0)}
    calls.clear()
    b = guided_max_rate(probe, 9.9, 0.02, floor=1.0, ceiling=100.0, known=known)
    _check(b, 10.0, 0.02, calls)
    assert calls[0] == 9.9 and not set(calls) & set(known)


def test_a_good_model_and_a_warm_start_need_few_probes():
    rng = random.Random(5)
    cold, warm, plain = [], [], []
    for _ in range(200):
        threshold = math.exp(rng.uniform(-2, 4))
        capacity = threshold * rng.uniform(1.1, 2.0)
        probe, _ = _queue(threshold, capacity)
        start = threshold * rng.uniform(0.7, 1.3)
        cold.append(guided_max_rate(probe, start, 0.02, floor=1e-6, ceiling=1e6, upper_hint=capacity).num_evaluations)
        probe, _ = _queue(threshold, capacity)
        near = threshold * rng.uniform(0.98, 1.02)
        warm.append(
            guided_max_rate(
                probe, near, 0.02, floor=1e-6, ceiling=1e6, upper_hint=near * 1.02, first_step=0.02
            ).num_evaluations
        )
        plain.append(max_feasible_rate(lambda r, t=threshold: r <= t, start, 0.02).num_evaluations)
    assert np.mean(cold) < 0.65 * np.mean(plain)
    assert np.mean(warm) <= 3.5


@pytest.mark.parametrize(("max_num_seqs", "ttft_p99_ms"), [(1, 400.0), (4, 150.0)])
def test_the_guided_search_agrees_with_the_exhaustive_one_on_simulations(max_num_seqs, ttft_p99_ms):
    base = tiny_base() | {"policy": {"kind": "vllm_v0", "max_num_seqs": max_num_seqs}}
    slo = SloTargets(ttft_p99_ms=ttft_p99_ms, tpot_p99_ms=None, attainment=0.9)
    settings = SearchSettings(requests_per_point=400, curve_points=0, rel_tol=0.02)
    run = CandidateRun(0, 0, base, None, 7, slo, settings)
    cfg = rate_config(run, 1.0)
    bound = capacity_bound(cfg, None, generate(cfg.workload, cfg.seed), slo, settings.max_growth_fraction)
    assert bound.upper_rate_per_s is not None and bound.estimate_rate_per_s is not None
    plain = search_task(SearchTask(run, start_rate_per_s=1.0))
    guided = search_task(
        SearchTask(run, bound.estimate_rate_per_s, 1.0, guided=True, capacity_hint=bound.upper_rate_per_s)
    )
    for key in ("max_rate_per_s", "max_goodput_rate_per_s"):
        assert guided[key] == pytest.approx(plain[key], rel=0.02 + 1e-9)
    assert bound.upper_rate_per_s >= plain["max_goodput_rate_per_s"] >= plain["max_rate_per_s"]

    def work(res):
        return sum(p["num_simulated"] for p in res["points"])

    # fewer requests simulated (overloaded points end early), never more points
    assert work(guided) < work(plain) and len(guided["points"]) <= len(plain["points"])
    assert all(p["stopped_early"] is False for p in plain["points"])
