"""Random valid scenarios at scale: the fuzz test's generator and checks over thousands of scenarios (issue 33).

Each worker draws scenarios from ``benchmarks/fuzzing/strategies.py`` (hypothesis, seeded per chunk: the same
``--seed`` draws the same scenarios) and runs each through ``benchmarks/fuzzing/checks.py``. A scenario that
raises anything but a one-line refusal, breaks an invariant, or runs past ``--scenario-timeout`` is a failure:
it is shrunk (``benchmarks/fuzzing/shrink.py``, delta-minimization keeping the same failure) and written to
``--out`` as ``<n>-scenario.yaml`` (shrunk), ``<n>-original.yaml`` and ``<n>-error.txt``. At the end it prints
the scenarios run, refused, the requests simulated and the failures.

    python benchmarks/fuzz.py --scenarios 10000 --workers 1 --out fuzz-failures
    python benchmarks/fuzz.py --scenarios 10000 --ray          # on a Ray cluster (or a local one)

Named traces are read from SERVESIM_DATA_DIR (default ../shared/data/traces beside the repository); nothing is
downloaded (SERVESIM_OFFLINE).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the repository's packages
    sys.path.insert(0, str(ROOT))
SHARED_TRACES = ROOT.parent / "shared" / "data" / "traces"
CHUNK = 20  # scenarios per task: small, so the progress bar moves and the pool balances


class ScenarioTimeout(Exception):
    """A scenario ran past --scenario-timeout."""


@dataclass
class ChunkResult:
    """What one task found: counts, and the failing scenarios with their error text."""

    num_scenarios: int = 0
    num_refused: int = 0
    num_requests: int = 0
    failures: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)  # (scenario, signature, text)


def _environment() -> None:
    if not os.environ.get("SERVESIM_DATA_DIR", "").strip() and SHARED_TRACES.is_dir():
        os.environ["SERVESIM_DATA_DIR"] = str(SHARED_TRACES)
    os.environ["SERVESIM_OFFLINE"] = "1"


def _on_alarm(signum, frame):
    raise ScenarioTimeout("scenario timed out")


def judge(data: dict[str, Any], timeout_s: float) -> tuple[int | None, str | None, str]:
    """Run one scenario: (requests simulated or None when refused, failure signature or None, error text)."""
    from benchmarks.fuzzing.checks import check_scenario
    from benchmarks.fuzzing.shrink import signature

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        verdict = check_scenario(data)
    except Exception as exc:  # every other exception is a failure: recorded, never raised
        return None, signature(exc), "".join(traceback.format_exception(exc))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return (None if verdict.refused else verdict.num_requests), None, verdict.refused or ""


def draw_scenarios(seed: int, count: int, skip_first: bool = True, max_requests: int = 24) -> list[dict[str, Any]]:
    """``count`` scenarios drawn with hypothesis from ``seed`` (generation only: no shrinking, no database).

    Hypothesis starts every run with the simplest example; ``skip_first`` leaves it out, so that chunks do not
    all repeat it (the first chunk of a run keeps it).
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from benchmarks.fuzzing.strategies import scenarios

    drawn: list[dict[str, Any]] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count + skip_first,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(scenarios(max_requests=max_requests))
    def collect(data):
        drawn.append(data)

    collect()
    return drawn[int(skip_first) :][:count]


def run_chunk(seed: int, start: int, count: int, timeout_s: float, max_requests: int = 24) -> ChunkResult:
    """Scenarios ``start`` to ``start + count`` of the run seeded ``seed``."""
    _environment()
    out = ChunkResult()
    for data in draw_scenarios(seed * 1_000_003 + start, count, skip_first=start > 0, max_requests=max_requests):
        requests, sig, text = judge(data, timeout_s)
        out.num_scenarios += 1
        if sig is not None:
            out.failures.append((data, sig, text))
        elif requests is None:
            out.num_refused += 1
        else:
            out.num_requests += requests
    return out


def _chunks(total: int) -> Iterator[tuple[int, int]]:
    for start in range(0, total, CHUNK):
        yield start, min(CHUNK, total - start)


def _results_local(args) -> Iterator[ChunkResult]:
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [
            pool.submit(run_chunk, args.seed, s, n, args.scenario_timeout, args.max_requests)
            for s, n in _chunks(args.scenarios)
        ]
        for future in as_completed(futures):
            yield future.result()


