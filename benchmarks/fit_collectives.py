"""Fit the all-reduce alpha-beta model of simulator/cost/collectives.py to the measured tables.

    python benchmarks/fit_collectives.py [--data ../shared/data/silicon] [--write]

Reads aiconfigurator's ``comm/vllm/<ver>/custom_allreduce_perf.parquet`` and
``comm/nccl/<ver>/nccl_perf.parquet`` of each GPU, fits per number of GPUs

    one-shot  alpha_1 + (n-1) x bytes / bw_1          } min of the two, below vLLM's custom
    two-shot  alpha_2 + 2(n-1)/n x bytes / bw_2       } all-reduce cap (8 MiB)
    NCCL      alpha_3 + 2(n-1)/n x bytes / bw_3       from 8 MiB

to what ``MeasuredAllReduce`` returns with ``cuda_graph=True`` at its own table points (the
vllm_graph rows under 8 MiB, nccl all_reduce rows from 8 MiB), by least squares on
log(model / measured) (so: relative error), and prints the constants as the module's
``_FITTED`` literal (``--write`` puts them into the module), then per GPU and number of GPUs the
median and max relative error over decode-size messages (8 KiB .. 16 MiB) and prefill-size
ones (16 MiB .. 512 MiB), of the fit, of the datasheet-derived model the roofline uses without a
fit, and of the formula the roofline used before (``2(n-1)/n x bytes / (0.8 x bw) + 2(n-1) x
latency``); last, Vidur's all_reduce.csv (host-timed torch.distributed) against the fit.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from simulator.config.presets import hardware_presets
from simulator.cost.collectives import (
    CUSTOM_AR_MAX_BYTES,
    AllReduceFit,
    AllReduceLatencyModel,
    MeasuredAllReduce,
    Regime,
    arrays_from_parquet,
)

GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "l40s")
KiB, MiB = 1 << 10, 1 << 20
DECODE = (8 * KiB, 16 * MiB)  # 1..512 tokens x hidden 4096..16384 x 2 bytes
PREFILL = (16 * MiB, 512 * MiB)  # up to 16384 tokens x hidden 16384 x 2 bytes
STATED = (8 * KiB, 512 * MiB)  # the range of the stated max_rel_error
MODULE = Path(__file__).resolve().parent.parent / "simulator" / "cost" / "collectives.py"
VIDUR_NODES = {"a100_sxm": "a100_dgx", "h100_sxm": "h100_dgx"}


def table_paths(data: Path, gpu: str) -> tuple[Path, Path]:
    custom = sorted((data / "aiconfigurator" / gpu / "comm" / "vllm").glob("*/custom_allreduce_perf.parquet"))
    nccl = sorted((data / "aiconfigurator" / gpu / "comm" / "nccl").glob("*/nccl_perf.parquet"))
    if not custom or not nccl:
        raise SystemExit(f"no all-reduce tables for {gpu} under {data}")
    return custom[-1], nccl[-1]


def target(measured: MeasuredAllReduce, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (bytes, seconds) points MeasuredAllReduce serves with cuda_graph=True."""
    xs = []
    graph, nccl = measured.points("vllm_graph", n), measured.points("nccl", n)
    if graph is not None:
        xs.append(graph[0][graph[0] < CUSTOM_AR_MAX_BYTES])
    if nccl is not None:
        xs.append(nccl[0][nccl[0] >= CUSTOM_AR_MAX_BYTES] if graph is not None else nccl[0])
    b = np.sort(np.concatenate(xs))
    return b, np.array([measured.seconds(v, n, cuda_graph=True) for v in b])


