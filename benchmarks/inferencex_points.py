"""InferenceX's measured serving points, read from the dependency and written as servesim scenarios.

aiconfigurator-core ships ``aiconfigurator_core/systems/silicon_sample.csv``: measured serving points,
each a model served by vLLM, SGLang or TensorRT-LLM on a named GPU at a fixed ISL/OSL, client
concurrency and parallelism, with the mean TTFT and mean TPOT measured. The file is read from the
installed package at run time; servesim keeps no copy of it.

A point comes from InferenceX's own runs (source ``inferencex``: ``silicon_data_source`` starting
``db-dump/`` or naming ``source_file=2026-04-06.csv``) or from NVIDIA's gap-analysis runs (source
``gap-analysis``: every other source file, whose client settings the file does not give; they are
written with InferenceX's client all the same). A run the file holds more than once is read once
(``drop_repeated_measurements``): 4,065 distinct runs of its 5,221 rows, 2,489 of them InferenceX's.

``scenario_for(row)`` writes a point as a user would write its scenario:

- the client: InferenceX's ``benchmark_serving.py --dataset-name random --random-range-ratio 0.8
  --num-prompts 10*CONC --max-concurrency CONC --ignore-eos``: a closed loop of CONC users with no
  think time, 10 x CONC requests (5 x CONC for the SGLang GB200 disaggregated points Dynamo's scripts ran:
  ``prompts_per_user``), prompt and output lengths uniform in [0.8 L, L];
- CONC: ``silicon_concurrency=`` of ``silicon_data_source`` when given, else ``batch_size``;
- the model: ``model_path`` as a Hugging Face id (read offline from the dependency's
  ``model_configs``); three ids the dependency ships under another name are renamed
  (``MODEL_ALIASES``);
- the GPU: the hardware preset whose ``silicon_tables`` is the point's ``system``;
- parallelism: ``tp: tp_size``, ``pp: pp_size`` and ``ep: moe_ep_size`` when above 1;
- quantization: the served checkpoint's own where its family is the point's precision (the model's published FP8
  release is 128x128 block FP8 for DeepSeek-R1/V3, MiniMax-M2.5 and Qwen3-*-FP8, and gpt-oss-120b is published in
  MXFP4: InferenceX serves those checkpoints as published, ``vllm serve $MODEL`` with no ``--quantization``), else
  ``gemm_quant_mode`` (fp8, fp8_block, nvfp4; none for bf16), which is aiconfigurator's modelling choice and names
  no checkpoint;
- the policy and KV cache of the launch script InferenceX ran for the point's (engine, model,
  precision, GPU) (``RECIPES``, agg points of source ``inferencex``; each entry names the script of
  SemiAnalysisAI/InferenceX and the commit read): the flags servesim's policies express (vLLM
  ``max_num_seqs``, ``max_num_batched_tokens``, ``gpu_memory_utilization``; SGLang
  ``max_running_requests``, ``chunked_prefill_size``, ``max_prefill_tokens``; TensorRT-LLM
  ``max_num_tokens``, ``max_batch_size``, chunked context), the KV dtype, block size and memory share
  (SGLang ``--mem-fraction-static``, TensorRT-LLM ``free_gpu_memory_fraction``), settings that pick
  the kernels (vLLM's ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8``) and expert parallelism, some of them
  functions of ISL, CONC and TP as the script computes them. A point with no recipe (every
  gap-analysis point, disaggregated points, groups whose script was not found) keeps the generic
  settings: vLLM ``--max-num-seqs CONC --max-num-batched-tokens 8192``; SGLang
  ``max_running_requests: CONC``; TensorRT-LLM ``max_batch_size: CONC``; an FP8 KV cache for FP8
  and FP4 runs. Prefix caching is off throughout;
- a disaggregated point: a prefill group and a decode group of their worker counts, TPs, EPs and
  attention-DP sizes, each served by the point's engine's policy; a TensorRT-LLM point's generation servers
  take the ``max_batch_size`` of the recipe it ran, and each server the MoE kernel family of its
  ``moe_config.backend`` (``DECODE_SEATS``, ``MOE_KERNELS``: ``benchmarks/inferencex_trt_disagg.py``); an SGLang
  point's prefill and decode servers take their recipe's ``chunked-prefill-size``, ``max-prefill-tokens``,
  ``max-running-requests`` and ``mem-fraction-static`` (``SGLANG_SERVERS``, ``benchmarks/inferencex_sglang_disagg.py``).

A gap-analysis point's attention data parallelism (``attention_dp_size`` > 1; the file's ``tp_size`` is then the
attention TP of one rank) is ``parallelism: {tp: tp_size x attention_dp_size, ep: moe_ep_size, dp_attention:
attention_dp_size}``. An InferenceX agg point's layout is its launch script's (``_recorded_squared_parallelism``,
``_vllm_parallelism``): the file records ``{tp: T, ep: E}`` as tp_size (or attention_dp_size) T x E.
A point servesim cannot express raises ``PointRefused`` with a one-line reason:
attention data parallelism implied but not recorded (``batch_size``, one attention rank's batch, differs
from the concurrency), int4 weight-only quantization, a disaggregated point
without worker counts, no recorded concurrency. A scenario servesim itself refuses (a model config it
cannot read, a model too big for the GPUs, a tp that does not divide the heads) is refused by
``run_point`` with servesim's one-line error.
"""

from __future__ import annotations

import importlib.resources
import math
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.inferencex_sglang_disagg import SGLANG_SERVERS
from benchmarks.inferencex_trt_disagg import ALL_TO_ALL, DECODE_SEATS, EXPERT_SLOTS, MOE_KERNELS, TRT_SERVERS
from simulator.config.presets import hardware_presets, resolve_model

SAMPLE_FILE = ("aiconfigurator_core", "systems/silicon_sample.csv")
INFERENCEX = "inferencex"
GAP_ANALYSIS = "gap-analysis"
GROUP_FIELDS = ("source", "model", "system", "engine", "precision")
RANGE_RATIO = 0.8  # InferenceX's --random-range-ratio: lengths uniform in [0.8 L, L]
PROMPTS_PER_USER = 10  # InferenceX's --num-prompts 10 * CONC
DEEPSEEK_PATHS = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")  # the file's names of DeepSeek-R1's runs
# InferenceX's GB200 disaggregated DeepSeek-R1 runs that went through ai-dynamo/dynamo's own launchers, by (engine,
# precision): the first day on srtctl (whose sa-bench sends 10 x CONC), and the prompts a user their client sent before
# (``prompts_per_user``)
DYNAMO_CLIENTS: dict[tuple[str, str], tuple[str, int]] = {
    ("sglang", "fp4"): ("2026-02-07", 5),  # slurm_jobs' scripts/vllm/bench.sh until 2767db504 (its day's points: none)
    # until 37f353be2 (07:50 -0800 that day): the day's points ran its new configs, the run the merge started, on srtctl
    ("sglang", "fp8"): ("2026-02-09", 5),
    ("trtllm", "fp4"): ("2026-01-30", 8),  # performance_sweeps' benchmark_disagg.slurm (MULTI_ROUND 8) until 4e9a376bf
}
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
    "int4_wo": "int4_wo",  # Kimi-K2.5's own checkpoint: INT4 routed experts
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


_IMAGE = re.compile(r"image=([^;]+)")
# Images that, in InferenceX's .github/configs/nvidia-master.yaml from 2025-10-01 to 2026-05-01 (every change, read at
# 843c6254f), only configurations with ``spec-decoding: mtp`` ran: a point measured in one of them is a run with
# DeepSeek's multi-token prediction, which the file does not say (and whose acceptance rate it does not give)
MTP_ONLY_IMAGES = {
    "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3": "dsr1-fp4-b200-trt-mtp, dsr1-fp8-b200-trt-mtp",
    "lmsysorg/sglang:v0.5.8-cu130-amd64": "dsr1-fp8-b200-sglang-mtp",
    "lmsysorg/sglang:v0.5.10.post1": "qwen3.5-fp8-h200-sglang-mtp",
}


def image_of(silicon_data_source: str) -> str | None:
    """The container image a point was measured in: ``image=`` of a source file's rows, the last field of a database
    dump's (``...; workflow_run_id=748; lmsysorg/sglang:v0.5.10.post1-cu130``); None when not recorded."""
    text = str(silicon_data_source)
    found = _IMAGE.search(text)
    if found is not None:
        image = found.group(1)
    else:
        last = text.rsplit(";", 1)[-1].strip()
        if "=" in last or ":" not in last or "/" not in last:
            return None
        image = last
    return image.strip().strip('"').replace("nvcr.io#", "nvcr.io/", 1)


# SGLang fused a Gated DeltaNet layer's input projections into in_proj_qkvz and in_proj_ba (sgl-project/sglang#21019,
# merged 2026-03-20, first released in v0.5.10): images of v0.5.9 and before, and nightlies built before that day,
# run in_proj_qkv, in_proj_z, in_proj_b and in_proj_a in turn (v0.5.9's python/sglang/srt/models/qwen3_5.py, read)
_GATED_DELTANET_MODELS = ("Qwen3.5",)  # Qwen3-Next's checkpoint holds in_proj_qkvz and in_proj_ba fused already
_SGLANG_GDN_FUSED_RELEASE = (0, 5, 10)
_SGLANG_GDN_FUSED_NIGHTLY = "20260320"
_SGLANG_RELEASE = re.compile(r"lmsysorg/sglang:v(\d+)\.(\d+)\.(\d+)")
_SGLANG_NIGHTLY = re.compile(r"lmsysorg/sglang:nightly-dev-(\d{8})")


def sglang_gdn_unfused(image: str | None) -> bool:
    """Whether an SGLang image runs a Gated DeltaNet layer's four input projections unfused (its release before
    0.5.10 or its nightly build before 2026-03-20); False for another engine's image or none recorded."""
    if image is None:
        return False
    release = _SGLANG_RELEASE.match(image)
    if release is not None:
        return tuple(int(x) for x in release.groups()) < _SGLANG_GDN_FUSED_RELEASE
    nightly = _SGLANG_NIGHTLY.match(image)
    return nightly is not None and nightly.group(1) < _SGLANG_GDN_FUSED_NIGHTLY


def check_not_mtp(silicon_data_source: str) -> None:
    """PointRefused for a point measured in an image that only InferenceX's MTP configurations ran."""
    image = image_of(silicon_data_source)
    if image is None:
        return
    configurations = MTP_ONLY_IMAGES.get(image)
    if configurations is not None:
        raise PointRefused(
            f"measured with MTP speculative decoding: image {image} ran only in InferenceX's {configurations} "
            "(nvidia-master.yaml), which the file does not record, nor the acceptance rate"
        )


MEASURED_DAY = re.compile(r"measured=(\d{4}-\d{2}-\d{2})")  # the day a point was measured (its export's)


def measured_day(row: pd.Series) -> str | None:
    """The day (YYYY-MM-DD) a point was measured, from ``silicon_data_source``'s ``measured=``; None where it gives
    none."""
    found = MEASURED_DAY.search(str(row["silicon_data_source"]))
    return found.group(1) if found else None


def run_model(row: pd.Series) -> str:
    """The model a point's run served: ``model_path`` read through ``SAME_RUN_MODELS``."""
    model = str(row["model_path"])
    return SAME_RUN_MODELS.get(model, model)


def _run_day(row: pd.Series) -> tuple[str, str, str, str, str | None]:
    """The key of the day-keyed tables (``MTP_SWEEP_DAYS``, ``MTP_ONLY_DAYS``, ``COLD_START_DAYS``): the run's model,
    GPU, precision, engine and the day measured."""
    return run_model(row), str(row["system"]), str(row["precision"]), str(row["backend"]), measured_day(row)


# Days on which InferenceX ran a DeepSeek configuration's MTP variant beside (or instead of) the plain one, in an
# image both ran: some point of the file's (model, GPU, precision, engine) that day was measured at a load only the
# ``-mtp`` configuration's search space held at that day's nvidia-master.yaml (the commit named). The file keeps no
# run id (its ``measured=`` time is the export's, shared by every configuration of it), so the day's points cannot
# be told apart: each of them is refused. Derived by benchmarks/inferencex_mtp_sweeps.py from every aggregated
# DeepSeek-R1/V3 point under TensorRT-LLM or SGLang (the days whose points all fit the plain search space, and
# those before the file's configurations were kept there, 2025-11-03, are not listed); the days whose images only
# MTP configurations ran are MTP_ONLY_IMAGES'.
MTP_SWEEP_DAYS: dict[tuple[str, str, str, str, str], str] = {
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4", "trtllm", "2026-01-14"): (
        "1k/1k and 1k/8k at 128 users and 8k/1k at 32, with attention DP: only dsr1-fp4-b200-trt-mtp's search "
        "space at bf3456727"
    ),
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", "trtllm", "2026-01-14"): (
        "1k/1k at 128 users with attention DP: only dsr1-fp8-b200-trt-mtp's search space at bf3456727"
    ),
    ("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", "trtllm", "2026-01-14"): (
        "1k/1k and 8k/1k at 128 and 256 users with attention DP, 1k/8k at 128 and at 256 with attention DP: only "
        "dsr1-fp8-h200-trt-mtp's search space at bf3456727"
    ),
    ("deepseek-ai/DeepSeek-R1", "h200_sxm", "fp8", "trtllm", "2026-01-28"): (
        "1k/8k at 256 users with attention DP: only dsr1-fp8-h200-trt-mtp's search space at 424862790"
    ),
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", "sglang", "2026-03-25"): (
        "1k/1k and 1k/8k at 128-512 users, 8k/1k at 64-512: only dsr1-fp8-b200-sglang-mtp's search space at 12ba0ae07"
    ),
}


