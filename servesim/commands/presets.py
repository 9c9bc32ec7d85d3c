"""`servesim presets`: the built-in models and hardware with their key figures."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from servesim import display


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list model and hardware presets", description="List the built-in presets.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--hf-models",
        action="store_true",
        help="list instead the Hugging Face ids whose config.json aiconfigurator-core ships and servesim reads "
        "(any id in the local Hugging Face cache resolves too)",
    )
    p.set_defaults(func=main)


def _hf_models(as_json: bool) -> int:
    """The ids aiconfigurator-core's model_configs holds that resolve to a spec; the others counted."""
    from simulator.config.hf_config import model_spec_from_hf_config
    from simulator.config.hf_hub import DEPENDENCY, dependency_model, dependency_model_ids, dependency_version

    read, refused = {}, []
    for hf_id in dependency_model_ids():
        found = dependency_model(hf_id)
        assert found is not None  # listed from the same folder
        try:
            read[hf_id] = model_spec_from_hf_config(found.config, hf_id, found.quant_config, found.source)
        except ValueError:  # a shape or quantization servesim does not model; --model ID says which
            refused.append(hf_id)
    if as_json:
        print(json.dumps({"models": {k: m.model_dump() for k, m in read.items()}, "not_read": refused}))
        return 0
    table = Table(title=f"Hugging Face ids in {DEPENDENCY} {dependency_version()}", title_justify="left")
    for col in ("id", "params (B)", "active (B)", "quantization", "layers", "max context"):
        table.add_column(col, justify="left" if col == "id" else "right")
    for hf_id, m in read.items():
        table.add_row(
            hf_id,
            f"{m.num_params() / 1e9:.2f}",
            f"{m.num_active_params() / 1e9:.2f}",
            m.quantization or "-",
            str(m.num_layers),
            f"{m.max_context_tokens:,}",
        )
    display.stdout.print(table)
    display.stdout.print(
        f"{len(refused)} more ship but are not read (multimodal, hybrid or NVFP4/MXFP4 checkpoints; "
        f"servesim run --model ID says why): {', '.join(refused)}"
    )
    return 0


def main(args: argparse.Namespace) -> int:
    from simulator.config.presets import hardware_presets, model_presets
    from workloads.datasets import LENGTH_DATASETS

    if args.hf_models:
        return _hf_models(args.json)
    models, hardware = model_presets(), hardware_presets()
    if args.json:
        print(
            json.dumps(
                {
                    "models": {
                        k: m.model_dump()
                        | {
                            "num_params": m.num_params(),
                            "num_active_params": m.num_active_params(),
                            "kv_bytes_per_token": m.kv_bytes_per_token(),
                        }
                        for k, m in models.items()
                    },
                    "hardware": {k: h.model_dump() for k, h in hardware.items()},
                    "length_datasets": list(LENGTH_DATASETS),
                }
            )
        )
        return 0
    mt = Table(title="models", title_justify="left")
    for col in ("preset", "name", "params (B)", "active (B)", "KV bytes/token", "layers", "heads q/kv", "max context"):
        mt.add_column(col, justify="left" if col in ("preset", "name") else "right")
    for key, m in models.items():
        mt.add_row(
            key,
            m.name,
            f"{m.num_params() / 1e9:.2f}",
            f"{m.num_active_params() / 1e9:.2f}",
            f"{m.kv_bytes_per_token():,.0f}",
            str(m.num_layers),
            f"{m.num_attention_heads}/{m.num_kv_heads}",
            f"{m.max_context_tokens:,}",
        )
    ht = Table(title="hardware", title_justify="left")
    for col in ("preset", "name", "bf16 TFLOP/s", "memory (GiB)", "HBM TB/s", "interconnect GB/s", "host GB/s", "$/h"):
        ht.add_column(col, justify="left" if col in ("preset", "name") else "right")
    for key, h in hardware.items():
        ht.add_row(
            key,
            h.name,
            f"{h.flops_per_s / 1e12:,.1f}",
            f"{h.memory_bytes / 2**30:,.1f}",
            f"{h.memory_bandwidth_bytes_per_s / 1e12:.2f}",
            f"{h.interconnect_bandwidth_bytes_per_s / 1e9:,.0f}",
            f"{h.host_link_bandwidth_bytes_per_s / 1e9:,.0f}",
            "-" if h.price_per_hour_usd is None else f"{h.price_per_hour_usd:.2f}",
        )
    display.stdout.print(mt)
    display.stdout.print(ht)
    display.stdout.print(f"length datasets: {', '.join(LENGTH_DATASETS)}")
    display.stdout.print(
        "models by Hugging Face id (e.g. Qwen/Qwen3-32B): the local Hugging Face cache, else aiconfigurator-core's "
        "model_configs (servesim presets --hf-models lists those)"
    )
    return 0
