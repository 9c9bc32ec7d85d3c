"""How ``SGLANG_SERVERS`` of ``benchmarks/inferencex_sglang_disagg.py`` was derived: the scheduler and memory flags
of each SGLang disaggregated point's prefill and decode servers, from the recipe InferenceX launched it with.

InferenceX's ``.github/configs/nvidia-master.yaml`` names, for each load of a ``*-dynamo-sglang`` configuration,
the srt-slurm recipe it ran (``CONFIG_FILE=recipes/gb200-fp8/8k1k/mid-curve.yaml``); InferenceX keeps copies of
those recipes under ``benchmarks/multi_node/srt-slurm-recipes/`` (from 80d98084f, 2026-04-28: the copy read is the
last on or before the day the point was measured, else the first). For every such point this finds the entry
without speculative decoding whose lengths, concurrency and worker counts are the point's (a point two entries
share, e.g. GB300 FP4 1k/1k ``mid_curve`` and ``max_tpt`` at the same loads and workers, is left out), and reads
``backend.sglang_config.{prefill,decode}``: ``chunked-prefill-size``, ``max-prefill-tokens``,
``max-running-requests`` (the sglang policy's fields: servesim divides the chunk and the requests by the
attention-DP size as SGLang does, ``simulator/cluster/dp_attention.py``) and ``mem-fraction-static``
(``kv_cache.mem_fraction_static``). Prints the table and each point's evidence.

Needs a git checkout of SemiAnalysisAI/InferenceX (not a dependency: run by hand):
``python -m benchmarks.inferencex_sglang_disagg_derive --inferencex PATH``.
"""

from __future__ import annotations

import argparse
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
from benchmarks.inferencex_trt_disagg_derive import GPU, config_files_for

RECIPES = "benchmarks/multi_node/srt-slurm-recipes/"
DEEPSEEK = ["deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"]
POLICY_FLAGS = {
    "chunked-prefill-size": "chunked_prefill_size",
    "max-prefill-tokens": "max_prefill_tokens",
    "max-running-requests": "max_running_requests",
}
KV_FLAGS = {"mem-fraction-static": "mem_fraction_static"}


def server_settings(recipe_text: str) -> dict[str, dict[str, dict[str, Any]]]:
    """``{role: {"policy": {...}, "kv_cache": {...}}}`` of an srt-slurm SGLang recipe's prefill and decode servers."""
    config = ((yaml.safe_load(recipe_text) or {}).get("backend") or {}).get("sglang_config") or {}
    out = {}
    for role in ("prefill", "decode"):
        flags = config.get(role) or {}
        out[role] = {
            "policy": {name: int(flags[flag]) for flag, name in POLICY_FLAGS.items() if flags.get(flag) is not None},
            "kv_cache": {name: float(flags[flag]) for flag, name in KV_FLAGS.items() if flags.get(flag) is not None},
        }
    return out


def derive(inferencex: Path) -> pd.DataFrame:
    rows = []
    for row, day_s, commit, configs in disaggregated_points_with_configs(inferencex, "sglang", DEEPSEEK):
        name = f"dsr1-{row['precision']}-{GPU[str(row['system'])]}-dynamo-sglang"
        files = config_files_for(configs.get(name), row)
        # InferenceX's copy of the recipe (its CONFIG_FILE is a path in srt-slurm)
        copy = RECIPES + files[0].removeprefix("recipes/") if len(files) == 1 else None
        found = file_on(inferencex, copy, day_s) if copy else None
        rows.append(
            {
                "id": row["id"],
                "day": day_s,
                "configs": f"{name}@{commit[:9]}",
                "config_files": " ".join(files),
                "copy": found[0][:9] if found else "",
                "servers": server_settings(found[1]) if found else None,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inferencex", required=True, type=Path, help="a git checkout of SemiAnalysisAI/InferenceX")
    args = parser.parse_args()
    require_checkout(parser, "--inferencex", args.inferencex, CONFIGS)
    table = derive(args.inferencex)
    print_table(table.drop(columns="servers"))
    known = table[table["servers"].notna()]
    print_mapping("SGLANG_SERVERS", ((r.id, repr(r.servers)) for r in known.itertuples()))
    print(f"# {len(known)} of {len(table)} points")


if __name__ == "__main__":
    main()
