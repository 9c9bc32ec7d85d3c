"""Which days of the InferenceX points ran a DeepSeek configuration with MTP as well: how ``MTP_SWEEP_DAYS`` of
``benchmarks/inferencex_points.py`` was derived.

InferenceX keeps each configuration's search space (sequence lengths, concurrencies, attention DP) in
``.github/configs/nvidia-master.yaml``, a plain configuration (``dsr1-fp8-h200-trt``) beside its MTP one
(``dsr1-fp8-h200-trt-mtp``, ``spec-decoding: mtp``), often in the same image. The file of measured points
records neither the configuration nor speculative decoding. For every aggregated DeepSeek-R1/V3 point under
TensorRT-LLM or SGLang this groups the points by (model, GPU, precision, engine, day measured) and reads the
configurations at the last change of nvidia-master.yaml on or before that day: a day with a load (ISL, OSL,
concurrency, attention DP) outside the plain configuration's search space and inside the MTP one's ran the MTP
configuration. Prints each group's verdict, loads outside the plain space, duplicate loads and least TPOT.

Needs a git checkout of SemiAnalysisAI/InferenceX (not a dependency: run by hand):
``python -m benchmarks.inferencex_mtp_sweeps --inferencex PATH``.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from benchmarks.inferencex_points import (
    INFERENCEX,
    MEASURED_DAY,
    concurrency_of,
    measured_day,
    read_points,
    source_of,
)

CONFIGS = ".github/configs/nvidia-master.yaml"
MODEL_PREFIX = {"deepseek-ai/DeepSeek-R1": "dsr1", "deepseek-ai/DeepSeek-V3": "dsr1"}
GPU = {"b200_sxm": "b200", "h200_sxm": "h200", "b300_sxm": "b300"}
ENGINE = {"trtllm": "trt", "sglang": "sglang"}
Load = tuple[int, int, int, bool]  # ISL, OSL, concurrency, attention DP


def git_out(repo: Path, *args: str, check: bool = False) -> str:
    """``git -C repo args``'s standard output ('' where it fails, unless ``check``)."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check).stdout


def require_checkout(parser: argparse.ArgumentParser, flag: str, repo: Path, path: str | None = None) -> None:
    """Exit through ``parser.error`` (status 2, one line) unless ``repo`` is a git checkout (holding ``path``)."""
    if not git_out(repo, "log", "-1", "--format=%H", *(("--", path) if path else ())).strip():
        held = f" with {path}" if path else ""
        parser.error(f"{flag} {repo}: not a git checkout{held}")


def file_on(repo: Path, path: str, day: str) -> tuple[str, str] | None:
    """(commit, text) of ``path`` in ``repo`` on any branch: its last version on or before ``day``, else its first;
    None where no commit holds it."""
    commit = git_out(repo, "log", "--all", "-1", f"--before={day}T23:59:59", "--format=%H", "--", path).strip()
    if not commit:
        versions = git_out(repo, "log", "--all", "--reverse", "--format=%H", "--", path).split()
        commit = versions[0] if versions else ""
    text = git_out(repo, "show", f"{commit}:{path}") if commit else ""
    return (commit, text) if text else None


def print_table(table: pd.DataFrame, max_colwidth: int = 90) -> None:
    """Print a derivation's evidence, every row and column."""
    with pd.option_context("display.width", 250, "display.max_colwidth", max_colwidth, "display.max_rows", None):
        print(table.to_string(index=False))


def print_mapping(name: str, entries: Iterator[tuple[str, str]]) -> None:
    """Print ``name = {...}`` with one ``"key": value,`` line an entry (``value`` as written), to paste into a
    benchmark's table module."""
    print(f"\n{name} = {{")
    for key, value in entries:
        print(f'    "{key}": {value},')
    print("}")


def configs_on(repo: Path, day: str) -> tuple[str, dict[str, Any] | None]:
    """The commit of the last change to nvidia-master.yaml on or before ``day`` and its configurations."""
    commit = git_out(repo, "log", "-1", f"--before={day}T23:59:59", "--format=%H", "--", CONFIGS, check=True).strip()
    if not commit:
        return "", None
    return commit, yaml.safe_load(git_out(repo, "show", f"{commit}:{CONFIGS}", check=True))


