"""InferenceX's measured serving points, read from the dependency and written as servesim scenarios.

aiconfigurator-core ships ``aiconfigurator_core/systems/silicon_sample.csv``: measured serving points,
each a model served by vLLM, SGLang or TensorRT-LLM on a named GPU at a fixed ISL/OSL, client
concurrency and parallelism, with the mean TTFT and mean TPOT measured. The file is read from the
installed package at run time; servesim keeps no copy of it.

A point comes from InferenceX's own runs (source ``inferencex``: ``silicon_data_source`` starting
``db-dump/`` or naming ``source_file=2026-04-06.csv``) or from NVIDIA's gap-analysis runs (source
``gap-analysis``: every other source file, whose client settings the file does not give; they are
written with InferenceX's client all the same).

``scenario_for(row)`` writes a point as a user would write its scenario:

- the client: InferenceX's ``benchmark_serving.py --dataset-name random --random-range-ratio 0.8
  --num-prompts 10*CONC --max-concurrency CONC --ignore-eos``: a closed loop of CONC users with no
  think time, 10 x CONC requests, prompt and output lengths uniform in [0.8 L, L];
- CONC: ``silicon_concurrency=`` of ``silicon_data_source`` when given, else ``batch_size``;
- the model: ``model_path`` as a Hugging Face id (read offline from the dependency's
  ``model_configs``); three ids the dependency ships under another name are renamed
  (``MODEL_ALIASES``);
- the GPU: the hardware preset whose ``silicon_tables`` is the point's ``system``;
- parallelism: ``tp: tp_size``, ``pp: pp_size`` and ``ep: moe_ep_size`` when above 1;
- quantization: from ``gemm_quant_mode`` (fp8, fp8_block, nvfp4; none for bf16) and an FP8 KV
  cache for FP8 and FP4 runs (InferenceX's recipes pass ``--kv-cache-dtype fp8``);
- the policy by engine: vLLM as InferenceX's recipe (``--max-num-seqs CONC
  --max-num-batched-tokens 8192 --no-enable-prefix-caching``); SGLang with
  ``max_running_requests: CONC`` (InferenceX's SGLang recipes pass ``--max-running-requests
  $CONC``; their chunk sizes differ per recipe, so the policy's default is kept); TensorRT-LLM
  with ``max_batch_size: CONC`` (its recipes pass ``--max_batch_size $CONC``; ``max_num_tokens``
  differs per recipe, the policy's 8192 is kept); prefix caching off throughout;
- a disaggregated point: a prefill group and a decode group of their worker counts, TPs and EPs
  (servesim then refuses those whose policy cannot serve such groups: SGLang's and TensorRT-LLM's).

A point servesim cannot express raises ``PointRefused`` with a one-line reason: attention data
parallelism (recorded, or implied where the size is not recorded and ``batch_size``, one attention
rank's batch, differs from the concurrency), int4 weight-only quantization, a disaggregated point
without worker counts, no recorded concurrency. A scenario servesim itself refuses (a model config it
cannot read, a model too big for the GPUs, a tp that does not divide the heads) is refused by
``run_point`` with servesim's one-line error.
"""

from __future__ import annotations

import importlib.resources
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.config.presets import hardware_presets

SAMPLE_FILE = ("aiconfigurator_core", "systems/silicon_sample.csv")
INFERENCEX = "inferencex"
GAP_ANALYSIS = "gap-analysis"
GROUP_FIELDS = ("source", "model", "system", "engine", "precision")
RANGE_RATIO = 0.8  # InferenceX's --random-range-ratio: lengths uniform in [0.8 L, L]
PROMPTS_PER_USER = 10  # InferenceX's --num-prompts 10 * CONC
VLLM_MAX_NUM_BATCHED_TOKENS = 8192  # InferenceX's vLLM recipe
# Ids of the file that the dependency's model_configs hold under another name, same architecture:
# meta-llama renamed its Llama 3.1 repositories (Meta-Llama-3.1-70B is Llama-3.1-70B); the 8B Instruct
# model has the 8B base model's config shapes; Zhipu AI publishes GLM-5 as zai-org.
MODEL_ALIASES = {
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "zhipuai/GLM-5": "zai-org/GLM-5",
}
QUANTIZATION_BY_GEMM_MODE: dict[str, str | None] = {
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "nvfp4",
    "none": None,  # bf16 runs: the checkpoint's own weights
}
_INSTALL_PREFIX = re.compile(r"/\S*/site-packages/")
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")


