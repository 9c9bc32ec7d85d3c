"""Down-sampling for plots: bounded points, every plotted point exact, bins that add up."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reports.sampling import (
    binned_level,
    binned_mean,
    binned_sum,
    cdf_curve,
    evenly_spaced,
    rate_per_bin,
    time_bins,
)


def brute_fraction_at_or_below(values: np.ndarray, x: float) -> float:
    return float(np.mean(values <= x))


def test_small_cdf_is_exact_step_function():
    values = np.array([3.0, 1.0, 2.0, 2.0, 5.0])
    curve = cdf_curve(values)
    assert curve.exact and curve.num_values == 5
    np.testing.assert_array_equal(curve.x, [1.0, 2.0, 3.0, 5.0])
    np.testing.assert_allclose(curve.fraction, [0.2, 0.6, 0.8, 1.0])
    assert "every distinct value" in curve.method


def test_large_cdf_is_bounded_and_every_point_lies_on_the_full_cdf():
    rng = np.random.default_rng(1)
    values = rng.lognormal(0, 1, 200_000)
    curve = cdf_curve(values, max_points=500)
    assert not curve.exact and 2 <= len(curve.x) <= 500
    assert curve.x[0] == values.min() and curve.x[-1] == values.max()
    assert curve.fraction[-1] == 1.0
    for i in range(0, len(curve.x), 37):
        assert curve.fraction[i] == pytest.approx(brute_fraction_at_or_below(values, curve.x[i]), abs=1e-12)
    assert "500 points at evenly spaced ranks of all 200,000 values" in curve.method
    # evenly spaced ranks: consecutive points are about 1/499 of the data apart
    assert np.max(np.diff(curve.fraction)) < 3 / 499


def test_weighted_cdf_equals_the_expanded_data():
    values = np.array([0.010, 0.012, 0.011, 0.030, 0.012])
    counts = np.array([5, 100, 7, 1, 3])
    curve = cdf_curve(values, counts)
    expanded = np.repeat(values, counts)
    assert curve.num_values == counts.sum()
    for x, f in zip(curve.x, curve.fraction, strict=True):
        assert f == pytest.approx(brute_fraction_at_or_below(expanded, x))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e3, allow_nan=False), min_size=1, max_size=300),
    st.integers(2, 40),
)
def test_cdf_points_are_exact_for_any_data(values, max_points):
    v = np.asarray(values)
    counts = (np.arange(len(v)) % 4) + 1
    curve = cdf_curve(v, counts, max_points)
    expanded = np.repeat(v, counts)
    assert len(curve.x) <= max_points
    assert np.all(np.diff(curve.x) > 0) and np.all(np.diff(curve.fraction) > 0)
    assert curve.x[0] == v.min() and curve.x[-1] == v.max() and curve.fraction[-1] == 1.0
    for x, f in zip(curve.x, curve.fraction, strict=True):
        assert f == pytest.approx(brute_fraction_at_or_below(expanded, x))


def test_cdf_drops_nan_and_handles_empty():
    assert cdf_curve(np.array([np.nan, np.nan])).num_values == 0
    assert cdf_curve(np.array([])).x.size == 0
    curve = cdf_curve(np.array([np.nan, 4.0]))
    assert curve.num_values == 1 and curve.x.tolist() == [4.0]


def test_time_bins_and_rates():
    bins = time_bins(10.0, 5)
    assert bins.num_bins == 5 and bins.width_s == 2.0
    np.testing.assert_allclose(bins.centres_s, [1, 3, 5, 7, 9])
    arrivals = np.array([0.1, 0.2, 1.9, 2.0, 9.99, 10.0, np.nan])
    rate = rate_per_bin(arrivals, bins)
    np.testing.assert_allclose(rate, [3 / 2, 1 / 2, 0, 0, 2 / 2])
    assert rate.sum() * bins.width_s == 6  # every non-NaN arrival counted once
    np.testing.assert_allclose(rate_per_bin(arrivals[:3], bins, np.array([10, 20, 30])), [30, 0, 0, 0, 0])
    assert time_bins(0.0, 3).width_s > 0


def test_binned_level_weights_by_duration_and_holds_the_last_state():
    bins = time_bins(4.0, 4)
    t = np.array([0.2, 0.9, 1.5, 3.5])
    d = np.array([0.1, 0.3, 1.0, 0.5])
    v = np.array([10.0, 2.0, 7.0, 1.0])
    lv = binned_level(t, d, v, bins)
    assert lv.mean[0] == pytest.approx((10 * 0.1 + 2 * 0.3) / 0.4)
    assert (lv.low[0], lv.high[0]) == (2.0, 10.0)
    assert lv.mean[1] == 7.0
    # bin 2 has no sample: it keeps the last state (7 from bin 1)
    assert lv.count[2] == 0 and lv.mean[2] == 7.0 and lv.low[2] == 7.0
    assert lv.mean[3] == 1.0
    # nothing before the first sample
    lv2 = binned_level(np.array([3.5]), np.array([0.1]), np.array([5.0]), bins)
    assert np.isnan(lv2.mean[:3]).all() and lv2.mean[3] == 5.0


def test_binned_sum_and_mean():
    bins = time_bins(3.0, 3)
    t = np.array([0.5, 0.6, 2.5])
    v = np.array([1.0, 3.0, 4.0])
    np.testing.assert_allclose(binned_sum(t, v, bins), [4, 0, 4])
    mean = binned_mean(t, v, bins)
    assert mean[0] == 2.0 and np.isnan(mean[1]) and mean[2] == 4.0


def test_evenly_spaced_indices():
    assert evenly_spaced(5, 10).tolist() == [0, 1, 2, 3, 4]
    idx = evenly_spaced(1000, 7)
    assert idx[0] == 0 and idx[-1] == 999 and len(idx) == 7
