"""Fit the engine's per-step CPU time of simulator/cost/overhead.py to Vidur's measurements.

    python benchmarks/fit_overheads.py [--data ../shared/data/silicon] [--gpu a100]

Reads Vidur's ``profiling/cpu_overheads/<gpu>/cpu_overheads.csv`` (medians, ms, per engine
iteration, against ``model_name``, ``batch_size`` 8..128 and ``tensor_parallel_degree``) and fits
each component on its own rows by least squares to

    t = step + per_seq x batch_size + tp_step x [tensor_parallel_degree > 1]

then prints the constants as the ``VIDUR_A100`` literal of the module, each component's fit
error (rms and max relative error, max absolute error in ms), the error of the summed default
against the summed measured rows, and a few of those rows (the ones tests/simulator/cost/test_overhead.py embeds).

What is fitted, and why (the module docstring says more):

- ``schedule_median``, ``prepare_inputs_e2e_median``, ``process_model_outputs_median`` as measured.
- ``sampler_e2e_median`` minus the LM-head GEMM it contains: Vidur's sampler computes the logits
  (``hidden @ lm_head.T``) and ends with ``torch.cuda.synchronize()``, so the GPU time of the LM
  head is inside it, and servesim's roofline charges that GEMM as its own op. The GEMM's time at
  the row's shape (m = batch_size, n = vocab / tp, k = hidden) is taken from NVIDIA
  aiconfigurator's A100 measurements (``aiconfigurator/a100_sxm/gemm/vllm/*/gemm_perf.parquet``,
  bf16): linear in m over the measured m, log-log in n between the two measured n around
  vocab / tp, at the model's hidden size (a measured k). Vocab and hidden come from Vidur's own
  ``profiling/compute/<gpu>/<model>/mlp.csv`` of the same models.
- ``ray_comm_time_mean`` (wall time per iteration minus the five timed parts: Ray RPC to the
  workers and anything untimed) is fitted and printed but is not in the default.
- ``model_execution_e2e`` is not fitted: it is the forward pass, launch plus synchronise, i.e. GPU
  time that the cost model computes op by op.

Rows dropped: Qwen-72B at batch_size 112 and 128. Its schedule time falls from 1.54 ms at 96
to 0.48 ms at 112 (every other model's grows linearly to 2.0 ms at 128), and its sampler and
output processing drop with it: without GQA its KV cache (80 layers x 64 KV heads, tp 4) could not
hold that many sequences, so those runs never reached the batch size they are labelled with.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import pandas as pd

COMPONENTS = {
    "schedule": "schedule_median",
    "prepare_inputs": "prepare_inputs_e2e_median",
    "sampler": "sampler_e2e_median",  # minus the LM-head GEMM (module docstring)
    "process_model_outputs": "process_model_outputs_median",
    "ray_comm": "ray_comm_time_mean",  # the csv has only its mean
}
DEFAULT = ("schedule", "prepare_inputs", "sampler", "process_model_outputs")
DROPPED = {("Qwen/Qwen-72B", 112), ("Qwen/Qwen-72B", 128)}  # never reached the batch (docstring)
GEMM_GPU = {"a100": "a100_sxm"}
TEST_ROWS = (("meta-llama/Llama-2-7b-hf", 8), ("meta-llama/Llama-2-7b-hf", 128), ("meta-llama/Llama-2-70b-hf", 32))


def load(data: Path, gpu: str) -> pd.DataFrame:
    vidur = data / "vidur" / "profiling"
    df = pd.read_csv(vidur / "cpu_overheads" / gpu / "cpu_overheads.csv", index_col=0)
    keep = [(m, b) not in DROPPED for m, b in zip(df["model_name"], df["batch_size"], strict=True)]
    df = df[keep].copy()
    shapes = {}
    for name in df["model_name"].unique():
        with (vidur / "compute" / gpu / name / "mlp.csv").open() as f:
            row = next(csv.DictReader(f))
        shapes[name] = (int(row["vocab_size"]), int(row["n_embd"]))
    df["vocab"] = [shapes[m][0] for m in df["model_name"]]
    df["hidden"] = [shapes[m][1] for m in df["model_name"]]
    df["lm_head_ms"] = lm_head_ms(data, GEMM_GPU[gpu], df)
    df["sampler_e2e_median"] = df["sampler_e2e_median"] - df["lm_head_ms"]
    return df


def lm_head_ms(data: Path, gemm_gpu: str, df: pd.DataFrame) -> np.ndarray:
    """The LM-head GEMM [batch x hidden] . [hidden x vocab/tp] from aiconfigurator's measured table, ms."""
    path = sorted((data / "aiconfigurator" / gemm_gpu / "gemm" / "vllm").glob("*/gemm_perf.parquet"))[-1]
    g = pd.read_parquet(path)
    g = g[(g["latency"] > 0) & (g["gemm_dtype"] == "bfloat16")]
    out = []
    for m, vocab, tp, k in zip(df["batch_size"], df["vocab"], df["tensor_parallel_degree"], df["hidden"], strict=True):
        n = vocab / tp
        measured_n = np.array(sorted(g.loc[g["k"] == k, "n"].unique()))
        assert measured_n[0] <= n <= measured_n[-1], f"vocab/tp {n} outside the measured n at k={k}"
        lo = int(measured_n[measured_n <= n].max())
        hi = int(measured_n[measured_n >= n].min())

        def at(nn: int, k: int = k, m: int = m) -> float:
            s = g[(g["n"] == nn) & (g["k"] == k)].sort_values("m")
            assert len(s) and s["m"].min() <= m <= s["m"].max(), f"no measured GEMM at n={nn} k={k} m={m}"
            return float(np.interp(m, s["m"], s["latency"]))

        t = 0.0 if hi == lo else (np.log(n) - np.log(lo)) / (np.log(hi) - np.log(lo))
        out.append(float(np.exp((1 - t) * np.log(at(lo)) + t * np.log(at(hi)))))
    return np.array(out)


