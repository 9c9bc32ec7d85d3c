"""`servesim validate`: run a real engine on a small workload and compare the simulator's prediction."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.table import Table

from servesim import display
from servesim.commands.common import add_out_args, output_folder


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="run a real engine on a small workload and compare it with the simulator's prediction",
        description="Run a real engine (transformers' continuous batching, or servesim's builtin torch engine) "
        "on the profile's device, simulate the same requests with the profile, and print per-metric errors. "
        "Writes both runs' per-request tables and the comparison to a folder. Needs torch.",
    )
    p.add_argument("--profile", type=Path, required=True, help="profile written by `servesim calibrate`")
    p.add_argument("--engine", choices=("hf", "builtin"), required=True, help="engine to run")
    p.add_argument(
        "--workload",
        type=Path,
        help="scenario YAML whose workload, seed, policy, kv_cache and max_model_len to use "
        "(default: a small Poisson workload sized for the device)",
    )
    p.add_argument("--requests", type=int, help="number of requests (overrides the workload's)")
    p.add_argument(
        "--json", action="store_true", help="print one JSON object {metric: {measured, predicted, rel_error}}"
    )
    add_out_args(p, "folder for the tables and the comparison (default: runs/validate-...)")
    timing = p.add_mutually_exclusive_group()
    timing.add_argument(
        "--fit-in-run",
        action="store_true",
        help="fit the engine's time scale and overheads to warm-up requests served around the compared ones "
        "(reported as fitted in-run) instead of using the profile's engine-level fit (servesim calibrate --engine)",
    )
    timing.add_argument(
        "--no-engine-fit",
        action="store_true",
        help="use the profile's op times and the harness's overhead only, ignoring any engine-level fit",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def comparison_table(comparison: dict, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("metric", "measured", "predicted", "error"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for key, row in comparison.items():
        m, p, e = row["measured"], row["predicted"], row["rel_error"]
        table.add_row(
            key,
            "-" if m is None else f"{m:,.3f}",
            "-" if p is None else f"{p:,.3f}",
            "-" if e is None else f"{e:+.1%}",
        )
    return table


def step_table(errors: dict) -> Table:
    table = Table(title="engine steps of the compared run, by kind (steps whose work is known)", title_justify="left")
    for col in ("kind", "steps", "measured ms", "predicted ms", "mean error", "mean |error|"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for kind, row in errors.items():
        if not row["num_steps"]:
            table.add_row(kind, "0", "-", "-", "-", "-")
            continue
        table.add_row(
            kind,
            str(row["num_steps"]),
            f"{row['mean_measured_ms']:,.3f}",
            f"{row['mean_predicted_ms']:,.3f}",
            f"{row['mean_rel_error']:+.1%}",
            f"{row['mean_abs_rel_error']:.1%}",
        )
    return table


def main(args: argparse.Namespace) -> int:
    from calibration.validate import DRIFT_WARNING, validate
    from simulator.config.scenario import read_scenario_dict
    from simulator.cost.profile import load_profile

    if args.requests is not None and args.requests < 1:
        raise ValueError(f"--requests must be at least 1 (got {args.requests})")
    profile = load_profile(args.profile)
    display.warn_suspect_profile(profile, args.profile)
    workload = read_scenario_dict(args.workload) if args.workload is not None else None
    with output_folder(args.out, "validate", args.overwrite) as out:  # before the engine runs; undone if it fails
        with display.progress_bar(f"running the {args.engine} engine", enabled=not args.quiet) as progress:
            result = validate(
                profile,
                args.profile,
                args.engine,
                workload,
                args.requests,
                progress,
                "in-run" if args.fit_in_run else "ops" if args.no_engine_fit else "profile",
            )
        result.write(out)
    drift = result.timing_drift
    if drift is not None and abs(drift) > DRIFT_WARNING:
        print(
            f"servesim: warning: the engine's warm-up steps ran {abs(drift):.0%} {'slower' if drift > 0 else 'faster'} "
            "than the profile's engine fit predicts: the machine's speed has changed since calibrate (other load, "
            "clock frequency), and this validation measures that too",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(result.comparison))
        return 0
    fit = result.fit
    title = (
        f"{result.engine_version} vs servesim ({profile.model.name}, {profile.device.name}, "
        f"{result.measured_summary['completed']} requests)"
    )
    display.stdout.print(comparison_table(result.comparison, title))
    display.stdout.print(step_table(result.step_errors))
    display.stdout.print(
        f"engine timing ({result.timing_source}): {fit.time_scale:.3f} x the profile's op times + "
        f"{fit.step_overhead_s * 1e3:.3f} ms per step + {fit.per_seq_overhead_s * 1e6:.1f} us per sequence + "
        f"{fit.per_kv_token_overhead_s * 1e9:.0f} ns per key attended (over {fit.num_steps} steps: "
        f"mean error {fit.mean_rel_error:.1%}); ingest delay {fit.ingest_delay_s * 1e3:.3f} ms"
    )
    display.stdout.print(f"folder: {out}")
    return 0
