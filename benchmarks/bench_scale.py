"""Simulation speed and memory at scale, side by side with issue 9's targets and Vidur's figures.

Cases (each in a fresh subprocess, so its peak resident memory is its own):

- ``default``: the default scenario (Llama-3.1-8B, one H100, ShareGPT lengths, Poisson at
  5 req/s, vllm) at 100,000 requests. Target: 50,000 simulated requests per wall-second.
- ``cluster``: 16 replicas behind least_outstanding, 1,000,000 Poisson requests with
  ShareGPT lengths at 16 x 5 req/s, vllm. Targets: under 60 s and 2 GB.
- ``vidur``: the scenario Vidur's figures were measured on: one replica, vllm, a 7B model
  (Llama-2-7B on an A100-80GB), Azure-conversation lengths capped at 4,096 tokens, Poisson
  at 85% of the replica's capacity (measured first by a saturating run), 100,000 requests.
  Targets: 100x Vidur's 310 req/s, under 10 s and 300 MB.
- ``dp``: attention-DP disaggregated serving, the largest layouts of the InferenceX benchmark: two DeepSeek-R1
  points written as ``benchmarks/inferencex.py`` writes them (``DP_POINTS``: SGLang on GB300, 2,048 users, 8k/1k;
  TensorRT-LLM on GB300, 8,192 users, 1k/1k), whose decode ranks step in lockstep, every step a plain one. No
  target in an issue; the benchmark gives each point ``--point-timeout`` seconds (120 in the figures of
  docs/accuracy.md).
- ``cold``: a cold start, ``servesim run`` of 1,000 requests on a model and GPU pair run for
  the first time, end to end in a fresh process (no profile to fit: the roofline needs none).
  Target: under 10 s (Vidur: about 40 minutes of predictor training).

Run by hand: ``python benchmarks/bench_scale.py [--cases default vidur ...] [--repeats 3] [--plain]
[--cluster-requests N] [--default-requests N] [--against DIR] [--calls N]`` (the cluster case reads the ShareGPT
lengths: offline, point ``SERVESIM_DATA_DIR`` at a folder holding ``sharegpt_8k_filtered_stats_llama2_tokenizer.csv``).
Wall times are medians over the repeats; peak memory is the largest ru_maxrss seen.

Old commit side by side: ``--against DIR`` (a checkout of it, ``git worktree add DIR <commit>``) runs the default,
cluster and dp cases from that tree too, interleaved with this one's repeats (a shared machine's load falls on both
alike), and prints both medians. ``--calls N``: the Python calls of the default scenario at N requests under
cProfile, in each tree (the deterministic measure: wall times on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/bench_scale.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import describe, load

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from simulator.build import build
from simulator.config.scenario import validate_scenario
case, fast = sys.argv[1], sys.argv[2] == "fast"
sharegpt = {"kind": "dataset", "name": "sharegpt-8k-multiturn"}
azure = {"kind": "empirical", "source": "azure-conv", "max_total_tokens": 4096}
calls = None
if case in ("default", "calls"):
    data = {"workload": {"num_requests": int(sys.argv[3])}}
elif case == "cluster":
    data = {"replicas": 16, "router": "least_outstanding",
            "workload": {"num_requests": int(sys.argv[3]), "arrival": {"kind": "poisson", "rate_per_s": 80.0},
                         "lengths": sharegpt}}
elif case == "dp":
    from benchmarks.inferencex_points import read_points, scenario_for
    points = read_points()
    data = scenario_for(points[points["id"] == sys.argv[3]].iloc[0])
elif case.startswith("vidur"):
    base = {"model": "llama-2-7b", "hardware": "a100-80gb", "max_model_len": 4096}
    rate = float(sys.argv[3])
    n = int(sys.argv[4])
    data = base | {"workload": {"num_requests": n, "arrival": {"kind": "poisson", "rate_per_s": rate},
                                "lengths": azure}}
cfg = validate_scenario(data)
sim = build(cfg, fast_forward=fast, record_steps=case not in ("cluster", "dp"))
t1 = time.perf_counter()
if case == "calls":
    import cProfile, pstats
    profile = cProfile.Profile()
    result = profile.runcall(sim.run)
    calls = pstats.Stats(profile).total_calls
else:
    result = sim.run()
t2 = time.perf_counter()
print(json.dumps({"n": len(sim.stream), "build_s": t1 - t0, "run_s": t2 - t1, "total_s": t2 - t0, "calls": calls,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "completed": result.summary["completed"], "rejected": result.summary["rejected"],
                  "request_throughput": result.summary["request_throughput"]}))
"""

DP_POINTS = (
    "dsr1_gb300_sglang_fp4_disagg_8192x1024_c2048_cfg575",
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c8192_cfg387",
)
VIDUR = {"req_per_s": 310.0, "wall_100k_s": 9 * 60 + 11, "peak_mb": 1930.0, "cold_start_s": 40 * 60}


def child(*args: str, tree: str | None = None) -> dict:
    """One run in a fresh process, importing the simulator from ``tree`` (a checkout; None: this one)."""
    env = os.environ | {"PYTHONPATH": tree} if tree is not None else None
    out = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, cwd=tree, env=env)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout)


def summarize(runs: list[dict]) -> tuple[dict, float, float, float]:
    wall = statistics.median(r["total_s"] for r in runs)
    run_s = statistics.median(r["run_s"] for r in runs)
    return runs[0], wall, run_s, max(r["peak_rss_mb"] for r in runs)