# Days on which InferenceX ran only a configuration's MTP variant, read from its history (not a DeepSeek day, so not
# benchmarks/inferencex_mtp_sweeps.py's): its image then served no other configuration of the model and GPU, and its
# search space holds every point of the day.
MTP_ONLY_DAYS: dict[tuple[str, str, str, str, str], str] = {
    ("Qwen/Qwen3.5-397B-A17B", "b200_sxm", "fp8", "sglang", "2026-03-20"): (
        "qwen3.5-fp8-b200-sglang-mtp (qwen3.5_fp8_b200_mtp.sh, EAGLE, added by 35d4bb367 that day) was the only "
        "configuration in lmsysorg/sglang:v0.5.9-cu130 then, the plain one ran v0.5.9-cu129-amd64, and its search "
        "space {tp 4, ep 1, 4-256 users} is the day's points"
    ),
}


# The database dump's rows name the configuration that ran them (the point id's ``cfgN``), numbered in the order
# InferenceX's database first met its configurations: one numbered below the first MTP configuration's (added by
# e62c6acdf; ids from 430) is a plain configuration, so its points of an MTP_SWEEP_DAYS day are told apart from
# the MTP runs (an inference from the numbering; the file's only such rows are the dump's 2026-03-25 SGLang FP8
# B200 points, cfg87 and cfg271, 13 of them).
FIRST_MTP_CONFIG_ID = 430


def runs_a_plain_configuration(row: pd.Series) -> bool:
    """Whether ``row``'s configuration id (the database dump's) shows it a plain configuration's run."""
    config = _config_id(str(row["id"]))
    return bool(config) and int(config.removeprefix("cfg")) < FIRST_MTP_CONFIG_ID


def check_not_mtp_sweep(row: pd.Series) -> None:
    """PointRefused for a point of a day on which InferenceX measured its configuration with MTP as well
    (``MTP_SWEEP_DAYS``) unless its configuration id shows it a plain configuration's, or with MTP only
    (``MTP_ONLY_DAYS``)."""
    key = _run_day(row)
    if key[-1] is None:
        return
    only = MTP_ONLY_DAYS.get(key)
    if only is not None:
        raise PointRefused(
            f"measured with MTP speculative decoding: on {key[-1]} InferenceX ran {only}; the file records neither the "
            "speculation nor its acceptance rate"
        )
    evidence = MTP_SWEEP_DAYS.get(key)
    if evidence is not None and not runs_a_plain_configuration(row):
        raise PointRefused(
            f"possibly measured with MTP speculative decoding: on {key[-1]} InferenceX also ran this configuration "
            f"with MTP ({evidence}), and the file does not say which points are which"
        )


# Days on which InferenceX ran a GPU only through Dynamo's disaggregated launchers, whose points the file records as
# aggregated with the job's GPUs as ``tp_size`` (12 to 72): InferenceX's GB200 workflow of November 2025
# (runners/launch_gb200-nv.sh at 0ba7aa3ff) ran DeepSeek-R1 under dynamo-trtllm with
# components/backends/trtllm/performance_sweeps/submit_disagg.sh (context servers, generation servers, their TP and
# batch, MTP on or off) and under dynamo-sglang with components/backends/sglang/slurm_jobs/submit_disagg.sh; no
# aggregated server. E.g. ``submit_disagg.sh "mtp=on" "dep" 8 1 32 ...`` at 538 users is 8 context servers of 4 GPUs
# and a generation server of 32: the file's "agg, tp 64, 538 users".
DISAGGREGATED_ONLY_DAYS: dict[tuple[str, str], str] = {
    ("gb200", day): "InferenceX's GB200 workflow then (runners/launch_gb200-nv.sh at 0ba7aa3ff) launched only Dynamo's "
    "submit_disagg.sh"
    for day in ("2025-11-16", "2025-11-17")
}


def check_not_disaggregated(row: pd.Series) -> None:
    """PointRefused for a point recorded as aggregated on a day its GPU ran only disaggregated
    (``DISAGGREGATED_ONLY_DAYS``): its servers' layout is not recorded."""
    if row["mode"] != "agg":
        return
    day = measured_day(row)
    evidence = DISAGGREGATED_ONLY_DAYS.get((str(row["system"]), day)) if day else None
    if evidence is not None:
        raise PointRefused(
            f"recorded as aggregated on {day}, when {evidence}: a disaggregated run whose tp_size "
            f"({_int(row, 'tp_size')}) is its GPUs, its context and generation servers not recorded"
        )


# The benchmark client sends random token ids decoded to text with its own tokenizer, which the server encodes again.
# Under transformers 5, DeepSeek's tokenizer (LlamaTokenizerFast over a ByteLevel tokenizer) loads broken unless
# patched as SGLang's server patches it: InferenceX's client patched it only for a local model folder (#937,
# 2026-03-27) while its scripts pass a hub id, so the server saw about 5 times the prompt tokens ("7000 tokens ->
# ~35000"), until #1381 (2026-05-15); InferenceX re-ran its DeepSeek SGLang configurations for it (#1502). The client
# runs in the server's image: SGLang 0.5.10.post1 pins transformers==5.3.0 (its wheel's Requires-Dist; 0.5.5-0.5.9
# pin 4.57.1).
TRANSFORMERS_5_IMAGES = ("lmsysorg/sglang:v0.5.10.post1",)
CLIENT_TOKENIZER_FIXED = "2026-05-15"
BROKEN_V5_TOKENIZER_MODELS = frozenset({"deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"})


def check_client_tokenizer(row: pd.Series) -> None:
    """PointRefused for a DeepSeek point whose client tokenized under transformers 5 before InferenceX's fix (its
    prompts were several times the ISL on the server; ``TRANSFORMERS_5_IMAGES``)."""
    if str(row["backend"]) != "sglang" or str(row["model_path"]) not in BROKEN_V5_TOKENIZER_MODELS:
        return
    image, day = image_of(str(row["silicon_data_source"])), measured_day(row)
    if image is None or day is None or day >= CLIENT_TOKENIZER_FIXED:
        return
    if image.startswith(TRANSFORMERS_5_IMAGES):
        raise PointRefused(
            f"prompts not the recorded lengths: image {image} runs the benchmark client on transformers 5.3.0, whose "
            "DeepSeek tokenizer InferenceX's client left unpatched for a hub model id until 2026-05-15 (InferenceX "
            "#937, #1381: about 5x the prompt tokens on the server)"
        )


# InferenceX's client warms the server up before it measures (``--num-warmups 2 x CONC``) only since d053ae24e
# (2026-01-21, "upstream kimbochen/bench_serving, adding warmup", benchmarks/benchmark_lib.sh); before, its runners
# ran benchmark_serving.py cold, but for one B200 runner's warm-up of DeepSeek-R1-0528 ("warmup for JIT kernels",
# runners/launch_b200-nvd.sh at 4b860b78e). A day whose points hold a start-up stall, by the file's own figures, is
# listed here with them (each point against the warm runs of its lengths and users on any layout, 2026-03-25 and
# later); servesim predicts a warm server. SGLang's DeepSeek-R1 on B200 then ran FlashInfer's TensorRT-LLM MoE and
# MLA kernels (dsr1_fp4_b200_docker.sh and dsr1_fp8_b200_docker.sh at 4b860b78e). Its FP4 points of 2025-11-10
# measured 5.5-12.1 s mean TTFT from 32 users at 1k/1k and 1k/8k and from 4 at 8k/1k, where the warm runs measured
# 0.25-2.6 s (TP 8, 1k/1k, 32 users: 8.6 s then, 0.38-0.51 s warm), and 1.3-3.2x the warm runs' highest at 4-16
# users with 1k prompts. Its FP8 points of 2025-11-18 measured 1.6-3.0 s at 64 users with 1k prompts and 1.9-2.9 s at
# 8k/1k with 8-32 users, 1.4-2.8x the warm runs' highest, but within the warm runs' range at up to 32 users with 1k
# prompts. A one-off stall of the first wave, growing with the shapes a run meets (kernels built or loaded on their
# first use would do it; not pinned down), adds its length over 10 to a mean over 10 x CONC requests. The FP4 points
# of 2025-11-02 (8k/1k, 32-128 users) are 1.0-1.4x the warm runs' highest and are kept.
CLIENT_WARMUP_DAY = "2026-01-21"
COLD_START_DAYS: dict[tuple[str, str, str, str, str], str] = {  # (the run's model, GPU, precision, engine, day)
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp4", "sglang", "2025-11-10"): "5.5-12.1 s mean TTFT from 32 users "
    "(from 4 at 8k/1k) where warm runs of the same lengths and users measured 0.25-2.6 s",
    ("deepseek-ai/DeepSeek-R1", "b200_sxm", "fp8", "sglang", "2025-11-18"): "1.6-3.0 s mean TTFT at 64 users with 1k "
    "prompts and 1.9-2.9 s at 8k/1k with 8-32 users, 1.4-2.8x the highest of warm runs of the same lengths and users",
}


def check_warmed_up(row: pd.Series) -> None:
    """PointRefused for an InferenceX agg point of a day measured cold whose points hold a start-up stall
    (``COLD_START_DAYS``; InferenceX's client warms the server up since ``CLIENT_WARMUP_DAY``)."""
    if row["mode"] != "agg" or source_of(str(row["silicon_data_source"])) != INFERENCEX:
        return
    key = _run_day(row)
    day = key[-1]
    evidence = COLD_START_DAYS.get(key) if day is not None and day < CLIENT_WARMUP_DAY else None
    if evidence is not None:
        raise PointRefused(
            f"measured cold on {day}, before InferenceX's client warmed the server up ({CLIENT_WARMUP_DAY}, "
            f"d053ae24e), with a start-up stall servesim does not model: {evidence}"
        )


def concurrency_of(row: pd.Series) -> int:
    """The client concurrency: ``silicon_concurrency=`` of the source when given, else ``batch_size``."""
    found = _CONCURRENCY.search(str(row["silicon_data_source"]))
    if found:
        return int(found.group(1))
    if pd.isna(row.get("batch_size")):
        raise PointRefused("client concurrency not recorded (no silicon_concurrency, no batch_size)")
    return int(row["batch_size"])


def read_points(path: Path | None = None) -> pd.DataFrame:
    """The measured points with their ``source``, ``model`` (the model run: the database dump's DeepSeek-V3 rows are
    DeepSeek-R1's runs, ``SAME_RUN_MODELS``), ``engine``, ``precision`` and ``group`` columns, each measurement once
    (``drop_repeated_measurements``)."""
    df = drop_repeated_measurements(pd.read_csv(path or sample_path()))
    df["source"] = df["silicon_data_source"].map(source_of)
    df["model"] = df["model_path"].replace(SAME_RUN_MODELS)  # the runs' model; model_path stays as the file names it
    df["engine"] = df["backend"]
    df["precision"] = df["precision"].fillna(df["gemm_quant_mode"].fillna("bf16"))
    df["group"] = df[list(GROUP_FIELDS)].astype(str).agg(" / ".join, axis=1)
    return df


PROVENANCE = ("id", "silicon_data_source", "backend_version")  # where a row came from, not what was measured


# InferenceX's database dump names the runs of its ``dsr1`` configurations (ids ``dsr1_...``, all 490 of its rows so
# named) deepseek-ai/DeepSeek-V3, where every ``dsr1-*`` configuration serves DeepSeek-R1-0528
# (.github/configs/nvidia-master.yaml at 39b46a0c6, the last change before the dump: e.g. ``dsr1-fp8-h200-sglang``
# has ``model: deepseek-ai/DeepSeek-R1-0528``; no configuration serves DeepSeek-V3) and its 2026-04-06 export names
# the same runs deepseek-ai/DeepSeek-R1. Two rows under these names alike in all else are one run.
SAME_RUN_MODELS = {"deepseek-ai/DeepSeek-V3": "deepseek-ai/DeepSeek-R1"}


def _measured(columns: pd.Index) -> list[str]:
    """The columns that say what a row measured: all but its ``PROVENANCE``."""
    return [c for c in columns if c not in PROVENANCE]


# The columns that record how a run was laid out over its GPUs. InferenceX's files record one run's layout in
# different ways (the database dump's DeepSeek-R1 FP4 B200 SGLang rows of cfg201 say tp_size 16 where the 2026-03-25
# export's copy of the run says 4; the dump's disaggregated rows give worker counts its 2026-04-06 export leaves
# out), so a run's identity leaves them out and reads the load and the day from the provenance instead.
_LAYOUT = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
LAYOUT_COLUMNS = (*_LAYOUT, *(f"{role}_{c}" for role in ("prefill", "decode") for c in ("num_workers", *_LAYOUT)))


def _run_identity(df: pd.DataFrame) -> pd.DataFrame:
    """The columns that say which run a row is: ``_measured``'s but the layout's (``LAYOUT_COLUMNS``), the model
    read through ``SAME_RUN_MODELS``, and the concurrency and the day the provenance gives. Two rows alike in these
    hold the same mean TTFT and TPOT to the last digit at one load, model, GPU, engine, precision and lengths on
    one day: one run, however each file recorded its layout."""
    identity = df[[c for c in _measured(df.columns) if c not in LAYOUT_COLUMNS]]
    if "model_path" in identity:
        identity = identity.assign(model_path=identity["model_path"].replace(SAME_RUN_MODELS))
    if "silicon_data_source" in df:
        source = df["silicon_data_source"].astype(str)
        identity = identity.assign(
            concurrency=source.str.extract(_CONCURRENCY.pattern)[0], day=source.str.extract(MEASURED_DAY.pattern)[0]
        )
    return identity


