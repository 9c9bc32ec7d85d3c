"""Arrival processes: counts, rates and burstiness match their parameters within sampling error."""

import time

import numpy as np
import pytest
from pydantic import ValidationError

from workloads import WorkloadConfig, generate
from workloads.arrivals import PiecewiseArrivals, arrival_times
from workloads.rng import Stream, rng_for


def _times(arrival: dict, **bound) -> np.ndarray:
    cfg = WorkloadConfig.model_validate({"arrival": arrival, **bound})
    return generate(cfg, seed=11).arrival_s


def _within(count: float, expected: float, sigmas: float = 4.0) -> bool:
    """A Poisson count within ``sigmas`` standard deviations of its mean."""
    return abs(count - expected) <= sigmas * np.sqrt(expected)


def test_constant_is_evenly_spaced():
    t = _times({"kind": "constant", "rate_per_s": 4.0}, num_requests=9)
    assert np.allclose(t, np.arange(1, 10) / 4.0)
    t = _times({"kind": "constant", "rate_per_s": 4.0}, duration_s=10.0)
    assert len(t) == 40 and t[-1] == pytest.approx(10.0)


def test_piecewise_rate_per_segment():
    segments = [
        {"duration_s": 200, "rate_per_s": 2.0},
        {"duration_s": 100, "rate_per_s": 0},
        {"duration_s": 200, "rate_per_s": 10.0},
    ]
    t = _times({"kind": "piecewise", "segments": segments}, duration_s=500.0)
    counts = np.histogram(t, bins=[0, 200, 300, 500])[0]
    assert _within(counts[0], 400) and counts[1] == 0 and _within(counts[2], 2000)
    # Inside a constant stretch the process is Poisson: gaps have CV 1.
    gaps = np.diff(t[t > 300])
    assert gaps.mean() == pytest.approx(0.1, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.08)


def test_piecewise_last_rate_continues_and_repeat_cycles():
    segments = [{"duration_s": 10, "rate_per_s": 1.0}, {"duration_s": 10, "rate_per_s": 5.0}]
    held = _times({"kind": "piecewise", "segments": segments}, duration_s=1000.0)
    assert _within(np.sum(held < 10), 10) and _within(np.sum(held >= 20), 980 * 5)
    cycled = _times({"kind": "piecewise", "segments": segments, "repeat": True}, duration_s=1000.0)
    phase = cycled % 20
    assert _within(np.sum(phase < 10), 50 * 10) and _within(np.sum(phase >= 10), 50 * 50)


def test_piecewise_request_count_and_unreachable_count():
    segments = [{"duration_s": 10, "rate_per_s": 3.0}, {"duration_s": 10, "rate_per_s": 0.0}]
    t = _times({"kind": "piecewise", "segments": segments, "repeat": True}, num_requests=3000)
    assert len(t) == 3000 and np.all(t % 20 < 10)  # never in the silent half
    assert t[-1] == pytest.approx(3000 / 1.5, rel=0.05)  # mean rate over a cycle is 1.5/s
    with pytest.raises(ValueError, match="bound the workload by duration_s"):
        _times({"kind": "piecewise", "segments": segments}, num_requests=10)
    with pytest.raises(ValidationError, match="no request would ever arrive"):
        PiecewiseArrivals.model_validate({"segments": [{"duration_s": 1, "rate_per_s": 0}]})


def test_periodic_mean_rate_and_amplitude():
    arrival = {"kind": "periodic", "rate_per_s": 20.0, "amplitude": 0.6, "period_s": 100.0, "phase_s": 25.0}
    t = _times(arrival, duration_s=10_000.0)
    assert _within(len(t), 200_000)
    # With density proportional to 1 + a sin(theta), E[sin(theta)] = a / 2.
    theta = 2 * np.pi * (t - 25.0) / 100.0
    assert 2 * np.sin(theta).mean() == pytest.approx(0.6, abs=0.01)
    assert np.cos(theta).mean() == pytest.approx(0.0, abs=0.01)
    # Peak quarter vs trough quarter of the cycle: ratio (1 + a) / (1 - a) averaged over the quarter.
    phase = ((t - 25.0) % 100.0) / 100.0
    peak, trough = np.sum(np.abs(phase - 0.25) < 0.125), np.sum(np.abs(phase - 0.75) < 0.125)
    expected = (1 + 0.6 * 0.9003) / (1 - 0.6 * 0.9003)  # mean of sin over the quarter: 2 sqrt(2) / pi
    assert peak / trough == pytest.approx(expected, rel=0.03)


