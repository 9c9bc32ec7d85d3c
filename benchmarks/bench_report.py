"""Report size and browser render time for a large run (the issue's bar: 100,000 requests, < 15 MB, < 10 s).

Builds the run report of a run folder (or simulates one first), then opens it from
file:// in headless Chromium (the local executable, through playwright) and times how
long the page takes to load and draw every figure. Run by hand:

    python benchmarks/bench_report.py --num-requests 100000            # simulate, then measure
    python benchmarks/bench_report.py --run-dir runs/big --repeats 5    # an existing run folder

Simulating 100,000 requests takes a few minutes; the report itself takes seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/bench_report.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import reports
from benchmarks.machine import describe, load
from reports.browser import launch_browser
from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.metrics.results import RunResult

SIZE_LIMIT_MB = 15.0
RENDER_LIMIT_S = 10.0


def simulate(num_requests: int, out: Path) -> Path:
    cfg = validate_scenario({"workload": {"num_requests": num_requests}, "slo": {"ttft_ms": 300, "tpot_ms": 40}})
    t0 = time.perf_counter()
    result = build(cfg).run()
    print(f"simulated {num_requests:,} requests in {time.perf_counter() - t0:,.1f} s")
    return result.write(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-dir", type=Path, help="an existing run folder")
    source.add_argument("--num-requests", type=int, help="simulate the default scenario with this many requests")
    parser.add_argument("--repeats", type=int, default=3, help="browser loads to time (median reported)")
    parser.add_argument("--out", type=Path, help="where to write the report (default: a temporary folder)")
    args = parser.parse_args()
    print(describe())

    with tempfile.TemporaryDirectory(prefix="servesim-bench-report-") as tmp:
        run_dir = args.run_dir or simulate(args.num_requests, Path(tmp) / "run")
        t0 = time.perf_counter()
        result = RunResult.load(run_dir)
        t1 = time.perf_counter()
        out = reports.write_run_report(result, args.out or Path(tmp) / "report.html")
        t2 = time.perf_counter()
        size_mb = out.stat().st_size / 1e6
        loads, renders = [], []
        with launch_browser() as browser:
            for _ in range(args.repeats):
                with browser.open(out, timeout_s=120) as page:
                    assert not page.console_errors and not page.page_errors, page.console_errors + page.page_errors
                    assert not page.network_requests, page.network_requests
                    loads.append(page.load_s)
                    renders.append(page.render_ms() / 1000)
        n = result.summary.get("num_requests", len(result.requests))
        print(f"run: {run_dir} ({n:,} requests, {len(result.steps):,} steps, {len(result.itl_values_s):,} ITL pairs)")
        print(f"load tables       {t1 - t0:8.2f} s")
        print(f"build + write     {t2 - t1:8.2f} s")
        print(f"report size       {size_mb:8.2f} MB   (limit {SIZE_LIMIT_MB:g} MB)")
        print(
            f"browser load+draw {statistics.median(loads):8.2f} s    (median of {len(loads)}, "
            f"max {max(loads):.2f} s; limit {RENDER_LIMIT_S:g} s)"
        )
        print(f"  of which drawing {statistics.median(renders):7.2f} s    (measured inside the page)")
        ok = size_mb < SIZE_LIMIT_MB and max(loads) < RENDER_LIMIT_S
        print(f"at the end: {load()}")
        print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
