"""`servesim estimate`: the cost of one engine step of a given shape, op by op."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from servesim import display
from simulator.config.precision import KV_CACHE_DTYPE_BYTES, MOE_KERNELS, QUANTIZATIONS

if TYPE_CHECKING:
    from simulator.cost import BatchShape


def _prefill(text: str) -> tuple[int, int]:
    tokens, _, cached = text.partition(":")
    try:
        new, old = int(tokens), int(cached or 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--prefill {text!r}: expected TOKENS or TOKENS:CACHED") from None
    if new < 1 or old < 0:
        raise argparse.ArgumentTypeError(f"--prefill {text!r}: TOKENS must be >= 1 and CACHED >= 0")
    return new, old


def _decode(text: str) -> tuple[int, int]:
    count, sep, context = text.partition(":")
    try:
        n, ctx = int(count), int(context)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--decode {text!r}: expected COUNT:CONTEXT") from None
    if not sep or n < 1 or ctx < 1:
        raise argparse.ArgumentTypeError(f"--decode {text!r}: expected COUNT:CONTEXT, both >= 1")
    return n, ctx


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "estimate",
        help="cost of one engine step of a given shape, with the per-op breakdown",
        description="Predict one engine step: prefill chunks (TOKENS new on top of CACHED) and "
        "decode groups (COUNT sequences at CONTEXT tokens each). Times are summed over layers; "
        "FLOPs and bytes are per GPU.",
    )
    p.add_argument(
        "--model", help="model preset, Hugging Face id, model folder, config.json or spec YAML (default: the profile's)"
    )
    p.add_argument("--hardware", help="hardware preset or spec YAML (default: the profile's)")
    p.add_argument("--profile", type=Path, help="calibration profile: use the profiled cost model")
    p.add_argument(
        "--cost-model",
        choices=("silicon", "roofline", "aiconfigurator"),
        help="without --profile: measured kernel tables (the default where the hardware has them), the roofline, "
        "or aiconfigurator's own step estimator",
    )
    p.add_argument(
        "--framework",
        choices=("vllm", "sglang", "trtllm"),
        help="the engine whose measured kernels are read (default: vllm)",
    )
    p.add_argument("--version", help="the engine version whose tables are read (default: the newest measured)")
    p.add_argument(
        "--moe-kernel",
        choices=MOE_KERNELS,
        help="the MoE kernel family the engine runs (e.g. marlin for vLLM's VLLM_MXFP4_USE_MARLIN=1), read from any "
        "engine's measurement of it, or carried over from GPUs that timed it at the model's shape (default: the "
        "fastest kernel measured)",
    )
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel degree (MoE; divides --tp and the experts)")
    p.add_argument(
        "--quantization",
        choices=tuple(QUANTIZATIONS),
        help="the linear layers' weight format: fp8 (vLLM's --quantization fp8), fp8_block, nvfp4, mxfp4",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=("auto", *KV_CACHE_DTYPE_BYTES),
        default="auto",
        help="bytes per cached K/V element: auto (the model's; with --framework sglang a DeepSeek-sparse-attention "
        "model's is FP8 on Blackwell, bf16 below, as SGLang chooses), bfloat16, float16 or fp8",
    )
    p.add_argument("--prefill", type=_prefill, action="append", default=[], metavar="TOKENS[:CACHED]")
    p.add_argument("--decode", type=_decode, action="append", default=[], metavar="COUNT:CONTEXT")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def shape_from(prefills: list[tuple[int, int]], decodes: list[tuple[int, int]]) -> BatchShape:
    from simulator.cost import BatchShape

    num_decode = sum(n for n, _ in decodes)
    return BatchShape(
        prefill_new_tokens=tuple(n for n, _ in prefills),
        prefill_cached_tokens=tuple(c for _, c in prefills),
        num_decode_seqs=num_decode,
        decode_context_tokens=sum(n * ctx for n, ctx in decodes),
        num_sampled_tokens=len(prefills) + num_decode,
    )


def main(args: argparse.Namespace) -> int:
    from simulator.build import deployed_model, make_cost_model
    from simulator.config.precision import served_kv_cache_dtype
    from simulator.config.presets import resolve_hardware, resolve_model
    from simulator.cost import OP_NAMES
    from simulator.cost.profile import load_profile
    from simulator.cost.profiled import ProfiledParams
    from simulator.cost.roofline import RooflineParams
    from simulator.cost.silicon import SiliconCostModel, SiliconParams

    if not args.prefill and not args.decode:
        raise ValueError("give at least one --prefill TOKENS[:CACHED] or --decode COUNT:CONTEXT")
    if args.tp < 1:
        raise ValueError(f"--tp must be at least 1 (got {args.tp})")
    if args.ep < 1:
        raise ValueError(f"--ep must be at least 1 (got {args.ep})")
    profile = load_profile(args.profile) if args.profile is not None else None
    if profile is not None:
        display.warn_suspect_profile(profile, args.profile)
    if profile is None and (args.model is None or args.hardware is None):
        raise ValueError("give --model and --hardware, or --profile")
    model = resolve_model(args.model) if args.model is not None else profile.model  # type: ignore[union-attr]
    hardware = resolve_hardware(args.hardware) if args.hardware is not None else profile.hardware  # type: ignore[union-attr]
    # the engine whose tables are read serves the model: SGLang's own cache for a DeepSeek-sparse-attention model
    # under auto, vLLM's and SGLang's scaled FP8 MLA format
    engine = args.framework or "vllm"
    kv_dtype = served_kv_cache_dtype(args.kv_cache_dtype, engine, model.is_dsa, hardware.compute_major)
    model = deployed_model(model, args.quantization, kv_dtype, engine=engine)
    if profile is not None:
        if args.cost_model is not None:
            raise ValueError("--cost-model: give it or --profile, not both (a profile means the profiled model)")
        for flag, value in (
            ("--moe-kernel", args.moe_kernel),
            ("--framework", args.framework),
            ("--version", args.version),
        ):
            if value is not None:
                raise ValueError(f"{flag}: a profile times its own kernels (give it without --profile)")
        params = ProfiledParams(profile=str(args.profile))
    elif args.cost_model == "roofline" or (args.cost_model is None and hardware.silicon_tables is None):
        if args.framework is not None or args.version is not None or args.moe_kernel is not None:
            raise ValueError(
                "--framework/--version/--moe-kernel: the roofline reads no measured tables (use --cost-model silicon)"
            )
        params = RooflineParams()
    elif args.cost_model == "aiconfigurator":
        from simulator.cost.aiconfigurator import AiconfiguratorParams

        if args.moe_kernel is not None:
            raise ValueError(
                "--moe-kernel: aiconfigurator's estimator picks its own kernels (use --cost-model silicon)"
            )

        params = AiconfiguratorParams(framework=args.framework, version=args.version)
    else:
        params = SiliconParams(framework=args.framework, version=args.version, moe_kernel=args.moe_kernel)
    kind, cost = params.kind, make_cost_model(params, model, hardware, args.tp, profile=profile, ep=args.ep)
    shape = shape_from(args.prefill, args.decode)
    step = cost.breakdown(shape)
    assert step.ops is not None
    ops = {name: step.ops[name] for name in OP_NAMES if name in step.ops}
    sources = _sources(cost, shape, ops)
    # the table, framework, version and kernel each op reads (the silicon model)
    measured = cost.tables_of(shape) if isinstance(cost, SiliconCostModel) else {}
    flops = sum(op.flops for op in ops.values())
    nbytes = sum(op.bytes for op in ops.values())
    if args.json:
        print(
            json.dumps(
                {
                    "step_time_s": step.total_s,
                    "ops": {k: v.seconds for k, v in ops.items()},
                    "flops": flops,
                    "bytes": nbytes,
                    "cost_model": kind,
                    "sources": sources,
                    "tables": measured,
                }
            )
        )
        return 0
    table = Table(title=f"one step of {model.name} on {hardware.name} x{args.tp} ({kind})", title_justify="left")
    columns = ("op", "ms", "share", "GFLOP/GPU", "MB/GPU", "from") + (("table",) if measured else ())
    for col in columns:
        table.add_column(col, justify="left" if col in ("op", "from", "table") else "right")
    for name, op in ops.items():
        row = [
            name,
            f"{op.seconds * 1e3:.4f}",
            f"{op.seconds / step.total_s:.1%}",
            f"{op.flops / 1e9:,.2f}",
            f"{op.bytes / 1e6:,.2f}",
            sources[name],
        ]
        table.add_row(*row, *((measured.get(name, ""),) if measured else ()))
    table.add_section()
    total = ["total", f"{step.total_s * 1e3:.4f}", "100.0%", f"{flops / 1e9:,.2f}", f"{nbytes / 1e6:,.2f}", ""]
    table.add_row(*total, *(("",) if measured else ()))
    display.stdout.print(table)
    if measured:
        display.stdout.print(f"measured tables: {cost.tables.describe()}")
    return 0


def _sources(cost, shape: BatchShape, ops: dict) -> dict[str, str]:
    """Where each op's time comes from: the silicon model says per op (measured table, interpolated, roofline
    fallback); the roofline is datasheet arithmetic; the profiled model reads the user's calibration profile."""
    explain = getattr(cost, "sources", None)
    if explain is not None:
        return {name: explain(shape).get(name, "") for name in ops}
    label = "calibration profile" if hasattr(cost, "profile") else "roofline (datasheet)"
    return dict.fromkeys(ops, label)
