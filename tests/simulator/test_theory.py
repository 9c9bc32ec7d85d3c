"""Checks against queueing theory."""

import numpy as np
import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario


def _mdl_config(rate: float, n: int, seed: int):
    # One request at a time; 10 output tokens = 1 prefill + 9 decode steps of 10 ms: D = 0.1 s.
    return validate_scenario(
        {
            "seed": seed,
            "policy": {"kind": "vllm_v0", "max_num_seqs": 1},
            "cost_model": {"kind": "constant", "step_time_s": 0.01},
            # the theory's wait starts when a request joins the queue: no API-server ingest or tokenising
            "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0},
            "kv_cache": {"num_blocks": 100, "block_size": 16},
            "workload": {
                "num_requests": n,
                "arrival": {"kind": "poisson", "rate_per_s": rate, "normalize": False},
                "lengths": {
                    "kind": "independent",
                    "prompt": {"kind": "fixed", "tokens": 10},
                    "output": {"kind": "fixed", "tokens": 10},
                },
            },
        }
    )


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_mean_waiting_time(rho):
    service_s = 0.1
    mu = 1 / service_s
    rate = rho * mu
    waits = []
    for seed in range(4):
        req = build(_mdl_config(rate, 15000, seed)).run().requests
        waits.append((req["first_scheduled_s"] - req["arrival_s"]).to_numpy())
    means = np.array([w.mean() for w in waits])
    theory = rho / (2 * mu * (1 - rho))  # Pollaczek-Khinchine for deterministic service
    # independent seeds give independent estimates; their spread bounds the sampling error
    stderr = means.std(ddof=1) / np.sqrt(len(means))
    assert abs(means.mean() - theory) < max(4 * stderr, 0.03 * theory)
    # service time is exactly deterministic
    e2e_minus_wait = (req["finished_s"] - req["first_scheduled_s"]).to_numpy()
    assert np.allclose(e2e_minus_wait, service_s)


def test_littles_law_on_a_long_run():
    # L counts requests from their reaching the serving system and W runs from arrival_s (sent): the
    # client's ingest and tokenising delay would sit in W only, so none here
    cfg = validate_scenario(
        {
            "workload": {"num_requests": 3000, "arrival": {"kind": "poisson", "rate_per_s": 5.0}},
            "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0},
        }
    )
    result = build(cfg).run()
    s, req, steps = result.summary, result.requests, result.steps
    duration = s["duration"]
    lam = len(req) / duration
    w = (req["finished_s"] - req["arrival_s"]).mean()
    assert s["mean_requests_in_system"] == pytest.approx(lam * w, rel=1e-9)
    # independently, the queue and batch sizes sampled at every step, weighted by step time
    in_system = steps["num_running"] + steps["num_waiting"]
    sampled_l = (in_system * steps["duration_s"]).sum() / duration
    assert sampled_l == pytest.approx(lam * w, rel=0.05)
