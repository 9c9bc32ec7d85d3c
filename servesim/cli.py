"""The `servesim` command line. User errors print one line and exit with status 2."""

from __future__ import annotations

import argparse
import sys

from servesim import __version__
from servesim.commands import (
    calibrate,
    compare,
    estimate,
    explain,
    plan,
    presets,
    report,
    run,
    sweep,
    validate,
    workload,
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (the usage block is what ``--help`` is for)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    # subcommands' parsers take this class too (argparse gives subparsers the parent's class)
    parser = OneLineParser(
        prog="servesim",
        description="Discrete-event simulator of LLM inference serving.",
    )
    parser.add_argument("--version", action="version", version=f"servesim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (run, compare, sweep, plan, report, estimate, explain, presets, workload, calibrate, validate):
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:
        message = str(exc).strip() or type(exc).__name__
        print(f"servesim {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("servesim: interrupted", file=sys.stderr)
        return 130