def design(df: pd.DataFrame) -> np.ndarray:
    return np.column_stack(
        [np.ones(len(df)), df["batch_size"].to_numpy(float), (df["tensor_parallel_degree"] > 1).to_numpy(float)]
    )


def errors(pred: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    rel = pred / y - 1
    return float(np.sqrt(np.mean(rel**2))), float(np.abs(rel).max()), float(np.abs(pred - y).max())


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=here.parent / "shared" / "data" / "silicon")
    ap.add_argument("--gpu", default="a100", choices=sorted(GEMM_GPU))
    args = ap.parse_args(argv)
    df = load(args.data, args.gpu)
    X = design(df)
    print(f"# {len(df)} rows of vidur/profiling/cpu_overheads/{args.gpu}/cpu_overheads.csv (ms)")
    print(
        f"# LM-head GEMM subtracted from sampler_e2e: {df['lm_head_ms'].min():.3f} .. {df['lm_head_ms'].max():.3f} ms"
    )
    fits = {}
    for name, column in COMPONENTS.items():
        y = df[column].to_numpy(float)
        coef = np.linalg.lstsq(X, y, rcond=None)[0]
        fits[name] = (coef, *errors(X @ coef, y))
    print(f"{'component':<22} {'step ms':>8} {'per seq':>8} {'tp>1':>8} {'rms rel':>8} {'max rel':>8} {'max ms':>7}")
    for name, (c, rms, worst, worst_ms) in fits.items():
        print(f"{name:<22} {c[0]:8.4f} {c[1]:8.5f} {c[2]:8.4f} {rms:8.3f} {worst:8.3f} {worst_ms:7.3f}")
    total = sum(df[COMPONENTS[n]].to_numpy(float) for n in DEFAULT)
    coef = sum(fits[n][0] for n in DEFAULT)
    sum_rms, sum_worst, sum_worst_ms = errors(X @ coef, total)
    print(
        f"{'default (sum)':<22} {coef[0]:8.4f} {coef[1]:8.5f} {coef[2]:8.4f} "
        f"{sum_rms:8.3f} {sum_worst:8.3f} {sum_worst_ms:7.3f}"
    )
    print("\nVIDUR_A100 = {  # step_s, per_seq_s, tp_step_s, rms_rel_error, max_rel_error, max_abs_error_s")
    for name, (c, rms, worst, worst_ms) in fits.items():
        print(
            f'    "{name}": ComponentFit({c[0] * 1e-3:.4e}, {c[1] * 1e-3:.4e}, {c[2] * 1e-3:.4e}, '
            f"{rms:.3f}, {worst:.3f}, {worst_ms * 1e-3:.2e}),"
        )
    print("}")
    print(
        f"\n# default (sum of {', '.join(DEFAULT)}) against the summed rows: "
        f"rms {sum_rms:.3f}, max {sum_worst:.3f} relative, {sum_worst_ms:.3f} ms"
    )
    print("# rows for tests/simulator/cost/test_overhead.py: model, batch, tp, summed default components, fit (ms)")
    for model, batch in TEST_ROWS:
        rows = df[(df["model_name"] == model) & (df["batch_size"] == batch)]
        for i in range(len(rows)):
            r = rows.iloc[i]
            tp = int(r["tensor_parallel_degree"])
            measured = sum(float(r[COMPONENTS[n]]) for n in DEFAULT)
            fit = coef[0] + coef[1] * batch + coef[2] * (tp > 1)
            print(f"#   {model} {batch} {tp} {measured:.4f} {fit:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
