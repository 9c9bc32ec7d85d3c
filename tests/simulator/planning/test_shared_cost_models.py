"""A plan's points read cost models kept by the process (``search.shared``): the same rows as models made anew."""

import math

from simulator.planning.search import shared
from simulator.planning.search.evaluate import CandidateRun, run_load, simulate_rate
from simulator.planning.search.settings import SearchSettings
from simulator.planning.search.steady import SloTargets


def _base(hardware: str, tp: int, policy: str) -> dict:
    return {
        "model": "llama-3.1-70b",
        "hardware": hardware,
        "parallelism": {"tp": tp},
        "policy": {"kind": policy},
        "workload": {
            "num_requests": 300,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "lognormal", "median_tokens": 512, "sigma": 0.8, "max_tokens": 4096},
                "output": {"kind": "lognormal", "median_tokens": 64, "sigma": 0.8, "max_tokens": 512},
            },
        },
    }


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


def test_kept_cost_models_give_the_rows_of_new_ones():
    slo = SloTargets(1000.0, 60.0, 0.9)
    search = SearchSettings(requests_per_point=300)
    runs = [
        CandidateRun(i, 0, _base(*deployment), None, 7 + i, slo, search)
        for i, deployment in enumerate([("h100-sxm", 4, "vllm"), ("h200", 2, "vllm_v0"), ("h100-sxm", 4, "vllm_v0")])
    ]
    points = [(run, rate, early) for run in runs for rate in (2.0, 6.0, 30.0) for early in (False, True)]
    fresh = []
    for run, rate, early in points:
        shared._models.clear()
        fresh.append(simulate_rate(run, rate, load=run_load(run), early_stop=early))
    shared._models.clear()
    kept = [simulate_rate(run, rate, load=run_load(run), early_stop=early) for run, rate, early in points]
    assert len(shared._models) == 3
    assert all(_same(a, b) for a, b in zip(fresh, kept, strict=True))
    assert any(row["stopped_early"] for row in kept) and not all(row["stopped_early"] for row in kept)
