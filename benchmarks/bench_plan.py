"""Time ``servesim plan`` on a 10-candidate 70B capacity question against one ``servesim run``.

The question (issue 19): Llama-3.1-70B, short chat lengths, p99 TTFT 1 s and p99 TPOT
60 ms, 30 req/s, 3 replicates, over H100 TP4/TP8, H200 TP2/TP4 and A100-80GB TP8, each
with vLLM V1 (chunked prefill) and vLLM V0 (no chunking). Prints the plan's wall time,
the ratio to one 2,000-request run of the base scenario timed in the same process, the
requests simulated, the wall time and tasks of each stage (where the time goes), the chosen
candidate and every candidate's replicas and max rate.

Run by hand on a quiet machine:
``python benchmarks/bench_plan.py [--workers 2] [--repeats 3] [--exhaustive] [--json OUT] [--against PLAN]``
(``--requests-per-point N``: shorter points, to measure what they cost in accuracy; ``--curve-points N``: the
chosen candidate's capacity curve at N loads instead of the default 8, 0 for none, to measure what it costs).

Measured (issue 31 item 3), 75c8fb3's planning against the planning after it (both on 75c8fb3's engine: the
bounds' shared cost models, the curve's reused runs, the pool started at once, probes stopped at their p99
verdict), a shared 2-core machine at load 4.3-6.0 from other sessions, 2 workers, interleaved x3 (medians):
plan 48.8 -> 39.6 s (47.3-49.0 and 38.7-41.3), one run 0.61-0.66 s, ratio 75.8 -> 60.5 (on a quiet machine
one run takes 0.42 s, the old plan about 30 s); simulated requests 102,262 -> 81,889; Python calls of the
whole plan in process (1 worker, the deterministic measure) 137.25M -> 110.75M, 39.1 -> 31.5 times one run's
3.51M. The same answer as ``--exhaustive`` (h100-tp4-chunked, 3 replicas, 12 GPUs, 35.88 USD/h; every pruned
candidate's least cost a true bound). The capacity curve (8 loads x 3 seeds, 18 of them simulated) is still
the largest stage: with ``--curve-points 0`` the plan takes 62.14M calls (17.7 runs' calls), 23.2 s, ratio 35.6.

Measured again (issue 31 item 3, b807534's planning against plan-speed's, the same engine): the points a worker
simulates share one cost model per deployment (``search.shared``: same rows, warm memos), t intervals without
importing scipy.stats, the bounds computed while the pool starts. Python calls of the whole plan in process
(1 worker) 47.06M -> 36.44M, 14.0 -> 10.8 times one run's 3.36M; simulated requests 85,041 both; plan.json and
points.parquet identical (1 and 2 workers); the same answer as ``--exhaustive``. Wall, 2 workers, a shared
2-core machine at load 2.8-3.7 from other sessions, interleaved x5 (medians): plan 15.9 -> 13.4 s (old 10.5-19.4,
new 8.5-15.4), ratio 36.4 -> 31.1 (old 22.6-43.0, new 18.1-32.4; one run 0.43-0.48 s).

And with the silicon tables cached packed (one block per dtype: a process reads a GPU's tables in 0.03 s, not
0.2-0.6 s), b807534 against 7d53d29 on a quieter 2-core machine (load about 2), 2 workers, interleaved x3 (medians):
plan 10.1 -> 7.2 s (old 10.0-10.3, new 6.6-7.8), ratio 17.9 -> 15.3 (old 17.3-22.5, new 15.3-16.4; one run
0.43-0.59 s); simulated requests 85,041 both. Not yet under 15 runs' time on every run. Where the new plan's
time goes (one run): the bounds 0.95 s in the plan's process while the pool starts, first replicates' searches
1.5 s (22 tasks), the other replicates' 1.3 s (2 tasks), operating points 0.35 s, the curve 2.0 s (18 tasks), the
pool's shutdown 0.33 s.

Then (70aa67d against the commit after it) two serial pauses gone, nothing else changed: the plan's process no
longer imports scipy.special (0.23 s between the searches and the operating points, while both workers waited)
for the t quantile at the default 3 replicates (2 degrees of freedom: a closed form with stdtrit's floats), and
a pool worker's exit skips the interpreter's teardown of its heap (the pool's shutdown 0.33 -> 0.02 s). A quiet
2-core machine (load below 1), 2 workers, interleaved x3 (medians): plan 7.8 -> 6.4 s (old 7.6-8.0, new
6.1-6.8), ratio 16.2 -> 14.1 (old 15.3-16.3, new 13.4-14.5; one run 0.42-0.52 s), under 15 on every run;
simulated requests 85,041 both, plan.json byte for byte the same, the same answer as ``--exhaustive``. The
embedded default scenario's question (``servesim plan --slo-ttft-ms 500 --slo-tpot-ms 50 --workers 2
--no-report``, one candidate) 7.98 -> 7.44 s end to end, the same plan.json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/bench_plan.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import describe, load
from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.planning.plans.candidates import CandidateSet, CandidateSpec
from simulator.planning.plans.plan import execute_plan, prepare_plan
from simulator.planning.points.executors import make_executor
from simulator.planning.search.settings import PlanRequest

BASE = {
    "model": "llama-3.1-70b",
    "hardware": "h100-sxm",
    "parallelism": {"tp": 4},
    "workload": {
        "num_requests": 2000,
        "arrival": {"kind": "poisson", "rate_per_s": 30.0},
        "lengths": {
            "kind": "independent",
            "prompt": {"kind": "lognormal", "median_tokens": 512, "sigma": 0.8, "max_tokens": 4096},
            "output": {"kind": "lognormal", "median_tokens": 128, "sigma": 0.8, "max_tokens": 1024},
        },
    },
    "slo": {"ttft_ms": 1000, "tpot_ms": 60},
}
DEPLOYMENTS = {
    "h100-tp4": {"hardware": "h100-sxm", "parallelism.tp": 4},
    "h100-tp8": {"hardware": "h100-sxm", "parallelism.tp": 8},
    "h200-tp2": {"hardware": "h200", "parallelism.tp": 2},
    "h200-tp4": {"hardware": "h200", "parallelism.tp": 4},
    "a100-tp8": {"hardware": "a100-80gb", "parallelism.tp": 8},
}
POLICIES = {"chunked": {"policy": {"kind": "vllm"}}, "unchunked": {"policy": {"kind": "vllm_v0"}}}


def candidates() -> CandidateSet:
    specs = [CandidateSpec(f"{d}-{p}", dep | pol) for d, dep in DEPLOYMENTS.items() for p, pol in POLICIES.items()]
    return CandidateSet("benchmarks/bench_plan.py", specs, {})


def one_run() -> float:
    t0 = time.perf_counter()
    build(validate_scenario(BASE)).run()
    return time.perf_counter() - t0


class StageTimes:
    """Wall time and tasks per stage of a plan (the ``stage`` progress hook): where the plan's time goes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.tasks: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def __call__(self, description: str):
        t0, total = time.perf_counter(), [0]

        def progress(done: int, n: int) -> None:
            total[0] = n

        yield progress
        self.seconds[description] += time.perf_counter() - t0
        self.tasks[description] += total[0]