def _copy_preference(silicon_data_source: str) -> int:
    """Which copy of a repeated measurement ``drop_repeated_measurements`` keeps, lowest first: InferenceX's
    database dump (it names the configuration and the workflow run), then its 2026-04-06 export, then any other
    file."""
    text = str(silicon_data_source)
    if text.startswith("db-dump/"):
        return 0
    return 1 if "source_file=2026-04-06.csv" in text else 2


def drop_repeated_measurements(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each measurement once. The file holds some runs more than once: rows alike in every column but
    their provenance (``PROVENANCE``: the same model, GPU, engine, load and lengths on one day, the same mean TTFT
    and TPOT to the last digit), because InferenceX's database dump and its 2026-04-06 export overlap (the export
    spells a nightly image's version ``nightly-dev`` where the dump names its date and commit), its 2026-03-25
    export (read as gap-analysis runs) repeats runs of the 2026-04-06 one, and that file repeats some of its own
    rows; the dump names DeepSeek-R1's runs DeepSeek-V3, and the files record some runs' layouts differently (the
    dump's disaggregated rows alone give worker counts), so a run's identity reads the model through
    ``SAME_RUN_MODELS`` and leaves the layout out (``_run_identity``): 1,156 copies of the 5,221 rows of
    aiconfigurator-core 0.12 (884 alike in the layout too). A copy would count twice in a group's error (or once
    refused and once scored) and could land on both sides of the intervals' calibration split. The copy kept is
    ``_copy_preference``'s, the earliest in the file among equals; runs of one load whose measured figures differ
    are all kept."""
    preference = df["silicon_data_source"].map(_copy_preference)
    order = df.assign(_preference=preference).sort_values("_preference", kind="stable").index
    kept = order[~_run_identity(df).loc[order].duplicated(keep="first").to_numpy()]
    return df.loc[sorted(kept)].reset_index(drop=True)


def kept_copy(point_id: str, path: Path | None = None) -> str | None:
    """The id ``read_points`` keeps for the run that row ``point_id`` of the file repeats (a row
    ``drop_repeated_measurements`` dropped); None where the file has no such row or keeps it."""
    raw = pd.read_csv(path or sample_path())
    row = raw[raw["id"] == point_id]
    kept = drop_repeated_measurements(raw)
    if row.empty or point_id in set(kept["id"]):
        return None
    run = _run_identity(row)
    same = _run_identity(kept).reset_index().merge(run, on=list(run.columns), how="inner")  # NaN keys match NaN
    return str(kept["id"].iloc[same["index"].iloc[0]]) if len(same) else None


def select_points(
    df: pd.DataFrame,
    per_group: int | None,
    seed: int,
    filters: dict[str, str | None] | None = None,
) -> pd.DataFrame:
    """Points passing ``filters`` (column -> value), then up to ``per_group`` per group drawn with ``seed``.

    ``per_group`` None keeps every point. Each group's rows are shuffled by a generator of its own, seeded by ``seed``
    and the group's name (``_group_rng``), so the same file, filters and seed give the same sample, and a group's
    draw does not change when another group gains or loses rows.
    """
    for column, value in (filters or {}).items():
        if value is not None:
            df = df[df[column] == value]
    if per_group is None:
        return df.reset_index(drop=True)
    picked = []
    for name, rows in sorted(df.groupby("group"), key=lambda kv: kv[0]):
        order = _group_rng(seed, str(name)).permutation(len(rows))[:per_group]
        picked.append(rows.iloc[np.sort(order)])
    return pd.concat(picked).reset_index(drop=True) if picked else df.iloc[:0]


def _group_rng(seed: int, group: str) -> np.random.Generator:
    """The generator that draws ``group``'s sample: ``seed`` and a checksum of the group's name (CRC-32, the same on
    every machine and Python, where ``hash`` of a string is salted per process)."""
    return np.random.default_rng([seed, zlib.crc32(group.encode())])


def _int(row: pd.Series, column: str, default: int = 1) -> int:
    value = row.get(column)
    return default if value is None or pd.isna(value) else int(value)


def hardware_preset(system: str) -> str:
    """The hardware preset whose ``silicon_tables`` is ``system``; PointRefused when none is."""
    for name, spec in hardware_presets().items():
        if spec.silicon_tables == system:
            return name
    raise PointRefused(f"no hardware preset reads the silicon tables of {system}")


def _parallelism(tp: int, ep: int, pp: int = 1, dp_attention: int = 1) -> dict[str, int]:
    """servesim's ``parallelism`` of a point recorded as attention TP ``tp`` per attention-DP rank, ``dp_attention``
    ranks, experts over ``ep``: the replica has tp x dp_attention GPUs (the file's moe_tp x moe_ep)."""
    out = {"tp": tp * dp_attention}
    if pp > 1:
        out["pp"] = pp
    if ep > 1:
        out["ep"] = ep
    if dp_attention > 1:
        out["dp_attention"] = dp_attention
    return out


def _attention_dp(size: float | None, batch_size: float | None = None, concurrency: int | None = None) -> int:
    """The attention-DP size of a point: the recorded size (empty or 0: 1); PointRefused where it is implied but not
    recorded (``batch_size``, the batch of one attention rank, differs from the client concurrency)."""
    if size is not None and not pd.isna(size) and size > 1:
        return int(size)
    recorded = size is not None and not pd.isna(size) and size == 1
    if not recorded and batch_size is not None and not pd.isna(batch_size) and int(batch_size) != concurrency:
        raise PointRefused("attention data parallelism size not recorded and batch_size differs from concurrency")
    return 1


# A quantization's family: a point's precision (fp8, fp4) names the family, the checkpoint the format.
QUANTIZATION_FAMILY = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "mxfp4": "fp4", "int4_wo": "int4"}


def _checkpoint_quantization(model: str) -> str | None:
    """The quantization the checkpoint ``model`` declares in its config (None for bf16 or an unreadable config)."""
    try:
        return resolve_model(MODEL_ALIASES.get(model, model)).quantization
    except ValueError:
        return None


def _quantization(row: pd.Series) -> str | None:
    """The scenario's ``quantization``: None where the served checkpoint's own format is the point's precision."""
    mode = row.get("gemm_quant_mode")
    mode = "none" if mode is None or pd.isna(mode) else str(mode)
    if mode not in QUANTIZATION_BY_GEMM_MODE:
        raise PointRefused(f"GEMM quantization {mode} not modelled")
    wanted = QUANTIZATION_BY_GEMM_MODE[mode]
    own = _checkpoint_quantization(str(row["model_path"]))
    if wanted is not None and own is not None and QUANTIZATION_FAMILY.get(own) == QUANTIZATION_FAMILY.get(wanted):
        return None
    return wanted


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


def dynamo_client(row: pd.Series) -> tuple[str, int] | None:
    """A GB200 disaggregated DeepSeek-R1 point's Dynamo client (``DYNAMO_CLIENTS``): the day its engine and precision
    left Dynamo's own launcher for srtctl, and the prompts a user it sent before; None where it never ran through
    one."""
    if row["mode"] != "disagg" or str(row["system"]) != "gb200" or str(row["model_path"]) not in DEEPSEEK_PATHS:
        return None
    return DYNAMO_CLIENTS.get((str(row["backend"]), str(row["precision"])))


def prompts_per_user(row: pd.Series) -> int:
    """The requests each user sent: 10 (InferenceX's ``benchmark_lib.sh`` and srt-slurm's sa-bench: ``--num-prompts
    $((concurrency * 10))``), but fewer where InferenceX ran a GB200 disaggregated DeepSeek-R1 point through
    ai-dynamo/dynamo's own launcher, before that engine and precision moved to srtctl (``DYNAMO_CLIENTS``):

    - SGLang: ``runners/launch_gb200-nv.sh`` ran ``examples/backends/sglang/slurm_jobs/submit_disagg.sh`` of Dynamo
      at b7107d0, whose ``scripts/vllm/bench.sh`` passes ``--num-prompts $((concurrency * 5))``; FP4 moved to srtctl
      with 2767db504 (2026-02-07), FP8 with 37f353be2 (2026-02-09).
    - TensorRT-LLM (FP4): the launcher checked out Dynamo's ``release/0.5.1-rc0.pre1`` (e9dd89c03) and then
      ``release/0.5.1-rc0.20251105`` (450d834a9, 93e1b3ca1), whose ``components/backends/trtllm/performance_sweeps/
      benchmark_disagg.slurm`` sets ``MULTI_ROUND`` 8 unless given (InferenceX never gives it) and whose
      ``scripts/bench.sh`` sends ``concurrency x multi_round`` prompts at that concurrency; srtctl from 4e9a376bf
      (2026-01-30).

    A point without its measurement day (an export file's) keeps 10."""
    client, day = dynamo_client(row), measured_day(row)
    if client is not None and day is not None and day < client[0]:
        return client[1]
    return PROMPTS_PER_USER


def workload_for(isl: int, osl: int, concurrency: int, per_user: int = PROMPTS_PER_USER) -> dict[str, Any]:
    """InferenceX's client: CONC users, ``per_user`` x CONC requests (``prompts_per_user``), lengths uniform in
    [0.8 L, L], no think time."""

    def uniform(length: int) -> dict[str, Any]:
        return {"kind": "uniform", "min_tokens": max(1, math.ceil(RANGE_RATIO * length)), "max_tokens": length}

    return {
        "kind": "closed_loop",
        "concurrency": concurrency,
        "num_requests": per_user * concurrency,
        "think_s": {"kind": "fixed", "seconds": 0.0},
        "lengths": {"kind": "independent", "prompt": uniform(isl), "output": uniform(osl)},
    }


KIMI_K2_5 = "moonshotai/Kimi-K2.5"
SGLANG_DEEPEP_SYSTEMS = frozenset(("gb200", "gb300"))
"""GPUs whose SGLang disaggregated workers with attention DP run DeepEP: every GB200 and GB300 DeepSeek recipe
InferenceX launched through srt-slurm (``benchmarks/multi_node/srt-slurm-recipes/{gb200,gb300}-{fp4,fp8}/``, read at
SemiAnalysisAI/InferenceX 80d98084f, the first commit that tracks them) gives a decode worker with
``enable-dp-attention`` ``moe-a2a-backend: deepep`` (``deepep-mode: low_latency``), and the FP8 recipes' prefill
worker with ``enable-dp-attention`` too (``deepep-mode: normal``); the FP4 recipes' prefill workers run
``moe-runner-backend: flashinfer_cutlass`` or ``flashinfer_trtllm`` without it, and the B200 recipes give none. Every
such DeepEP worker has 8 to 48 attention-DP ranks, in these recipes and in NVIDIA/srt-slurm's of 2025-12-20 (d83c9ee,
``recipies/gb200-{fp4,fp8}/``) that the points measured on 2025-12-21 ran; the workers of 4 GPUs run none. Those
older points record a DeepEP worker's experts as moe_tp (moe_ep 1), and their 4-GPU TP workers as 4 attention-DP
ranks."""


def _disaggregated_groups(row: pd.Series) -> list[dict[str, Any]]:
    groups = []
    for role in ("prefill", "decode"):
        workers = row.get(f"{role}_num_workers")
        if workers is None or pd.isna(workers):
            raise PointRefused("disaggregated point without worker counts")
        dp = _attention_dp(row.get(f"{role}_attention_dp_size"))
        tp = _int(row, f"{role}_tp_size")
        ep, pp = _int(row, f"{role}_moe_ep_size"), _int(row, f"{role}_pp_size")
        deepep = row["backend"] == "sglang" and str(row["system"]) in SGLANG_DEEPEP_SYSTEMS and dp >= 8
        deepep = deepep and (role == "decode" or row["precision"] == "fp8")
        kimi = row["backend"] == "vllm" and str(row["model_path"]) == KIMI_K2_5
        if kimi and role == "prefill" and dp == 1 and ep > 1:
            # every Kimi-K2.5 vLLM recipe's prefill worker is "dep4" (NVIDIA/srt-slurm sa-submission-q2-2026 at
            # 8294e64e: data-parallel-size 4, tensor-parallel-size 1, enable-expert-parallel), recorded as tp 4, ep 4
            dp, tp = tp, 1
        if deepep:
            # SGLang's _handle_a2a_moe (python/sglang/srt/server_args.py): with --moe-a2a-backend deepep the expert-
            # parallel size is set to the tensor-parallel size, whatever --ep-size says (the points measured before
            # 2026 record such workers' experts as moe_tp x moe_ep 1)
            ep = tp * dp
        group: dict[str, Any] = {
            "name": role,
            "role": role,
            "count": int(workers),
            "parallelism": _parallelism(tp, ep, pp, dp),
        }
        if deepep:
            group["cost_model"] = {"kind": "silicon", "roofline": {"expert_all_to_all": True}}
        groups.append(group)
    return groups


@dataclass(frozen=True)
class Recipe:
    """What one InferenceX launch script sets that servesim expresses.

    ``policy(isl, osl, conc, tp)`` gives the policy fields besides ``kind`` (ISL and OSL the
    nominal lengths, as the script sees them); ``kv_cache`` the KV-cache fields (``dtype`` fp8 where
    the script passes ``--kv-cache-dtype fp8`` / ``kv_cache_config.dtype: fp8``, absent where it
    leaves the engine's ``auto``). ``unexpressed`` names what the script sets that servesim does not
    model or whose meaning differs from servesim's knob.
    """

    script: str  # path in SemiAnalysisAI/InferenceX
    commit: str  # the commit read: the last one on main at or before the group's latest measurement
    policy: Callable[[int, int, int, int], dict[str, Any]]
    kv_cache: dict[str, Any] = field(default_factory=dict)
    unexpressed: str = ""
    quantization: str | None = None  # an engine setting that picks the weights' kernels (None: the point's)
    expert_parallel: bool = False  # --enable-expert-parallel whatever the point's recorded EP: ep = tp
    tensor_parallel_only: bool = False  # never --enable-expert-parallel, whatever the point's recorded EP
    # KV-cache fields the script sets by (ISL, OSL, CONC, TP)
    kv_cache_for: Callable[[int, int, int, int], dict[str, Any]] | None = None
    # the db-dump configurations (the ``cfgN`` of a point's id) launched with DP_ATTENTION=true (vLLM: tp 1, dp TP)
    dp_attention_configs: frozenset[str] = frozenset()
    # the MoE kernel family the script selects, by (ISL, OSL, CONC, TP, attention DP): SiliconParams.moe_kernel
    moe_kernel: Callable[[int, int, int, int, bool], str | None] | None = None
    # policy fields the script adds when it launches with attention DP (DP_ATTENTION=true)
    dp_attention_policy: dict[str, Any] = field(default_factory=dict)
    # TensorRT-LLM's piecewise CUDA graphs: the largest capture_num_tokens by (ISL, OSL, CONC, the script's TP and
    # EP_SIZE, max_num_tokens), 0 where the script leaves them off (trtllm's piecewise_cuda_graph_max_tokens)
    piecewise_max_tokens: Callable[[int, int, int, int, int, int], int] | None = None
    # the layout the script chose by (ISL, OSL, CONC, TP): (EP size, attention DP), where the file records none (its
    # points of 2025-11-02: InferenceX's utils/process_result.py wrote no ep or dp fields until 17d5e204f, so the
    # file's ep 1 and no DP are defaults) or records another (SGLang's --enable-ep-moe, EP = TP, recorded as ep 1)
    layout: Callable[[int, int, int, int], tuple[int, bool]] | None = None
    # the script as it stood before a change that alters what servesim expresses: (day, recipe) pairs in day order;
    # a point measured before a pair's day ran that pair's recipe (the first such pair), later points this one. A
    # pair's day is the first day whose points ran the changed script: the change's own day where that day's run
    # followed the push (02-03, 01-29, 04-03 and 04-20 below: the image switch the change made, or the run's order), the
    # day after where the nightly run of 00:00 UTC came before it (2025-11-10's SGLang change, 2025-12-05's B200 one)
    earlier: tuple[tuple[str, Recipe], ...] = ()
    # the checkpoint the script served (nvidia-master.yaml's ``model`` at ``commit``) where the point's model_path
    # names another and the script leaves the KV cache's dtype to the engine: its auto is then the dtype the
    # checkpoint declares (simulator/config/hf_config.py _declared_fp8_kv), read from its config in the dependency
    checkpoint: str | None = None

    @property
    def label(self) -> str:
        return f"{self.script}@{self.commit[:10]}"

    def on(self, day: str | None) -> Recipe:
        """The recipe a point measured on ``day`` (``YYYY-MM-DD``; None: not recorded, the latest) ran."""
        if day is not None:
            for until, recipe in self.earlier:
                if day < until:
                    return recipe
        return self


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _trt_dsr1_b200_tokens(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)/64*64 ))
    # MAX_NUM_TOKENS=$(( MAX_NUM_TOKENS > 8192 ? MAX_NUM_TOKENS : 8192 ))
    return {"max_num_tokens": max(_round_up(conc + isl + 64, 64), 8192), "enable_chunked_prefill": False}


