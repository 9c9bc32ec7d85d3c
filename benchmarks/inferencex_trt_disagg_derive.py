"""How ``DECODE_SEATS`` and ``MOE_KERNELS`` of ``benchmarks/inferencex_trt_disagg.py`` were derived: the
``max_batch_size`` of each TensorRT-LLM disaggregated point's generation servers and the MoE backend of its
context and generation servers, from the recipe InferenceX launched it with.

The file of measured points records a disaggregated point's worker counts and parallelism, and a
``decode_batch_size`` that is the concurrency over the generation servers, not what they were launched with.
InferenceX's ``.github/configs/nvidia-master.yaml`` names, for each load of a ``*-dynamo-trt`` configuration
(ISL, OSL, concurrency list, prefill and decode worker counts), the srt-slurm recipe it ran
(``CONFIG_FILE=recipes/...``, e.g. ``ctx1_gen3_tep16_batch1_eplb0_mtp0.yaml``). For every such point this reads
nvidia-master.yaml at the last change on or before the day the point was measured, finds the entry without
speculative decoding whose lengths, concurrency and worker counts are the point's, and reads the recipe's
``backend.trtllm_config.decode.max_batch_size`` from NVIDIA/srt-slurm (the last version of that path on or before
the day, else its first version); where srt-slurm does not hold the path, the recipe name's ``batchN``. It reads the
``moe_config.backend`` of the recipe's ``prefill`` and ``decode`` servers too, as the kernel family servesim prices
(``SiliconParams.moe_kernel``: TRTLLM trtllm_gen, CUTLASS cutlass, DEEPGEMM deepgemm; CUTEDSL and WIDEEP have no
family of their own in the tables, and the fastest measured kernel is kept), and each server's scheduler limits, KV
memory fraction and overlap scheduler (``server_flags``, ``TRT_SERVERS``), and the all-to-all their environment
forces (``all_to_all``, ``ALL_TO_ALL``), and the slots of their expert load balancer (``expert_slots``,
``EXPERT_SLOTS``: ``moe_config.load_balancer.num_slots``). Prints the
table and each point's evidence; points with no recipe (the configurations of 2025, launched without a
CONFIG_FILE) are listed and left out.

Needs git checkouts of SemiAnalysisAI/InferenceX and NVIDIA/srt-slurm (not dependencies: run by hand):
``python -m benchmarks.inferencex_trt_disagg_derive --inferencex PATH --srt-slurm PATH``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from benchmarks.inferencex_mtp_sweeps import (
    CONFIGS,
    disaggregated_points_with_configs,
    file_on,
    print_mapping,
    print_table,
    require_checkout,
)
from benchmarks.inferencex_points import concurrency_of, image_of
from benchmarks.inferencex_trt_disagg import TrtServers

MODEL_PREFIX = {
    "deepseek-ai/DeepSeek-R1": "dsr1",
    "deepseek-ai/DeepSeek-V3": "dsr1",
    "moonshotai/Kimi-K2.5": "kimik2.5",
}
GPU = {
    "b200_sxm": "b200",
    "h200_sxm": "h200",
    "b300_sxm": "b300",
    "h100_sxm": "h100",
    "gb200": "gb200",
    "gb300": "gb300",
}
BATCH_IN_NAME = re.compile(r"_batch(\d+)_")


def recipe_name_batch(config_file: str) -> int | None:
    """The ``batchN`` of a recipe's file name (the generation servers' max_batch_size it was named for)."""
    found = BATCH_IN_NAME.search(Path(config_file).name)
    return int(found.group(1)) if found else None


def _backend(recipe_text: str) -> dict[str, Any]:
    """An srt-slurm recipe's ``backend`` section ({} where it has none)."""
    return (yaml.safe_load(recipe_text) or {}).get("backend") or {}


def _server(backend: dict[str, Any], role: str) -> dict[str, Any]:
    """``trtllm_config.<role>`` of a recipe's ``backend`` (role: "prefill" or "decode"; {} where it is not set)."""
    return (backend.get("trtllm_config") or {}).get(role) or {}


def _moe_config(backend: dict[str, Any], role: str) -> dict[str, Any]:
    """The ``moe_config`` of a recipe's ``role`` server ({} where it is not set)."""
    return _server(backend, role).get("moe_config") or {}


def decode_max_batch_size(recipe_text: str) -> int | None:
    """``backend.trtllm_config.decode.max_batch_size`` of an srt-slurm recipe, None where it sets none."""
    value = _server(_backend(recipe_text), "decode").get("max_batch_size")
    return int(value) if value is not None else None


MOE_BACKENDS = {"TRTLLM": "trtllm_gen", "CUTLASS": "cutlass", "DEEPGEMM": "deepgemm"}
"""TensorRT-LLM's ``moe_config.backend`` -> the kernel family of the measured tables (``SiliconParams.moe_kernel``)."""


