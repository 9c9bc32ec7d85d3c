"""Flags shared by the commands that run scenarios, and how they override a scenario."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simulator.config import ScenarioConfig
from simulator.cost.profile import load_profile
from simulator.scenario import read_scenario_dict, set_path, validate_scenario


def add_scenario_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", nargs="?", type=Path, help="scenario YAML file (default: the embedded default)")
    g = parser.add_argument_group("scenario overrides")
    g.add_argument("--model", help="model preset, config.json or spec YAML (e.g. llama-3.1-8b)")
    g.add_argument("--hardware", help="hardware preset or spec YAML (e.g. h100-sxm)")
    g.add_argument("--tp", type=int, help="tensor-parallel degree")
    g.add_argument("--policy", help="batch policy name (e.g. vllm)")
    g.add_argument("--rate", type=float, help="mean arrival rate, requests/s")
    g.add_argument("--num-requests", type=int, help="number of requests")
    g.add_argument("--duration", type=float, help="arrivals stop after this many seconds (instead of --num-requests)")
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


def _normalize_tagged(data: dict[str, Any], key: str) -> None:
    if isinstance(data.get(key), str):
        data[key] = {"kind": data[key]}


def scenario_from_args(args: argparse.Namespace) -> tuple[ScenarioConfig, Path | None]:
    """The scenario file (or the default) with the command-line overrides applied, validated."""
    source = "command line"
    data: dict[str, Any] = {}
    base_dir = None
    if args.scenario is not None:
        data = read_scenario_dict(args.scenario)
        source = str(args.scenario)
        base_dir = args.scenario.parent
    _normalize_tagged(data, "policy")
    overrides: dict[str, Any] = {
        "model": args.model,
        "hardware": args.hardware,
        "parallelism.tp": args.tp,
        "workload.arrival.rate_per_s": args.rate,
        "seed": args.seed,
        "slo.ttft_ms": args.slo_ttft_ms,
        "slo.tpot_ms": args.slo_tpot_ms,
        "slo.e2el_ms": args.slo_e2el_ms,
    }
    if args.policy is not None and (data.get("policy") or {}).get("kind") != args.policy:
        data["policy"] = {"kind": args.policy}
    if args.num_requests is not None:
        overrides["workload.num_requests"] = args.num_requests
        data.get("workload", {}).pop("duration_s", None)
    if args.duration is not None:
        overrides["workload.duration_s"] = args.duration
        data.get("workload", {}).pop("num_requests", None)
    if args.rate is not None and "kind" not in (data.get("workload", {}).get("arrival") or {}):
        overrides["workload.arrival.kind"] = "poisson"
    for path, value in overrides.items():
        if value is not None:
            set_path(data, path, value)
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
