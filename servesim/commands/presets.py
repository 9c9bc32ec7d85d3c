"""`servesim presets`: the built-in models and hardware with their key figures."""

from __future__ import annotations

import argparse
import importlib.metadata
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
        f"{len(refused)} more ship but are not read (multimodal, hybrid Mamba or NVFP4/MXFP4 checkpoints; "
        f"servesim run --model ID says why): {', '.join(refused)}"
    )
    return 0


def _measured_tables(system: str | None) -> dict | None:
    """``{"system", "frameworks": {framework: [versions of its GEMM tables]}, "source"}`` of the dependency's
    tables of ``system``; None when the preset names none or the installed dependency lacks them."""
    from simulator.cost.silicon import database

    if system is None or system not in database.systems():
        return None
    tables = database.table_set(system)
    found = tables.frameworks()
    order = [f for f in database.FRAMEWORKS if f in found] + sorted(f for f in found if f not in database.FRAMEWORKS)
    return {"system": system, "frameworks": {f: found[f] for f in order}, "source": tables.source}


def _describe(frameworks: dict[str, list[str]]) -> str:
    return ", ".join(f"{fw} {'/'.join(versions)}" for fw, versions in frameworks.items())


def _tables_source() -> dict:
    """The package the measured tables come from: its name, version, author and licence (from its metadata)."""
    from simulator.cost.silicon import database

    version = database.dependency_version()
    out = {"package": database.DEPENDENCY, "version": version, "author": None, "licence": None}
    if version is not None:
        meta = importlib.metadata.metadata(database.DEPENDENCY)
        author = meta.get("Author") or (meta.get("Author-email") or "").split("<")[0].strip().strip('"')
        out["author"] = author or None
        out["licence"] = meta.get("License-Expression") or meta.get("License") or None
    return out


def _source_line(source: dict) -> str:
    package = source["package"]
    if source["version"] is None:
        return f"measured tables: {package} is not installed (pip install {package}); every preset runs the roofline"
    by = ", ".join(x for x in (source["author"], source["licence"]) if x)
    return (
        f"measured tables: {package} {source['version']}{f' ({by})' if by else ''}, "
        "aiconfigurator_core/systems/data/<tables>; a preset's figures: its vendor's datasheet "
        "(simulator/config/presets/hardware.yaml names each)"
    )


def main(args: argparse.Namespace) -> int:
    from simulator.config.presets import hardware_presets, model_presets
    from workloads.datasets import LENGTH_DATASETS

    if args.hf_models:
        return _hf_models(args.json)
    models, hardware = model_presets(), hardware_presets()
    measured = {k: _measured_tables(h.silicon_tables) for k, h in hardware.items()}
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
                    "hardware": {
                        k: h.model_dump() | {"fp4_flops_per_s": h.fp4_flops_per_s, "measured_tables": measured[k]}
                        for k, h in hardware.items()
                    },
                    "measured_tables_source": _tables_source(),
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
    source = _tables_source()
    tt = Table(title="measured kernel tables (the default `silicon` cost model reads them)", title_justify="left")
    for col in ("preset", "tables", "frameworks and versions measured"):
        tt.add_column(col, justify="left")
    for key, h in hardware.items():
        found = measured[key]
        if h.silicon_tables is None:
            tt.add_row(key, "-", "not measured: the roofline")
        elif found is None:
            tt.add_row(key, h.silicon_tables, f"not in the installed {source['package']}: the roofline")
        else:
            tt.add_row(key, h.silicon_tables, _describe(found["frameworks"]))
    display.stdout.print(mt)
    display.stdout.print(ht)
    display.stdout.print(tt)
    display.stdout.print(_source_line(source))
    display.stdout.print(f"length datasets: {', '.join(LENGTH_DATASETS)}")
    display.stdout.print(
        "models by Hugging Face id (e.g. Qwen/Qwen3-32B): the local Hugging Face cache, else aiconfigurator-core's "
        "model_configs (servesim presets --hf-models lists those)"
    )
    return 0