class PointRefused(ValueError):
    """A measured point servesim cannot express as a scenario; the message is the one-line reason."""


def sample_path() -> Path:
    """The installed dependency's ``silicon_sample.csv``; FileNotFoundError when the package lacks it."""
    package, name = SAMPLE_FILE
    path = Path(str(importlib.resources.files(package) / name))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (aiconfigurator-core without its silicon sample)")
    return path


def source_of(silicon_data_source: str) -> str:
    """``inferencex`` for InferenceX's own runs, ``gap-analysis`` for NVIDIA's gap-analysis runs."""
    text = str(silicon_data_source)
    if text.startswith("db-dump/") or "source_file=2026-04-06.csv" in text:
        return INFERENCEX
    return GAP_ANALYSIS


def concurrency_of(row: pd.Series) -> int:
    """The client concurrency: ``silicon_concurrency=`` of the source when given, else ``batch_size``."""
    found = _CONCURRENCY.search(str(row["silicon_data_source"]))
    if found:
        return int(found.group(1))
    if pd.isna(row.get("batch_size")):
        raise PointRefused("client concurrency not recorded (no silicon_concurrency, no batch_size)")
    return int(row["batch_size"])


def read_points(path: Path | None = None) -> pd.DataFrame:
    """The measured points with their ``source``, ``model``, ``engine``, ``precision`` and ``group`` columns."""
    df = pd.read_csv(path or sample_path())
    df["source"] = df["silicon_data_source"].map(source_of)
    df["model"] = df["model_path"]
    df["engine"] = df["backend"]
    df["precision"] = df["precision"].fillna(df["gemm_quant_mode"].fillna("bf16"))
    df["group"] = df[list(GROUP_FIELDS)].astype(str).agg(" / ".join, axis=1)
    return df


def select_points(
    df: pd.DataFrame,
    per_group: int | None,
    seed: int,
    filters: dict[str, str | None] | None = None,
) -> pd.DataFrame:
    """Points passing ``filters`` (column -> value), then up to ``per_group`` per group drawn with ``seed``.

    ``per_group`` None keeps every point. Groups are visited in sorted order and each group's
    rows shuffled by one generator, so the same file, filters and seed give the same sample.
    """
    for column, value in (filters or {}).items():
        if value is not None:
            df = df[df[column] == value]
    if per_group is None:
        return df.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    picked = []
    for _, rows in sorted(df.groupby("group"), key=lambda kv: kv[0]):
        order = rng.permutation(len(rows))[:per_group]
        picked.append(rows.iloc[np.sort(order)])
    return pd.concat(picked).reset_index(drop=True) if picked else df.iloc[:0]


def _int(row: pd.Series, column: str, default: int = 1) -> int:
    value = row.get(column)
    return default if value is None or pd.isna(value) else int(value)


def hardware_preset(system: str) -> str:
    """The hardware preset whose ``silicon_tables`` is ``system``; PointRefused when none is."""
    for name, spec in hardware_presets().items():
        if spec.silicon_tables == system:
            return name
    raise PointRefused(f"no hardware preset reads the silicon tables of {system}")


def _parallelism(tp: int, ep: int, pp: int = 1) -> dict[str, int]:
    out = {"tp": tp}
    if pp > 1:
        out["pp"] = pp
    if ep > 1:
        out["ep"] = ep
    return out


def _check_attention_dp(size: float | None, batch_size: float | None = None, concurrency: int | None = None) -> None:
    """PointRefused for attention data parallelism, recorded (size > 1) or implied.

    A size not recorded (empty or 0) is taken as 1 unless the point's ``batch_size`` (the batch of
    one attention rank) differs from the client concurrency, which attention DP implies.
    """
    if size is not None and not pd.isna(size) and size > 1:
        raise PointRefused("attention data parallelism not modelled")
    recorded = size is not None and not pd.isna(size) and size == 1
    if not recorded and batch_size is not None and not pd.isna(batch_size) and int(batch_size) != concurrency:
        raise PointRefused("attention data parallelism size not recorded and batch_size differs from concurrency")


def _quantization(row: pd.Series) -> str | None:
    mode = row.get("gemm_quant_mode")
    mode = "none" if mode is None or pd.isna(mode) else str(mode)
    if mode == "int4_wo":
        raise PointRefused("int4 weight-only not modelled")
    if mode not in QUANTIZATION_BY_GEMM_MODE:
        raise PointRefused(f"GEMM quantization {mode} not modelled")
    return QUANTIZATION_BY_GEMM_MODE[mode]