def _trt_dsr1_h200_tokens(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)/64*64 )): no 8192 floor before 64af5a771 (2026-01-21), which added it to
    # the H200 script too (its recipes' commits and points are older)
    return {"max_num_tokens": _round_up(conc + isl + 64, 64), "enable_chunked_prefill": False}


def _sglang_dsr1_fp8_blackwell(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # TP 8: MAX_RUNNING_REQUESTS=128, CHUNKED_PREFILL_SIZE=32768, MAX_PREFILL_TOKENS=32768, SCHEDULER_RECV_INTERVAL 30
    # at CONC >= 16, else 10; TP 4 (8k/1k only): 32, 8192, 8192, 10; any other TP exits (no recipe: the generic ones)
    if tp == 4:
        return {
            "max_running_requests": 32,
            "chunked_prefill_size": 8192,
            "max_prefill_tokens": 8192,
            "scheduler_recv_interval": 10,
        }
    if tp == 8:
        return {
            "max_running_requests": 128,
            "chunked_prefill_size": 32768,
            "max_prefill_tokens": 32768,
            "scheduler_recv_interval": 30 if conc >= 16 else 10,
        }
    return {"max_running_requests": conc}


def _sglang_dsr1_fp8_h200(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # 1k/1k: --max-running-requests 512, else 256; --chunked-prefill-size 32768 --max-prefill-tokens 32768
    running = 512 if (isl, osl) == (1024, 1024) else 256
    return {"max_running_requests": running, "chunked_prefill_size": 32768, "max_prefill_tokens": 32768}


def _sglang_dsr1_fp4_blackwell(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # --max-running-requests 256 --chunked-prefill-size 16384 (max-prefill-tokens SGLang's 16384),
    # --scheduler-recv-interval 30 at CONC >= 16, else 10
    return {
        "max_running_requests": 256,
        "chunked_prefill_size": 16384,
        "scheduler_recv_interval": 30 if conc >= 16 else 10,
    }


_FP8_KV = {"dtype": "fp8"}
_QWEN35_FP8 = _FP8_KV | {"mamba_ssm_dtype": "bfloat16"}
_QWEN35_UNEXPRESSED = "decode CUDA-graph batch sizes (--cuda-graph-max-bs), --tokenizer-worker-num 6"


def _sglang_qwen35(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    """Most Qwen3.5 SGLang scripts' MAX_RUNNING_REQUESTS 128, CHUNKED_PREFILL_SIZE = MAX_PREFILL_TOKENS 32768 and
    SCHEDULER_RECV_INTERVAL 30 at CONC >= 16, else 10."""
    return {
        "max_running_requests": 128,
        "chunked_prefill_size": 32768,
        "max_prefill_tokens": 32768,
        "scheduler_recv_interval": 30 if conc >= 16 else 10,
    }


def _qwen35(script: str, commit: str, mem_fraction_static: float, fp8: bool) -> Recipe:
    """A Qwen3.5 SGLang script of that common shape (``_sglang_qwen35``): its --mem-fraction-static, and with
    ``fp8`` (the FP8 and FP4 scripts) --kv-cache-dtype fp8_e4m3 and --mamba-ssm-dtype bfloat16."""
    kv = (_QWEN35_FP8 if fp8 else {}) | {"mem_fraction_static": mem_fraction_static}
    return Recipe(f"benchmarks/single_node/{script}", commit, _sglang_qwen35, kv, _QWEN35_UNEXPRESSED)


_DSR1_TRT_UNEXPRESSED = "decode CUDA-graph batch sizes (cuda_graph_config.max_batch_size)"
# with DP_ATTENTION=true: attention_dp_config {batching_wait_iters: 0, enable_balance: true, timeout_iters: 60}
_DSR1_TRT_DP = {"attention_dp_config": {"enable_balance": True, "batching_wait_iters": 0, "timeout_iters": 60}}
_DSR1_TRT_KV = _FP8_KV | {"free_gpu_memory_fraction": 0.8}


def _trt_70b(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    """The Llama-3.1-70B scripts: --max_num_tokens 16384, and batch waiting at 1k/1k below TP 8."""
    out: dict[str, Any] = {"max_num_tokens": 16384, "enable_chunked_prefill": False}
    if isl == 1024 and osl == 1024 and tp < 8:
        out |= {"batch_wait_max_tokens_ratio": 0.9, "batch_wait_timeout_iters": 20}
    return out


_70B_TRT = Recipe("", "", _trt_70b, _FP8_KV, "CUDA graphs to 1024")
_C_70B = "9596d23d74e9e1e4f4bcdb27572c87cafb746a02"  # 2025-10-29, the day the Llama-3.1-70B points were measured
_C_DSR1_TRT_FP4 = "ec912828040791e8ba9b1133a1de51ac63a6f513"  # 2026-02-06
_C_DSR1_TRT_FP8 = "d7dbd045b23447f2fef1fb3fe44d392c33e32679"  # 2026-02-05
_C_DSR1_TRT_H200 = "008b91a9dd78c335612d4a228397ffdd83c23cc4"  # 2026-01-14
_C_SGLANG_0325 = "12ba0ae07289e3212840f8f59913ddee97b07f73"  # 2026-03-25
_C_SGLANG_0417 = "dd9c285b31409ac34f35ccc25ba5ac3af234df13"  # 2026-04-17


# VLLM_MXFP4_USE_MARLIN=1 came into the gpt-oss H100 and H200 scripts on 2026-01-02 (4e52ed4c6, #327 "Update vLLM
# version to v0.13.0 for NVIDIA configs"); before, vLLM 0.10.2's and 0.11.2's get_mxfp4_backend ran SM90's MXFP4 experts
# on OpenAI's triton_kernels (Mxfp4Backend.TRITON, whenever triton_kernels is installed and torch >= 2.8; Marlin only
# without them; both wheels read)
_GPTOSS_BEFORE_MARLIN = "2026-01-02"


def _gptoss_hopper_triton(script: str, commit: str) -> Recipe:
    """A gpt-oss H100/H200 vLLM script before VLLM_MXFP4_USE_MARLIN: async scheduling, no prefix caching, CUDA graphs
    to 2048 tokens and a budget of 8192 (its config.yaml), --max-num-seqs CONC, --gpu-memory-utilization 0.9, the
    experts on triton_kernels."""
    return Recipe(
        script,
        commit,
        _vllm(-1, 8192, 2048),
        {"gpu_memory_utilization": 0.9},  # no kv-cache-dtype (auto)
        moe_kernel=lambda isl, osl, conc, tp, dp: "triton_kernels",
    )


def _with(recipe: Recipe, script: str, commit: str) -> Recipe:
    return replace(recipe, script=script, commit=commit)


def _vllm(
    seqs: int | None, tokens: int | None, graphs: int | None = None
) -> Callable[[int, int, int, int], dict[str, Any]]:
    """vLLM's flags: ``seqs`` -1 for ``--max-num-seqs $CONC``, None where unset; ``tokens`` -1 for 2 x ISL; ``graphs``
    ``--max-cudagraph-capture-size`` (vLLM 0.10's ``cuda-graph-sizes`` of one value), None where unset."""

    def policy(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if seqs is not None:
            out["max_num_seqs"] = conc if seqs == -1 else seqs
        if tokens is not None:
            out["max_num_batched_tokens"] = 2 * isl if tokens == -1 else tokens
        if graphs is not None:
            out["max_cudagraph_capture_size"] = graphs
        return out

    return policy


def _trt_dsr1_fp8_b200(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # DELAY_BATCHING at 1k/1k with CONC >= 64: batch_wait_timeout_iters 40, batch_wait_max_tokens_ratio 0.8
    out = _trt_dsr1_b200_tokens(isl, osl, conc, tp)
    if isl == 1024 and osl == 1024 and conc >= 64:
        out |= {"batch_wait_timeout_iters": 40, "batch_wait_max_tokens_ratio": 0.8}
    return out


def _trt_dsr1_fp8_b200_kv(isl: int, osl: int, conc: int, tp: int) -> dict[str, Any]:
    # KV_CACHE_FREE_MEM_FRACTION 0.8; 0.7 at 1k/8k with CONC >= 256; 0.75 at 8k/1k on TP 4
    if isl == 1024 and osl == 8192 and conc >= 256:
        return {"free_gpu_memory_fraction": 0.7}
    if isl == 8192 and osl == 1024 and tp == 4:
        return {"free_gpu_memory_fraction": 0.75}
    return {}


def _trt_dsr1_fp4_b200_piecewise(isl: int, osl: int, conc: int, tp: int, ep: int, max_num_tokens: int) -> int:
    # PIECEWISE_CUDA_GRAPHS at 1k/1k on TP 8 with EP_SIZE 8; capture_tokens (1 2 4 ... 128) and
    # $(seq 256 256 $MAX_NUM_TOKENS)
    if (isl, osl) == (1024, 1024) and tp == 8 and ep == 8:
        return max_num_tokens // 256 * 256
    return 0


def _trt_dsr1_fp8_b200_piecewise(isl: int, osl: int, conc: int, tp: int, ep: int, max_num_tokens: int) -> int:
    # PIECEWISE_CUDA_GRAPHS at 1k/1k and 8k/1k with CONC >= 64, at 1k/8k with 128 <= CONC < 256; capture_tokens
    # (1 2 4 ... 128) + $(seq 256 256 $MAX_NUM_TOKENS), and $MAX_NUM_TOKENS itself when not a multiple of 256
    on = ((isl, osl) in ((1024, 1024), (8192, 1024)) and conc >= 64) or (
        (isl, osl) == (1024, 8192) and 128 <= conc < 256
    )
    return max_num_tokens if on else 0


def _trt_dsr1_fp4_b200_moe(isl: int, osl: int, conc: int, tp: int, dp: bool) -> str:
    # MOE_BACKEND="TRTLLM"; "CUTLASS" with DP_ATTENTION
    return "cutlass" if dp else "trtllm_gen"


def _trt_dsr1_fp8_b200_moe(isl: int, osl: int, conc: int, tp: int, dp: bool) -> str:
    # MOE_BACKEND="TRTLLM"; "DEEPGEMM" at 1k/8k with CONC >= 256
    return "deepgemm" if (isl, osl) == (1024, 8192) and conc >= 256 else "trtllm_gen"


# Before 17d5e204f (2025-11-03) the DeepSeek TensorRT-LLM scripts chose EP_SIZE, DP_ATTENTION and MOE_BACKEND
# themselves (e06929c70, the scripts InferenceX ran on 2025-11-02) and the file recorded neither (``Recipe.layout``);
# the 8192 floor of MAX_NUM_TOKENS came with 64af5a771 (2026-01-21); the B200 FP4 script's piecewise CUDA graphs with
# 6eecc0e66 (2026-02-03), the B200 FP8 script's, its batch waiting, its TRTLLM experts and its 0.75 / 0.7 fractions with
# ec7bafaae (2026-01-29): before, MOE_BACKEND="DEEPGEMM" and free_gpu_memory_fraction 0.8 for every point
_AFTER_1102 = "2025-11-03"  # the first day after the 2025-11-02 runs (main left e06929c70 with 17d5e204f that day)
_TRT_TOKENS_FLOOR = "2026-01-21"
_TRT_FP8_TRTLLM = "2026-01-29"  # ec7bafaae
_TRT_FP4_PIECEWISE = "2026-02-03"  # 6eecc0e66
_C_1101 = "e06929c701a09f1f354150682e3c96afab8ebe22"  # 2025-11-01: main until 2025-11-03, the 2025-11-02 runs'
_C_1215 = "f6a9d0b6adf1b0eb52c7b107b275f086bbb48100"  # 2025-12-15
_C_0121 = "64af5a771b8a14915d907e0dc8abb2af40d9eaf0"  # 2026-01-21: the 8192 floor


def _experts_over_tp(isl: int, osl: int, conc: int, tp: int) -> tuple[int, bool]:
    """A script's layout of EP = TP at every load, without attention DP (``Recipe.layout``)."""
    return tp, False


def _trt_dsr1_fp4_b200_layout(isl: int, osl: int, conc: int, tp: int) -> tuple[int, bool]:
    # e06929c70 dsr1_fp4_b200_trt_slurm.sh: EP_SIZE=$TP at TP 4 above 32 users, at TP 8 above 8 (1k/1k), 16 (1k/8k) or
    # 32 (8k/1k); DP_ATTENTION=true (and MOE_BACKEND=CUTLASS) from 256 users at 1k/1k and 1k/8k, above 32 at 8k/1k
    if tp not in (4, 8):
        return 1, False
    ep_above = 32 if tp == 4 else {(1024, 1024): 8, (1024, 8192): 16}.get((isl, osl), 32)
    dp = conc > 32 if (isl, osl) == (8192, 1024) else conc >= 256
    return (tp if conc > ep_above else 1), dp


def _trt_dsr1_fp8_b200_layout(isl: int, osl: int, conc: int, tp: int) -> tuple[int, bool]:
    # e06929c70 dsr1_fp8_b200_trt_slurm.sh: EP_SIZE=$TP; DP_ATTENTION=true above 32 users at 1k/1k, above 64 otherwise
    return tp, conc > (32 if (isl, osl) == (1024, 1024) else 64)


def _trt_dsr1_fp8_h200_layout(isl: int, osl: int, conc: int, tp: int) -> tuple[int, bool]:
    # e06929c70 dsr1_fp8_h200_trt_slurm.sh: EP_SIZE=$TP; DP_ATTENTION=true above 32 users at 8k/1k, above 64 otherwise
    return tp, conc > (32 if (isl, osl) == (8192, 1024) else 64)


def _dsr1_trt_b200_earlier(fp8: bool) -> tuple[tuple[str, Recipe], ...]:
    """The B200 DeepSeek TensorRT-LLM scripts as they stood before the recipes' commits (FP4: until piecewise CUDA
    graphs, 6eecc0e66, 2026-02-03; FP8: until ec7bafaae, 2026-01-29)."""
    script = f"benchmarks/dsr1_{'fp8' if fp8 else 'fp4'}_b200_trt_slurm.sh"
    moe = (lambda isl, osl, conc, tp, dp: "deepgemm") if fp8 else _trt_dsr1_fp4_b200_moe

    def version(
        commit: str,
        tokens: Callable[[int, int, int, int], dict[str, Any]],
        layout: Callable[[int, int, int, int], tuple[int, bool]] | None = None,
    ) -> Recipe:
        return Recipe(
            script,
            commit,
            tokens,
            _DSR1_TRT_KV,
            _DSR1_TRT_UNEXPRESSED,
            moe_kernel=moe,
            dp_attention_policy=_DSR1_TRT_DP,
            layout=layout,
        )

    layout = _trt_dsr1_fp8_b200_layout if fp8 else _trt_dsr1_fp4_b200_layout
    return (
        (_AFTER_1102, version(_C_1101, _trt_dsr1_h200_tokens, layout)),
        (_TRT_TOKENS_FLOOR, version(_C_1215, _trt_dsr1_h200_tokens)),
        (_TRT_FP8_TRTLLM if fp8 else _TRT_FP4_PIECEWISE, version(_C_0121, _trt_dsr1_b200_tokens)),
    )


_GPTOSS_TRT_H200 = Recipe(
    "benchmarks/gptoss_fp4_h200_trt_slurm.sh",
    _C_1215,
    lambda isl, osl, conc, tp: {"max_num_tokens": 20000, "max_batch_size": conc, "enable_chunked_prefill": False},
    {"free_gpu_memory_fraction": 0.85},  # kv_cache_config dtype: auto
    "CUDA graphs to CONC",
    moe_kernel=lambda isl, osl, conc, tp, dp: "triton_kernels",  # moe_config: backend: TRITON (matmul_ogs)
)
_DSR1_TRT_B200 = Recipe(
    "",
    "",
    _trt_dsr1_b200_tokens,
    _DSR1_TRT_KV,
    _DSR1_TRT_UNEXPRESSED,
    moe_kernel=_trt_dsr1_fp4_b200_moe,
    dp_attention_policy=_DSR1_TRT_DP,
    piecewise_max_tokens=_trt_dsr1_fp4_b200_piecewise,
    earlier=_dsr1_trt_b200_earlier(fp8=False),
)
_DSR1_TRT_FP8_B200 = Recipe(
    "",
    "",
    _trt_dsr1_fp8_b200,
    _DSR1_TRT_KV,
    _DSR1_TRT_UNEXPRESSED,
    kv_cache_for=_trt_dsr1_fp8_b200_kv,
    moe_kernel=_trt_dsr1_fp8_b200_moe,
    dp_attention_policy=_DSR1_TRT_DP,
    piecewise_max_tokens=_trt_dsr1_fp8_b200_piecewise,
    earlier=_dsr1_trt_b200_earlier(fp8=True),
)
# free_gpu_memory_fraction: 0.75 for every point; MOE_BACKEND="CUTLASS"
_DSR1_TRT_FP8_H200 = Recipe(
    "",
    "",
    _trt_dsr1_h200_tokens,
    _FP8_KV | {"free_gpu_memory_fraction": 0.75},
    _DSR1_TRT_UNEXPRESSED,
    moe_kernel=lambda isl, osl, conc, tp, dp: "cutlass",
    dp_attention_policy=_DSR1_TRT_DP,
)
_DSR1_TRT_FP8_H200 = replace(
    _DSR1_TRT_FP8_H200,
    earlier=(
        (
            _AFTER_1102,
            replace(
                _DSR1_TRT_FP8_H200,
                script="benchmarks/dsr1_fp8_h200_trt_slurm.sh",
                commit=_C_1101,
                layout=_trt_dsr1_fp8_h200_layout,
            ),
        ),
    ),
)
# --mem-fraction-static 0.85; 0.82, or 0.95 at TP 4; 0.82 and no --kv-cache-dtype (auto) on H200
_SGL_FP4 = Recipe("", "", _sglang_dsr1_fp4_blackwell, _FP8_KV | {"mem_fraction_static": 0.85})
# benchmarks/dsr1_fp4_b200_docker.sh as of 4b860b78e (2025-10-01; its B200 points of 2025-11-02 and of the 2025-11-10
# midnight run, before d8fe8f73e that evening) passed --enable-ep-moe, which SGLang then mapped to ep_size = tp_size
# (server_args.py __post_init__ in the 0.5.3rc0 wheel), where the file records ep 1; its other flags are these
_SGL_FP4_B200_EARLIER = (
    (
        "2025-11-11",
        replace(
            _SGL_FP4,
            script="benchmarks/dsr1_fp4_b200_docker.sh",
            commit="4b860b78e34f2860d4a6cacadf65f7b7b93a0da9",
            unexpressed="the 2025-11-02 runs served nvidia/DeepSeek-R1-0528-FP4, the later ones its -V2",
            layout=_experts_over_tp,
        ),
    ),
)
_SGL_FP8 = Recipe(
    "",
    "",
    _sglang_dsr1_fp8_blackwell,
    _FP8_KV,
    kv_cache_for=lambda isl, osl, conc, tp: {"mem_fraction_static": 0.95 if tp == 4 else 0.82},
)
_SGL_H200 = Recipe("", "", _sglang_dsr1_fp8_h200, {"mem_fraction_static": 0.82})

# (engine, model, precision, GPU) -> the launch script InferenceX ran, read in the public repository
# SemiAnalysisAI/InferenceX at the commit named (the last on main at or before the group's latest
# measurement; a group measured over months may have run earlier versions for its older points).
# Keyed by the run's model: the database dump's DeepSeek-V3 rows are DeepSeek-R1's runs (``SAME_RUN_MODELS``), of
# InferenceX's dsr1_* scripts, read at the latest measurement of both names' rows.
RECIPES: dict[tuple[str, str, str, str], Recipe] = {
    # TensorRT-LLM, Llama-3.1-70B: trtllm-serve --max_num_tokens 16384, kv_cache_config dtype fp8,
    # enable_block_reuse false; no --max_batch_size (TensorRT-LLM's 2048, the policy's default)
    ("trtllm", "meta-llama/Llama-3.1-70B", "fp8", "b200_sxm"): _with(
        _70B_TRT, "benchmarks/70b_fp8_b200_trt_slurm.sh", _C_70B
    ),
    ("trtllm", "meta-llama/Llama-3.1-70B", "fp4", "b200_sxm"): _with(
        _70B_TRT, "benchmarks/70b_fp4_b200_trt_slurm.sh", _C_70B
    ),
    ("trtllm", "meta-llama/Llama-3.1-70B", "fp8", "h200_sxm"): _with(
        _70B_TRT, "benchmarks/70b_fp8_h200_trt_slurm.sh", _C_70B
    ),
    # TensorRT-LLM, gpt-oss-120b: --max_num_tokens 20000 (MAX_NUM_TOKENS=20000), free_gpu_memory_fraction 0.85
    ("trtllm", "openai/gpt-oss-120b", "fp4", "b200_sxm"): Recipe(
        "benchmarks/gptoss_fp4_b200_trt.sh",
        "d7dbd045b23447f2fef1fb3fe44d392c33e32679",  # 2026-02-05
        lambda isl, osl, conc, tp: {"max_num_tokens": 20000, "max_batch_size": 512, "enable_chunked_prefill": False},
        _FP8_KV | {"free_gpu_memory_fraction": 0.85},
        "CUDA graphs to CONC",
        moe_kernel=lambda isl, osl, conc, tp, dp: "trtllm_gen",  # MOE_BACKEND="TRTLLM"
        # with DP_ATTENTION=true: attention_dp_config {enable_balance: true} (TensorRT-LLM's defaults for the rest)
        dp_attention_policy={"attention_dp_config": {"enable_balance": True}},
    ),
    ("trtllm", "openai/gpt-oss-120b", "fp4", "h200_sxm"): replace(
        _GPTOSS_TRT_H200,
        # at e06929c70 (the points of 2025-11-02) the launch line passed --ep_size=$TP, which the file does not record
        earlier=((_AFTER_1102, replace(_GPTOSS_TRT_H200, commit=_C_1101, layout=_experts_over_tp)),),
    ),
    # TensorRT-LLM, DeepSeek-R1: MAX_NUM_TOKENS from CONC and ISL, kv fp8, no --max_batch_size
    ("trtllm", "deepseek-ai/DeepSeek-R1", "fp4", "b200_sxm"): _with(
        _DSR1_TRT_B200, "benchmarks/dsr1_fp4_b200_trt.sh", _C_DSR1_TRT_FP4
    ),
    ("trtllm", "deepseek-ai/DeepSeek-R1", "fp8", "b200_sxm"): _with(
        _DSR1_TRT_FP8_B200, "benchmarks/dsr1_fp8_b200_trt.sh", _C_DSR1_TRT_FP8
    ),
    ("trtllm", "deepseek-ai/DeepSeek-R1", "fp8", "h200_sxm"): _with(
        _DSR1_TRT_FP8_H200, "benchmarks/dsr1_fp8_h200_trt_slurm.sh", _C_DSR1_TRT_H200
    ),
    # SGLang, DeepSeek-R1 (its points of 2026-03-25 in the database dump are kept although run 337 also ran
    # dsr1-fp8-b200-sglang-mtp that day: their configuration ids, cfg87 and cfg271, come before the first MTP
    # configuration's, runs_a_plain_configuration)
    ("sglang", "deepseek-ai/DeepSeek-R1", "fp4", "b200_sxm"): replace(
        _with(_SGL_FP4, "benchmarks/single_node/dsr1_fp4_b200.sh", _C_SGLANG_0325), earlier=_SGL_FP4_B200_EARLIER
    ),
    ("sglang", "deepseek-ai/DeepSeek-R1", "fp8", "b200_sxm"): _with(
        _SGL_FP8, "benchmarks/single_node/dsr1_fp8_b200.sh", _C_SGLANG_0325
    ),
    ("sglang", "deepseek-ai/DeepSeek-R1", "fp8", "h200_sxm"): _with(
        _SGL_H200, "benchmarks/single_node/dsr1_fp8_h200.sh", _C_SGLANG_0325
    ),
    ("sglang", "deepseek-ai/DeepSeek-R1", "fp4", "b300_sxm"): _with(
        _SGL_FP4, "benchmarks/single_node/dsr1_fp4_b300.sh", _C_SGLANG_0417
    ),
    ("sglang", "deepseek-ai/DeepSeek-R1", "fp8", "b300_sxm"): _with(
        _SGL_FP8, "benchmarks/single_node/dsr1_fp8_b300.sh", _C_SGLANG_0417
    ),
    # SGLang, GLM-5
    ("sglang", "zhipuai/GLM-5", "fp8", "b200_sxm"): Recipe(
        "benchmarks/single_node/glm5_fp8_b200.sh",
        "35d4bb3679f44e759921b47e72e68e890fd6b689",  # 2026-03-20
        lambda isl, osl, conc, tp: {
            "max_running_requests": conc,
            "chunked_prefill_size": 32768,
            "max_prefill_tokens": 32768,
        },
        _FP8_KV | {"mem_fraction_static": 0.85},
    ),
    ("sglang", "zhipuai/GLM-5", "fp4", "b200_sxm"): Recipe(
        # first version on main (2026-04-02), four days after the points' 2026-03-29 run
        "benchmarks/single_node/glm5_fp4_b200.sh",
        "800f57aaf7c3e739fd7f5da938a6f1055565458e",
        lambda isl, osl, conc, tp: {"max_running_requests": conc, "chunked_prefill_size": 131072},
        {"mem_fraction_static": 0.80},  # no --kv-cache-dtype (auto): the checkpoint's
        checkpoint="nvidia/GLM-5-NVFP4",  # its hf_quant_config.json's kv_cache_quant_algo: FP8
    ),
    ("sglang", "zhipuai/GLM-5", "fp8", "h200_sxm"): Recipe(
        # only --tp-size and --mem-fraction-static: SGLang's defaults for the rest
        "benchmarks/single_node/glm5_fp8_h200.sh",
        "ebb48d4bce45f1ee9e41ec0684dc2d1282fed798",  # 2026-03-19
        lambda isl, osl, conc, tp: {},
        {"mem_fraction_static": 0.85},  # no --kv-cache-dtype (auto)
    ),
    # SGLang, Qwen3.5-397B-A17B (the hybrid Gated DeltaNet model): --disable-radix-cache everywhere; the FP8 and FP4
    # scripts pass --kv-cache-dtype fp8_e4m3 and --mamba-ssm-dtype bfloat16, the BF16 ones neither (auto, and the
    # config's float32 state)
    # the script read at the last commit on or before the points' run (bf16 B200: 2026-02-19 for a run of 02-20; FP8
    # B200: 2026-03-23, the points of 03-03 ran efd49e50b, whose flags servesim reads are the same, those of 03-20 the
    # MTP configuration (MTP_ONLY_DAYS); FP4 B200: the run's day, 04-08; B300: 04-17 for runs of 04-18)
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "bf16", "b200_sxm"): _qwen35(
        "qwen3.5_bf16_b200.sh", "9dc87a68c19c17bc0bd367e2ed72d3f9f95ed951", 0.82, fp8=False
    ),
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "fp4", "b200_sxm"): _qwen35(
        "qwen3.5_fp4_b200.sh", "48d35c480fb21b5892e01e5bf670695d7d601ce9", 0.85, fp8=True
    ),
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "fp8", "b200_sxm"): _qwen35(
        "qwen3.5_fp8_b200.sh", "6a5dad463efe03fca04526048d0027a47f7e20be", 0.82, fp8=True
    ),
    # B300: on 04-17 and 04-18 a -mtp configuration ran in the same image and search space as each plain one
    # (28752f613, 071f849cb, b76876ade); the points are kept as the plain runs, which each day's run order (the plain
    # push's run id directly before the next plain push's) suggests, an inference the history cannot settle
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "bf16", "b300_sxm"): _qwen35(
        "qwen3.5_bf16_b300.sh", "32274d6c16830f8e1d7d9bcfa4a2d0c2838771e4", 0.82, fp8=False
    ),
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "fp4", "b300_sxm"): _qwen35(
        "qwen3.5_fp4_b300.sh", "8acbd08b7865ddcedabc885d14714a080653ddcb", 0.8, fp8=True
    ),
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "fp8", "b300_sxm"): Recipe(
        # --max-running-requests CONC, --chunked-prefill-size and --max-prefill-tokens 16384,
        # --scheduler-recv-interval 10 at every CONC
        "benchmarks/single_node/qwen3.5_fp8_b300.sh",
        "c0f62a2efa7bf22eed72f66f4f4ff2aaf84fd250",  # 2026-04-17, the points' day
        lambda isl, osl, conc, tp: {
            "max_running_requests": conc,
            "chunked_prefill_size": 16384,
            "max_prefill_tokens": 16384,
            "scheduler_recv_interval": 10,
        },
        _QWEN35_FP8 | {"mem_fraction_static": 0.8},
        _QWEN35_UNEXPRESSED,
    ),
    ("sglang", "Qwen/Qwen3.5-397B-A17B", "fp8", "h200_sxm"): Recipe(
        # --max-running-requests 128 --chunked-prefill-size 16384 (max-prefill-tokens SGLang's 16384); no
        # --scheduler-recv-interval (SGLang's 1)
        "benchmarks/single_node/qwen3.5_fp8_h200.sh",
        "f65d6b4b1e0eb7744b9987ede6b1d11735f6dcf2",  # 2026-03-04, the points' day
        lambda isl, osl, conc, tp: {"max_running_requests": 128, "chunked_prefill_size": 16384},
        _QWEN35_FP8 | {"mem_fraction_static": 0.8},
        _QWEN35_UNEXPRESSED,
    ),
    # vLLM, Llama-3.1-70B: max-num-batched-tokens 8192, kv-cache-dtype fp8, --gpu-memory-utilization 0.9
    ("vllm", "meta-llama/Llama-3.1-70B", "fp8", "b200_sxm"): Recipe(
        "benchmarks/70b_fp8_b200_docker.sh", _C_70B, _vllm(512, 8192), _FP8_KV | {"gpu_memory_utilization": 0.9}
    ),
    ("vllm", "meta-llama/Llama-3.1-70B", "fp4", "b200_sxm"): Recipe(
        "benchmarks/70b_fp4_b200_docker.sh", _C_70B, _vllm(512, 8192), _FP8_KV | {"gpu_memory_utilization": 0.9}
    ),
    ("vllm", "meta-llama/Llama-3.1-70B", "fp8", "h100_sxm"): Recipe(
        "benchmarks/70b_fp8_h100_slurm.sh", _C_70B, _vllm(-1, 8192), _FP8_KV | {"gpu_memory_utilization": 0.9}
    ),
    ("vllm", "meta-llama/Llama-3.1-70B", "fp8", "h200_sxm"): Recipe(
        "benchmarks/70b_fp8_h200_slurm.sh", _C_70B, _vllm(-1, 8192), _FP8_KV | {"gpu_memory_utilization": 0.9}
    ),
    # vLLM, gpt-oss-120b
    ("vllm", "openai/gpt-oss-120b", "fp4", "b200_sxm"): Recipe(
        "benchmarks/single_node/gptoss_fp4_b200.sh",
        "8944a358cce877d43064e35b1301c62c17f502f4",  # 2026-02-25
        _vllm(512, 8192, 2048),
        _FP8_KV | {"gpu_memory_utilization": 0.9},
        "fuse_allreduce_rms compilation pass",
        # export VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1: the experts run W4A8 (FlashInfer's TRT-LLM MoE)
        quantization="mxfp4_mxfp8",
        earlier=(
            (
                # kv-cache-dtype: fp8 came into the script's config.yaml with 25506e87c ("Upgrade vLLM to v0.11.2"),
                # pushed 2025-12-05 21:49 UTC, after that day's 00:00 UTC nightly run: the first day to run it is
                # 12-06. Before, benchmarks/gptoss_fp4_b200_docker.sh at e06929c70 (2025-11-01) left it auto, with the
                # same budget, --max-num-seqs 512, async scheduling and VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
                "2025-12-06",
                Recipe(
                    "benchmarks/gptoss_fp4_b200_docker.sh",
                    _C_1101,
                    _vllm(512, 8192, 2048),
                    {"gpu_memory_utilization": 0.9},  # no kv-cache-dtype (auto)
                    "fi_allreduce_fusion and attn_fusion compilation passes",
                    quantization="mxfp4_mxfp8",
                ),
            ),
        ),
    ),
    ("vllm", "openai/gpt-oss-120b", "fp4", "h100_sxm"): Recipe(
        "benchmarks/single_node/gptoss_fp4_h100.sh",
        "79a42e20a8559784641ca2279994c75c0608dc39",  # 2026-03-27
        _vllm(-1, 8192, 2048),
        {"gpu_memory_utilization": 0.9},  # no kv-cache-dtype (auto)
        # export VLLM_MXFP4_USE_MARLIN=1: Marlin's W4A16 MoE (vLLM's MXFP4 oracle takes it when set), timed at
        # gpt-oss's shape on RTX PRO 6000 and L40S only (simulator/cost/silicon/borrow.py carries it over)
        moe_kernel=lambda isl, osl, conc, tp, dp: "marlin",
        # its points of 2025-11-02 ran vLLM 0.10.2 and e06929c70's script; those of 2025-12-05 (no image recorded;
        # the configuration's then was v0.11.0, whose MXFP4 oracle was not read) and 2025-12-08 (v0.11.2) the same
        # flags (4e135fd3f). Those December points are all at 512 users, which main's search space never held then
        # (conc-end 64): runs from outside the scheduled sweep, whose settings are inferred from main's script
        earlier=(
            (
                _AFTER_1102,
                _gptoss_hopper_triton("benchmarks/gptoss_fp4_h100_docker.sh", _C_1101),
            ),
            (
                _GPTOSS_BEFORE_MARLIN,
                _gptoss_hopper_triton(
                    "benchmarks/gptoss_fp4_h100_docker.sh",
                    "4e135fd3f054cebcbfd1f6e4b384f7ef3a705be8",  # 2025-12-08
                ),
            ),
        ),
    ),
    ("vllm", "openai/gpt-oss-120b", "fp4", "h200_sxm"): Recipe(
        "benchmarks/single_node/gptoss_fp4_h200.sh",
        "79a42e20a8559784641ca2279994c75c0608dc39",  # 2026-03-27
        _vllm(-1, 8192, 2048),
        {"gpu_memory_utilization": 0.9},  # no kv-cache-dtype (auto)
        # export VLLM_MXFP4_USE_MARLIN=1: Marlin's W4A16 MoE (vLLM's MXFP4 oracle takes it when set), timed at
        # gpt-oss's shape on RTX PRO 6000 and L40S only (simulator/cost/silicon/borrow.py carries it over)
        moe_kernel=lambda isl, osl, conc, tp, dp: "marlin",
        # its points of 2025-11-02 ran vLLM 0.10.2 and this script of the day before
        earlier=((_GPTOSS_BEFORE_MARLIN, _gptoss_hopper_triton("benchmarks/gptoss_fp4_h200_slurm.sh", _C_1101)),),
    ),
    # vLLM, MiniMax-M2.5: Blackwell --max-num-batched-tokens $((ISL * 2)), no --max-num-seqs (vLLM's default)
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp4", "b200_sxm"): Recipe(
        "benchmarks/single_node/minimaxm2.5_fp4_b200.sh",
        "8c3eb5b86e065ad3db33e25de61019c08505e4fd",  # 2026-04-22
        _vllm(None, -1, 2048),
        _FP8_KV | {"gpu_memory_utilization": 0.9},
        "--stream-interval 20",
        # .github/configs/nvidia-master.yaml at that commit: {tp: 2, ep: 2, dp-attn: true} at 1k/1k CONC 256-1024,
        # the points of cfg707; cfg706 (tp 2, ep 2 at 1k/1k CONC 128 and 8k/1k CONC 128-512) without
        dp_attention_configs=frozenset({"cfg707"}),
    ),
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp4", "b300_sxm"): Recipe(
        "benchmarks/single_node/minimaxm2.5_fp4_b300.sh",
        "77b259a5e4343f568643463719554681fbf4f577",  # 2026-04-21
        _vllm(None, -1, 2048),
        _FP8_KV | {"gpu_memory_utilization": 0.9},
        "--stream-interval 20",
        # nvidia-master.yaml at that commit: {tp: 2, ep: 2, dp-attn: true} at 1k/1k CONC 256-2048 and 8k/1k CONC
        # 512, the points of cfg727; cfg726 (tp 2, ep 2 at CONC 128-512) without
        dp_attention_configs=frozenset({"cfg727"}),
    ),
    # vLLM, Kimi-K2.5 NVFP4 on B200: --tensor-parallel-size=$TP and no --enable-expert-parallel on either day (the
    # file records the configuration's ep: 4 of 2026-03-27, which the script never read; 2cbaec340 "fix bogus ep"
    # reset it on 2026-04-14), --max-num-seqs $CONC, --gpu-memory-utilization 0.90, no prefix caching, the
    # fuse_allreduce_rms pass; from 6c3acebfa (2026-04-20 14:22 UTC, before that day's run) --kv-cache-dtype fp8,
    # --max-cudagraph-capture-size 2048, --max-num-batched-tokens 2 x ISL and --stream-interval 20
    ("vllm", "moonshotai/Kimi-K2.5", "fp4", "b200_sxm"): Recipe(
        "benchmarks/single_node/kimik2.5_fp4_b200.sh",
        "6c3acebfad91f32ea6b9233afbc6013db2f1f6b5",  # 2026-04-20
        _vllm(-1, -1, 2048),
        _FP8_KV | {"gpu_memory_utilization": 0.9},
        "fuse_allreduce_rms compilation pass; --stream-interval 20",
        tensor_parallel_only=True,
        earlier=(
            (
                "2026-04-20",
                Recipe(
                    "benchmarks/single_node/kimik2.5_fp4_b200.sh",
                    "79a42e20a8559784641ca2279994c75c0608dc39",  # 2026-03-27
                    _vllm(-1, None),
                    {"gpu_memory_utilization": 0.9},  # no kv-cache-dtype (auto): the checkpoint's
                    "fuse_allreduce_rms compilation pass",
                    tensor_parallel_only=True,
                    checkpoint="nvidia/Kimi-K2.5-NVFP4",  # its config.json's kv_cache_scheme: 8-bit float
                ),
            ),
        ),
    ),
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "b200_sxm"): Recipe(
        "benchmarks/single_node/minimaxm2.5_fp8_b200.sh",
        "8c3eb5b86e065ad3db33e25de61019c08505e4fd",  # 2026-04-22
        _vllm(None, -1, 2048),
        _FP8_KV | {"gpu_memory_utilization": 0.9, "block_size": 32},
        "--stream-interval 20",
        earlier=(
            (
                # until bddbf4031 (2026-04-03) the script (0f78cf4eb, run 2026-03-28, vllm/vllm-openai:v0.17.0-cu130)
                # tested `[ "$EP_SIZE" -ge 1 ]` (--enable-expert-parallel for every point), passed
                # --gpu-memory-utilization 0.95, no --kv-cache-dtype and no --max-num-batched-tokens, and exported
                # VLLM_USE_FLASHINFER_MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0: vLLM's FP8 MoE oracle (oracle/fp8.py
                # select_fp8_moe_backend, read in 0.16.0) then drops the FlashInfer and DeepGEMM experts, and without
                # vLLM's own CUTLASS (allow_vllm_cutlass=False in fp8.py) takes Triton's
                "2026-04-03",
                Recipe(
                    "benchmarks/single_node/minimaxm2.5_fp8_b200.sh",
                    "0f78cf4eba558e05d0d2ba6bdbfd3b6c9f427a07",  # 2026-03-28 02:17 UTC
                    _vllm(None, None),
                    {"gpu_memory_utilization": 0.95, "block_size": 32},  # no kv-cache-dtype (auto)
                    expert_parallel=True,
                    moe_kernel=lambda isl, osl, conc, tp, dp: "triton",
                ),
            ),
        ),
    ),
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "b300_sxm"): Recipe(
        "benchmarks/single_node/minimaxm2.5_fp8_b300.sh",
        "77b259a5e4343f568643463719554681fbf4f577",  # 2026-04-21
        _vllm(None, -1, 2048),
        _FP8_KV | {"gpu_memory_utilization": 0.9, "block_size": 32},
        "--stream-interval 20",
    ),
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "h200_sxm"): Recipe(
        "benchmarks/single_node/minimaxm2.5_fp8_h200.sh",
        "626932a110a2348591e314eddb782f7a0dee104c",  # 2026-03-28
        _vllm(None, None),
        {"gpu_memory_utilization": 0.95},  # no kv-cache-dtype (auto)
        # `if [ "$EP_SIZE" -ge 1 ]; then EP=" --enable-expert-parallel"`: on for every point (the H100, B200 and
        # B300 scripts test -gt 1), so the experts run EP = TP whatever EP_SIZE the point records
        expert_parallel=True,
        earlier=(
            (
                # --enable-expert-parallel came in with 5e2c705d3 (2026-03-13, "enable ep") and
                # --no-enable-prefix-caching with 0f78cf4eb (2026-03-28 02:17 UTC; no point was measured between):
                # the script of 2026-03-01 (a36346339, image vllm/vllm-openai:v0.16.0) ran TP alone with vLLM's prefix
                # caching (on by default), and vLLM 0.16.0's FP8 MoE oracle (oracle/fp8.py select_fp8_moe_backend)
                # takes FlashInfer's CUTLASS experts first on SM90 for block-scaled FP8
                # (FlashInferExperts._supports_quant_scheme: kFp8Static128BlockSym weights on capability 9.0), before
                # DeepGEMM and Triton. The points of 2026-03-28 ran 0f78cf4eb (most likely: run 344 follows the push
                # of 03-27 22:21) or 1d5cae141 (prefix caching on), which the history cannot tell apart; they keep
                # this recipe's setting, off
                "2026-03-13",
                Recipe(
                    "benchmarks/single_node/minimaxm2.5_fp8_h200.sh",
                    "a36346339a98176d70fadb857b5021f6cf36901f",  # 2026-03-01
                    _vllm(None, None),
                    {"gpu_memory_utilization": 0.95, "prefix_caching": True},  # no kv-cache-dtype (auto)
                    moe_kernel=lambda isl, osl, conc, tp, dp: "cutlass",
                ),
            ),
        ),
    ),
    ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "h100_sxm"): Recipe(
        "benchmarks/single_node/minimaxm2.5_fp8_h100.sh",
        "626932a110a2348591e314eddb782f7a0dee104c",  # 2026-03-28
        _vllm(256, None),
        {"gpu_memory_utilization": 0.9},  # no kv-cache-dtype (auto)
    ),
}


