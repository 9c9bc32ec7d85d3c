"""`servesim run`: simulate one scenario and write its run folder."""

from __future__ import annotations

import argparse
import json

from servesim import display
from servesim.commands.common import add_out_args, add_scenario_args, output_folder, scenario_from_args
from servesim.commands.report import add_report_args, check_report_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="simulate a scenario (the embedded default without arguments)",
        description="Simulate a scenario and write summary.json, config.json, the per-request "
        "and per-step tables and an interactive report.html to a run folder.",
    )
    add_scenario_args(p)
    add_out_args(p, "run folder (default: runs/run-YYYYmmdd-HHMMSS)")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="table format")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--plain",
        action="store_true",
        help="plan every engine step (no fast-forward over decode-only steps): the same decisions, times equal "
        "to 1e-12 relative (see docs/concepts/architecture.md), slower",
    )
    add_report_args(p)
    p.set_defaults(func=main)


def add_intervals(result) -> list:
    """The run's prediction intervals (servesim's measured error against InferenceX's runs, for the engine the
    policy models; ``simulator.metrics.intervals``), added to its summary as ``<metric>_interval`` [low, high]
    and ``interval_level``."""
    from simulator.metrics.intervals import deployment_intervals

    group = (result.config.get("resolved_groups") or [{}])[0]
    intervals = deployment_intervals(result.summary, result.config.get("policy"), group.get("cost_model"))
    for iv in intervals:
        result.summary[f"{iv.metric}_interval"] = [iv.low, iv.high]
    if intervals:
        result.summary["interval_level"] = intervals[0].level
    return intervals


def main(args: argparse.Namespace) -> int:
    check_report_args(args)
    cfg, base_dir = scenario_from_args(args)  # a bad scenario is refused before the simulator is imported
    from simulator.build import build
    from simulator.metrics.results import describe_deployment

    sim = build(cfg, base_dir=base_dir, fast_forward=not args.plain)
    skipped = sim.stream.meta.get("num_skipped_rows")
    if skipped:
        display.stderr.print(f"workload: skipped {skipped:,} bad trace rows")
    with output_folder(args.out, "run", args.overwrite) as out:  # refused before the simulation; undone if it fails
        with display.progress_bar("simulating", enabled=not args.quiet) as progress:
            result = sim.run(progress=progress)
        intervals = add_intervals(result)
        result.write(out, args.format)
        if not args.no_report:
            import reports  # plotly is imported only when a report is written

            data = reports.load_run(result)
            data.source = out
            with display.step_progress("writing report", enabled=not args.quiet) as progress:
                reports.write_run_report(
                    data, out / "report.html", static=args.static, plotlyjs=args.plotlyjs, progress=progress
                )
    if args.json:
        print(json.dumps(json.loads((out / "summary.json").read_text())))
        return 0
    title = describe_deployment(result.config)
    display.stdout.print(display.summary_table(result.summary, title))
    for line in display.interval_lines(intervals):
        display.stdout.print(line)
    display.stdout.print(f"run folder: {out}")
    if not args.no_report:
        display.stdout.print(f"report: {out / 'report.html'}")
    return 0
