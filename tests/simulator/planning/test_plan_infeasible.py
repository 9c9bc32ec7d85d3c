"""A candidate that cannot meet the SLOs is reported infeasible with its reason, never as a raw error (issue 31).

The rate search once went below the slowest rate the scenario validator accepts (its load
bounds allowed arrivals over 1e9 s, the validator one year), so a candidate too slow for
its TPOT bound at any rate came back as a multi-line validation error. The bounds are now
one definition (``workloads.validators.rate_range``), read by the validator's rules and the
planner alike.
"""

from __future__ import annotations

import json
import math

import pytest

from simulator.config.scenario import validate_scenario
from simulator.planning.points.overrides import apply_overrides
from simulator.planning.search.load import MIN_SPAN_S, Load
from tests.simulator.planning.planning_helpers import md1_base, servesim, write_yaml
from workloads.validators import MAX_SECONDS, rate_range

SESSIONS = {
    "kind": "sessions",
    "turns": {"kind": "fixed", "count": 1},
    "user_tokens": {"kind": "fixed", "tokens": 10},
    "output_tokens": {"kind": "fixed", "tokens": 5},
}


@pytest.mark.parametrize("count", [1, 2, 300, 2000, 123_457, 10_000_000])
@pytest.mark.parametrize("kind", ["arrival_rate", "session_rate"])
def test_every_load_the_planner_may_try_validates(kind, count):
    base = md1_base() if kind == "arrival_rate" else {"workload": SESSIONS}
    load = Load(kind, count)
    low, high = load.bounds()
    assert low == rate_range(count)[0] and high == min(rate_range(count)[1], count / MIN_SPAN_S)
    for rate in (low, high):
        validate_scenario(apply_overrides(base, load.overrides(rate)))
    # just below the slowest rate, the arrivals span more than the validator's horizon: refused
    if count / MAX_SECONDS > rate_range(1)[0]:
        slower = math.nextafter(low, 0.0) * (1 - 1e-12)
        with pytest.raises(ValueError, match="one year"):
            validate_scenario(apply_overrides(base, load.overrides(slower)))


def test_a_candidate_too_slow_for_its_tpot_bound_is_infeasible_with_the_reason(tmp_path):
    # four output tokens of 25 ms steps: TPOT 25 ms at any rate, above a 10 ms bound; the search halves down to
    # its floor (2 / 2^16 req/s), below the slowest rate 2,000 requests may arrive at within a year
    scenario = write_yaml(tmp_path / "s.yaml", md1_base(output_tokens=4, step_time_s=0.025))
    out = tmp_path / "plan"
    proc = servesim(
        "plan", scenario, "--slo-tpot-ms", 10, "--target-rate", 2, "--requests-per-point", 2000,
        "--out", out, "--no-report", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (candidate,) = json.loads((out / "plan.json").read_text())["candidates"]
    assert candidate["status"] == "infeasible", candidate["reason"]
    floor = rate_range(2000)[0]
    assert candidate["reason"].startswith(f"no rate down to {floor:.3g} req/s (the search's floor) meets the SLOs")
    assert "TPOT" in candidate["reason"] and "\n" not in candidate["reason"]
    assert "infeasible" in proc.stdout and "validation error" not in proc.stdout
