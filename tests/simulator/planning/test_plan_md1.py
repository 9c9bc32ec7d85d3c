"""On an M/D/1 queue the planned maximum rate matches the closed form within its interval.

One request at a time (max_num_seqs 1), one output token (so the request is a single
100 ms step: D = 0.1 s), Poisson arrivals: an M/D/1 queue whose TTFT is the wait plus D.
Erlang's formula gives the waiting-time distribution, so the rate at which the p99 (or,
for goodput at 90% attainment, the p90) of the wait reaches a bound is known exactly.
"""

import pytest

from simulator.planning.plans.candidates import scenario_only
from simulator.planning.plans.plan import run_plan
from simulator.planning.points.executors import InProcessExecutor
from simulator.planning.search.settings import PlanRequest
from tests.simulator.planning.planning_helpers import md1_base, md1_max_rate

SERVICE_S = 0.1
WAIT_BOUND_S = 0.5


@pytest.mark.slow
def test_max_rate_under_a_waiting_time_bound_matches_the_closed_form():
    request = PlanRequest(
        slo_ttft_p99_ms=(WAIT_BOUND_S + SERVICE_S) * 1000,
        attainment=0.9,
        target_rate_per_s=20.0,
        replicates=6,
        search={"requests_per_point": 4000, "rel_tol": 0.005, "curve_points": 0, "start_rate_per_s": 5.0},
    )
    result = run_plan(md1_base(), None, "M/D/1", scenario_only(), request, InProcessExecutor())
    (c,) = result.plan["candidates"]
    p99_rate, p90_rate = md1_max_rate(WAIT_BOUND_S, 0.99, SERVICE_S), md1_max_rate(WAIT_BOUND_S, 0.90, SERVICE_S)
    for name, truth in (("max_rate_per_s", p99_rate), ("max_goodput_rate_per_s", p90_rate)):
        iv = c[name]
        print(f"{name}: closed form {truth:.3f}, planned {iv['value']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]")
        assert iv["low"] <= truth <= iv["high"]
        assert iv["high"] - iv["low"] < 0.25 * truth  # an interval that says something
    # one replica serves 6.3/s within the SLO, so 20/s needs ceil(20 / 6.3) = 4 replicas
    assert c["replicas"]["value"] == 4 and c["status"] == "feasible"