def policy_for(engine: str, concurrency: int) -> dict[str, Any]:
    """The batch policy of InferenceX's recipe for ``engine`` at client concurrency ``concurrency``."""
    if engine == "vllm":
        return {
            "kind": "vllm",
            "max_num_seqs": concurrency,
            "max_num_batched_tokens": max(VLLM_MAX_NUM_BATCHED_TOKENS, concurrency),
        }
    if engine == "sglang":
        return {"kind": "sglang", "max_running_requests": concurrency}
    if engine == "trtllm":
        return {"kind": "trtllm", "max_batch_size": concurrency}
    raise PointRefused(f"engine {engine} not modelled")


def workload_for(isl: int, osl: int, concurrency: int) -> dict[str, Any]:
    """InferenceX's client: CONC users, 10 x CONC requests, lengths uniform in [0.8 L, L], no think time."""

    def uniform(length: int) -> dict[str, Any]:
        return {"kind": "uniform", "min_tokens": max(1, math.ceil(RANGE_RATIO * length)), "max_tokens": length}

    return {
        "kind": "closed_loop",
        "concurrency": concurrency,
        "num_requests": PROMPTS_PER_USER * concurrency,
        "think_s": {"kind": "fixed", "seconds": 0.0},
        "lengths": {"kind": "independent", "prompt": uniform(isl), "output": uniform(osl)},
    }


def _disaggregated_groups(row: pd.Series) -> list[dict[str, Any]]:
    groups = []
    for role in ("prefill", "decode"):
        workers = row.get(f"{role}_num_workers")
        if workers is None or pd.isna(workers):
            raise PointRefused("disaggregated point without worker counts")
        _check_attention_dp(row.get(f"{role}_attention_dp_size"))
        tp = _int(row, f"{role}_tp_size")
        groups.append(
            {
                "name": role,
                "role": role,
                "count": int(workers),
                "parallelism": _parallelism(tp, _int(row, f"{role}_moe_ep_size"), _int(row, f"{role}_pp_size")),
            }
        )
    return groups


def scenario_for(row: pd.Series, seed: int = 0) -> dict[str, Any]:
    """The servesim scenario (a plain dict, as a user writes it) of measured point ``row``.

    Raises PointRefused with a one-line reason for a point servesim cannot express.
    """
    quantization = _quantization(row)
    model = str(row["model_path"])
    scenario: dict[str, Any] = {
        "seed": seed,
        "model": MODEL_ALIASES.get(model, model),
        "hardware": hardware_preset(str(row["system"])),
    }
    if quantization is not None:
        scenario["quantization"] = quantization
    kv_cache: dict[str, Any] = {"prefix_caching": False}
    if quantization is not None:
        kv_cache["dtype"] = "fp8"
    if row["mode"] == "disagg":
        scenario["groups"] = _disaggregated_groups(row)
        concurrency = concurrency_of(row)
    elif row["mode"] == "agg":
        concurrency = concurrency_of(row)
        _check_attention_dp(row.get("attention_dp_size"), row.get("batch_size"), concurrency)
        scenario["parallelism"] = _parallelism(_int(row, "tp_size"), _int(row, "moe_ep_size"), _int(row, "pp_size"))
    else:
        raise PointRefused(f"serving mode {row['mode']} not modelled")
    scenario["policy"] = policy_for(str(row["backend"]), concurrency)
    scenario["kv_cache"] = kv_cache
    scenario["workload"] = workload_for(int(row["isl"]), int(row["osl"]), concurrency)
    return scenario


def one_line(exc: BaseException, limit: int = 240) -> str:
    """The first line of ``exc``'s message (its type name when empty, install paths cut), at most ``limit`` long."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = _INSTALL_PREFIX.sub("", text)  # .../site-packages/aiconfigurator_core/x -> aiconfigurator_core/x
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_point(item: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """Simulate one point's scenario: its mean TTFT and TPOT in ms, or the one-line reason it was refused.

    A process-pool task (module level, plain data in and out); an exception of the validation,
    the build or the run is caught and returned as the refusal, so one point never stops the others.
    """
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    point_id, scenario = item
    start_s = time.perf_counter()
    try:
        summary = build(validate_scenario(scenario), record_steps=False).run().summary
        out = {"id": point_id, "pred_ttft_ms": summary["mean_ttft_ms"], "pred_tpot_ms": summary["mean_tpot_ms"]}
    except Exception as exc:
        out = {"id": point_id, "refused": one_line(exc)}
    out["wall_s"] = time.perf_counter() - start_s
    return out
