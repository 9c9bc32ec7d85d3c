"""Flags shared by the commands that run scenarios, and how they override a scenario."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from simulator.config import ScenarioConfig
from simulator.cost.profile import load_profile
from simulator.planning.overrides import apply_overrides, lookup
from simulator.scenario import read_scenario_dict, validate_scenario
from workloads.traces import SHIPPED_TRACES

# Values of --quantization and --kv-cache-dtype (checked here so that a bad one is one error line).
QUANTIZATIONS = ("fp8",)
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8")


def _check_choice(flag: str, value: str | None, choices: tuple[str, ...]) -> None:
    if value is not None and value not in choices:
        raise ValueError(f"{flag} {value!r}: expected one of {', '.join(choices)}")


def add_scenario_args(parser: argparse.ArgumentParser, include_policy: bool = True) -> None:
    parser.add_argument("scenario", nargs="?", type=Path, help="scenario YAML file (default: the embedded default)")
    g = parser.add_argument_group("scenario overrides")
    g.add_argument("--model", help="model preset, config.json or spec YAML (e.g. llama-3.1-8b)")
    g.add_argument("--hardware", help="hardware preset or spec YAML (e.g. h100-sxm)")
    g.add_argument("--tp", type=int, help="tensor-parallel degree")
    g.add_argument("--pp", type=int, help="pipeline-parallel stages")
    g.add_argument(
        "--quantization",
        metavar="{" + ",".join(QUANTIZATIONS) + "}",
        help="serve with FP8 weights and activations (vLLM's --quantization fp8): 1-byte weights, FP8 GEMMs",
    )
    g.add_argument(
        "--kv-cache-dtype",
        metavar="{" + ",".join(KV_CACHE_DTYPES) + "}",
        help="cached K/V dtype (vLLM's flag): auto keeps the model's, fp8 stores 1 byte per element",
    )
    g.add_argument("--replicas", type=int, help="identical replicas behind the router")
    g.add_argument("--router", help="router name (e.g. least_outstanding)")
    g.add_argument("--prefix-caching", action="store_true", default=None, help="reuse cached prompt prefixes")
    g.add_argument("--disaggregate", metavar="P:D", help="P prefill and D decode replicas instead of mixed ones")
    if include_policy:
        g.add_argument("--policy", help="batch policy name (e.g. vllm)")
    g.add_argument("--rate", type=float, help="mean arrival rate, requests/s")
    g.add_argument("--num-requests", type=int, help="number of requests")
    g.add_argument("--duration", type=float, help="arrivals stop after this many seconds (instead of --num-requests)")
    g.add_argument(
        "--trace",
        metavar="SOURCE",
        help="replay a trace instead of the scenario's workload: a shipped name (see `servesim workload list`) "
        "or a file",
    )
    g.add_argument("--seed", type=int, help="seed of every random stream")
    g.add_argument("--slo-ttft-ms", type=float, help="TTFT SLO for goodput, ms")
    g.add_argument("--slo-tpot-ms", type=float, help="TPOT SLO for goodput, ms")
    g.add_argument("--slo-e2el-ms", type=float, help="end-to-end latency SLO for goodput, ms")
    g.add_argument(
        "--profile",
        type=Path,
        help="calibration profile (servesim calibrate): the profiled cost model, KV capacity from the measured "
        "memory, and the profile's model and device unless --model/--hardware or the scenario name them",
    )


def _kind_of(value: Any) -> Any:
    """The kind of a tagged field's raw value (a bare name or ``{kind: ...}``), else None."""
    if isinstance(value, str):
        return value
    return value.get("kind") if isinstance(value, dict) else None


def _disaggregated_groups(text: str) -> list[dict[str, Any]]:
    p, sep, d = text.partition(":")
    try:
        num_prefill, num_decode = int(p), int(d)
    except ValueError:
        raise ValueError(f"--disaggregate {text!r}: expected P:D, e.g. 2:2") from None
    if not sep or num_prefill < 1 or num_decode < 1:
        raise ValueError(f"--disaggregate {text!r}: expected P:D with both at least 1")
    return [{"role": "prefill", "count": num_prefill}, {"role": "decode", "count": num_decode}]