def test_periodic_request_count_and_zero_amplitude_is_poisson():
    t = _times({"kind": "periodic", "rate_per_s": 5.0, "amplitude": 0.0, "period_s": 60.0}, num_requests=20_000)
    assert len(t) == 20_000 and np.all(np.diff(t) >= 0)
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(0.2, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)


def test_gamma_duration_bounded_rate():
    t = _times({"kind": "gamma", "rate_per_s": 8.0, "burstiness": 0.25}, duration_s=2000.0)
    gaps = np.diff(t)
    assert len(t) / 2000.0 == pytest.approx(8.0, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.06)


@pytest.mark.parametrize(
    "arrival",
    [
        {"kind": "poisson", "rate_per_s": 3.0},
        {"kind": "periodic", "rate_per_s": 3.0, "amplitude": 0.5, "period_s": 50},
        {"kind": "piecewise", "segments": [{"duration_s": 5, "rate_per_s": 1}, {"duration_s": 5, "rate_per_s": 6}]},
    ],
)
def test_same_seed_same_times_other_seed_other_times(arrival):
    cfg = WorkloadConfig.model_validate({"num_requests": 200, "arrival": arrival})
    assert np.array_equal(generate(cfg, 5).arrival_s, generate(cfg, 5).arrival_s)
    assert not np.array_equal(generate(cfg, 5).arrival_s, generate(cfg, 6).arrival_s)


def test_a_million_arrivals_generate_quickly():
    for arrival in (
        WorkloadConfig.model_validate({"arrival": {"kind": "gamma", "rate_per_s": 100, "burstiness": 0.5}}).arrival,
        WorkloadConfig.model_validate({"arrival": {"kind": "periodic", "rate_per_s": 100, "amplitude": 0.8}}).arrival,
        WorkloadConfig.model_validate(
            {"arrival": {"kind": "piecewise", "segments": [{"duration_s": 60, "rate_per_s": 50}], "repeat": True}}
        ).arrival,
    ):
        start = time.perf_counter()
        t = arrival_times(arrival, rng_for(0, Stream.ARRIVALS), 1_000_000, None)
        assert len(t) == 1_000_000 and np.all(np.diff(t) >= 0)
        assert time.perf_counter() - start < 5.0, arrival.kind  # vectorised: well under a second here


def test_synthetic_draws_are_those_of_earlier_versions():
    # Pinned from the implementation before trace, session and closed-loop workloads existed:
    # the same scenario and seed must keep giving the same requests.
    s = generate(
        WorkloadConfig.model_validate({"duration_s": 100, "arrival": {"kind": "poisson", "rate_per_s": 3}}), 11
    )
    assert len(s) == 293 and s.arrival_s[-1] == 99.79759342267081
    assert s.arrival_s[:3].tolist() == [1.121769896492187, 2.192744366946478, 2.578105294341348]
    sharegpt = {"kind": "dataset", "name": "sharegpt-8k-multiturn"}  # the default lengths until issue 29
    s = generate(WorkloadConfig.model_validate({"num_requests": 50, "lengths": sharegpt}), 11)
    assert s.arrival_s[:2].tolist() == [0.645889714902016, 1.2625325732565924]
    assert s.num_prompt_tokens[:4].tolist() == [1260, 5339, 1203, 1291]
    # Pinned when the default lengths became the set's percentiles (workloads.default_lengths).
    s = generate(WorkloadConfig.model_validate({"num_requests": 50}), 11)
    assert s.arrival_s[:2].tolist() == [0.645889714902016, 1.2625325732565924]
    assert s.num_prompt_tokens[:4].tolist() == [4364, 1353, 1927, 3111]
    assert s.num_output_tokens[:4].tolist() == [294, 659, 609, 212]


# -- offline: every request at t = 0 ------------------------------------------------------

OFFLINE_LENGTHS = {
    "kind": "independent",
    "prompt": {"kind": "fixed", "tokens": 64},
    "output": {"kind": "fixed", "tokens": 8},
}