def disaggregated_points_with_configs(
    repo: Path, engine: str, models: list[str]
) -> Iterator[tuple[pd.Series, str, str, dict[str, Any]]]:
    """Each InferenceX disaggregated point of ``engine`` on ``models`` with worker counts, by id, with the day it
    was measured and the commit and configurations of nvidia-master.yaml on that day (read once a day)."""
    points = read_points()
    chosen = points[(points["engine"] == engine) & (points["mode"] == "disagg")]
    chosen = chosen[[source_of(str(s)) == INFERENCEX for s in chosen["silicon_data_source"]]]
    chosen = chosen[chosen["decode_num_workers"].notna() & chosen["model_path"].isin(models)]
    by_day: dict[str, tuple[str, dict[str, Any] | None]] = {}
    for _, row in chosen.sort_values("id").iterrows():
        day = measured_day(row)
        if day is None:
            continue
        if day not in by_day:
            by_day[day] = configs_on(repo, day)
        commit, configs = by_day[day]
        yield row, day, commit, configs or {}


def search_space(config: dict[str, Any] | None) -> set[Load] | None:
    """Every load a configuration's search space runs (concurrencies doubling from conc-start to conc-end)."""
    if config is None:
        return None
    loads = set()
    for lengths in config.get("seq-len-configs", []):
        for entry in lengths["search-space"]:
            conc = entry["conc-start"]
            while conc <= entry["conc-end"]:
                loads.add((lengths["isl"], lengths["osl"], conc, bool(entry.get("dp-attn", False))))
                conc *= 2
    return loads


def verdicts(repo: Path) -> pd.DataFrame:
    points = read_points()
    agg = points[points["engine"].isin(list(ENGINE)) & (points["mode"] == "agg")].copy()
    agg = agg[agg["model"].isin(list(MODEL_PREFIX)) & agg["system"].isin(list(GPU))]
    agg["day"] = agg["silicon_data_source"].str.extract(MEASURED_DAY.pattern)[0]
    agg["conc"] = [concurrency_of(row) for _, row in agg.iterrows()]
    agg["dp"] = agg["attention_dp_size"].fillna(1) > 1
    by_day: dict[str, tuple[str, dict[str, Any] | None]] = {}
    rows = []
    keys = ["model", "system", "precision", "engine", "day"]
    for (model, system, precision, engine, day), group in agg.groupby(keys):
        if day not in by_day:
            by_day[day] = configs_on(repo, day)
        commit, configs = by_day[day]
        name = f"{MODEL_PREFIX[model]}-{precision}-{GPU[system]}-{ENGINE[engine]}"
        plain = search_space((configs or {}).get(name))
        mtp = search_space((configs or {}).get(f"{name}-mtp"))
        loads = [(int(r.isl), int(r.osl), int(r.conc), bool(r.dp)) for r in group.itertuples()]
        outside = sorted({x for x in loads if plain is not None and x not in plain})
        if configs is None or plain is None:
            verdict = "configurations not kept then" if configs is None else f"no {name} then"
        elif not outside:
            verdict = "plain"
        elif mtp is not None and all(x in mtp for x in outside):
            verdict = "MTP ran"
        else:
            verdict = "outside both"
        rows.append(
            {
                "model": model,
                "system": system,
                "precision": precision,
                "engine": engine,
                "day": day,
                "points": len(group),
                "verdict": verdict,
                "commit": commit[:9],
                "outside_plain": " ".join(f"{i}/{o}@{c}{'dp' if dp else ''}" for i, o, c, dp in outside),
                "duplicate_loads": len(loads) - len(set(loads)),
                "least_tpot_ms": round(float(group["silicon_tpot_ms"].min()), 1),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inferencex", required=True, type=Path, help="a git checkout of SemiAnalysisAI/InferenceX")
    args = parser.parse_args()
    require_checkout(parser, "--inferencex", args.inferencex, CONFIGS)
    print_table(verdicts(args.inferencex), max_colwidth=120)


if __name__ == "__main__":
    main()
