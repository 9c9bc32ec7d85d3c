"""A calibration's measurements as a table set: the layout the ``silicon`` cost model reads.

``servesim calibrate --tables-out FOLDER`` writes what the harness measured in the layout and schema of
NVIDIA aiconfigurator's silicon database (the ``aiconfigurator-core`` dependency's
``systems/data/<gpu>/<family>/<framework>/<version>/<table>.parquet``, Apache-2.0), so that
``cost_model: {kind: silicon, tables: FOLDER}`` prices this device with the same code that prices an H100
from the database::

    gemm/torch/<torch version>/gemm_perf.parquet                      every linear layer of the model
    attention/torch/<torch version>/context_attention_perf.parquet    prefill: 1 prompt of isl tokens, no prefix
    attention/torch/<torch version>/generation_attention_perf.parquet decode: batch_size sequences of step tokens
    (each folder with its collection_meta.yaml: device, engine, torch and harness versions, date, dtype)

Latencies are milliseconds (the schema's unit), the median of the harness's interleaved timed runs, per
decoder layer. The framework folder is ``torch``: the kernels timed are torch's own (``F.linear`` and
``F.scaled_dot_product_attention``), as servesim's builtin engine runs them. GEMM rows are the model's
linear layers at their (n, k) and the grid's token counts m: o_proj, mlp_gate_up and mlp_down as the
profile measured them; the fused QKV projection and the LM head timed again as bare GEMMs (the profile's
qkv_proj includes the rotary embedding and its lm_head the final norm and the argmax; the silicon model
adds those by its roofline). Prefill attention with a cached prefix has no column in the schema and is
left out; so are the held-out points (off the grid). One device measures no collective: there are no
communication tables, and a tensor-parallel deployment read from them prices its all-reduce by the
roofline.

Dtypes are named as measured (``bfloat16``, ``float16``, ``float32``); the silicon model reads the
``bfloat16`` tables for an unquantized model.

Writing into a folder that already holds this device's tables (another model calibrated on it) merges the
rows, a point measured again taking the new time; a folder holding another device's tables is refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from calibration import HARNESS_VERSION
from simulator.config.specs import ModelSpec
from simulator.cost.profile import CalibrationProfile, ProfilePoint

FRAMEWORK = "torch"  # the kernels' library; the folder name under each family
ENGINE = "servesim builtin engine (calibration.engine.BuiltinEngine)"
GEMM_KERNEL = "torch.nn.functional.linear"
ATTENTION_KERNEL = "torch.nn.functional.scaled_dot_product_attention"
TABLE_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}  # the schema's dtype names
META_FILE = "collection_meta.yaml"
META_SCHEMA_VERSION = 1  # aiconfigurator's collection_meta.yaml schema_version
PROVENANCE = "servesim-calibrate"
GEMM_OPS = ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "lm_head")
GEMM_KEYS = ["kernel_source", "gemm_dtype", "m", "n", "k"]
ATTENTION_KEYS = ["kernel_source", "kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim", "batch_size"]


@dataclass(frozen=True)
class GemmSeries:
    """One linear layer's ``[m x k] . [k x n]`` times at token counts m (``ProfilePoint.at == (m,)``)."""

    op: str
    n: int
    k: int
    points: tuple[ProfilePoint, ...]


