"""`servesim report`: an interactive HTML report of one run folder, or a comparison of several."""

from __future__ import annotations

import argparse
from pathlib import Path

from servesim import display
from servesim.commands.common import check_writable_out

STATIC_FORMATS = ("png", "svg")


def add_static_args(parser: argparse.ArgumentParser) -> None:
    """``--static [png|svg]`` and ``--plotlyjs``, shared by the commands that write reports."""
    parser.add_argument(
        "--static",
        nargs="?",
        const="png",
        choices=STATIC_FORMATS,
        help="also export every figure as PNG (default) or SVG into <report>_figures/ (needs kaleido and Chromium)",
    )
    parser.add_argument(
        "--plotlyjs",
        choices=("inline", "beside"),
        default="inline",
        help="embed plotly.js in the page (default) or write it once beside the page",
    )


def add_report_args(parser: argparse.ArgumentParser, what: str = "report.html") -> None:
    """``--no-report`` and the static-export flags of the commands that write a report beside their results."""
    parser.add_argument("--no-report", action="store_true", help=f"do not write {what}")
    add_static_args(parser)


def check_report_args(args: argparse.Namespace) -> None:
    if args.static and args.no_report:
        raise ValueError("--static exports the report's figures; it cannot be combined with --no-report")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write an interactive HTML report of run folders",
        description="Write a self-contained HTML report: a run report for one run folder, a comparison "
        "report for several (variants overlaid; latency versus load when a variant ran at several rates), "
        "or the report of a plan or sweep folder.",
    )
    p.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="run folders written by `servesim run` (or one plan or sweep folder)",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        help="report file (default: RUN_DIR/report.html for one run, ./comparison.html for several)",
    )
    p.add_argument("--labels", help="comma-separated variant label per run (default: the policy names)")
    add_static_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    labels = None
    if args.labels is not None:
        labels = [label.strip() for label in args.labels.split(",")]
        if len(labels) != len(args.runs) or not all(labels):
            raise ValueError(f"--labels: give one non-empty label per run folder ({len(args.runs)})")
    import reports  # plotly is imported only when a report is written

    if args.out is None:
        out = args.runs[0] / "report.html" if len(args.runs) == 1 else Path("comparison.html")
    elif not args.out.strip():
        raise ValueError(f"--out {args.out!r}: empty file name")
    else:
        out = Path(args.out)
        check_writable_out(out, is_file=True)
    folder = args.runs[0]
    if len(args.runs) == 1 and (folder / "plan.json").is_file():
        path = reports.write_plan_report(folder, out, static=args.static, plotlyjs=args.plotlyjs)
    elif len(args.runs) == 1 and (folder / "sweep.json").is_file():
        path = reports.write_sweep_report(folder, out, static=args.static, plotlyjs=args.plotlyjs)
    else:
        with display.step_progress("building report", enabled=not args.quiet) as progress:
            path = reports.write_report(
                args.runs, out, labels, static=args.static, plotlyjs=args.plotlyjs, progress=progress
            )
    display.stdout.print(f"report: {path}")
    if args.static:
        display.stdout.print(f"figures: {reports.static_dir(path)}")
    return 0