def _results_ray(args) -> Iterator[ChunkResult]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(address=args.ray_address, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    task = ray.remote(run_chunk)
    pending = [
        task.remote(args.seed, s, n, args.scenario_timeout, args.max_requests) for s, n in _chunks(args.scenarios)
    ]
    while pending:
        done, pending = ray.wait(pending)
        for ref in done:
            yield ray.get(ref)


def record_failure(out_dir: Path, n: int, data: dict[str, Any], sig: str, text: str) -> None:
    """Write a failing scenario as found, with its error (at once: a run cut short keeps what it found)."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{n:03d}-original.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (out_dir / f"{n:03d}-error.txt").write_text(f"{sig}\n\n{text}")


def write_failure(out_dir: Path, n: int, data: dict[str, Any], sig: str, text: str, timeout_s: float) -> Path:
    """Shrink the failing ``data`` and write it (shrunk and original) with its error; returns the shrunk file.

    A scenario that does not fail the same way again here (the code changed under the run, or it only times out
    on a busy machine) is written unshrunk, its first line saying so.
    """
    import yaml

    from benchmarks.fuzzing.shrink import shrink

    def fails(candidate: dict[str, Any]) -> str | None:
        return judge(candidate, timeout_s)[1]

    record_failure(out_dir, n, data, sig, text)
    again = fails(data)
    if again == sig:
        small, note = shrink(data, fails), sig
    else:
        small, note = data, f"{sig} (did not fail so again when shrinking: {again or 'it passed'})"
    path = out_dir / f"{n:03d}-scenario.yaml"
    path.write_text(f"# {note}\n" + yaml.safe_dump(small, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=1000, help="scenarios to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local processes (default: cores)")
    parser.add_argument("--ray", action="store_true", help="run the chunks as Ray tasks instead of a local pool")
    parser.add_argument("--ray-address", default=None, help="Ray cluster address (default: start a local one)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="folder for failing scenarios")
    parser.add_argument("--max-requests", type=int, default=24, help="most requests of a scenario (default 24)")
    parser.add_argument("--scenario-timeout", type=float, default=300.0, help="seconds one scenario may take")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.scenarios < 1 or args.workers < 1:
        parser.error("--scenarios and --workers must be at least 1")
    _environment()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    total = ChunkResult()
    seen: dict[str, tuple[dict[str, Any], str]] = {}  # one shrunk scenario per failure signature
    start = time.perf_counter()
    results = _results_ray(args) if args.ray else _results_local(args)
    columns = (TextColumn("fuzz"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"))
    with Progress(*columns, TimeRemainingColumn(), disable=args.quiet) as progress:
        bar = progress.add_task("fuzz", total=args.scenarios, note="")
        for chunk in results:
            total.num_scenarios += chunk.num_scenarios
            total.num_refused += chunk.num_refused
            total.num_requests += chunk.num_requests
            total.failures += chunk.failures
            for data, sig, text in chunk.failures:
                if sig not in seen:
                    record_failure(args.out, len(seen), data, sig, text)
                    seen[sig] = (data, text)
            note = f"{total.num_requests:,} requests, {len(total.failures)} failing"
            progress.update(bar, advance=chunk.num_scenarios, note=note)
            if not args.quiet and not progress.console.is_terminal and total.num_scenarios % (5 * CHUNK) < CHUNK:
                # a log file gets a line now and then instead of the bar
                rate = total.num_scenarios / max(time.perf_counter() - start, 1e-9)
                print(f"{total.num_scenarios:,}/{args.scenarios:,} scenarios, {note}, {rate:.1f}/s", flush=True)
    wall = time.perf_counter() - start
    paths = [write_failure(args.out, i, d, s, t, args.scenario_timeout) for i, (s, (d, t)) in enumerate(seen.items())]
    print(
        f"scenarios: {total.num_scenarios:,} ({total.num_refused:,} refused in one line), "
        f"requests simulated: {total.num_requests:,}, failures: {len(total.failures)} "
        f"({len(seen)} distinct), {wall:.0f} s ({total.num_scenarios / max(wall, 1e-9):.1f} scenarios/s)"
    )
    for sig, path in zip(seen, paths, strict=True):
        print(f"  {path}: {sig}")
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
