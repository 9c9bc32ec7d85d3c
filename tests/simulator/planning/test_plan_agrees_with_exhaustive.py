"""The guided plan answers as the exhaustive one on real questions (the silicon cost model): the same choice,
replicas and cost; the planned max rates within the search tolerance."""

import pytest

BASE = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "workload": {
        "num_requests": 300,
        "arrival": {"kind": "poisson", "rate_per_s": 10.0},
        "lengths": {
            "kind": "independent",
            "prompt": {"kind": "lognormal", "median_tokens": 512, "sigma": 0.8, "max_tokens": 4096},
            "output": {"kind": "lognormal", "median_tokens": 128, "sigma": 0.8, "max_tokens": 1024},
        },
    },
}


def _answer(plan: dict) -> tuple:
    """The answer a plan gives: the chosen candidate and its replicas, GPUs and cost."""
    chosen = next((c for c in plan["candidates"] if c["chosen"]), None)
    if chosen is None:
        return (None,)
    return (
        plan["chosen"],
        chosen["replicas"]["value"],
        chosen["num_gpus"]["value"],
        chosen["cost_per_hour_usd"]["value"],
    )


@pytest.mark.slow
@pytest.mark.parametrize("lengths", ["lognormal", "trace"])
def test_the_guided_plan_answers_as_the_exhaustive_plan(tmp_path, lengths):
    """Two real candidates (the silicon cost model) on a synthetic workload and on a trace's (prompt, output)
    rows with a Poisson arrival: the same choice, replicas and cost; the planned max rates within the search
    tolerance."""
    from simulator.planning.plans.candidates import CandidateSet, CandidateSpec
    from simulator.planning.plans.plan import run_plan
    from simulator.planning.points.executors import InProcessExecutor
    from simulator.planning.search.settings import PlanRequest

    base = BASE | {"slo": {"ttft_ms": 500, "tpot_ms": 40}}
    if lengths == "trace":
        rows = ["arrival_s,prompt_tokens,output_tokens"] + [
            f"{i * 0.1:.1f},{200 + 37 * (i % 29)},{20 + 11 * (i % 13)}" for i in range(400)
        ]
        (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
        lengths_of_trace = {"kind": "empirical", "source": str(tmp_path / "t.csv")}
        base = base | {"workload": BASE["workload"] | {"lengths": lengths_of_trace}}
    cset = CandidateSet("test", [CandidateSpec("h100", {}), CandidateSpec("l40s", {"hardware": "l40s"})], {})
    plans = {}
    for exhaustive in (True, False):
        request = PlanRequest.model_validate(
            {
                "target_rate_per_s": 60.0,
                "replicates": 2,
                "search": {"requests_per_point": 300, "curve_points": 2, "exhaustive": exhaustive},
            }
            | {"slo_ttft_p99_ms": 500, "slo_tpot_p99_ms": 40}
        )
        plans[exhaustive] = run_plan(base, tmp_path, "s", cset, request, InProcessExecutor()).plan
    assert _answer(plans[False]) == _answer(plans[True]) and plans[True]["chosen"] is not None
    full = {c["name"]: c for c in plans[True]["candidates"]}
    for c in plans[False]["candidates"]:
        if c["status"] == "feasible":
            a, b = c["max_rate_per_s"]["value"], full[c["name"]]["max_rate_per_s"]["value"]
            assert abs(a / b - 1) <= 0.05  # both within the 2% tolerance of the same threshold, per replicate
