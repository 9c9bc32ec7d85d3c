"""The probe verdict that prunes a candidate: sound (it never calls dearer a candidate whose replicates' max loads
average at or above the probe load), decisive within the tolerance, and a replay of its own points only."""

import math
import random

import pytest

from simulator.planning.search.prune import MAX_PROBE_ROUNDS, next_probe_load, probe_verdict

TOL = 0.02
FLOOR, CEILING = 0.01, 1e4


def _decide(thresholds, load, integer=False, tol=TOL):
    """Run the probe to its verdict against replicates feasible up to their ``thresholds``; (verdict, rounds)."""
    rows: dict[tuple[int, float], dict] = {}
    for rounds in range(1, MAX_PROBE_ROUNDS + 2):
        v = probe_verdict(load, len(thresholds), lambda r, x: rows.get((r, x)), tol, FLOOR, CEILING, integer)
        if v.dearer is not None:
            return v, rounds - 1
        for r, x in v.pending:
            assert (r, x) not in rows, "a point is asked for twice"
            rows[r, x] = {"replicate": r, "rate_per_s": x, "meets_slo": x <= thresholds[r], "error": None}
    raise AssertionError("the probe did not end")


@pytest.mark.parametrize("seed", range(200))
def test_a_probe_is_sound_and_decides_within_the_tolerance(seed):
    rng = random.Random(seed)
    load = rng.choice([0.5, 3.0, 10.0, 40.0])
    k = rng.choice([1, 2, 3, 5])
    thresholds = [load * rng.uniform(0.9, 1.1) for _ in range(k)]
    v, rounds = _decide(thresholds, load)
    mean = sum(thresholds) / k
    if v.dearer:
        # every least load missed is above its replicate's threshold, and they average at most the load
        assert all(m > t for m, t in zip(v.missed, thresholds, strict=True))
        assert mean < load and sum(v.missed) <= load * k
    if mean * (1 + TOL) <= load:
        assert v.dearer, (thresholds, load, v.missed)
    assert rounds <= MAX_PROBE_ROUNDS
    assert all(seq[0]["rate_per_s"] == load for seq in v.rows)  # round 0 is the probe load itself


@pytest.mark.parametrize("seed", range(60))
def test_a_probe_of_whole_user_counts_is_sound(seed):
    rng = random.Random(1000 + seed)
    load = float(rng.randint(2, 40))
    thresholds = [float(max(1, round(load * rng.uniform(0.7, 1.3)))) for _ in range(rng.choice([2, 3]))]
    v, _ = _decide(thresholds, load, integer=True)
    assert all(row["rate_per_s"] == round(row["rate_per_s"]) for seq in v.rows for row in seq)
    if v.dearer:
        assert sum(thresholds) / len(thresholds) < load


def test_clear_cases_take_one_point_per_replicate():
    missed, _ = _decide([5.0, 6.0, 7.0], 10.0)
    assert missed.dearer and [len(seq) for seq in missed.rows] == [1, 1, 1] and missed.missed == [10.0] * 3
    met, _ = _decide([12.0, 15.0, 11.0], 10.0)
    assert met.dearer is False and [len(seq) for seq in met.rows] == [1, 1, 1]


def test_a_straddling_candidate_is_decided_in_a_few_points():
    # max loads averaging 3% below the probe load: one above it, two below
    v, rounds = _decide([10.2, 9.3, 9.6], 10.0)
    assert v.dearer and rounds <= 3 and sum(len(seq) for seq in v.rows) <= 9
    assert math.isfinite(sum(v.missed)) and sum(v.missed) <= 30.0


def test_a_failed_point_or_an_open_verdict_is_never_dearer():
    rows = {(0, 10.0): {"error": "cannot run"}, (1, 10.0): {"rate_per_s": 10.0, "meets_slo": False, "error": None}}
    v = probe_verdict(10.0, 2, lambda r, x: rows.get((r, x)), TOL, FLOOR, CEILING, False)
    assert v.dearer is False
    unknown = {(0, 10.0): {"rate_per_s": 10.0, "meets_slo": None, "error": None}}
    assert probe_verdict(10.0, 1, lambda r, x: unknown.get((r, x)), TOL, FLOOR, CEILING, False).dearer is False


def test_the_next_load_steps_outwards_then_bisects():
    def row(x, ok):
        return {"rate_per_s": x, "meets_slo": ok}

    assert next_probe_load([row(10.0, True)], TOL, FLOOR, CEILING, False) == pytest.approx(10.2)
    assert next_probe_load([row(10.0, True), row(10.2, True)], TOL, FLOOR, CEILING, False) == pytest.approx(10.608)
    assert next_probe_load([row(10.0, False)], TOL, FLOOR, CEILING, False) == pytest.approx(10 / 1.02)
    assert next_probe_load([row(10.0, False), row(9.0, True)], TOL, FLOOR, CEILING, False) == pytest.approx(9.5)
    assert next_probe_load([row(10.0, False), row(9.9, True)], TOL, FLOOR, CEILING, False) is None  # closed
    assert next_probe_load([row(10.0, True)], TOL, FLOOR, 10.1, False) is None  # beyond the search's ceiling
    assert next_probe_load([row(4.0, False), row(3.0, True)], TOL, FLOOR, CEILING, True) is None  # one user apart
    assert next_probe_load([row(4.0, True)], TOL, FLOOR, CEILING, True) == 5.0