def repeat(repeats: int, *args: str, against: str | None = None) -> tuple[tuple, tuple | None]:
    """``repeats`` runs here and, with ``against``, as many from that tree, interleaved; each summarized."""
    here: list[dict] = []
    there: list[dict] = []
    for _ in range(repeats):
        here.append(child(*args))
        if against is not None:
            there.append(child(*args, tree=against))
    return summarize(here), (summarize(there) if there else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cases = ["default", "vidur", "cold", "cluster", "dp"]
    parser.add_argument("--cases", nargs="*", choices=cases, default=cases, help="none: only --calls")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="the step-by-step path instead of fast-forward")
    parser.add_argument(
        "--cluster-requests", type=int, default=1_000_000, help="requests of the 16-replica case (target: 1M)"
    )
    parser.add_argument("--default-requests", type=int, default=100_000, help="requests of the default case")
    parser.add_argument("--against", help="a checkout of another commit: run default, cluster and dp there too")
    parser.add_argument("--calls", type=int, help="also count the Python calls of the default scenario at N requests")
    args = parser.parse_args()
    mode = "plain" if args.plain else "fast"
    print(describe())
    rows = []
    trees = [("", None)] + ([(f" [{args.against}]", args.against)] if args.against else [])
    if args.calls:
        for label, tree in trees:
            calls = child("calls", mode, str(args.calls), tree=tree)["calls"]
            rows.append((f"Python calls, default, {args.calls:,} requests{label}", f"{calls:,}", "-", "-"))
    for case in args.cases:
        if case == "default":
            n = args.default_requests
            runs = [x for x in repeat(args.repeats, "default", mode, str(n), against=args.against) if x is not None]
            for (label, _), (r, wall, run_s, peak) in zip(trees, runs, strict=True):
                rows.append(
                    (
                        f"default, {n:,} requests{label}",
                        f"{r['n'] / run_s:,.0f} req/s (wall {wall:.1f} s)",
                        "20,000 req/s (issue 31)",
                        f"{peak:,.0f} MB ({peak * 1024 / r['n']:.1f} KB/request)",
                    )
                )
        elif case == "cluster":
            n = args.cluster_requests
            repeats = 1 if args.against is None else args.repeats
            runs = [x for x in repeat(repeats, "cluster", mode, str(n), against=args.against) if x is not None]
            for (label, _), (r, wall, run_s, peak) in zip(trees, runs, strict=True):
                rows.append(
                    (
                        f"16 replicas, {n:,} requests{label}",
                        f"{wall:.0f} s ({r['n'] / run_s:,.0f} req/s)",
                        "< 60 s, < 2 GB",
                        f"{peak:,.0f} MB ({peak * 1024 / r['n']:.2f} KB/request)",
                    )
                )
        elif case == "dp":
            for point in DP_POINTS:
                runs = [x for x in repeat(args.repeats, "dp", mode, point, against=args.against) if x is not None]
                for (label, _), (r, wall, run_s, peak) in zip(trees, runs, strict=True):
                    rows.append(
                        (
                            f"{point}, {r['n']:,} requests{label}",
                            f"{wall:.1f} s ({r['n'] / run_s:,.0f} req/s)",
                            "within the benchmark's point limit",
                            f"{peak:,.0f} MB",
                        )
                    )
        elif case == "vidur":
            sat = child("vidur-sat", mode, "1000", "3000")  # saturating: its throughput is the capacity
            rate = 0.85 * sat["request_throughput"]
            (r, wall, run_s, peak), _ = repeat(args.repeats, "vidur", mode, str(rate), "100000")
            rows.append(
                (
                    f"Vidur's scenario at 85% load ({rate:.2f} req/s), 100k",
                    f"{r['n'] / run_s:,.0f} req/s, {wall:.1f} s end to end",
                    f"{100 * VIDUR['req_per_s']:,.0f} req/s, < 10 s, < 300 MB "
                    f"(Vidur: {VIDUR['req_per_s']:.0f} req/s, {VIDUR['wall_100k_s']} s, {VIDUR['peak_mb']:.0f} MB)",
                    f"{peak:,.0f} MB",
                )
            )
        elif case == "cold":
            walls = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "servesim",
                        "run",
                        "--model",
                        "qwen2.5-7b",
                        "--hardware",
                        "mi300x",
                        "--num-requests",
                        "1000",
                        "--quiet",
                        "--no-report",
                        "--out",
                        "/tmp/servesim-cold-start",
                    ],
                    check=True,
                    capture_output=True,
                )
                walls.append(time.perf_counter() - t)
            rows.append(
                (
                    "cold start: new model x GPU, 1,000 requests",
                    f"{statistics.median(walls):.1f} s",
                    f"< 10 s (Vidur: ~{VIDUR['cold_start_s'] // 60} min)",
                    "-",
                )
            )
    width = max(len(r[0]) for r in rows)
    cluster_runs = "1 run" if args.against is None else f"{args.repeats} runs"
    cluster_note = f" (the 16-replica case: {cluster_runs}, as it takes minutes)" if "cluster" in args.cases else ""
    print(f"mode: {mode}; wall times are medians of {args.repeats} runs, each in a fresh process{cluster_note}")
    print(f"{'case':<{width}}  {'servesim':<40}  {'target':<70}  memory")
    for case, got, target, mem in rows:
        print(f"{case:<{width}}  {got:<40}  {target:<70}  {mem}")
    print(f"at the end: {load()}")


if __name__ == "__main__":
    main()