def one_plan(
    workers: int,
    exhaustive: bool,
    rank_all: bool = False,
    requests_per_point: int | None = None,
    stages: StageTimes | None = None,
    curve_points: int | None = None,
) -> tuple[float, dict, int]:
    request = PlanRequest(slo_ttft_p99_ms=1000, slo_tpot_p99_ms=60, target_rate_per_s=30, replicates=3)
    update: dict = {"exhaustive": exhaustive, "rank_all": rank_all}
    if requests_per_point is not None:
        update["requests_per_point"] = requests_per_point
    if curve_points is not None:
        update["curve_points"] = curve_points
    search = request.search.model_copy(update=update)
    request = request.model_copy(update={"search": search})
    t0 = time.perf_counter()
    inputs = prepare_plan(BASE, None, "bench", candidates(), request)
    executor = make_executor("local", workers)
    try:
        result = execute_plan(inputs, request, executor, stages)
    finally:
        executor.close()
    wall = time.perf_counter() - t0
    simulated = result.simulated_requests
    return wall, result.plan, simulated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="plans to time (median reported)")
    parser.add_argument("--exhaustive", action="store_true", help="the exhaustive search (every candidate, every rate)")
    parser.add_argument("--rank-all", action="store_true", help="the guided search of every candidate, none pruned")
    parser.add_argument(
        "--requests-per-point",
        type=int,
        help="simulate this many requests at each rate point instead of the default (shorter points are "
        "cheaper and noisier: compare the answer with --against)",
    )
    parser.add_argument(
        "--curve-points", type=int, help="the chosen candidate's capacity curve at this many loads (0: none)"
    )
    parser.add_argument("--json", help="write the plan.json of the last repeat here")
    parser.add_argument(
        "--against", help="a plan.json of the other search (--exhaustive --json F): say whether the answers agree"
    )
    args = parser.parse_args()
    print(describe())
    runs = [one_run() for _ in range(3)]
    run_s = statistics.median(runs)
    walls = []
    for _ in range(args.repeats):
        stages = StageTimes()
        wall, plan, simulated = one_plan(
            args.workers, args.exhaustive, args.rank_all, args.requests_per_point, stages, args.curve_points
        )
        walls.append(wall)
    wall = statistics.median(walls)
    print(f"one run (2,000 requests): {run_s:.2f} s (median of 3: {', '.join(f'{x:.2f}' for x in runs)})")
    print(
        f"plan ({'exhaustive' if args.exhaustive else 'rank-all' if args.rank_all else 'default'}, "
        f"{args.workers} workers): {wall:.1f} s "
        f"(runs: {', '.join(f'{x:.1f}' for x in walls)}); ratio {wall / run_s:.1f}; simulated requests {simulated:,}"
    )
    for name, seconds in stages.seconds.items():  # the last repeat's
        print(f"  stage {seconds:6.1f} s  {stages.tasks[name]:3d} tasks  {name}")
    print(f"chosen: {plan['chosen']}")
    for c in plan["candidates"]:
        mr = (c.get("max_rate_per_s") or {}).get("value")
        rep = (c.get("replicas") or {}).get("value")
        cost = (c.get("cost_per_hour_usd") or {}).get("value")
        print(
            f"  {c['name']:<20} {c['status']:<10} max rate {mr if mr is None else round(mr, 3)!s:>8}  "
            f"replicas {rep!s:>5}  $/h {cost if cost is None else round(cost, 2)!s:>8}  {c.get('reason') or ''}"
        )
    print(f"at the end: {load()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(plan, f, indent=1)
    if args.against:
        with open(args.against) as f:
            other = json.load(f)
        agree(plan, other, 0.02)


def other_best(plan: dict) -> float:
    """The chosen candidate's cost per hour in ``plan``."""
    chosen = next(c for c in plan["candidates"] if c["chosen"])
    return chosen["cost_per_hour_usd"]["value"]


def agree(plan: dict, other: dict, rel_tol: float) -> None:
    """Print whether two plans of the question give the same answer: the same chosen candidate, the same
    replicas for every candidate both sized, max rates within the search tolerance."""
    mine = {c["name"]: c for c in plan["candidates"]}
    theirs = {c["name"]: c for c in other["candidates"]}
    print(
        f"chosen: {plan['chosen']} / {other['chosen']}: {'same' if plan['chosen'] == other['chosen'] else 'DIFFERENT'}"
    )
    for name, c in mine.items():
        o = theirs[name]
        if c["status"] == "pruned" and o["status"] == "feasible":
            least, cost = c["least_cost_per_hour_usd"], o["cost_per_hour_usd"]["value"]
            ok = least is not None and least <= cost * (1 + 1e-9) and cost > other_best(other)
            print(
                f"  {name:<20} pruned: at least {least:.2f} $/h / {cost:.2f} $/h "
                + ("(a true bound, above the cheapest)" if ok else "WRONG: below its cost or it could be cheapest")
            )
            continue
        if c["status"] != "feasible" or o["status"] != "feasible":
            print(f"  {name:<20} {c['status']} / {o['status']}")
            continue
        a, b = c["max_rate_per_s"]["value"], o["max_rate_per_s"]["value"]
        ga, gb = c["max_goodput_rate_per_s"]["value"], o["max_goodput_rate_per_s"]["value"]
        same = c["replicas"]["value"] == o["replicas"]["value"]
        print(
            f"  {name:<20} replicas {c['replicas']['value']:g} / {o['replicas']['value']:g} "
            f"{'same' if same else 'DIFFERENT'}; max rate {a:.3f} / {b:.3f} ({a / b - 1:+.1%}); "
            f"goodput rate {ga:.3f} / {gb:.3f} ({ga / gb - 1:+.1%})"
            + ("" if abs(a / b - 1) <= rel_tol and abs(ga / gb - 1) <= rel_tol else "  OUTSIDE THE TOLERANCE")
        )


if __name__ == "__main__":
    main()
