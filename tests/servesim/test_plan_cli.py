"""`servesim plan` on a small candidate set: the cheapest feasible configuration, with intervals."""

import json
import math

import pandas as pd
import pytest

from simulator.planning.plans.candidates import CandidateSet, CandidateSpec
from simulator.planning.plans.figures import CandidateFigures, straddled
from simulator.planning.plans.plan import execute_plan, prepare_plan, run_plan
from simulator.planning.points.capacity import IndependentReplicas
from simulator.planning.points.executors import InProcessExecutor, LocalPoolExecutor
from simulator.planning.points.stats import Interval
from simulator.planning.search.settings import PlanRequest
from tests.simulator.planning.planning_helpers import md1_base, md1_max_rate, servesim, write_yaml

# Four output tokens of 25 ms steps, one request at a time: M/D/1 with D = 0.1 s and a
# TPOT of exactly 25 ms. The constant cost model ignores the hardware, so the candidates
# set their speed through the step time and their price through the hardware preset.
STEP_S = 0.025
TTFT_SLO_MS, TPOT_SLO_MS, TARGET = 300.0, 30.0, 8.0
CANDIDATES = {
    "l40s-slow": {"hardware": "l40s"},  # $0.99/h, D = 0.1 s
    "h100-fast": {"hardware": "h100-sxm", "cost_model.step_time_s": STEP_S / 2},  # $2.99/h, D = 0.05 s
    "b200-slow": {"hardware": "b200"},  # $5.99/h, as slow as the L40S
    "a100-too-slow": {"hardware": "a100-40gb", "cost_model.step_time_s": 0.04},  # TPOT 40 ms > 30 ms
}
PRICES = {"l40s-slow": 0.99, "h100-fast": 2.99, "b200-slow": 5.99}


def _expected_costs() -> dict[str, float]:
    """Cost per hour from the M/D/1 closed form: replicas = ceil(target / max rate) at the p99 wait bound."""
    out = {}
    for name, price in PRICES.items():
        step = STEP_S / 2 if name == "h100-fast" else STEP_S
        service = 4 * step
        max_rate = md1_max_rate(TTFT_SLO_MS / 1000 - step, 0.99, service)  # TTFT = wait + first step
        out[name] = math.ceil(TARGET / max_rate) * price
    return out


