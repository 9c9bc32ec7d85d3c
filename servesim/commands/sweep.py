"""`servesim sweep`: run a grid of scenario variants in parallel into one resumable table."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from servesim import display
from servesim.commands.common import add_out_args, sweep_folder
from servesim.commands.report import add_report_args, check_report_args
from simulator.planning.points.executors import EXECUTOR_KINDS, check_executor_options, make_executor

SHOWN_ROWS = 40


def add_executor_args(parser: argparse.ArgumentParser) -> None:
    """--executor, --workers, --address: where the simulations run (shared with `servesim plan`)."""
    g = parser.add_argument_group("execution")
    g.add_argument("--executor", choices=EXECUTOR_KINDS, default="local", help="local process pool or Ray tasks")
    g.add_argument("--workers", type=int, help="parallel simulations (default: all CPUs; 1 runs in this process)")
    g.add_argument("--address", help="Ray cluster address (default: start a local Ray)")


def default_out_dir(grid: Path) -> Path:
    """A folder named after the grid file, so re-running the same command resumes it."""
    return Path("runs") / f"sweep-{grid.stem}"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of scenario variants (resumable; local processes or Ray)",
        description="Run the cartesian grid (and explicit points) of a GRID file over a base scenario, "
        "in parallel, into one Parquet table with a row per point. Points already in the output "
        "folder (same resolved config) are skipped, so an interrupted sweep resumes.",
    )
    p.add_argument("grid", type=Path, help="GRID file (YAML): base, grid, points, replicates")
    add_executor_args(p)
    p.add_argument("--replicates", type=int, help="independent seeds per point (overrides the grid file)")
    add_out_args(
        p,
        "output folder (default: runs/sweep-<grid name>); a sweep folder there is resumed",
        "start afresh: empty --out of an earlier sweep (or other servesim output) first; refused if it holds "
        "files servesim does not write",
    )
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_report_args(p)
    p.set_defaults(func=main)


def _warn(line: str) -> None:
    print(f"servesim sweep: warning: {line}", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    from simulator.planning.sweeps.grid import MAX_REPLICATES, load_grid

    check_report_args(args)
    check_executor_options(args.executor, args.workers, args.address)  # before any folder is made
    spec = load_grid(args.grid)
    if args.replicates is not None:
        if not 1 <= args.replicates <= MAX_REPLICATES:
            raise ValueError(f"--replicates {args.replicates}: must be between 1 and {MAX_REPLICATES}")
        spec = dataclasses.replace(spec, replicates=args.replicates)
    # the grid file is read: now the sweep machinery (pandas, the simulator) loads
    from simulator.planning.sweeps.sweep import SHOWN_METRICS, TABLE_NAME, resolve_points, run_sweep

    points = resolve_points(spec)  # every point checked before workers or Ray start
    out = sweep_folder(args.out, default_out_dir(args.grid), args.overwrite)  # a sweep folder there resumes
    executor = make_executor(args.executor, args.workers, args.address)
    try:
        with display.progress_bar("sweep points", enabled=not args.quiet, eta=True) as progress:
            outcome = run_sweep(spec, out, executor, progress, points=points, warn=_warn)
    finally:
        executor.close()
    if not args.no_report:
        import reports  # plotly is imported only when a report is written

        reports.write_sweep_report(out, out / "report.html", static=args.static, plotlyjs=args.plotlyjs)
    if args.json:
        print(json.dumps(json.loads((out / "sweep.json").read_text())))
        return 0
    table = outcome.table
    display.stdout.print(
        f"{outcome.num_points} points ({outcome.num_unique} distinct configs): {outcome.num_run} run, "
        f"{outcome.num_skipped} already done, {outcome.num_errors} could not run; "
        f"{outcome.wall_s:.1f} s on {executor.kind} x{executor.workers}"
    )
    if len(table) <= SHOWN_ROWS:
        params = json.loads((out / "sweep.json").read_text())["parameters"]
        metrics = [(k, h) for k, h, _ in SHOWN_METRICS if k in table.columns]
        columns = [("point", "#"), *((p, p) for p in params), ("status", "status"), *metrics]
        rows = table.astype(object).where(table.notna(), None).to_dict("records")
        display.stdout.print(display.table_from_rows("sweep", columns, rows))
    display.stdout.print(f"table: {out / TABLE_NAME}")
    if not args.no_report:
        display.stdout.print(f"report: {out / 'report.html'}")
    return 0
