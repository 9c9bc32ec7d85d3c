"""Simulate the default scenario at 10,000 and 100,000 requests; print wall time, rate and peak memory.

Each size runs in a fresh subprocess so its peak resident memory (ru_maxrss) is its own.
Run by hand: ``python benchmarks/bench_default.py [--sizes 10000 100000] [--repeats 3] [--plain]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/bench_default.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import describe, load

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from simulator.build import build
from simulator.config.scenario import validate_scenario
n = int(sys.argv[1])
cfg = validate_scenario({"workload": {"num_requests": n}})
sim = build(cfg, fast_forward=sys.argv[2] == "fast")
t1 = time.perf_counter()
result = sim.run()
t2 = time.perf_counter()
print(json.dumps({"n": n, "build_s": t1 - t0, "run_s": t2 - t1, "total_s": t2 - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "completed": result.summary["completed"], "steps": result.summary["num_steps"]}))
"""


def measure(n: int, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="plan every step (no fast-forward)")
    args = parser.parse_args()
    mode = "plain" if args.plain else "fast"
    print(describe())
    print(f"mode: {mode}; medians of {args.repeats} runs, each in a fresh process")
    print(f"{'requests':>10} {'wall s (median)':>16} {'sim req/s':>10} {'steps':>9} {'peak RSS MB':>12}")
    for n in args.sizes:
        runs = [measure(n, mode) for _ in range(args.repeats)]
        wall = statistics.median(r["total_s"] for r in runs)
        run_s = statistics.median(r["run_s"] for r in runs)
        print(
            f"{n:>10,} {wall:>16.2f} {n / run_s:>10,.0f} {runs[0]['steps']:>9,} "
            f"{max(r['peak_rss_mb'] for r in runs):>12.0f}"
        )
    print(f"at the end: {load()}")


if __name__ == "__main__":
    main()
