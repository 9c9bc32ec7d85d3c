"""servesim's mean TTFT and TPOT against the serving points InferenceX and NVIDIA measured.

Reads aiconfigurator-core's ``silicon_sample.csv`` from the installed package (no copy is kept),
writes each sampled point as a servesim scenario (``benchmarks/inferencex_points.py`` says how:
InferenceX's client, the settings of the launch script InferenceX ran for the group where known),
simulates them on a local process pool (or Ray) and reports, per source (``inferencex``,
``gap-analysis``) and per group (source, model, GPU, engine, precision), the number of points and
the MAPE and bias (mean signed relative error, predicted / measured - 1) of mean TTFT and mean
TPOT, and the points refused by reason. It measures only: nothing of the model is fitted to it.

    python -m benchmarks.inferencex [--per-group 8 | --all] [--seed 0] [--source inferencex]
        [--engine vllm] [--model meta-llama/Llama-3.1-70B] [--system h200_sxm]
        [--workers N] [--ray] [--out runs/inferencex] [--point-timeout 300]
    python -m benchmarks.inferencex --explain POINT_ID [--seed 0]

Writes ``points.csv`` (one row per point), ``summary.md`` (the tables, also printed) and
``report.html`` (predicted against measured, plotly embedded: opens offline) to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

if __package__ in (None, ""):  # run as a script: python benchmarks/inferencex.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.inferencex_points import (
    GROUP_FIELDS,
    SAME_RUN_MODELS,
    PointRefused,
    kept_copy,
    one_line,
    read_points,
    recipe_label,
    run_point,
    scenario_for,
    select_points,
)
from simulator.planning.points.executors import make_executor

METRICS = ("ttft", "tpot")
# A point still simulating after this many wall seconds is recorded as timed out: the largest disaggregated
# attention-DP points (10 x CONC requests at CONC up to 12,000, 8k output tokens) take up to about two minutes each
# on one core, so every point of the default sample runs within it.
POINT_TIMEOUT_S = 300.0
POINT_COLUMNS = (
    ["id", *GROUP_FIELDS, "mode", "isl", "osl", "concurrency"]
    + [f"{kind}_{m}_ms" for m in METRICS for kind in ("measured", "pred")]
    + [f"rel_err_{m}" for m in METRICS]
    + ["pred_ttft_first_wave_ms", "first_wave_ttft_share"]
    + ["recipe", "refused", "wall_s"]
)


def write_scenarios(points: pd.DataFrame, seed: int) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """The (id, scenario) of every point servesim can express, and the refusal reason of every other."""
    scenarios, refused = [], {}
    for _, row in points.iterrows():
        try:
            scenarios.append((str(row["id"]), scenario_for(row, seed)))
        except PointRefused as exc:
            refused[str(row["id"])] = str(exc)
    return scenarios, refused


def derive_tables(scenarios: list[tuple[str, dict[str, Any]]]) -> None:
    """Build one scenario of each (GPU, engine) pair here first: the measured tables it reads are derived once per
    dependency version and cached (simulator/cost/silicon/tables.py), up to a minute a pair on a loaded machine,
    which is not the point's simulation and must not count against its wall-time limit."""
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    first: dict[tuple[str, str], dict[str, Any]] = {}
    for _, scenario in scenarios:
        first.setdefault((str(scenario.get("hardware")), str(scenario.get("policy", {}).get("kind"))), scenario)
    for done, ((gpu, engine), scenario) in enumerate(first.items(), start=1):
        print(f"tables [{done}/{len(first)}] {gpu} {engine}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):  # the point itself reports why it cannot run
            build(validate_scenario(scenario), record_steps=False)


def simulate(
    scenarios: list[tuple[str, dict[str, Any]]], workers: int, use_ray: bool, point_timeout_s: float | None = None
) -> dict[str, dict[str, Any]]:
    """Each scenario's run result by point id (``run_point``, at most ``point_timeout_s`` of wall time each),
    progress lines on stderr."""
    results: dict[str, dict[str, Any]] = {}
    if not scenarios:
        return results
    derive_tables(scenarios)
    executor = make_executor("ray" if use_ray else "local", min(workers, len(scenarios)) if not use_ray else workers)
    start_s = time.perf_counter()
    step = max(1, len(scenarios) // 50)
    try:
        items = [(pid, scenario, point_timeout_s) for pid, scenario in scenarios]
        for done, (_, result) in enumerate(executor.map_unordered(run_point, items), start=1):
            results[result["id"]] = result
            if done % step == 0 or done == len(scenarios):
                elapsed = time.perf_counter() - start_s
                print(f"[{done}/{len(scenarios)}] {elapsed:7.1f} s  last: {result['id']}", file=sys.stderr, flush=True)
    finally:
        executor.close()
    return results


def point_table(points: pd.DataFrame, results: dict[str, dict[str, Any]], refused: dict[str, str]) -> pd.DataFrame:
    """One row per point: group fields, measured and predicted TTFT/TPOT, relative errors or the refusal."""
    rows = []
    for _, p in points.iterrows():
        pid = str(p["id"])
        result = results.get(pid, {})
        row = {f: p[f] for f in ("id", *GROUP_FIELDS, "mode", "isl", "osl")}
        row["concurrency"] = result.get("concurrency", p.get("concurrency"))
        row["recipe"] = recipe_label(p)
        row["refused"] = refused.get(pid, result.get("refused"))
        row["wall_s"] = result.get("wall_s")
        row["pred_ttft_first_wave_ms"] = result.get("pred_ttft_first_wave_ms")
        row["first_wave_ttft_share"] = result.get("first_wave_ttft_share")
        for m in METRICS:
            measured = float(p[f"silicon_{m}_ms"])
            pred = result.get(f"pred_{m}_ms")
            row[f"measured_{m}_ms"] = measured
            row[f"pred_{m}_ms"] = pred
            row[f"rel_err_{m}"] = pred / measured - 1 if pred is not None and measured > 0 else None
        rows.append(row)
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


def error_table(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Points, MAPE and bias of mean TTFT and TPOT per ``by`` over the simulated points."""
    done = table[table["refused"].isna()].copy()
    if done.empty:
        return pd.DataFrame(columns=[*by, "points"])
    for m in METRICS:
        done[f"abs_{m}"] = done[f"rel_err_{m}"].abs()
    agg: dict[str, Any] = {"points": ("id", "size")}
    for m in METRICS:
        agg[f"{m}_mape"] = (f"abs_{m}", "mean")
        agg[f"{m}_bias"] = (f"rel_err_{m}", "mean")
    return done.groupby(by, dropna=False).agg(**agg).reset_index()


def first_wave_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per source and engine: the simulated points, and the mean and the largest share of the predicted mean TTFT
    that the closed loop's first wave makes up (``first_wave_ttft``)."""
    done = table[table["refused"].isna() & table["first_wave_ttft_share"].notna()]
    if done.empty:
        return pd.DataFrame(columns=["source", "engine", "points"])
    return (
        done.groupby(["source", "engine"])
        .agg(
            points=("id", "size"),
            first_wave_share_mean=("first_wave_ttft_share", "mean"),
            first_wave_share_max=("first_wave_ttft_share", "max"),
        )
        .reset_index()
    )


SHORT_PROMPT, LONG_PROMPT, PROMPT_TABLE_OUTPUT = 1024, 8192, 1024


def prompt_length_table(table: pd.DataFrame) -> pd.DataFrame:
    """Where a group's TTFT gap sits: per group and launch script (agg points with 1k outputs), at the fewest users
    with both 1k and 8k prompts among its simulated points, the median measured and predicted mean TTFT at each prompt
    length, the 8k-1k difference of each (what 7k more prompt tokens cost: the prompt's own work) as ``slope_ratio``
    (measured over predicted), and ``gap_1k_ms``, measured less predicted at 1k (what does not grow with the prompt:
    the request's way in, the host's launches, a fixed wait). A slope ratio near 1 with a large gap points to a fixed
    cost the model misses; a slope ratio far from 1 to the prompt's work priced wrong."""
    columns = [*GROUP_FIELDS, "recipe", "users", "measured_1k_ms", "pred_1k_ms", "measured_8k_ms", "pred_8k_ms"]
    columns += ["gap_1k_ms", "slope_ratio"]
    done = table[table["refused"].isna() & (table["mode"] == "agg")]
    done = done.assign(isl=done["isl"].astype(int), osl=done["osl"].astype(int))
    done = done[(done["osl"] == PROMPT_TABLE_OUTPUT) & done["isl"].isin((SHORT_PROMPT, LONG_PROMPT))]
    rows = []
    for key, group in done.groupby([*GROUP_FIELDS, "recipe"], sort=True):
        short_users = set(group.loc[group["isl"] == SHORT_PROMPT, "concurrency"])
        both = short_users & set(group.loc[group["isl"] == LONG_PROMPT, "concurrency"])
        if not both:
            continue
        users = min(both)
        at = group[group["concurrency"] == users]
        short, long = at[at["isl"] == SHORT_PROMPT], at[at["isl"] == LONG_PROMPT]
        m1, p1 = short["measured_ttft_ms"].median(), short["pred_ttft_ms"].median()
        m8, p8 = long["measured_ttft_ms"].median(), long["pred_ttft_ms"].median()
        ratio = (m8 - m1) / (p8 - p1) if p8 != p1 else float("nan")
        rows.append([*key, int(users), round(m1), round(p1), round(m8), round(p8), round(m1 - p1), round(ratio, 2)])
    return pd.DataFrame(rows, columns=columns)


def _markdown(df: pd.DataFrame) -> str:
    if df.empty:
        return "(none)\n"
    shown = df.copy()
    for column in shown.columns:
        if column.endswith("_bias"):
            shown[column] = shown[column].map("{:+.1%}".format)
        elif column.endswith("_mape") or "_share_" in column:
            shown[column] = shown[column].map("{:.1%}".format)
    header = "| " + " | ".join(map(str, shown.columns)) + " |"
    rule = "| " + " | ".join("---" for _ in shown.columns) + " |"
    body = ["| " + " | ".join(str(v) for v in r) + " |" for r in shown.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


def recipe_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per InferenceX group: the launch script its agg points' settings come from, or ``recipe unknown``."""
    own = table[(table["source"] == "inferencex") & (table["mode"] == "agg")]
    if own.empty or "recipe" not in own:
        return pd.DataFrame(columns=[*GROUP_FIELDS[1:], "recipe", "points"])
    return own.groupby([*GROUP_FIELDS[1:], "recipe"]).size().rename("points").reset_index()


def summary_markdown(table: pd.DataFrame, runtime_s: float, settings: str) -> str:
    """The summary: errors per source, engine and group, the recipes found, the refused points by reason."""
    refused = table[table["refused"].notna()]
    by_reason = (
        refused.groupby(["source", "refused"])
        .size()
        .rename("points")
        .reset_index()
        .sort_values(["source", "points"], ascending=[True, False])
    )
    recipes = recipe_table(table)
    unknown = int((recipes["recipe"] == "recipe unknown").sum()) if not recipes.empty else 0
    return "\n".join(
        [
            "# servesim against InferenceX's measured serving points",
            "",
            f"{settings}; {len(table)} points selected, {len(table) - len(refused)} simulated, "
            f"{len(refused)} refused; {runtime_s:.0f} s. MAPE: mean |predicted / measured - 1|; "
            "bias: mean (predicted / measured - 1).",
            "",
            "## Per source",
            "",
            _markdown(error_table(table, ["source"])),
            "## Per source and engine",
            "",
            _markdown(error_table(table, ["source", "engine"])),
            "## Per group",
            "",
            _markdown(error_table(table, list(GROUP_FIELDS))),
            "## The first wave's share of the predicted mean TTFT",
            "",
            "The requests each user sends first arrive together and queue behind one another's prompts; their share "
            "of the sum of the predicted TTFTs (points.csv: pred_ttft_first_wave_ms, first_wave_ttft_share).",
            "",
            _markdown(first_wave_table(table)),
            "## The TTFT gap by prompt length",
            "",
            "At the fewest users at which a group has simulated points with both 1k and 8k prompts (1k outputs): "
            "median mean TTFT, ms; slope_ratio is the measured 8k-1k difference over the predicted one (the prompt "
            "tokens' own cost), gap_1k_ms measured less predicted at 1k (the part that does not grow with the prompt).",
            "",
            _markdown(prompt_length_table(table)),
            "## InferenceX's launch scripts (agg points of source inferencex)",
            "",
            f"Each group's settings come from the script named (SemiAnalysisAI/InferenceX, path@commit); "
            f"{unknown} of {len(recipes)} groups have no recipe encoded (recipe unknown) and keep the generic "
            "settings, as do the disaggregated and gap-analysis points.",
            "",
            _markdown(recipes),
            "## Refused points, by reason",
            "",
            _markdown(by_reason),
        ]
    )


def report_html(table: pd.DataFrame, path: Path) -> None:
    """Predicted against measured TTFT and TPOT, log axes, one marker per run coloured by group, y = x."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    done = table[table["refused"].isna()]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("mean TTFT (ms)", "mean TPOT (ms)"))
    groups = sorted(done[list(GROUP_FIELDS)].astype(str).agg(" / ".join, axis=1).unique())
    labels = done[list(GROUP_FIELDS)].astype(str).agg(" / ".join, axis=1)
    hover = (
        done["id"]
        + "<br>"
        + labels
        + "<br>"
        + done["mode"].astype(str)
        + " ISL "
        + done["isl"].astype(str)
        + " OSL "
        + done["osl"].astype(str)
        + " CONC "
        + done["concurrency"].astype(str)
    )
    for col, m in enumerate(METRICS, start=1):
        for group in groups:
            rows = labels == group
            fig.add_trace(
                go.Scatter(
                    x=done.loc[rows, f"measured_{m}_ms"],
                    y=done.loc[rows, f"pred_{m}_ms"],
                    mode="markers",
                    name=group,
                    legendgroup=group,
                    showlegend=col == 1,
                    text=hover[rows],
                    hovertemplate="%{text}<br>measured %{x:.2f} ms<br>predicted %{y:.2f} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
        values = pd.concat([done[f"measured_{m}_ms"], done[f"pred_{m}_ms"]]).dropna()
        values = values[values > 0]
        if not values.empty:
            lo, hi = float(values.min()) / 1.5, float(values.max()) * 1.5
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi],
                    y=[lo, hi],
                    mode="lines",
                    line={"color": "black", "dash": "dash"},
                    name="y = x",
                    showlegend=col == 1,
                    hoverinfo="skip",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(type="log", title_text="measured (ms)", row=1, col=col)
        fig.update_yaxes(type="log", title_text="servesim (ms)", row=1, col=col)
    fig.update_layout(title="servesim against InferenceX's and NVIDIA's measured serving points", height=700)
    fig.write_html(str(path), include_plotlyjs=True, full_html=True)


def explain_point(parser: argparse.ArgumentParser, point_id: str, seed: int) -> int:
    """``--explain``: print the report on one point; an unknown point, or one servesim refuses (writing its scenario,
    validating or building it), is one line and exit status 2."""
    from benchmarks.inferencex_explain import explain

    points = read_points()
    found = points[points["id"] == point_id]
    if found.empty and (kept := kept_copy(point_id)) is not None:
        print(f"point {point_id} repeats the run of {kept} (the file holds it more than once; read once)")
        found = points[points["id"] == kept]
    if found.empty:
        parser.error(f"--explain: no measured point has the id {point_id!r} (the ids are points.csv's)")
    try:
        print(explain(found.iloc[0], seed), end="")
    except (PointRefused, ValueError) as exc:  # written, or validated and built, as the benchmark would refuse it
        parser.error(f"--explain: point {point_id} is refused: {one_line(exc)}")
    return 0


def run_benchmark(
    points: pd.DataFrame, seed: int, workers: int, use_ray: bool = False, point_timeout_s: float | None = None
) -> tuple[pd.DataFrame, float]:
    """Write, simulate and score ``points``: the point table and the runtime in seconds."""
    start_s = time.perf_counter()
    scenarios, refused = write_scenarios(points, seed)
    results = simulate(scenarios, workers, use_ray, point_timeout_s)
    concurrency = {pid: s["workload"]["concurrency"] for pid, s in scenarios}
    for pid, result in results.items():
        result["concurrency"] = concurrency[pid]
    return point_table(points, results, refused), time.perf_counter() - start_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sample = parser.add_mutually_exclusive_group()
    sample.add_argument("--per-group", type=int, default=8, help="Points drawn per group (default 8).")
    sample.add_argument("--all", action="store_true", help="Every point (of the filters).")
    sample.add_argument(
        "--explain",
        metavar="POINT_ID",
        help="Take one point apart instead (its scenario, its predicted TTFT's parts, its prompt step's ops: "
        "benchmarks/inferencex_explain.py); the id as in points.csv.",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the sample and of every run (default 0).")
    parser.add_argument("--source", choices=("inferencex", "gap-analysis"))
    parser.add_argument("--engine", choices=("vllm", "sglang", "trtllm"))
    parser.add_argument(
        "--model",
        help="model_path as in the file, e.g. meta-llama/Llama-3.1-70B (deepseek-ai/DeepSeek-V3, the database dump's "
        "name of DeepSeek-R1's runs, selects deepseek-ai/DeepSeek-R1's)",
    )
    parser.add_argument("--system", help="GPU as in the file, e.g. h200_sxm")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="Local processes (default: CPUs).")
    parser.add_argument("--ray", action="store_true", help="Run on Ray (a local one started on demand).")
    parser.add_argument("--out", type=Path, default=Path("runs/inferencex"), help="Output folder.")
    parser.add_argument(
        "--point-timeout",
        type=float,
        default=POINT_TIMEOUT_S,
        help=f"Wall seconds a point may simulate before it is recorded as timed out (default {POINT_TIMEOUT_S:g}; "
        "0: no limit).",
    )
    args = parser.parse_args(argv)
    if args.per_group < 1:
        parser.error(f"--per-group must be at least 1 (got {args.per_group})")
    if not args.point_timeout >= 0 or args.point_timeout == float("inf"):
        parser.error(f"--point-timeout must be a number of seconds >= 0 (got {args.point_timeout})")
    if args.explain is not None:
        return explain_point(parser, args.explain, args.seed)
    model = SAME_RUN_MODELS.get(args.model, args.model)
    filters = {"source": args.source, "engine": args.engine, "model": model, "system": args.system}
    points = select_points(read_points(), None if args.all else args.per_group, args.seed, filters)
    if points.empty:
        parser.error(f"no measured point matches {', '.join(f'{k}={v}' for k, v in filters.items() if v)}")
    try:
        table, runtime_s = run_benchmark(points, args.seed, args.workers, args.ray, args.point_timeout or None)
    except ValueError as exc:
        parser.error(str(exc))
    settings = "all points" if args.all else f"up to {args.per_group} points per group, seed {args.seed}"
    chosen = ", ".join(f"{k} {v}" for k, v in filters.items() if v)
    settings += f" ({chosen})" if chosen else ""
    summary = summary_markdown(table, runtime_s, settings)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "points.csv", index=False)
    (args.out / "summary.md").write_text(summary)
    report_html(table, args.out / "report.html")
    print(summary)
    print(f"wrote {args.out / 'points.csv'}, {args.out / 'summary.md'}, {args.out / 'report.html'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