@pytest.mark.slow
@pytest.mark.parametrize("search", ["exhaustive", "guided"])
def test_plan_picks_the_cheapest_feasible_configuration(tmp_path, search):
    scenario = write_yaml(tmp_path / "s.yaml", md1_base(output_tokens=4, step_time_s=STEP_S))
    cands = write_yaml(
        tmp_path / "c.yaml", {"candidates": [{"name": k, "overrides": v} for k, v in CANDIDATES.items()]}
    )
    out = tmp_path / "plan"
    proc = servesim(
        "plan", scenario, "--candidates", cands, "--slo-ttft-p99-ms", TTFT_SLO_MS, "--slo-tpot-p99-ms", TPOT_SLO_MS,
        "--target-rate", TARGET, "--replicates", 2, "--requests-per-point", 400, "--curve-points", 3,
        "--workers", 2, "--out", out, "--quiet", *(["--exhaustive"] if search == "exhaustive" else []),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = _expected_costs()
    cheapest = min(expected, key=expected.get)
    assert cheapest == "l40s-slow" and f"chosen: {cheapest}" in proc.stdout

    plan = json.loads((out / "plan.json").read_text())
    assert plan["schema"] == "servesim.plan/1" and plan["chosen"] == cheapest
    by_name = {c["name"]: c for c in plan["candidates"]}
    if search == "guided":
        # one replica of the faster H100 (at most ~28 req/s by its bound) or of the B200 already costs more
        # than the two L40S the target needs: both pruned, never simulated; the rest as the exhaustive plan says
        for name in ("h100-fast", "b200-slow"):
            c = by_name[name]
            assert c["status"] == "pruned" and c["reason"].startswith("pruned: at most") and c["rank"] is None
            assert c["search"]["rates_tried"] == [] and c["search"]["simulated_requests"] == 0
            assert c["search"]["bound"]["upper_rate_per_s"] >= TARGET
            del expected[name]
    assert plan["ranking"] == sorted(expected, key=expected.get)
    for name, cost in expected.items():
        c = by_name[name]
        assert c["status"] == "feasible" and c["cost_per_hour_usd"]["value"] == pytest.approx(cost)
        assert c["num_gpus"]["value"] == c["replicas"]["value"] * c["tp"]
        # every planned figure comes with an interval over the two replicates (a null upper
        # bound is unbounded: the max rate's lower bound reached 0)
        for figure in ("max_rate_per_s", "goodput_per_gpu_per_s", "replicas", "cost_per_hour_usd"):
            iv = c[figure]
            high = math.inf if iv["high"] is None else iv["high"]
            assert iv["n"] == 2 and iv["low"] <= iv["value"] <= high
        op = c["operating_point"]
        assert op["meets_slo"] and op["p99_tpot_ms"]["value"] == pytest.approx(
            STEP_S * 1000 / (2 if "fast" in name else 1)
        )
        assert op["p99_ttft_ms"]["low"] <= op["p99_ttft_ms"]["value"] <= op["p99_ttft_ms"]["high"]
        # the measured error the intervals rest on is the silicon model's: a constant-step plan gets none
        assert op["prediction_intervals"] == {}
    slow = by_name["a100-too-slow"]
    assert slow["rank"] is None
    if search == "guided":
        # it misses the SLOs at the load that would make it cheaper than the L40S: pruned, one point per replicate
        assert slow["status"] == "pruned" and slow["reason"].startswith("pruned: misses the SLOs at")
        assert [len(r) for r in slow["search"]["rates_tried"]] == [1, 1]
        assert slow["least_cost_per_hour_usd"] > expected[cheapest]
    else:
        assert slow["status"] == "infeasible" and slow["reason"].startswith("no rate down to")
    if search == "exhaustive":
        # the B200 is as slow as the L40S at six times the price: dominated; the H100 buys latency
        assert plan["pareto_frontier"] == ["l40s-slow", "h100-fast"]
        assert (
            by_name["h100-fast"]["operating_point"]["p99_ttft_ms"]["value"]
            < by_name["l40s-slow"]["operating_point"]["p99_ttft_ms"]["value"]
        )

    table = pd.read_parquet(out / "candidates.parquet")
    assert list(table["name"]) == list(CANDIDATES)
    assert {"max_rate_per_s_low", "op_p99_ttft_ms_high", "cost_per_hour_usd", "chosen", "pareto"} <= set(table)
    points = pd.read_parquet(out / "points.parquet")
    assert set(points["phase"]) == {"search", "curve", "operating"} | ({"probe"} if search == "guided" else set())
    curves = points[(points["phase"] == "curve") & (points["candidate"] == "l40s-slow")]
    assert len(curves) == 3 * 2 and curves.groupby("rate_per_s")["replicate"].nunique().eq(2).all()
    assert (points["slo_ttft_p99_ms"] == TTFT_SLO_MS).all()


def test_intervals_shrink_as_replicates_grow():
    cset = CandidateSet("test", [CandidateSpec("l40s", {"hardware": "l40s"})], {})
    widths = {}
    for k in (3, 9):
        request = PlanRequest(
            slo_ttft_p99_ms=TTFT_SLO_MS,
            target_rate_per_s=TARGET,
            replicates=k,
            search={"requests_per_point": 400, "curve_points": 0, "rel_tol": 0.02},
        )
        # one 100 ms step per request: M/D/1 with D = 0.1 s, as above, at a quarter of the steps
        result = run_plan(md1_base(), None, "s", cset, request, InProcessExecutor())
        (c,) = result.plan["candidates"]
        widths[k] = {
            name: iv["high"] - iv["low"]
            for name, iv in (
                ("max_rate_per_s", c["max_rate_per_s"]),
                ("goodput_per_gpu_per_s", c["goodput_per_gpu_per_s"]),
                ("p99_ttft_ms", c["operating_point"]["p99_ttft_ms"]),
            )
        }
    print(widths)
    for name in widths[3]:
        assert widths[9][name] < widths[3][name]


def test_a_plan_is_the_same_on_any_executor():
    cset = CandidateSet("test", [CandidateSpec(k, CANDIDATES[k]) for k in ("l40s-slow", "h100-fast")], {})
    request = PlanRequest(
        slo_ttft_p99_ms=TTFT_SLO_MS,
        target_rate_per_s=TARGET,
        replicates=2,
        search={"requests_per_point": 150, "curve_points": 2, "rel_tol": 0.05},
    )
    base = md1_base(output_tokens=4, step_time_s=STEP_S)
    serial = run_plan(base, None, "s", cset, request, InProcessExecutor())
    pool = LocalPoolExecutor(2)
    try:
        parallel = run_plan(base, None, "s", cset, request, pool)
    finally:
        pool.close()
    assert serial.plan == parallel.plan
    pd.testing.assert_frame_equal(serial.points, parallel.points)
    pd.testing.assert_frame_equal(serial.candidates, parallel.candidates)


def test_the_plan_says_when_an_interval_straddles_an_slo():
    request = PlanRequest(slo_ttft_p99_ms=300.0, slo_tpot_p99_ms=30.0)
    figures = CandidateFigures(Interval(5.0), Interval(6.0), Interval(6.0), False)
    figures.replicas = Interval(2.0, 2.0, 3.0, 3)
    figures.operating = {"p99_ttft_ms": Interval(280.0, 250.0, 310.0, 3), "p99_tpot_ms": Interval(25.0, 24.0, 26.0, 3)}
    assert straddled(figures, request) == ["p99_ttft_ms", "replicas"]


def test_plan_default_scenario_is_the_only_candidate(tmp_path):
    # the default scenario (Llama-3.1-8B on an H100, roofline) with a short search
    proc = servesim(
        "plan", "--slo-ttft-p99-ms", 2000, "--slo-tpot-p99-ms", 100, "--requests-per-point", 60,
        "--curve-points", 0, "--rel-tol", 0.2, "--workers", 1, "--json", "--out", tmp_path / "p",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["target_rate_per_s"] == 5.0 and [c["name"] for c in plan["candidates"]] == ["scenario"]
    (c,) = plan["candidates"]
    assert c["hardware"] == "h100-sxm" and c["price_per_gpu_hour_usd"] == 2.99 and c["max_rate_per_s"]["value"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give at least one SLO: a slo: block in the scenario (ttft_ms, tpot_ms, e2el_ms) or --slo-ttft-ms"),
        (("--slo-ttft-p99-ms", "-5"), "--slo-ttft-p99-ms: Input should be greater than 0"),
        (("--slo-ttft-p99-ms", "100", "--price", "h100-sxm"), "--price 'h100-sxm': expected HARDWARE=USD"),
        (("--slo-ttft-p99-ms", "100", "--price", "h100-sxm=inf"), "--price 'h100-sxm=inf': expected HARDWARE=USD"),
        (("--slo-ttft-p99-ms", "100", "--candidates", "c.yaml"), "c.yaml: candidates.0.overides: unknown field"),
        (("--slo-ttft-p99-ms", "100", "--candidates", "h.yaml"), "h.yaml: candidate 'own': no price for hardware"),
        (
            ("--slo-ttft-ms", "100", "--tune", "policy.max_num_seqs"),
            "--tune 'policy.max_num_seqs': expected PATH=VALUE",
        ),
        (
            ("--slo-ttft-ms", "100", "--tune", "nosuch.x=1,2"),
            "--tune 'nosuch.x=1,2': 'nosuch.x': 'nosuch' is not a scenario field",
        ),
        (
            ("--slo-ttft-ms", "100", "--tune", "policy.max_num_seqs=0"),
            "variant 'scenario [policy.max_num_seqs=0]': policy: max_num_seqs: Input should be greater than",
        ),
        (("--slo-ttft-ms", "100", "--target-rate", "5,-2"), "--target-rate -2: must be a positive finite number"),
        (
            ("--slo-ttft-ms", "100", "--target-rate", "5,x"),
            "--target-rate: '5,x': expected a number or comma-separated",
        ),
        (("--slo-ttft-ms", "100", "--pd-ratio"), "--pd-ratio: no candidate is a disaggregated cluster"),
    ],
)
def test_plan_bad_input_is_one_clear_line_and_exit_2(tmp_path, args, message):
    write_yaml(tmp_path / "c.yaml", {"candidates": [{"name": "x", "overides": {"hardware": "l40s"}}]})
    spec = {"name": "mine", "flops_per_s": 1e14, "memory_bytes": 8e10, "memory_bandwidth_bytes_per_s": 1e12}
    spec |= {"interconnect_bandwidth_bytes_per_s": 1e11, "interconnect_latency_s": 1e-5}
    spec |= {"host_link_bandwidth_bytes_per_s": 3e10, "host_link_latency_s": 1e-5}
    write_yaml(tmp_path / "mine.yaml", spec)
    write_yaml(tmp_path / "h.yaml", {"candidates": [{"name": "own", "overrides": {"hardware": "mine.yaml"}}]})
    proc = servesim("plan", *args, "--quiet", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


class _SimulatedCluster(IndependentReplicas):
    """A stand-in for the cluster-level check to come: the operating run is told the replica
    count (here through a faster step time, as a cluster field does not exist yet) and its
    throughput is already the deployment's."""

    def operating_overrides(self, num_replicas):
        return {"cost_model.step_time_s": STEP_S / num_replicas}

    def deployment_factor(self, num_replicas):
        return 1.0


def test_replica_scaling_is_the_seam_for_a_cluster_level_check():
    cset = CandidateSet("test", [CandidateSpec("l40s", {"hardware": "l40s"})], {})
    request = PlanRequest(
        slo_ttft_p99_ms=TTFT_SLO_MS, target_rate_per_s=TARGET, search={"requests_per_point": 300, "curve_points": 0}
    )
    inputs = prepare_plan(md1_base(output_tokens=4, step_time_s=STEP_S), None, "s", cset, request)
    plain = execute_plan(inputs, request, InProcessExecutor())
    cluster = execute_plan(inputs, request, InProcessExecutor(), scaling=_SimulatedCluster())
    (p,), (c,) = plain.plan["candidates"], cluster.plan["candidates"]
    assert p["replicas"] == c["replicas"] and p["replicas"]["value"] == 2
    op_plain = plain.points[plain.points["phase"] == "operating"].iloc[0]
    op_cluster = cluster.points[cluster.points["phase"] == "operating"].iloc[0]
    assert op_cluster["p99_ttft_ms"] < op_plain["p99_ttft_ms"]  # the overrides reached the simulation
    assert p["operating_point"]["vllm_goodput_per_s"]["value"] == pytest.approx(2 * op_plain["request_goodput"])
    assert c["operating_point"]["vllm_goodput_per_s"]["value"] == pytest.approx(op_cluster["request_goodput"])


def test_plan_load_curve_and_tuning_from_the_command_line(tmp_path):
    scenario = write_yaml(tmp_path / "s.yaml", md1_base(output_tokens=4, step_time_s=STEP_S))
    out = tmp_path / "plan"
    proc = servesim(
        "plan", scenario, "--slo-ttft-ms", TTFT_SLO_MS, "--target-rate", "4,8", "--target-rate", 16,
        "--tune", "policy.max_num_seqs=1,2", "--requests-per-point", 200, "--curve-points", 2, "--workers", 1,
        "--out", out, "--quiet", "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "load curve: the cheapest deployment at each load" in proc.stdout
    plan = json.loads((out / "plan.json").read_text())
    assert [row["target_rate_per_s"] for row in plan["load_curve"]] == [4.0, 8.0, 16.0]
    assert plan["target_rate_per_s"] == 16.0
    family = plan["tuning"]["scenario"]
    assert family["variants"] == ["scenario [policy.max_num_seqs=1]", "scenario [policy.max_num_seqs=2]"]
    # the family's best (cheapest, then most headroom) and the plan's choice (cheapest, then its tie-breaks)
    assert family["best"] in family["variants"] and plan["chosen"] in family["variants"]
    replicas = [row["replicas"] for row in plan["load_curve"]]
    assert replicas == sorted(replicas) and replicas[0] >= 1


GPUS_QUESTION = ("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--isl", "1000", "--osl", "100")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpus", "0", *GPUS_QUESTION), "--gpus 0: expected 1 to 64 GPUs"),
        (("--gpus", "1", "--model", "llama-3.1-70b", "--hardware", "h100-sxm"), "fits no layout on 1 x h100-sxm"),
        (("--gpus", "2", *GPUS_QUESTION, "--target-rate", "5"), "--target-rate: not with --gpus"),
        (("--gpus", "2", *GPUS_QUESTION, "--replicates", "3"), "--replicates: not with --gpus"),
        (("--gpus", "2", "--isl", "1000"), "--isl and --osl: give both"),
        (("--gpus", "2", "--isl", "0", "--osl", "5"), "--isl 0: expected a positive number of tokens"),
        (("--gpus", "2", "--model", "no-such-model"), "unknown model 'no-such-model'"),
    ],
)
def test_plan_gpus_bad_input_is_one_clear_line_and_exit_2(tmp_path, args, message):
    proc = servesim("plan", *args, "--slo-ttft-ms", "500", "--quiet", "--no-report", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_plan_gpus_answers_with_a_front_and_a_report(tmp_path):
    out = tmp_path / "gpus"
    proc = servesim(
        "plan", "--gpus", "2", *GPUS_QUESTION, "--slo-ttft-ms", "500", "--slo-tpot-ms", "25",
        "--requests-per-point", "600", "--workers", "1", "--out", out, "--quiet", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["schema"] == "servesim.plan-gpus/1" and plan["num_gpus"] == 2
    assert plan["chosen"] is not None and f"chosen: {plan['chosen']['layout']}" in proc.stdout
    assert "Pareto front on 2 GPUs" in proc.stdout and "answered in" in proc.stdout
    points = pd.read_parquet(out / "points.parquet")
    assert len(points) == plan["operating_points"] and points["chosen"].sum() == 1
    report = (out / "report.html").read_text()
    assert "Pareto front" in report and "output tokens\\u002fs per GPU" in report