def _use_trace(data: dict[str, Any], source: str) -> None:
    """Make the workload a replay of ``source``, keeping the trace options a trace workload already has."""
    workload = data.get("workload")
    if not isinstance(workload, dict) or workload.get("kind") != "trace":
        workload = {"kind": "trace"}
        data["workload"] = workload
    # A file named on the command line is relative to the working directory, not the scenario's folder.
    path = Path(source).expanduser()
    workload["source"] = source if source in SHIPPED_TRACES or not path.exists() else str(path.resolve())


def scenario_from_args(args: argparse.Namespace) -> tuple[ScenarioConfig, Path | None]:
    """The scenario file (or the default) with the command-line overrides applied, validated."""
    _check_choice("--quantization", args.quantization, QUANTIZATIONS)
    _check_choice("--kv-cache-dtype", args.kv_cache_dtype, KV_CACHE_DTYPES)
    source = "command line"
    data: dict[str, Any] = {}
    base_dir = None
    if args.scenario is not None:
        data = read_scenario_dict(args.scenario)
        source = str(args.scenario)
        base_dir = args.scenario.parent
    if args.trace is not None:
        _use_trace(data, args.trace)
    overrides: dict[str, Any] = {
        "model": args.model,
        "hardware": args.hardware,
        "parallelism.tp": args.tp,
        "parallelism.pp": args.pp,
        "quantization": args.quantization,
        "kv_cache.dtype": args.kv_cache_dtype,
        "replicas": args.replicas,
        "workload.arrival.rate_per_s": args.rate,
        "workload.num_requests": args.num_requests,
        "workload.duration_s": args.duration,
        "seed": args.seed,
        "slo.ttft_ms": args.slo_ttft_ms,
        "slo.tpot_ms": args.slo_tpot_ms,
        "slo.e2el_ms": args.slo_e2el_ms,
    }
    for field in ("policy", "router"):  # a new kind starts from its defaults; the same kind keeps its parameters
        kind = getattr(args, field, None)
        if kind is not None and _kind_of(data.get(field)) != kind:
            overrides[field] = {"kind": kind}
    if args.prefix_caching:
        overrides["kv_cache.prefix_caching"] = True
    if args.disaggregate is not None:
        overrides["groups"] = _disaggregated_groups(args.disaggregate)
        data.pop("replicas", None)
    workload = data.get("workload")
    if isinstance(workload, dict):  # the one of num_requests / duration_s not given on the command line goes
        if args.num_requests is not None:
            workload.pop("duration_s", None)
        if args.duration is not None:
            workload.pop("num_requests", None)
    if args.rate is not None and _kind_of(lookup(data, "workload.arrival")) is None:
        overrides["workload.arrival.kind"] = "poisson"
    try:
        data = apply_overrides(data, {path: value for path, value in overrides.items() if value is not None})
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    if getattr(args, "profile", None) is not None:
        _apply_profile(data, args.profile)
    return validate_scenario(data, source=source), base_dir


def _apply_profile(data: dict[str, Any], path: Path) -> None:
    """Point the scenario at a calibration profile (read here to default the model and hardware)."""
    profile = load_profile(path)
    cost = data.get("cost_model") if isinstance(data.get("cost_model"), dict) else None
    params = cost if cost is not None and cost.get("kind") == "profiled" else {}
    data["cost_model"] = params | {"kind": "profiled", "profile": str(path.resolve())}
    data.setdefault("model", profile.model.model_dump())
    data.setdefault("hardware", profile.hardware.model_dump())


def timestamped_out_dir(command: str) -> Path:
    """``runs/<command>-YYYYmmdd-HHMMSS``: a new folder for each invocation."""
    return Path("runs") / dt.datetime.now().strftime(f"{command}-%Y%m%d-%H%M%S")


def check_writable_out(path: Path, is_file: bool = False) -> None:
    """Make the --out folder (or a file's folder) now, before long work; ValueError naming --out if it cannot be."""
    folder = path.parent if is_file else path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {path}: cannot create {folder} ({exc.strerror})") from None
    if is_file and path.is_dir():
        raise ValueError(f"--out {path}: is a folder, not a file")
