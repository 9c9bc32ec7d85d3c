"""Leave-one-out error of the ``silicon`` model's interpolation against its own tables, and the roofline's.

For every shipped GPU and op family, each interior measured point is left out and predicted
from its two neighbours along one axis, the way the cost model interpolates (log time over log
coordinate); the roofline's prediction of the same point (the datasheet figures and default
efficiencies of ``RooflineParams``) is scored beside it. Prints, per GPU and family, the
median, 90th percentile and max absolute relative error, and the roofline's median and
geometric-mean ratio (>1: the roofline predicts slower than measured).

    python benchmarks/silicon_loo.py [--gpu h100_sxm] [--framework vllm]

Reads the tables of the aiconfigurator-core dependency (NVIDIA's silicon database) that the cost model reads, for
the framework's newest version on each GPU (GEMM shapes no m was measured at, filled from a neighbour, are left out).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from simulator.config.precision import QUANTIZATIONS
from simulator.config.presets import hardware_presets
from simulator.cost.roofline import RooflineParams
from simulator.cost.silicon.tables import available, load_tables

P = RooflineParams()


def hardware_for(gpu: str):
    for hw in hardware_presets().values():
        if hw.silicon_tables == gpu:
            return hw
    raise SystemExit(f"no hardware preset reads {gpu}")


def loo_along(axis_values: np.ndarray, values: np.ndarray) -> list[float]:
    """Relative errors of predicting values[i] from values[i-1], values[i+1] (log-log), interior points."""
    out = []
    x, v = np.log(axis_values), values
    for i in range(1, len(v) - 1):
        a, b, c = v[i - 1], v[i], v[i + 1]
        if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)) or min(a, b, c) <= 0:
            continue
        w = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1])
        pred = math.exp((1 - w) * math.log(a) + w * math.log(c))
        out.append(pred / b - 1)
    return out


def summary(errors: list[float]) -> str:
    if not errors:
        return "no interior points"
    e = np.abs(np.asarray(errors))
    return f"n={len(e):5d}  median {np.median(e):6.1%}  p90 {np.quantile(e, 0.9):6.1%}  max {e.max():7.1%}"


def roofline_summary(ratios: list[float]) -> str:
    r = np.asarray([x for x in ratios if x > 0 and np.isfinite(x)])
    if not len(r):
        return ""
    err = np.abs(r - 1)
    return f"roofline: median |err| {np.median(err):6.1%}  geomean ratio x{math.exp(np.log(r).mean()):.2f}"


def gemm_family(tables, dtype: str, hw) -> tuple[list[float], list[float]]:
    g = tables.gemm(dtype)
    if g is None:
        return [], []
    ms = np.exp(g._log_s)
    ms[:, g.filled] = np.nan  # never measured: not a point to score
    errors: list[float] = []
    for j in range(len(g.n)):
        for k in range(len(g.k)):
            errors += loo_along(g.m, ms[:, j, k])
    for i in range(len(g.m)):
        for k in range(len(g.k)):
            errors += loo_along(g.n, ms[i, :, k])
    quant = {"fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}.get(dtype)
    peak = {"fp8": hw.fp8_flops_per_s, "fp8_block": hw.fp8_flops_per_s, "nvfp4": hw.fp4_flops_per_s}.get(dtype)
    rate = (peak or hw.flops_per_s) * P.gemm_flops_efficiency
    bw = hw.memory_bandwidth_bytes_per_s * P.memory_bandwidth_efficiency
    w = QUANTIZATIONS[quant].weight_bytes if quant else 2.0
    m, n, k = np.meshgrid(g.m, g.n, g.k, indexing="ij")
    roof = np.maximum(2 * m * n * k / rate, (w * n * k + 2 * m * (n + k)) / bw) + P.kernel_launch_s
    ok = np.isfinite(ms)
    return errors, (roof[ok] / ms[ok]).ravel().tolist()


def mla_family(tables, phase: str) -> tuple[list[float], list[float]]:
    """The MLA module tables (DeepSeek-V3's shape), every head count, KV dtype and GEMM dtype: LOO only."""
    errors: list[float] = []
    for key in tables.keys:
        if key.startswith(f"{phase}/") and key.endswith("/ms"):
            stem = key[: -len("/ms")]
            batch, lengths = tables.array(f"{stem}/batch"), tables.array(f"{stem}/len")
            ms = tables.array(key).astype(np.float64)
            for i in range(len(batch)):
                errors += loo_along(lengths.astype(np.float64), ms[i])
            for j in range(len(lengths)):
                errors += loo_along(batch.astype(np.float64), ms[:, j])
    return errors, []


def all_to_all_family(tables) -> tuple[list[float], list[float]]:
    errors: list[float] = []
    for key in tables.keys:
        if key.startswith("a2a/"):
            arr = tables.array(key).astype(np.float64)
            errors += loo_along(arr[0], arr[1])
    return errors, []


def attention_family(tables, phase: str, hw) -> tuple[list[float], list[float]]:
    errors: list[float] = []
    ratios: list[float] = []
    rate = hw.flops_per_s * P.attention_flops_efficiency
    bw = hw.memory_bandwidth_bytes_per_s * P.memory_bandwidth_efficiency
    for heads, kv_heads, dim in tables.head_configs(phase, "bf16"):
        key = f"{phase}/bf16/{heads}/{kv_heads}/{dim}"
        batch, lengths = tables.array(f"{key}/batch"), tables.array(f"{key}/len")
        ms = tables.array(f"{key}/ms").astype(np.float64) * 1e-3
        for i in range(len(batch)):
            errors += loo_along(lengths.astype(np.float64), ms[i])
        for j in range(len(lengths)):
            errors += loo_along(batch.astype(np.float64), ms[:, j])
        b, ell = np.meshgrid(batch.astype(np.float64), lengths.astype(np.float64), indexing="ij")
        q, kv, a = heads * dim, kv_heads * dim, 2.0
        if phase == "decode":
            ctx = b * ell
            roof = np.maximum(4 * q * ctx / rate, (2 * ctx * 2 * kv + 2 * a * b * q + 2 * b * 2 * kv) / bw)
        else:
            pairs = b * ell * (ell + 1) / 2
            roof = np.maximum(4 * q * pairs / rate, b * (2 * a * ell * q + 2 * ell * 2 * kv * 2) / bw)
        roof = roof + 2 * P.kernel_launch_s
        ok = np.isfinite(ms)
        ratios += (roof[ok] / ms[ok]).tolist()
    return errors, ratios


def allreduce_family(tables, hw) -> tuple[list[float], list[float]]:
    errors: list[float] = []
    ratios: list[float] = []
    tp_model = None
    try:
        from simulator.cost.collectives import AllReduceLatencyModel

        tp_model = AllReduceLatencyModel.for_hardware(hw)
    except ImportError:
        pass
    for key, arr in tables.allreduce_arrays().items():
        errors += loo_along(arr[0], arr[1])
        n = int(key.rsplit("/", 1)[1])
        if tp_model is not None and "eager" not in key:
            ratios += [tp_model.seconds(float(b), n) / t for b, t in zip(arr[0], arr[1], strict=True)]
    return errors, ratios


def moe_family(tables) -> tuple[list[float], list[float]]:
    errors: list[float] = []
    for key in tables.keys:
        if key.startswith("moe/bf16/balanced/"):
            arr = tables.array(key).astype(np.float64)
            errors += loo_along(arr[0], arr[1])
    return errors, []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", action="append", choices=available(), help="GPU tables (default: all measured)")
    parser.add_argument("--framework", default="vllm", choices=("vllm", "sglang", "trtllm"))
    args = parser.parse_args()
    for gpu in args.gpu or available():
        tables, hw = load_tables(gpu, args.framework), hardware_for(gpu)
        print(f"== {tables.describe()} ({hw.name})")
        families = {
            "gemm bf16": gemm_family(tables, "bf16", hw),
            "gemm fp8": gemm_family(tables, "fp8", hw),
            "gemm fp8_block": gemm_family(tables, "fp8_block", hw),
            "gemm nvfp4": gemm_family(tables, "nvfp4", hw),
            "attention prefill": attention_family(tables, "prefill", hw),
            "attention decode": attention_family(tables, "decode", hw),
            "mla module prefill": mla_family(tables, "mla_prefill"),
            "mla module decode": mla_family(tables, "mla_decode"),
            "all-reduce": allreduce_family(tables, hw),
            "moe (fused layer)": moe_family(tables),
            "all-to-all (DeepEP)": all_to_all_family(tables),
        }
        for name, (errors, ratios) in families.items():
            if not errors and not ratios:
                print(f"  {name:18s} not measured")
                continue
            print(f"  {name:18s} LOO {summary(errors)}   {roofline_summary(ratios)}")


if __name__ == "__main__":
    main()