def _one(p: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    return math.exp(p[0]) + (n - 1) * b / math.exp(p[1])


def _two(p: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    return math.exp(p[0]) + 2 * (n - 1) / n * b / math.exp(p[1])


def _lsq(f, b: np.ndarray, t: np.ndarray, starts: list[list[float]]):
    best = None
    for x0 in starts:
        r = least_squares(lambda p: np.log(f(p, b)) - np.log(t), np.log(x0), method="lm")
        if best is None or r.cost < best.cost:
            best = r
    return best


def fit_custom(b: np.ndarray, t: np.ndarray, n: int) -> tuple[Regime | None, Regime | None]:
    """min(one-shot, two-shot) below the cap; a regime winning at under 2 points is dropped, the other refit."""
    t0 = float(t.min())
    bws = (3e9, 3e10, 3e11, 1e12)
    both = _lsq(
        lambda p, x: np.minimum(_one(p[:2], x, n), _two(p[2:], x, n)),
        b,
        t,
        [[t0, w1, 2 * t0, w2] for w1 in bws for w2 in bws],
    )
    one_wins = _one(both.x[:2], b, n) <= _two(both.x[2:], b, n)
    if n > 2 and one_wins.sum() >= 2 and (~one_wins).sum() >= 2:
        p = np.exp(both.x)
        return Regime(p[0], p[1]), Regime(p[2], p[3])
    single_one = _lsq(lambda p, x: _one(p, x, n), b, t, [[t0, w] for w in bws])
    if n == 2:  # the two forms coincide on 2 GPUs, where vLLM always runs one-shot
        p = np.exp(single_one.x)
        return Regime(p[0], p[1]), None
    single_two = _lsq(lambda p, x: _two(p, x, n), b, t, [[t0, w] for w in bws])
    if single_one.cost <= single_two.cost:
        p = np.exp(single_one.x)
        return Regime(p[0], p[1]), None
    p = np.exp(single_two.x)
    return None, Regime(p[0], p[1])


def fit_nccl(b: np.ndarray, t: np.ndarray, n: int) -> Regime:
    r = _lsq(lambda p, x: _two(p, x, n), b, t, [[1e-5, w] for w in (3e9, 3e10, 3e11)])
    p = np.exp(r.x)
    return Regime(p[0], p[1])


def old_formula(b: np.ndarray, n: int, bw: float, latency: float) -> np.ndarray:
    return 2 * (n - 1) / n * b / (bw * 0.8) + 2 * (n - 1) * latency


def rel_errors(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred / meas - 1)


def band(b: np.ndarray, err: np.ndarray, lo: float, hi: float) -> str:
    """Median and max of ``err`` over lo <= bytes <= hi (lo < bytes for the prefill band)."""
    m = ((b > lo) if lo == PREFILL[0] else (b >= lo)) & (b <= hi)
    e = err[m]
    return f"{np.median(e):6.1%} {e.max():6.1%}" if e.size else "     -      -"


def ceil3(x: float) -> float:
    return math.ceil(x * 1000) / 1000


def fmt_regime(r: Regime | None) -> str:
    def num(x: float) -> str:
        return f"{x:.4g}".replace("e+", "e")  # as ruff format writes it

    return "None" if r is None else f"({num(r.alpha_s)}, {num(r.bus_bytes_per_s)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared/data/silicon")
    ap.add_argument("--write", action="store_true", help="put the fitted constants into simulator/cost/collectives.py")
    args = ap.parse_args(argv)
    presets = {h.silicon_tables: h for h in hardware_presets().values() if h.silicon_tables}

    literal = ["_FITTED: dict[str, dict[int, tuple[_Pair | None, _Pair | None, _Pair, float]]] = {"]
    report = []
    models: dict[str, AllReduceLatencyModel] = {}
    for gpu in GPUS:
        custom_path, nccl_path = table_paths(args.data, gpu)
        measured = MeasuredAllReduce.from_arrays(arrays_from_parquet(custom_path, nccl_path))
        rel = lambda p: p.relative_to(args.data).as_posix()  # noqa: E731
        hw = presets.get(gpu)
        fits: dict[int, AllReduceFit] = {}
        entries = []
        for n in measured.num_gpus():
            b, t = target(measured, n)
            below = b < CUSTOM_AR_MAX_BYTES
            one, two = fit_custom(b[below], t[below], n)
            fit = AllReduceFit(one, two, fit_nccl(b[~below], t[~below], n))
            fits[n] = fit
            model = AllReduceLatencyModel({n: fit})
            err = rel_errors(np.array([model.seconds(v, n) for v in b]), t)
            m = (b >= STATED[0]) & (b <= STATED[1])
            stated = ceil3(float(err[m].max()))
            dec, pre = band(b, err, *DECODE), band(b, err, *PREFILL)
            (dmed, dmax), (pmed, pmax) = dec.split(), pre.split()
            entries.append(f"        # {n} GPUs: decode sizes median {dmed} max {dmax}, prefill {pmed} max {pmax}")
            entries.append(f"        {n}: ({fmt_regime(one)}, {fmt_regime(two)}, {fmt_regime(fit.nccl)}, {stated}),")
            lines = [f"{gpu:9s} n={n}  fit     {dec}   {pre}"]
            if hw is not None:
                derived = AllReduceLatencyModel.derived(
                    hw.interconnect_bandwidth_bytes_per_s, hw.interconnect_latency_s
                )
                e_der = rel_errors(np.array([derived.seconds(v, n) for v in b]), t)
                e_old = rel_errors(
                    old_formula(b, n, hw.interconnect_bandwidth_bytes_per_s, hw.interconnect_latency_s), t
                )
                lines.append(f"{'':9s}      derived {band(b, e_der, *DECODE)}   {band(b, e_der, *PREFILL)}")
                lines.append(f"{'':9s}      old     {band(b, e_old, *DECODE)}   {band(b, e_old, *PREFILL)}")
            report.extend(lines)
        models[gpu] = AllReduceLatencyModel(fits)
        literal.append(f"    # {rel(custom_path)} (vllm_graph rows < 8 MiB)")
        literal.append(f"    # + {rel(nccl_path)} (all_reduce half rows >= 8 MiB)")
        literal.append(f'    "{gpu}": {{')
        literal.extend(entries)
        literal.append("    },")
    literal.append("}")

    print("# fitted constants {num_gpus: (one_shot, two_shot, nccl, max_rel_error)}, each (alpha_s, bus_bytes_per_s)")
    print("\n".join(literal))
    print()
    print("relative error |model/measured - 1| at the table points (vllm_graph < 8 MiB, nccl >= 8 MiB)")
    print(f"{'':16s}        decode 8 KiB-16 MiB  prefill 16-512 MiB")
    print(f"{'':16s}        median    max      median    max")
    print("\n".join(report))
    print("(derived: the model without tables, from the preset's interconnect figures, efficiency 0.8;")
    print(" old: 2(n-1)/n x bytes / (0.8 bw) + 2(n-1) x latency, the roofline's formula before)")

    print()
    print("Vidur profiling/network/<node>/all_reduce.csv (median, host-timed torch.distributed) / fitted model")
    for gpu, node in VIDUR_NODES.items():
        path = args.data / "vidur" / "profiling" / "network" / node / "all_reduce.csv"
        if not path.exists():
            continue
        import pandas as pd

        d = pd.read_csv(path)
        d = d[(d["rank"] == 0) & (d["devices_per_node"] == d["num_workers"])]
        model = models[gpu]
        for n, rows in d.groupby("num_workers"):
            b = rows["size"].to_numpy(np.float64)
            t = rows["time_stats.all_reduce.median"].to_numpy(np.float64) / 1e3
            ratio = t / np.array([model.seconds(v, int(n)) for v in b])
            small, large = b < 1 * MiB, b >= 16 * MiB
            print(
                f"  {node:9s} n={n}: sizes {b.min() / KiB:.0f} KiB-{b.max() / MiB:.0f} MiB; "
                f"< 1 MiB median {np.median(ratio[small]):.2f}x (floor {np.median(t[small]) * 1e6:.0f} us), "
                f">= 16 MiB median {np.median(ratio[large]):.2f}x"
            )

    if args.write:
        text = MODULE.read_text()
        pattern = re.compile(r"(# FITTED-BEGIN \(generated\)\n).*?(\n# FITTED-END)", re.S)
        if not pattern.search(text):
            print(f"no FITTED-BEGIN/END block in {MODULE}", file=sys.stderr)
            return 1
        MODULE.write_text(pattern.sub(lambda m: m.group(1) + "\n".join(literal) + m.group(2), text))
        print(f"\nwrote the constants into {MODULE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