def moe_kernels(recipe_text: str) -> tuple[str | None, str | None]:
    """The MoE kernel family of the recipe's (context, generation) servers, None where it is not a measured one."""
    backend = _backend(recipe_text)

    def family(role: str) -> str | None:
        name = _moe_config(backend, role).get("backend")
        return MOE_BACKENDS.get(str(name).upper()) if name else None

    return family("prefill"), family("decode")


COMM_METHODS = {"NVLINK_TWO_SIDED": "nvlink_two_sided", "NVLINK_ONE_SIDED": "nvlink_one_sided"}
"""TensorRT-LLM's ``TRTLLM_FORCE_COMM_METHOD`` values servesim prices, as ``all_to_all_kernel``."""


def server_flags(recipe_text: str) -> TrtServers:
    """The context (prefill) and generation (decode) servers' settings of an srt-slurm TensorRT-LLM recipe
    (``backend.trtllm_config.{prefill,decode}``): ``max_batch_size`` (the context servers'; the generation servers'
    is ``DECODE_SEATS``), ``max_num_tokens``, ``enable_chunked_prefill``, ``kv_cache_config.free_gpu_memory_fraction``
    and whether the overlap scheduler runs (``disable_overlap_scheduler`` unset or false)."""
    backend = _backend(recipe_text)
    prefill, decode = _server(backend, "prefill"), _server(backend, "decode")

    def number(server: dict[str, Any], key: str, kind: type) -> Any:
        value = server.get(key)
        return kind(value) if value is not None else None

    def fraction(server: dict[str, Any]) -> float | None:
        return number(server.get("kv_cache_config") or {}, "free_gpu_memory_fraction", float)

    return TrtServers(
        number(prefill, "max_batch_size", int),
        number(prefill, "max_num_tokens", int),
        number(prefill, "enable_chunked_prefill", bool),
        fraction(prefill),
        not prefill.get("disable_overlap_scheduler"),
        number(decode, "max_num_tokens", int),
        fraction(decode),
        not decode.get("disable_overlap_scheduler"),
    )


CONFIGURABLE_CUTEDSL_IMAGES = ("nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1",)
"""Dynamo's TensorRT-LLM images whose release builds a CUTEDSL MoE as ConfigurableMoE whatever the environment: 0.8.1
(0.8.1.post2) ships TensorRT-LLM 1.2.0rc6, after NVIDIA/TensorRT-LLM#9592 (2025-12-06) made ``create_moe`` wrap
``CuteDslFusedMoE`` so (``if enable_configurable_moe or moe_cls == CuteDslFusedMoE``)."""


def all_to_all(recipe_text: str, image: str | None = None) -> tuple[str | None, str | None]:
    """The all-to-all the context and generation servers' MoE runs, as ``all_to_all_kernel`` (None: the gather).

    TensorRT-LLM's ConfigurableMoE picks it in ``fused_moe/communication/communication_factory.py``: the method
    ``TRTLLM_FORCE_COMM_METHOD`` names where the server's environment (``backend.{prefill,decode}_environment``) sets
    it with ``ENABLE_CONFIGURABLE_MOE`` "1"; else, for a CUTEDSL server in ``image`` of
    ``CONFIGURABLE_CUTEDSL_IMAGES``, the factory's first choice, NVLinkOneSided (its order: NVLinkOneSided,
    NVLinkTwoSided, DeepEP, DeepEP low-latency, the gather). Both only with attention DP over more than one rank and
    the experts' TP 1, which the benchmark checks on the point's layout."""
    backend = _backend(recipe_text)
    configurable = image is not None and image.startswith(CONFIGURABLE_CUTEDSL_IMAGES)

    def chosen(role: str) -> str | None:
        env = backend.get(f"{role}_environment") or {}
        if str(env.get("ENABLE_CONFIGURABLE_MOE")) == "1" and "TRTLLM_FORCE_COMM_METHOD" in env:
            return COMM_METHODS.get(str(env["TRTLLM_FORCE_COMM_METHOD"]))
        moe = str(_moe_config(backend, role).get("backend", "")).upper()
        return "nvlink_one_sided" if configurable and moe == "CUTEDSL" else None

    return chosen("prefill"), chosen("decode")


def expert_slots(recipe_text: str) -> tuple[int | None, int | None]:
    """The context and generation servers' expert load balancer slots (``moe_config.load_balancer.num_slots``; None:
    no balancer), as ``SiliconParams.eplb_slots``."""
    backend = _backend(recipe_text)

    def slots(role: str) -> int | None:
        balancer = _moe_config(backend, role).get("load_balancer")
        found = balancer.get("num_slots") if isinstance(balancer, dict) else None
        return int(found) if found is not None else None

    return slots("prefill"), slots("decode")


