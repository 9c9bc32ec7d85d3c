"""`servesim validate`: run a real engine on a small workload and compare the simulator's prediction."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.table import Table

from servesim import display
from servesim.commands.common import add_out_args, output_folder
from simulator.cost.profile import load_profile
from simulator.scenario import read_scenario_dict


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="run a real engine on a small workload and compare it with the simulator's prediction",
        description="Run a real engine (transformers' continuous batching, or servesim's builtin torch engine) "
        "on the profile's device, simulate the same requests with the profile as calibrated (nothing is fitted "
        "to the compared run unless --fit-in-run), and print per-metric and per-step-kind errors. "
        "Writes both runs' per-request tables, the engine's steps and the comparison to a folder. Needs torch.",
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
    p.add_argument(
        "--fit-in-run",
        action="store_true",
        help="fit the engine's step model to warm-up requests served around the compared run instead of "
        "taking the profile's (not a held-out check; reported as fitted in-run)",
    )
    p.add_argument(
        "--no-engine-fit",
        action="store_true",
        help="ignore the profile's engine section: the harness's op times (scale 1) and decode-loop overhead",
    )
    p.add_argument(
        "--threads", type=int, help="torch threads of the engine on a CPU (default: the profile's, as it was measured)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def step_table(step_errors: dict) -> Table:
    table = Table(title="engine steps: simulator vs engine, by step kind (relative error)", title_justify="left")
    for col in ("step kind", "steps", "mean |error|", "p90 |error|", "mean error"):
        table.add_column(col, justify="left" if col == "step kind" else "right")
    for kind, e in step_errors.items():
        table.add_row(
            kind,
            str(e.num_steps),
            f"{e.mean_rel_error:.1%}",
            f"{e.p90_rel_error:.1%}",
            f"{e.mean_signed_rel_error:+.1%}",
        )
    return table


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


def main(args: argparse.Namespace) -> int:
    from calibration.validate import validate

    if args.requests is not None and args.requests < 1:
        raise ValueError(f"--requests must be at least 1 (got {args.requests})")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be at least 1 (got {args.threads})")
    if args.fit_in_run and args.no_engine_fit:
        raise ValueError("--fit-in-run and --no-engine-fit: give one (the first fits in-run, the second does not fit)")
    profile = load_profile(args.profile)
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
                fit_in_run=args.fit_in_run,
                use_engine_fit=not args.no_engine_fit,
                num_threads=args.threads,
            )
        result.write(out)
    for i, line in enumerate(result.notes):
        print(("note: " if i == 0 or not line.startswith(" ") else "      ") + line, file=sys.stderr)
    if args.json:
        print(json.dumps(result.comparison))
        return 0
    fit = result.fit
    title = (
        f"{result.engine_version} vs servesim ({profile.model.name}, {profile.device.name}, "
        f"{result.measured_summary['completed']} requests)"
    )
    display.stdout.print(comparison_table(result.comparison, title))
    if result.step_errors:
        display.stdout.print(step_table(result.step_errors))
    if fit.fitted:
        how = f"FITTED IN-RUN on {fit.num_steps} warm-up steps (mean error {fit.mean_rel_error:.1%}): not held out"
    else:
        how = f"held out, from {fit.source}"
    display.stdout.print(
        f"engine timing {how}: {fit.time_scale:.3f} x the profile's op times + {fit.step_overhead_s * 1e3:.3f} ms "
        f"per step + {fit.per_seq_overhead_s * 1e6:.1f} us per sequence + {fit.per_token_overhead_s * 1e6:.2f} us "
        f"per token + {fit.per_kv_token_overhead_s * 1e9:.1f} ns per key attended; ingest delay "
        f"{fit.ingest_delay_s * 1e3:.3f} ms; {result.num_threads} thread{'s' * (result.num_threads != 1)}"
    )
    load = result.load
    if load is not None and load.other_cpus_mean is not None:
        avg = " ".join(f"{x:.2f}" for x in load.load_average)
        display.stdout.print(
            f"machine: other processes kept {load.other_cpus_mean:.2f} of {load.num_cpus} CPUs busy during the run"
            + (f" (load average {avg})" if avg else "")
        )
    display.stdout.print(f"folder: {out}")
    return 0
