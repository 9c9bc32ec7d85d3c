"""`servesim calibrate`: time the cost model's ops on this device and write a profile."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from servesim import display
from servesim.commands.common import check_writable_out

if TYPE_CHECKING:
    from simulator.cost.profile import CalibrationProfile


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure the cost model's ops on this device (torch) and write a profile",
        description="Build the model's layers in torch with random weights at its real shapes, time every op of "
        "the cost model over a grid of shapes, the per-step overhead of real engine steps and the memory "
        "besides the KV cache, and write a profile for `servesim run --profile`. Needs torch "
        "(pip install 'servesim[calibrate]').",
    )
    p.add_argument("--model", required=True, help="model preset, config.json or spec YAML")
    p.add_argument("--device", choices=("cuda", "cpu"), required=True, help="device to measure")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument("--grid", choices=("quick", "full"), default="quick", help="grid of shapes (default quick)")
    p.add_argument("--threads", type=int, help="torch threads on a CPU (default: torch's)")
    p.add_argument(
        "--engine",
        action="append",
        choices=("builtin", "hf"),
        help="also fit this engine's own time per step on whole steps it runs (repeatable); kept in the profile, "
        "applied by `servesim run --profile`, used as it is by `servesim validate`",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and inputs")
    p.add_argument("--out", type=Path, required=True, help="profile file to write (JSON)")
    p.add_argument(
        "--tables-out",
        type=Path,
        metavar="FOLDER",
        help="also write the measured GEMM and attention times as a table set in aiconfigurator's silicon-database "
        "layout (gemm/torch/<torch version>/gemm_perf.parquet, ...), read by `cost_model: {kind: silicon, tables: "
        "FOLDER}`; this device's earlier tables in FOLDER (other models) are kept, merged",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse to write a suspect profile (over 25%% of points noisy, a busy machine, an op's held-out "
        "error above 25%%)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def fit_table(profile: CalibrationProfile) -> Table:
    """Per-op fit errors on held-out points (on its own points the interpolation is exact by construction)."""
    table = Table(title="fit of the interpolation (relative error)", title_justify="left")
    for col in ("op", "space", "grid points", "held-out points", "held-out mean", "held-out max"):
        table.add_column(col, justify="left" if col in ("op", "space") else "right")
    for name, fit in profile.fit.items():
        table.add_row(
            name,
            profile.ops[name].space,
            str(len(profile.ops[name].points)),
            str(fit.num_held_out),
            "-" if fit.held_out_mean_rel_error is None else f"{fit.held_out_mean_rel_error:.1%}",
            "-" if fit.held_out_max_rel_error is None else f"{fit.held_out_max_rel_error:.1%}",
        )
    return table


def main(args: argparse.Namespace) -> int:
    from calibration.harness import calibrate, calibrate_with_tables
    from simulator.config.presets import resolve_model
    from simulator.cost.profile import save_profile

    model = resolve_model(args.model)
    check_writable_out(args.out, is_file=True)  # before minutes of measuring, not after
    if args.tables_out is not None:
        _check_tables_out(args.tables_out)
    dtype = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    started = time.perf_counter()
    with display.progress_bar("calibrating", enabled=not args.quiet) as progress:
        if args.tables_out is None:
            profile, gemms = calibrate(model, args.device, dtype, args.grid, args.threads, progress, args.seed), ()
        else:
            profile, gemms = calibrate_with_tables(
                model, args.device, dtype, args.grid, args.threads, progress, args.seed
            )
    for name in dict.fromkeys(args.engine or ()):
        from calibration.engine_fit import calibrate_engine, with_engine

        profile = with_engine(profile, calibrate_engine(profile, name, args.seed))
    elapsed = time.perf_counter() - started
    if profile.warnings and args.strict:
        raise ValueError(f"--strict: the profile is suspect, not written: {'; '.join(profile.warnings)}")
    out = save_profile(profile, args.out)
    if args.tables_out is not None:
        from calibration.tables import TABLE_DTYPES, write_table_set

        write_table_set(args.tables_out, profile, gemms)
    o = display.stdout
    o.print(fit_table(profile))
    mem, ovh, gib = profile.memory, profile.overhead, 2**30
    step_err = profile.step_fit_mean_rel_error
    o.print(
        f"per-step overhead: {ovh.step_s * 1e3:.3f} ms + {ovh.per_seq_s * 1e6:.1f} us per sequence "
        f"(from {ovh.num_steps} engine steps; whole-step mean error "
        f"{'-' if step_err is None else f'{step_err:.1%}'})"
    )
    o.print(
        f"memory: device {mem.device_memory_bytes / gib:.1f} GiB, weights {mem.weight_bytes / gib:.2f} GiB, "
        f"activation peak {mem.activation_peak_bytes / gib:.2f} GiB at {mem.activation_tokens} tokens, "
        f"runtime {mem.runtime_bytes / gib:.2f} GiB"
    )
    o.print(
        f"measured {profile.model.name} ({profile.dtype}) on {profile.device.name} in {elapsed:.0f} s; profile: {out}"
    )
    for e in profile.engines.values():
        held = "-" if e.held_out_mean_rel_error is None else f"{e.held_out_mean_rel_error:.1%}"
        o.print(
            f"engine {e.engine} ({e.engine_version}): {e.time_scale:.3f} x op times + {e.step_overhead_s * 1e3:.3f} ms "
            f"per step + {e.per_seq_overhead_s * 1e6:.1f} us per sequence + {e.per_kv_token_overhead_s * 1e9:.0f} ns "
            f"per key; ingest {e.ingest_delay_s * 1e3:.2f} ms; {e.num_steps} steps, mean error "
            f"{e.fit_mean_rel_error:.1%}; held out ({e.num_held_out} steps) {held}"
        )
    if args.tables_out is not None:
        o.print(
            f"table set: {args.tables_out} (GEMM and attention, {TABLE_DTYPES[profile.dtype]}; no communication "
            f"tables from one device): cost_model: {{kind: silicon, tables: {args.tables_out}}}"
        )
        if profile.dtype != "bf16":
            display.stderr.print(
                f"note: the silicon model reads bfloat16 tables for an unquantized model; these are "
                f"{TABLE_DTYPES[profile.dtype]} (calibrate with --dtype bf16 for tables it reads)"
            )
    q = profile.quality
    if q is not None:
        load = "not measurable here" if q.other_cores is None else f"{q.other_cores:.2f} cores used by other processes"
        o.print(f"quality: {q.num_noisy_points} of {q.num_points} points noisy; {load}")
    display.warn_suspect_profile(profile, out)  # loud, on stderr: the profile was written all the same
    return 0


def _check_tables_out(folder: Path) -> None:
    """--tables-out must be a folder that can be made (checked before the measuring, not after)."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--tables-out {folder}: is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--tables-out {folder}: cannot create it ({exc.strerror})") from None
