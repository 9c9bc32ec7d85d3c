"""`servesim calibrate`: time the cost model's ops on this device and write a profile."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.table import Table

from servesim import display
from servesim.commands.common import check_writable_out
from simulator.cost.profile import STEP_KINDS, CalibrationProfile, default_torch_threads, save_profile
from simulator.cost.profiled import quality_warnings
from simulator.presets import resolve_model


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
    p.add_argument(
        "--threads",
        type=int,
        help="torch intra-op threads on a CPU (default: torch's default here, "
        f"{default_torch_threads()}, which is what transformers' and the builtin engine run with); "
        "recorded in the profile, and an engine must run with the same count for it to hold",
    )
    p.add_argument(
        "--engine",
        choices=("hf", "builtin"),
        help="also run this real engine over designed batches and fit its whole steps (op-time scale, per-step, "
        "per-sequence, per-token and per-key overheads) into the profile: what `servesim run --profile` then "
        "predicts with",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse to write a profile whose timings are noisy, interpolate held-out points badly or were taken "
        "on a busy machine (exit 2)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and inputs")
    p.add_argument("--out", type=Path, required=True, help="profile file to write (JSON)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def print_warnings(lines: list[str]) -> None:
    """A profile's warning on stderr, plain (no wrapping), first line marked."""
    for i, line in enumerate(lines):
        print(("warning: " if i == 0 else "         ") + line, file=sys.stderr)


def engine_table(profile: CalibrationProfile) -> Table | None:
    """The engine fit's errors by step kind, on fitted and held-out steps."""
    e = profile.engine
    if e is None:
        return None
    table = Table(title=f"engine fit: {e.engine_version} whole steps (relative error)", title_justify="left")
    for col in ("step kind", "fitted steps", "fitted mean", "held-out steps", "held-out mean", "held-out p90"):
        table.add_column(col, justify="left" if col == "step kind" else "right")
    for kind in STEP_KINDS:
        fit, held = e.fit_error.get(kind), e.held_out_error.get(kind)
        if fit is None and held is None:
            continue

        def pct(x: float | None) -> str:
            return "-" if x is None else f"{x:.1%}"

        table.add_row(
            kind,
            str(fit.num_steps if fit else 0),
            pct(fit.mean_rel_error if fit else None),
            str(held.num_steps if held else 0),
            pct(held.mean_rel_error if held else None),
            pct(held.p90_rel_error if held else None),
        )
    return table


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
    from calibration.harness import calibrate

    model = resolve_model(args.model)
    check_writable_out(args.out, is_file=True)  # before minutes of measuring, not after
    dtype = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    started = time.perf_counter()
    with display.progress_bar("calibrating", enabled=not args.quiet) as progress:
        profile = calibrate(model, args.device, dtype, args.grid, args.threads, progress, args.seed, args.engine)
    elapsed = time.perf_counter() - started
    warnings = quality_warnings(profile, str(args.out))
    if warnings and args.strict:
        problems = "; ".join(line.strip().removeprefix("- ") for line in warnings[1:-1])
        raise ValueError(f"--strict: {args.out} not written, its timings are not to be trusted: {problems}")
    out = save_profile(profile, args.out)
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
    engine = profile.engine
    table = engine_table(profile)
    if engine is not None and table is not None:
        o.print(table)
        o.print(
            f"engine step model: {engine.time_scale:.3f} x the op times + {engine.step_overhead_s * 1e3:.3f} ms "
            f"per step + {engine.per_seq_overhead_s * 1e6:.1f} us per sequence + "
            f"{engine.per_token_overhead_s * 1e6:.2f} us per token + {engine.per_kv_token_overhead_s * 1e9:.1f} ns "
            f"per key attended ({engine.attention} attention; {len(engine.steps)} steps in {engine.wall_s:.0f} s; "
            f"ingest delay {engine.ingest_delay_s * 1e3:.2f} ms)"
        )
    threads = profile.device.num_threads
    load = profile.quality.load if profile.quality is not None else None
    if load is not None and load.other_cpus is not None:
        avg = " ".join(f"{x:.2f}" for x in load.load_average)
        o.print(
            f"machine: other processes kept {load.other_cpus:.2f} of {load.num_cpus} CPUs busy during the "
            f"measurement (load average {avg})"
        )
    o.print(
        f"measured {profile.model.name} ({profile.dtype}) on {profile.device.name} with {threads} "
        f"thread{'s' * (threads != 1)} in {elapsed:.0f} s; profile: {out}"
    )
    if warnings:
        print_warnings(warnings)
    return 0