def test_offline_puts_every_request_at_zero_whatever_the_seed():
    cfg = WorkloadConfig.model_validate({"num_requests": 37, "arrival": {"kind": "offline"}})
    a, b = generate(cfg, 1), generate(cfg, 99)
    assert len(a) == 37 and np.array_equal(a.arrival_s, np.zeros(37)) and np.array_equal(b.arrival_s, a.arrival_s)
    assert not np.array_equal(a.num_prompt_tokens, b.num_prompt_tokens)  # lengths still follow the seed


def test_offline_with_lengths_and_classes():
    cfg = WorkloadConfig.model_validate(
        {
            "num_requests": 50,
            "arrival": {"kind": "offline"},
            "lengths": OFFLINE_LENGTHS,
            "classes": [{"weight": 1, "priority": 0}, {"weight": 1, "priority": 1}],
        }
    )
    s = generate(cfg, 3)
    assert set(s.arrival_s) == {0.0} and set(s.num_prompt_tokens) == {64} and set(s.priority) == {0, 1}


def test_offline_default_count_and_lengths_only_trace():
    assert len(generate(WorkloadConfig.model_validate({"arrival": {"kind": "offline"}}), 0)) == 1000
    trace = {"kind": "trace", "source": "arxiv", "arrival": {"kind": "offline"}, "num_requests": 20}
    s = generate(WorkloadConfig.model_validate(trace), 0)
    assert len(s) == 20 and set(s.arrival_s) == {0.0}


@pytest.mark.parametrize(
    "workload",
    [
        {"duration_s": 10, "arrival": {"kind": "offline"}},
        {"kind": "trace", "source": "arxiv", "duration_s": 10, "arrival": {"kind": "offline"}},
        {
            "kind": "sessions",
            "duration_s": 10,
            "arrival": {"kind": "offline"},
            "turns": {"kind": "fixed", "count": 2},
            "user_tokens": {"kind": "fixed", "tokens": 10},
            "output_tokens": {"kind": "fixed", "tokens": 10},
        },
    ],
    ids=["synthetic", "trace", "sessions"],
)
def test_offline_refuses_a_duration_naming_the_field(workload):
    with pytest.raises(ValidationError) as err:
        WorkloadConfig.model_validate(workload)
    errors = err.value.errors()
    assert len(errors) == 1 and errors[0]["loc"] == ("duration_s",)
    assert "offline arrivals put every request at t = 0" in errors[0]["msg"]


def test_offline_refuses_a_rate_and_closed_loop_refuses_an_arrival():
    with pytest.raises(ValidationError, match="offline arrivals have no rate"):
        WorkloadConfig.model_validate({"arrival": {"kind": "offline", "rate_per_s": 4}})
    with pytest.raises(ValidationError, match="a closed loop has no arrival process") as err:
        WorkloadConfig.model_validate({"kind": "closed_loop", "concurrency": 4, "arrival": {"kind": "offline"}})
    assert err.value.errors()[0]["loc"] == ("arrival",)


def test_offline_sessions_all_start_at_zero():
    cfg = WorkloadConfig.model_validate(
        {
            "kind": "sessions",
            "num_sessions": 6,
            "arrival": {"kind": "offline"},
            "turns": {"kind": "fixed", "count": 2},
            "user_tokens": {"kind": "fixed", "tokens": 10},
            "output_tokens": {"kind": "fixed", "tokens": 10},
        }
    )
    s = generate(cfg, 0)
    roots = s.parent < 0
    assert roots.sum() == 6 and set(s.arrival_s[roots]) == {0.0}


def test_offline_span_helpers():
    from workloads.arrivals import OfflineArrivals, expected_arrivals, expected_span_s

    offline = OfflineArrivals()
    assert expected_span_s(offline, 10_000) == 0.0
    with pytest.raises(ValueError, match="a duration bounds nothing"):
        expected_arrivals(offline, 5.0)
    with pytest.raises(ValueError, match="a duration bounds nothing"):
        arrival_times(offline, rng_for(0, Stream.ARRIVALS), None, 5.0)


def test_offline_run_finishes():
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    cfg = validate_scenario(
        {"seed": 1, "workload": {"num_requests": 40, "arrival": {"kind": "offline"}, "lengths": OFFLINE_LENGTHS}}
    )
    result = build(cfg).run()
    assert result.summary["completed"] == 40 and result.summary["failed"] == 0
    assert (result.requests["arrival_s"] == 0).all()
    assert result.summary["max_concurrent_requests"] == 40  # all in flight from t = 0