def _config_id(point_id: str) -> str:
    """The db-dump configuration of a point id (``..._c256_cfg707`` -> ``cfg707``; "" for other sources)."""
    last = point_id.rsplit("_", 1)[-1]
    return last if last.startswith("cfg") else ""


def _declared_kv_dtype(checkpoint: str) -> dict[str, str]:
    """The KV-cache dtype the engine's ``auto`` takes for ``checkpoint``: fp8 where it declares an FP8 cache, else
    nothing (the weights' dtype)."""
    return {"dtype": "fp8"} if resolve_model(checkpoint).kv_cache_bytes == 1 else {}


def _vllm_parallelism(row: pd.Series, recipe: Recipe | None) -> dict[str, int]:
    """The layout a vLLM single-node script launched for ``row``.

    The scripts start ``vllm serve --tensor-parallel-size=$TP`` with ``--enable-expert-parallel`` when EP_SIZE > 1 (or,
    on the MiniMax-M2.5 FP4 Blackwell scripts with DP_ATTENTION=true, ``--tensor-parallel-size=1
    --data-parallel-size=$TP --enable-expert-parallel``): TP GPUs either way, experts over all of them (vLLM's EP size
    is TP x DP). The file records such an expert-parallel point as attention_dp_size TP and moe_ep_size TP x TP with
    batch_size CONC / TP, whether or not attention ran data-parallel (MiniMax-M2.5 on H100: tp 4, dp 4, ep 16, where
    InferenceX's configuration is ``{tp: 4, ep: 4}`` on 4 GPUs), so the layout is read from the script, the TP and
    the configuration, not from those columns.
    """
    tp, pp = _int(row, "tp_size"), _int(row, "pp_size")
    if recipe is not None and recipe.tensor_parallel_only:
        return _parallelism(tp, 1, pp)
    expert_parallel = (recipe is not None and recipe.expert_parallel) or _int(row, "moe_ep_size") > 1
    if recipe is not None and _config_id(str(row["id"])) in recipe.dp_attention_configs:
        return _parallelism(1, tp, pp, dp_attention=tp)
    return _parallelism(tp, tp if expert_parallel else 1, pp)


