"""Routing in a disaggregated cluster: each pool (prefill, decode) has its own router and state."""

import pytest

import policies
from simulator.build import build
from simulator.config.scenario import validate_scenario
from tests.conftest import make_stream

TWO_BY_TWO = [{"role": "prefill", "count": 2}, {"role": "decode", "count": 2}]


def _run(router, n=8, spacing_s=5.0, extra=None):
    cfg = validate_scenario(
        {"groups": TWO_BY_TWO, "router": router, "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0}}
        | (extra or {})
    )
    stream = make_stream([i * spacing_s for i in range(n)], [300] * n, [20] * n)
    return build(cfg, stream=stream, check_invariants=True).run().requests.sort_values("request_id")


def test_round_robin_alternates_within_each_pool():
    """Spaced arrivals, 2 prefill : 2 decode. One shared counter sent every request to prefill 0 and decode 3."""
    req = _run("round_robin")
    assert req["prefill_replica_id"].tolist() == [0, 1] * 4
    assert req["replica_id"].tolist() == [2, 3] * 4


@pytest.mark.parametrize("router", list(policies.ROUTERS))
def test_every_router_serves_both_pools_of_a_disaggregated_cluster(router):
    req = _run(router, n=12, spacing_s=0.05)
    assert (req["status"] == "finished").all()
    assert set(req["prefill_replica_id"]) <= {0, 1}
    assert set(req["replica_id"]) <= {2, 3}


def test_session_affinity_keeps_a_session_on_one_replica_of_each_pool():
    """The prefill pool's home of a session is not overwritten by where its decode went."""
    sessions = {
        "workload": {
            "kind": "sessions",
            "num_sessions": 6,
            "arrival": {"kind": "poisson", "rate_per_s": 2.0},
            "turns": {"kind": "fixed", "count": 3},
            "user_tokens": {"kind": "fixed", "tokens": 200},
            "output_tokens": {"kind": "fixed", "tokens": 30},
            "think_s": {"kind": "fixed", "seconds": 1.0},
        }
    }
    cfg = validate_scenario({"groups": TWO_BY_TWO, "router": "session_affinity", "seed": 1} | sessions)
    req = build(cfg).run().requests
    per_session = req.groupby("session_id").agg(
        prefill=("prefill_replica_id", "nunique"), decode=("replica_id", "nunique")
    )
    assert (per_session["prefill"] == 1).all() and (per_session["decode"] == 1).all()
