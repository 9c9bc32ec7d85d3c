"""Prediction intervals from the InferenceX benchmark's scores: calibrate on one half, measure coverage on the other.

    python -m benchmarks.inferencex --out runs/inferencex            # score the points first
    python -m benchmarks.inferencex_intervals runs/inferencex/points.csv [--seed 0] [--level 0.8]
        [--splits 100] [--out simulator/metrics/prediction_error.json]

Takes the simulated InferenceX points of ``points.csv`` (source ``inferencex``), splits them in two seeded
halves, fits split-conformal bounds on ``measured / predicted`` of mean TTFT and mean TPOT per engine on the
first (``simulator.metrics.intervals``) and reports the coverage they reach on the second, pooled and per
engine; the bounds, with that coverage, the servesim commit and the dependency version, go to ``--out``
(servesim ships that file: ``servesim run`` shows the intervals it gives).

One split's held-out coverage moves with the draw (about 200 points a half: a binomial standard error of about 3
points at 80 %). ``--splits N`` refits on N seeded splits (seeds ``seed`` to ``seed + N - 1``) and reports the pooled
held-out coverage over them, its mean and 5th to 95th percentiles, and the share of splits within 5 points of the
level; the file's bounds stay those of ``--seed``'s split, and the figures go with them (``coverage_over_splits``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.metrics.intervals import LEVEL, METRICS, PredictionError, coverage, fit_prediction_error, to_json

COLUMNS = {"mean_ttft_ms": ("pred_ttft_ms", "measured_ttft_ms"), "mean_tpot_ms": ("pred_tpot_ms", "measured_tpot_ms")}
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "simulator" / "metrics" / "prediction_error.json"


def split_halves(points: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A seeded random half of the points for calibration, the rest held out."""
    order = np.random.default_rng(seed).permutation(len(points))
    half = len(points) // 2
    return points.iloc[np.sort(order[:half])], points.iloc[np.sort(order[half:])]


def fit_split(
    points: pd.DataFrame, seed: int, level: float, meta: dict
) -> tuple[PredictionError, dict[str, dict[str, float]]]:
    """The bounds fitted on ``seed``'s calibration half of ``points``, and each metric's held-out coverage, pooled and
    per engine. Raises ValueError where a half is too small to fit."""
    calibration, held_out = split_halves(points, seed)
    ratios = {
        metric: list(zip(calibration.engine, calibration[m] / calibration[p], strict=True))
        for metric, (p, m) in COLUMNS.items()
    }
    meta = meta | {"calibration_points": len(calibration), "held_out_points": len(held_out), "split_seed": seed}
    error = fit_prediction_error(ratios, level, meta)
    covered: dict[str, dict[str, float]] = {}
    for metric, (p, m) in COLUMNS.items():
        rows = list(zip(held_out.engine, held_out[p], held_out[m], strict=True))
        covered[metric] = {"pooled": round(coverage(error, metric, rows), 4)}
        for engine in sorted(held_out.engine.unique()):
            own = [r for r in rows if r[0] == engine]
            covered[metric][engine] = round(coverage(error, metric, own), 4)
    return error, covered


def coverage_over_splits(points: pd.DataFrame, seeds: range, level: float) -> dict[str, dict[str, float]]:
    """Each metric's pooled held-out coverage over the splits of ``seeds``: its mean, 5th and 95th percentiles, and
    the share of splits within 5 points of ``level``; empty without seeds."""
    if not seeds:
        return {}
    pooled: dict[str, list[float]] = {metric: [] for metric in COLUMNS}
    for seed in seeds:
        _, covered = fit_split(points, seed, level, {})
        for metric in COLUMNS:
            pooled[metric].append(covered[metric]["pooled"])
    out = {}
    for metric, values in pooled.items():
        v = np.array(values)
        out[metric] = {
            "splits": len(v),
            "mean": round(float(v.mean()), 4),
            "p5": round(float(np.percentile(v, 5)), 4),
            "p95": round(float(np.percentile(v, 95)), 4),
            "within_5_points": round(float(np.mean(np.abs(v - level) <= 0.05 + 1e-9)), 4),
        }
    return out


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("points", type=Path, help="points.csv written by benchmarks/inferencex.py")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the split (default 0).")
    parser.add_argument("--level", type=float, default=LEVEL, help=f"Nominal coverage (default {LEVEL}).")
    parser.add_argument(
        "--splits",
        type=int,
        default=0,
        help="Also refit on this many seeded splits and report the held-out coverage over them (default 0: none).",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Where the bounds go.")
    args = parser.parse_args(argv)
    if not 0 < args.level < 1:
        parser.error(f"--level must lie between 0 and 1 (got {args.level})")
    if not 0 <= args.splits <= 10_000:
        parser.error(f"--splits must lie between 0 and 10000 (got {args.splits})")
    try:
        table = pd.read_csv(args.points)
    except (OSError, pd.errors.ParserError) as exc:
        parser.error(f"{args.points}: {exc}")
    missing = {c for cols in COLUMNS.values() for c in cols} - set(table.columns)
    if missing or "refused" not in table.columns:
        parser.error(f"{args.points}: not a benchmarks/inferencex.py points table (no {', '.join(sorted(missing))})")
    ok = table[(table.source == "inferencex") & table.refused.isna()]
    for pred, measured in COLUMNS.values():
        ok = ok[(ok[pred] > 0) & (ok[measured] > 0)]
    points = ok.reset_index(drop=True)
    meta = {
        "points": "InferenceX",
        "cost_model": "silicon",  # the benchmark's scenarios leave the default cost model
        "servesim_commit": _commit(),
        "aiconfigurator_core": importlib.metadata.version("aiconfigurator-core"),
    }
    try:
        error, covered = fit_split(points, args.seed, args.level, meta)
        spread = coverage_over_splits(points, range(args.seed, args.seed + args.splits), args.level)
    except ValueError as exc:
        parser.error(str(exc))
    error.meta["coverage_held_out"] = covered
    if args.splits:
        error.meta["coverage_over_splits"] = spread
    args.out.write_text(to_json(error) + "\n")
    print(
        f"{error.meta['calibration_points']} calibration and {error.meta['held_out_points']} held-out InferenceX "
        f"points, level {args.level:.0%}"
    )
    for metric in METRICS:
        for stratum, b in error.bounds[metric].items():
            print(
                f"  {metric:13s} {stratum:7s} x{np.exp(b['lo']):.2f} .. x{np.exp(b['hi']):.2f} (n={int(b['n'])}); "
                f"held-out coverage {covered[metric].get(stratum, float('nan')):.0%}"
            )
    for metric, c in spread.items():
        print(
            f"  {metric:13s} over {c['splits']} splits: held-out coverage {c['mean']:.1%} on average, "
            f"{c['p5']:.0%} to {c['p95']:.0%} (5th to 95th percentile), within 5 points of the level in "
            f"{c['within_5_points']:.0%} of them"
        )
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