def _recorded_squared_parallelism(row: pd.Series) -> dict[str, int]:
    """The layout an SGLang or TensorRT-LLM script launched for an InferenceX point ``row``.

    The scripts launch ``--tp $TP --ep-size $EP_SIZE`` (SGLang) or ``--tp_size=$TP --ep_size=$EP_SIZE`` (TensorRT-LLM,
    with ``enable_attention_dp: $DP_ATTENTION``): TP GPUs, experts over EP of them, and with attention DP one
    attention rank per GPU. InferenceX's file records a point of ``{tp: T, ep: E}`` as moe_tp_size T and
    moe_ep_size E, but its tp_size (attention_dp_size, with attention DP) as T x E: DeepSeek-R1 ``..._tp8_ep8`` has
    tp_size 64, which read as recorded would run on 64 GPUs. Where E is 1 the columns agree.
    """
    tp, ep, pp = _int(row, "moe_tp_size"), _int(row, "moe_ep_size"), _int(row, "pp_size")
    dp = _attention_dp(row.get("attention_dp_size"), row.get("batch_size"), concurrency_of(row))
    recorded = dp if dp > 1 else _int(row, "tp_size")
    if recorded != tp * ep:
        raise PointRefused(
            f"{'attention DP' if dp > 1 else 'tp_size'} {recorded} is not moe_tp x moe_ep ({tp} x {ep}) as InferenceX "
            "records its points"
        )
    if dp > 1:
        return _parallelism(1, ep, pp, dp_attention=tp)
    return _parallelism(tp, ep, pp)