def config_files_for(config: dict[str, Any] | None, row: pd.Series) -> list[str]:
    """The CONFIG_FILEs of the search-space entries without speculative decoding whose lengths, concurrency and
    worker counts are point ``row``'s."""
    conc = concurrency_of(row)
    found = []
    for lengths in (config or {}).get("seq-len-configs", []):
        if (lengths["isl"], lengths["osl"]) != (int(row["isl"]), int(row["osl"])):
            continue
        for entry in lengths["search-space"]:
            if entry.get("spec-decoding", "none") != "none" or conc not in (entry.get("conc-list") or []):
                continue
            workers = (entry["prefill"]["num-worker"], entry["decode"]["num-worker"])
            if workers != (int(row["prefill_num_workers"]), int(row["decode_num_workers"])):
                continue
            for setting in entry["prefill"].get("additional-settings", []):
                if setting.startswith("CONFIG_FILE="):
                    found.append(setting.removeprefix("CONFIG_FILE="))
    return found


def config_file_for(config: dict[str, Any] | None, row: pd.Series) -> str | None:
    """The CONFIG_FILE of the first search-space entry without speculative decoding that ran point ``row``."""
    files = config_files_for(config, row)
    return files[0] if files else None


def derive(inferencex: Path, srt_slurm: Path) -> pd.DataFrame:
    rows = []
    for row, day_s, commit, configs in disaggregated_points_with_configs(inferencex, "trtllm", list(MODEL_PREFIX)):
        name = f"{MODEL_PREFIX[str(row['model_path'])]}-{row['precision']}-{GPU[str(row['system'])]}-dynamo-trt"
        config_file = config_file_for(configs.get(name), row)
        named = recipe_name_batch(config_file) if config_file else None
        found = file_on(srt_slurm, config_file, day_s) if config_file else None
        recipe = decode_max_batch_size(found[1]) if found else None
        prefill_moe, decode_moe = moe_kernels(found[1]) if found else (None, None)
        servers = server_flags(found[1]) if found else None
        image = image_of(str(row["silicon_data_source"]))
        prefill_a2a, decode_a2a = all_to_all(found[1], image) if found else (None, None)
        prefill_slots, decode_slots = expert_slots(found[1]) if found else (None, None)
        rows.append(
            {
                "id": row["id"],
                "day": day_s,
                "configs": f"{name}@{commit[:9]}",
                "config_file": config_file or "",
                "srt_slurm": found[0][:8] if found else "",
                "recipe_batch": recipe,
                "name_batch": named,
                "seats": recipe if recipe is not None else named,
                "prefill_moe": prefill_moe,
                "decode_moe": decode_moe,
                "servers": servers,
                "prefill_a2a": prefill_a2a,
                "decode_a2a": decode_a2a,
                "prefill_slots": prefill_slots,
                "decode_slots": decode_slots,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inferencex", required=True, type=Path, help="a git checkout of SemiAnalysisAI/InferenceX")
    parser.add_argument("--srt-slurm", required=True, type=Path, help="a git checkout of NVIDIA/srt-slurm")
    args = parser.parse_args()
    require_checkout(parser, "--inferencex", args.inferencex, CONFIGS)
    require_checkout(parser, "--srt-slurm", args.srt_slurm)
    table = derive(args.inferencex, args.srt_slurm)
    print_table(table.drop(columns="servers"))
    known = table[table["seats"].notna()]
    print_mapping("DECODE_SEATS", ((r.id, str(int(r.seats))) for r in known.itertuples()))

    def family(kernel: Any) -> str:
        return f'"{kernel}"' if pd.notna(kernel) else "None"

    kernels = table[table["prefill_moe"].notna() | table["decode_moe"].notna()]
    print_mapping(
        "MOE_KERNELS", ((r.id, f"({family(r.prefill_moe)}, {family(r.decode_moe)})") for r in kernels.itertuples())
    )
    servers = table[table["servers"].notna()]
    print_mapping(
        "TRT_SERVERS", ((r.id, f"TrtServers({', '.join(map(repr, r.servers))})") for r in servers.itertuples())
    )
    forced = table[table["prefill_a2a"].notna() | table["decode_a2a"].notna()]
    print_mapping(
        "ALL_TO_ALL", ((r.id, f"({family(r.prefill_a2a)}, {family(r.decode_a2a)})") for r in forced.itertuples())
    )
    balanced = table[table["prefill_slots"].notna() | table["decode_slots"].notna()]

    def count(slots: Any) -> str:
        return str(int(slots)) if pd.notna(slots) else "None"

    print_mapping(
        "EXPERT_SLOTS",
        ((r.id, f"({count(r.prefill_slots)}, {count(r.decode_slots)})") for r in balanced.itertuples()),
    )
    unknown = ", ".join(table.loc[table["seats"].isna(), "id"])
    print(f"# {len(known)} of {len(table)} points; without a recipe: {unknown}")


if __name__ == "__main__":
    main()