def gemm_shapes(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    """(n, k) of each linear layer on one device, as ``calibration.model.TorchModel`` builds its weights."""
    up = 2 if spec.gated_mlp else 1
    h = spec.hidden_size
    return {
        "qkv_proj": (spec.q_size + 2 * spec.kv_size, h),
        "o_proj": (h, spec.q_size),
        "mlp_gate_up": (up * spec.intermediate_size, h),
        "mlp_down": (h, spec.intermediate_size),
        "lm_head": (spec.vocab_size, h),
    }


def torch_public_version(version: str) -> str:
    """``2.13.0`` of ``2.13.0+cu128``: the folder's version (the build is named in the meta file)."""
    return version.split("+", 1)[0]


def _ms(point: ProfilePoint) -> float:
    return point.median_s * 1e3


def _frames(profile: CalibrationProfile, gemms: Iterable[GemmSeries]) -> dict[str, object]:
    import pandas as pd

    spec, dev = profile.model, profile.device
    dtype = TABLE_DTYPES[profile.dtype]
    common = {
        "framework": FRAMEWORK,
        "version": torch_public_version(dev.torch_version),
        "device": dev.name,
    }
    gemm = pd.DataFrame(
        [
            common
            | {"op_name": "gemm", "kernel_source": GEMM_KERNEL, "gemm_dtype": dtype}
            | {"m": int(p.at[0]), "n": g.n, "k": g.k, "latency": _ms(p)}
            for g in gemms
            for p in g.points
        ]
    )
    heads = {
        "num_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "beam_width": 1,
        "attn_dtype": dtype,
        "kv_cache_dtype": dtype,
        "window_size": 0,
    }
    context = pd.DataFrame(
        [
            common
            | {"op_name": "context_attention", "kernel_source": ATTENTION_KERNEL}
            | heads
            | {"batch_size": 1, "isl": int(p.at[0]), "step": 0, "latency": _ms(p)}
            for p in profile.ops["attn_prefill"].points
            if p.at[1] == 0  # no cached prefix: the schema's prefill
        ]
    )
    generation = pd.DataFrame(
        [
            common
            | {"op_name": "generation_attention", "kernel_source": ATTENTION_KERNEL}
            | heads
            | {"batch_size": int(p.at[0]), "isl": 1, "step": int(p.at[1]), "latency": _ms(p)}
            for p in profile.ops["attn_decode"].points
        ]
    )
    return {
        "gemm/gemm_perf": (gemm, GEMM_KEYS),
        "attention/context_attention_perf": (context, [*ATTENTION_KEYS, "isl"]),
        "attention/generation_attention_perf": (generation, [*ATTENTION_KEYS, "step"]),
    }


def _meta(profile: CalibrationProfile, tables: list[str]) -> dict[str, object]:
    dev = profile.device
    return {
        "schema_version": META_SCHEMA_VERSION,
        "provenance": PROVENANCE,
        "runtime": {"framework": FRAMEWORK, "version": torch_public_version(dev.torch_version)},
        "device": {"name": dev.name, "kind": dev.kind, "num_threads": dev.num_threads, "timer": dev.timer},
        "engine": ENGINE,
        "torch_version": dev.torch_version,
        "cuda_version": dev.cuda_version,
        "harness_version": HARNESS_VERSION,
        "date": profile.created_utc or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "dtypes": [TABLE_DTYPES[profile.dtype]],
        "models": [profile.model.name],
        "tables": {name: {"status": "complete"} for name in tables},
    }


def _check_device(folder: Path, meta_path: Path, device: str) -> dict | None:
    """The meta file already at ``meta_path``; ValueError when it names another device."""
    if not meta_path.is_file():
        return None
    try:
        old = yaml.safe_load(meta_path.read_text())
        old_device = old["device"]["name"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        raise ValueError(f"--tables-out {folder}: {meta_path} is not a servesim table set's meta file") from None
    if old_device != device:
        raise ValueError(
            f"--tables-out {folder}: holds tables measured on {old_device}, not {device}; use another folder"
        )
    return old


def write_table_set(folder: str | Path, profile: CalibrationProfile, gemms: Iterable[GemmSeries]) -> list[Path]:
    """Write the table set of ``profile`` and its GEMM series into ``folder``; the parquet files written.

    ValueError (naming --tables-out) when the folder holds another device's tables.
    """
    import pandas as pd

    folder = Path(folder)
    version = torch_public_version(profile.device.torch_version)
    frames = _frames(profile, gemms)
    by_family: dict[str, list[str]] = {}
    for key in frames:
        family, table = key.split("/")
        by_family.setdefault(family, []).append(table)
    olds = {}
    for family in by_family:  # every check before any write
        where = folder / family / FRAMEWORK / version
        olds[family] = _check_device(folder, where / META_FILE, profile.device.name)
    written = []
    for family, tables in by_family.items():
        where = folder / family / FRAMEWORK / version
        where.mkdir(parents=True, exist_ok=True)
        for table in tables:
            frame, keys = frames[f"{family}/{table}"]
            path = where / f"{table}.parquet"
            if path.is_file():  # another model on this device: keep its rows, a point measured again takes the new
                frame = pd.concat([pd.read_parquet(path), frame], ignore_index=True)
                frame = frame.drop_duplicates(subset=keys, keep="last").reset_index(drop=True)
            frame.to_parquet(path, index=False)
            written.append(path)
        meta = _meta(profile, tables)
        old = olds[family]
        if old is not None:  # what the merged rows were measured with
            for key in ("models", "dtypes"):
                meta[key] = list(dict.fromkeys([*old.get(key, []), *meta[key]]))  # type: ignore[misc]
        (where / META_FILE).write_text(yaml.safe_dump(meta, sort_keys=False))
    return written