def _script_layout(
    row: pd.Series, layout: Callable[[int, int, int, int], tuple[int, bool]], concurrency: int
) -> dict[str, int]:
    """The layout an SGLang or TensorRT-LLM script chose itself for point ``row`` (``Recipe.layout``) on the TP the
    point records (with EP 1 and no attention DP recorded: the file's defaults for a layout it did not record)."""
    tp, pp = _int(row, "tp_size"), _int(row, "pp_size")
    recorded = _attention_dp(row.get("attention_dp_size"), row.get("batch_size"), concurrency)
    if _int(row, "moe_ep_size") != 1 or _int(row, "moe_tp_size") != tp or recorded > 1:
        raise PointRefused(
            f"records a layout (tp_size {tp}, moe_ep {_int(row, 'moe_ep_size')}) its script chose itself"
        )
    ep, dp = layout(int(row["isl"]), int(row["osl"]), concurrency, tp)
    if dp:
        return _parallelism(1, ep, pp, dp_attention=tp)
    return _parallelism(tp, ep, pp)


def recipe_for(row: pd.Series) -> Recipe | None:
    """The InferenceX launch script's settings for an agg point of source ``inferencex`` as they stood on the day it
    was measured (``Recipe.earlier``); None otherwise."""
    if source_of(str(row["silicon_data_source"])) != INFERENCEX or row["mode"] != "agg":
        return None
    precision = row.get("precision")
    if precision is None or pd.isna(precision):
        precision = row.get("gemm_quant_mode")
        precision = "bf16" if precision is None or pd.isna(precision) else str(precision)
    recipe = RECIPES.get((str(row["backend"]), run_model(row), str(precision), str(row["system"])))
    if recipe is None:
        return None
    return recipe.on(measured_day(row))


def recipe_label(row: pd.Series) -> str:
    """The script (path@commit) a point's settings come from, or why the generic settings were used."""
    if source_of(str(row["silicon_data_source"])) != INFERENCEX:
        return "generic (gap-analysis)"
    if row["mode"] != "agg":
        return "generic (disaggregated)"
    recipe = recipe_for(row)
    return recipe.label if recipe is not None else "recipe unknown"


