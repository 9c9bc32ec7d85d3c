"""How ``SGLANG_RECIPES`` and ``SGLANG_RECIPE_OF`` of ``benchmarks/inferencex_sglang_disagg.py`` were derived: the
scheduler and memory flags of each SGLang disaggregated point's prefill and decode servers, from the recipe InferenceX
launched it with.

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

The points InferenceX measured before its GB200 SGLang runs moved to srtctl (FP4 2026-02-07, FP8 2026-02-09:
``inferencex_points.DYNAMO_CLIENTS``) name no recipe: they ran
Dynamo's SGLang ``slurm_jobs`` scripts, whose flags NVIDIA/srt-slurm published as recipes on 2025-12-20 (d83c9ee,
``recipies/gb200-{fp4,fp8}/{1k1k,8k1k}/``; e.g. the 8k/1k FP8 ``mid-curve-5p1d`` flags are those of Dynamo's
``scripts/gb200-fp8/disagg/8k1k-max-tpt.sh``). With ``--srt-slurm`` such a point takes the recipe of that folder, as
it stood on the point's day, whose prefill and decode worker counts and GPUs a worker (``tp-size``, else nodes x
GPUs a node over workers) are the point's and whose ``benchmark.concurrencies`` hold its concurrency, where exactly
one does.

Needs a git checkout of SemiAnalysisAI/InferenceX, and of NVIDIA/srt-slurm for the earlier points (not
dependencies: run by hand):
``python -m benchmarks.inferencex_sglang_disagg_derive --inferencex PATH [--srt-slurm PATH]``.
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
    git_out,
    print_mapping,
    print_table,
    require_checkout,
)
from benchmarks.inferencex_points import (
    DEEPSEEK_PATHS,
    PointRefused,
    concurrency_of,
    dynamo_client,
    scenario_for,
)
from benchmarks.inferencex_trt_disagg_derive import GPU, config_files_for

RECIPES = "benchmarks/multi_node/srt-slurm-recipes/"
DEEPSEEK = list(DEEPSEEK_PATHS)
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


EARLY_RECIPES = "recipies/"  # NVIDIA/srt-slurm's recipe folder as it was named in December 2025
LENGTHS = {(1024, 1024): "1k1k", (8192, 1024): "8k1k"}


def recipe_layout(recipe_text: str) -> tuple[int, int, int, int, set[int]] | None:
    """(prefill workers, GPUs a prefill worker, decode workers, GPUs a decode worker, concurrencies) of an
    srt-slurm recipe; None where it says too little."""
    recipe = yaml.safe_load(recipe_text) or {}
    resources, config = recipe.get("resources") or {}, (recipe.get("backend") or {}).get("sglang_config") or {}
    gpus_per_node = int(resources.get("gpus_per_node", 4))
    layout: list[int] = []
    for role in ("prefill", "decode"):
        workers, nodes = resources.get(f"{role}_workers"), resources.get(f"{role}_nodes")
        if not workers or not nodes:
            return None
        tp = (config.get(role) or {}).get("tp-size") or nodes * gpus_per_node // workers
        layout += [int(workers), int(tp)]
    concurrencies = str((recipe.get("benchmark") or {}).get("concurrencies") or "")
    return (*layout, {int(c) for c in concurrencies.split("x") if c.strip().isdigit()})  # type: ignore[return-value]


def early_recipe(srt_slurm: Path, row: pd.Series, day: str) -> tuple[str, str, str] | None:
    """(commit, path, text) of the one NVIDIA/srt-slurm recipe of the day that matches point ``row``'s layout and
    concurrency (module docstring), or None."""
    folder = LENGTHS.get((int(row["isl"]), int(row["osl"])))
    if folder is None:
        return None
    folder = f"{EARLY_RECIPES}gb200-{row['precision']}/{folder}/"
    commit = git_out(srt_slurm, "log", "--all", "-1", f"--before={day}T23:59:59", "--format=%H", "--", folder).strip()
    if not commit:
        return None
    try:
        prefill, decode = (g["parallelism"].get("tp", 1) for g in scenario_for(row)["groups"])
    except PointRefused:
        return None
    want = (int(row["prefill_num_workers"]), prefill, int(row["decode_num_workers"]), decode)
    matches = []
    for path in git_out(srt_slurm, "ls-tree", "--name-only", f"{commit}:{folder}").split():
        text = git_out(srt_slurm, "show", f"{commit}:{folder}{path}")
        layout = recipe_layout(text)
        if layout is not None and layout[:4] == want and concurrency_of(row) in layout[4]:
            matches.append((commit, folder + path, text))
    return matches[0] if len(matches) == 1 else None


def derive(inferencex: Path, srt_slurm: Path | None = None) -> pd.DataFrame:
    rows = []
    for row, day_s, commit, configs in disaggregated_points_with_configs(inferencex, "sglang", DEEPSEEK):
        name = f"dsr1-{row['precision']}-{GPU[str(row['system'])]}-dynamo-sglang"
        files = config_files_for(configs.get(name), row)
        # InferenceX's copy of the recipe (its CONFIG_FILE is a path in srt-slurm)
        copy = RECIPES + files[0].removeprefix("recipes/") if len(files) == 1 else None
        found = file_on(inferencex, copy, day_s) if copy else None
        # the recipe's key: the repository, commit and path read (under RECIPES, or EARLY_RECIPES)
        source = f"InferenceX@{found[0][:9]}:{copy.removeprefix(RECIPES)}" if found and copy else ""
        client = dynamo_client(row)
        if found is None and srt_slurm is not None and client is not None and day_s < client[0]:
            early = early_recipe(srt_slurm, row, day_s)
            if early is not None:
                found = (early[0], early[2])
                files, source = [early[1]], f"srt-slurm@{early[0][:8]}:{early[1].removeprefix(EARLY_RECIPES)}"
        rows.append(
            {
                "id": row["id"],
                "day": day_s,
                "configs": f"{name}@{commit[:9]}",
                "config_files": " ".join(files),
                "copy": source,
                "servers": server_settings(found[1]) if found else None,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inferencex", required=True, type=Path, help="a git checkout of SemiAnalysisAI/InferenceX")
    parser.add_argument("--srt-slurm", type=Path, help="a git checkout of NVIDIA/srt-slurm (the earlier points)")
    args = parser.parse_args()
    require_checkout(parser, "--inferencex", args.inferencex, CONFIGS)
    if args.srt_slurm is not None:
        require_checkout(parser, "--srt-slurm", args.srt_slurm)
    table = derive(args.inferencex, args.srt_slurm)
    print_table(table.drop(columns="servers"))
    known = table[table["servers"].notna()]
    recipes = dict(zip(known["copy"], known["servers"], strict=True))
    print_mapping("SGLANG_RECIPES", ((key, repr(servers)) for key, servers in sorted(recipes.items())))
    print_mapping("SGLANG_RECIPE_OF", ((r.id, repr(r.copy)) for r in known.itertuples()))
    print(f"# {len(known)} of {len(table)} points, {len(recipes)} recipes")


if __name__ == "__main__":
    main()