def scenario_for(row: pd.Series, seed: int = 0) -> dict[str, Any]:
    """The servesim scenario (a plain dict, as a user writes it) of measured point ``row``.

    Raises PointRefused with a one-line reason for a point servesim cannot express.
    """
    check_not_mtp(str(row["silicon_data_source"]))
    check_not_mtp_sweep(row)
    check_client_tokenizer(row)
    check_not_disaggregated(row)
    check_warmed_up(row)
    quantization = _quantization(row)
    recipe = recipe_for(row)
    model = str(row["model_path"])
    scenario: dict[str, Any] = {
        "seed": seed,
        "model": MODEL_ALIASES.get(model, model),
        "hardware": hardware_preset(str(row["system"])),
    }
    if quantization is not None:
        scenario["quantization"] = quantization
    kv_cache: dict[str, Any] = {"prefix_caching": False}
    if row["mode"] == "disagg":
        scenario["groups"] = _disaggregated_groups(row)
        concurrency = concurrency_of(row)
    elif row["mode"] == "agg":
        concurrency = concurrency_of(row)
        inferencex = source_of(str(row["silicon_data_source"])) == INFERENCEX
        if inferencex and row["backend"] == "vllm":
            scenario["parallelism"] = _vllm_parallelism(row, recipe)
        elif inferencex and recipe is not None and recipe.layout is not None:
            scenario["parallelism"] = _script_layout(row, recipe.layout, concurrency)
        elif inferencex:
            scenario["parallelism"] = _recorded_squared_parallelism(row)
        else:
            dp = _attention_dp(row.get("attention_dp_size"), row.get("batch_size"), concurrency)
            tp, ep, pp = _int(row, "tp_size"), _int(row, "moe_ep_size"), _int(row, "pp_size")
            scenario["parallelism"] = _parallelism(tp, ep, pp, dp)
    else:
        raise PointRefused(f"serving mode {row['mode']} not modelled")
    if recipe is None:
        scenario["policy"] = policy_for(str(row["backend"]), concurrency)
        if str(row.get("precision")) != "bf16":  # an FP8 KV cache for FP8 and FP4 runs
            kv_cache["dtype"] = "fp8"
    else:
        tp = _int(row, "tp_size")
        fields = recipe.policy(int(row["isl"]), int(row["osl"]), concurrency, tp)
        scenario["policy"] = {"kind": str(row["backend"]), **fields}
        kv_cache.update(recipe.kv_cache)
        if recipe.kv_cache_for is not None:
            kv_cache.update(recipe.kv_cache_for(int(row["isl"]), int(row["osl"]), concurrency, tp))
        if "dtype" not in kv_cache and recipe.checkpoint is not None:
            kv_cache |= _declared_kv_dtype(recipe.checkpoint)
        if recipe.quantization is not None:
            scenario["quantization"] = recipe.quantization
        dp = scenario.get("parallelism", {}).get("dp_attention", 1) > 1
        if dp:
            scenario["policy"] |= recipe.dp_attention_policy
        if recipe.piecewise_max_tokens is not None:
            # the script's TP and EP_SIZE: the point's moe_tp and moe_ep (_recorded_squared_parallelism)
            captured = recipe.piecewise_max_tokens(
                int(row["isl"]),
                int(row["osl"]),
                concurrency,
                _int(row, "moe_tp_size"),
                _int(row, "moe_ep_size"),
                scenario["policy"]["max_num_tokens"],
            )
            if captured:
                scenario["policy"]["piecewise_cuda_graph_max_tokens"] = captured
        kernel = (
            None
            if recipe.moe_kernel is None
            else recipe.moe_kernel(int(row["isl"]), int(row["osl"]), concurrency, tp, dp)
        )
        if kernel is not None:
            scenario["cost_model"] = {"kind": "silicon", "moe_kernel": kernel}
    hybrid = any(name in model for name in _GATED_DELTANET_MODELS)
    if hybrid and row["backend"] == "sglang" and sglang_gdn_unfused(image_of(str(row["silicon_data_source"]))):
        cost_model = scenario.setdefault("cost_model", {"kind": "silicon"})
        cost_model["roofline"] = {"gdn_input_projections": "separate"}
    if row["mode"] == "disagg" and row["backend"] == "vllm":
        # vLLM's disaggregated prefill workers run --enforce-eager: every vLLM recipe InferenceX's disaggregated
        # points were launched with (NVIDIA/srt-slurm recipes/vllm/kimi-k2.5/{1k1k,8k1k}/disagg-gb200-*.yaml, branch
        # sa-submission-q2-2026 at 8294e64e, 2026-04-06, the day before the Kimi-K2.5 GB200 points were measured;
        # likewise the copies InferenceX tracks under benchmarks/multi_node/srt-slurm-recipes/vllm/kimi-k2.5-fp4/)
        # gives the prefill worker enforce-eager: true and the decode worker CUDA graphs (FULL_DECODE_ONLY)
        for group in scenario["groups"]:
            if group["role"] == "prefill":
                group["policy"] = scenario["policy"] | {"enforce_eager": True}
    scenario["kv_cache"] = kv_cache
    if row["mode"] == "disagg" and row["backend"] == "trtllm":
        _trt_disaggregated_recipe(scenario, str(row["id"]))
    if row["mode"] == "disagg" and row["backend"] == "sglang":
        _sglang_disaggregated_recipe(scenario, str(row["id"]))
    scenario["workload"] = workload_for(int(row["isl"]), int(row["osl"]), concurrency, prompts_per_user(row))
    return scenario


def _trt_disaggregated_recipe(scenario: dict[str, Any], point_id: str) -> None:
    """Each server's settings from the recipe the point ran (benchmarks/inferencex_trt_disagg.py), where known: the
    generation servers' max_batch_size (their seats), each server's MoE kernel family, scheduler limits and KV
    memory fraction, the context servers' overlap scheduler, off (``disable_overlap_scheduler: true``): a server
    without it runs its CPU work between its steps and plans each step after the last (``cpu_overlap`` false), and
    the all-to-all a server's environment forces on its attention-DP MoE (``all_to_all_kernel``), and the slots of
    its expert load balancer (``eplb_slots``)."""
    seats = DECODE_SEATS.get(point_id)
    slots = EXPERT_SLOTS.get(point_id, (None, None))
    kernels = MOE_KERNELS.get(point_id, (None, None))
    servers = TRT_SERVERS.get(point_id)
    forced = ALL_TO_ALL.get(point_id, (None, None))
    for group in scenario["groups"]:
        decode = group["role"] == "decode"
        side = int(decode)  # each map's (context, generation) pair
        policy = dict(group.get("policy", scenario["policy"]))
        cost_model: dict[str, Any] = {}
        if decode and seats is not None:
            policy["max_batch_size"] = seats
        kernel = kernels[side]
        if kernel is not None:
            cost_model["moe_kernel"] = kernel
        balancer = slots[side]
        if balancer is not None:
            cost_model["eplb_slots"] = balancer
        roofline: dict[str, Any] = {}
        if servers is not None:
            fields, kv_cache, overlap = servers.role(group["role"])
            policy |= fields
            if kv_cache:
                group["kv_cache"] = scenario["kv_cache"] | kv_cache
            if not overlap:
                roofline["cpu_overlap"] = False
        a2a = forced[side]
        layout = group["parallelism"]
        if a2a is not None and layout.get("dp_attention", 1) > 1 and layout.get("ep", 1) == layout.get("tp", 1):
            # ConfigurableMoE's forced method runs only with attention DP over more than one rank and the experts'
            # TP 1 (communication_factory.create_strategy gathers otherwise)
            roofline |= {"expert_all_to_all": True, "all_to_all_kernel": a2a}
        if roofline:
            cost_model["roofline"] = roofline
        if policy != scenario["policy"]:
            group["policy"] = policy
        if cost_model:
            group["cost_model"] = {"kind": "silicon"} | cost_model


SGLANG_DEEPEP_LAYOUT = {"moe_dense_tp_size": 1, "enable_dp_lm_head": True}
"""What every DeepEP worker of InferenceX's SGLang recipes sets beside ``moe-a2a-backend: deepep``:
``moe-dense-tp-size: 1`` and ``enable-dp-lm-head: true`` (each rank runs the dense layers' MLP and the LM head on its
own tokens), in the copies at SemiAnalysisAI/InferenceX 80d98084f (``benchmarks/multi_node/srt-slurm-recipes/``,
gb200 and gb300, fp4 and fp8) and in NVIDIA/srt-slurm's recipes of 2025-12-20 (d83c9ee) and 2026-02-04 (f7d28c3f)."""


SGLANG_FP4_DP_PREFILL = {"moe_runner_backend": "flashinfer_cutlass"}
"""What every GB200 and GB300 FP4 recipe whose prefill worker runs attention DP gives it: ``moe-runner-backend:
flashinfer_cutlass`` (with ``dp-size`` = ``ep-size`` 4: SGLang then all-gathers each rank's FP4-quantized tokens for the
routed experts), in the copies at SemiAnalysisAI/InferenceX 80d98084f and NVIDIA/srt-slurm's of 2025-12-20 (d83c9ee)
and 2026-02-04 (f7d28c3f); their TP prefill workers run ``flashinfer_trtllm``."""


def _sglang_disaggregated_recipe(scenario: dict[str, Any], point_id: str) -> None:
    """Each server's scheduler limits and memory fraction from the recipe the point ran
    (benchmarks/inferencex_sglang_disagg.py), where known, a DeepEP server's layout flags (``SGLANG_DEEPEP_LAYOUT``)
    and an FP4 attention-DP prefill server's MoE runner (``SGLANG_FP4_DP_PREFILL``); a group's kv_cache replaces the
    scenario's whole."""
    servers = SGLANG_SERVERS.get(point_id)
    fp4 = scenario.get("quantization") == "nvfp4" and scenario.get("hardware") in SGLANG_DEEPEP_SYSTEMS
    for group in scenario["groups"]:
        policy = dict(group.get("policy", scenario["policy"]))
        if group.get("cost_model", {}).get("roofline", {}).get("expert_all_to_all"):
            policy |= SGLANG_DEEPEP_LAYOUT
        dp = group["parallelism"].get("dp_attention", 1)
        if fp4 and group["role"] == "prefill" and dp > 1 and group["parallelism"].get("ep", 1) == dp:
            policy |= SGLANG_FP4_DP_PREFILL
        settings = servers[group["role"]] if servers is not None else {"policy": {}, "kv_cache": {}}
        policy |= settings["policy"]
        if policy != scenario["policy"]:
            group["policy"] = policy
        if settings["kv_cache"]:
            group["kv_cache"] = scenario["kv_cache"] | settings["kv_cache"]


def one_line(exc: BaseException, limit: int = 240) -> str:
    """The first line of ``exc``'s message (its type name when empty, install paths cut), at most ``limit`` long."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = _INSTALL_PREFIX.sub("", text)  # .../site-packages/aiconfigurator_core/x -> aiconfigurator_core/x
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_wave_mask(requests: pd.DataFrame) -> pd.Series | None:
    """Which requests are a closed loop's first wave (the ones its users send first, waiting on no other); None where
    no request waits on another (not a closed loop)."""
    if "parent" not in requests or not (requests["parent"] >= 0).any():
        return None
    return requests["parent"] < 0


def first_wave_ttft(requests: pd.DataFrame) -> tuple[float, float]:
    """A closed loop's first wave: the mean TTFT, ms, of the requests its users send first (all at once, before any
    has an answer), and their share of the sum of every request's TTFT, which the mean TTFT divides by the count.

    InferenceX's 10 x CONC requests make the first wave a tenth of them, but at hundreds of users its prompts queue
    behind one another for seconds: it can make up most of the mean TTFT, which then measures how fast the engine
    works off a burst of prompts more than the TTFT of a steady state. NaN for both where no request waits on another
    (not a closed loop) or none of the first wave got a first token.
    """
    first_wave = first_wave_mask(requests)
    if first_wave is None:
        return float("nan"), float("nan")
    ttft_s = requests["ttft_s"]
    first = ttft_s[first_wave].dropna()
    total_s = float(ttft_s.sum())
    if first.empty or total_s <= 0:
        return float("nan"), float("nan")
    return float(first.mean()) * 1e3, float(first.sum()) / total_s


class PointTimeout(Exception):
    """A point's simulation ran past its wall-time limit."""


_ALARM = {"armed": False}
ALARM_REPEAT_S = 0.5
"""After the limit the alarm repeats this often until the point stops: an exception raised while a gc callback or
a finalizer runs is swallowed by Python (hypothesis installs such a callback), so one alarm alone can be lost."""


def _on_alarm(signum: int, frame: Any) -> None:
    if _ALARM["armed"]:
        raise PointTimeout


def run_point(item: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], float | None]) -> dict[str, Any]:
    """Simulate one point's scenario: its mean TTFT and TPOT in ms, or the one-line reason it was refused.

    A process-pool task (module level, plain data in and out); an exception of the validation,
    the build or the run is caught and returned as the refusal, so one point never stops the others.
    A third item, seconds, bounds the point's wall time (SIGALRM, in a worker's main thread): a point
    still running then is recorded as timed out (the 10 x CONC requests of the largest disaggregated
    attention-DP points take minutes, their ranks stepping in lockstep without the decode fast path).
    """
    import signal
    import threading

    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    point_id, scenario, *rest = item
    timeout_s = rest[0] if rest else None
    start_s = time.perf_counter()
    alarm = timeout_s is not None and threading.current_thread() is threading.main_thread()
    if alarm:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        _ALARM["armed"] = True
        signal.setitimer(signal.ITIMER_REAL, timeout_s, ALARM_REPEAT_S)
    try:
        run = build(validate_scenario(scenario), record_steps=False).run()
        summary = run.summary
        out = {"id": point_id, "pred_ttft_ms": summary["mean_ttft_ms"], "pred_tpot_ms": summary["mean_tpot_ms"]}
        out["pred_ttft_first_wave_ms"], out["first_wave_ttft_share"] = first_wave_ttft(run.requests)
    except PointTimeout:
        _ALARM["armed"] = False
        out = {"id": point_id, "refused": f"not simulated within the {timeout_s:g} s wall-time limit"}
    except Exception as exc:
        _ALARM["armed"] = False
        out = {"id": point_id, "refused": one_line(exc)}
    finally:
        _ALARM["armed"] = False
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    out["wall_s"] = time.perf_counter() - start_s
    return out
