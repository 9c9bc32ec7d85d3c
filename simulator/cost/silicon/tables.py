"""The measured kernel tables shipped with servesim, and the interpolation over them.

``data/<gpu>.npz`` holds, in float32 milliseconds, what ``scripts/convert_silicon.py`` kept of
NVIDIA aiconfigurator's silicon database (Apache-2.0, ``data/LICENSE-aiconfigurator``; see
``data/ATTRIBUTION.md``): GEMMs on an m x n x k grid, prefill and decode attention per head
configuration on a batch x length grid (NaN where the collector did not run), vLLM's custom
all-reduce and NCCL's by message size, and the fused MoE layer by token count. A file is read
only when a cost model for that GPU is built, and each array only when it is asked for.

Interpolation is piecewise linear in log(time) over log(coordinate) (a piecewise power law:
exact on the measured points, and between two of them it lies between their values). A lookup
outside what was measured answers None: the cost model decides how to extrapolate.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"


def available() -> tuple[str, ...]:
    """Names of the GPUs whose tables are shipped."""
    return tuple(sorted(p.stem for p in DATA_DIR.glob("*.npz")))


class Curve:
    """One measured axis: ``times_s`` at increasing ``xs``, log-log piecewise linear between them."""

    __slots__ = ("_lt", "_lx", "hi", "lo", "times_s", "xs")

    def __init__(self, xs: Sequence[float], times_s: Sequence[float]) -> None:
        assert len(xs) == len(times_s) >= 1
        self.xs = [float(x) for x in xs]
        self.times_s = [float(t) for t in times_s]
        assert all(a < b for a, b in zip(self.xs, self.xs[1:], strict=False)), "axis must increase"
        assert all(t > 0 for t in self.times_s)
        self.lo, self.hi = self.xs[0], self.xs[-1]
        self._lx = [math.log(x) for x in self.xs]
        self._lt = [math.log(t) for t in self.times_s]

    def __call__(self, x: float) -> float | None:
        if not self.lo <= x <= self.hi:
            return None
        j = bisect.bisect_left(self.xs, x)
        if self.xs[j] == x:
            return self.times_s[j]
        w = (math.log(x) - self._lx[j - 1]) / (self._lx[j] - self._lx[j - 1])
        return math.exp(self._lt[j - 1] + w * (self._lt[j] - self._lt[j - 1]))

    def log_at(self, x: float) -> float | None:
        """log(time) at ``x``, or None outside: ``__call__`` without the exp (the hot path combines in logs)."""
        if not self.lo <= x <= self.hi:
            return None
        j = bisect.bisect_left(self.xs, x)
        if self.xs[j] == x:
            return self._lt[j]
        lx = self._lx
        return self._lt[j - 1] + (math.log(x) - lx[j - 1]) / (lx[j] - lx[j - 1]) * (self._lt[j] - self._lt[j - 1])

    def clamp(self, x: float) -> float:
        return min(max(x, self.lo), self.hi)


def _log_weights(axis: np.ndarray, x: float) -> tuple[int, int, float] | None:
    """Indices enclosing ``x`` on ``axis`` and the log-space weight of the upper one; None outside."""
    if not axis[0] <= x <= axis[-1]:
        return None
    j = int(np.searchsorted(axis, x))
    if axis[j] == x:
        return j, j, 0.0
    return j - 1, j, (math.log(x) - math.log(axis[j - 1])) / (math.log(axis[j]) - math.log(axis[j - 1]))


class GemmTable:
    """``[m x k] . [k x n]`` times on one GPU for one dtype, on the measured m x n x k grid."""

    def __init__(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, ms: np.ndarray) -> None:
        self.m, self.n, self.k = (np.asarray(a, dtype=np.float64) for a in (m, n, k))
        self._log_s = np.log(np.asarray(ms, dtype=np.float64) * 1e-3)

    def clamp_nk(self, n: float, k: float) -> tuple[float, float]:
        return float(np.clip(n, self.n[0], self.n[-1])), float(np.clip(k, self.k[0], self.k[-1]))

    def curve(self, n: float, k: float) -> Curve:
        """Seconds against m for an (n, k) inside the grid (bilinear in log space across n and k)."""
        wn, wk = _log_weights(self.n, n), _log_weights(self.k, k)
        if wn is None or wk is None:
            raise ValueError(f"GEMM n={n}, k={k} outside the measured grid")
        (n0, n1, a), (k0, k1, b) = wn, wk
        g = self._log_s
        log_s = (
            (1 - a) * (1 - b) * g[:, n0, k0]
            + a * (1 - b) * g[:, n1, k0]
            + (1 - a) * b * g[:, n0, k1]
            + a * b * g[:, n1, k1]
        )
        return Curve(self.m.tolist(), np.exp(log_s).tolist())


class AttentionTable:
    """One layer's attention time on one GPU for one head configuration: batch x length, NaN unmeasured.

    Each batch row is measured up to some length (long sequences at large batch were not run);
    ``row_curves[i]`` covers row i's measured prefix.
    """

    def __init__(self, batch: np.ndarray, lengths: np.ndarray, ms: np.ndarray, heads_scale: float = 1.0) -> None:
        self.batch = [float(b) for b in batch]
        self.rows: list[Curve] = []
        keep: list[float] = []
        for b, row in zip(self.batch, np.asarray(ms, dtype=np.float64), strict=True):
            ok = ~np.isnan(row) & (row > 0)
            if not ok.any():
                continue
            last = int(np.nonzero(ok)[0][-1]) + 1
            xs, ts = np.asarray(lengths, dtype=np.float64)[:last], row[:last]
            if np.isnan(ts).any():  # a hole inside a row: keep the measured points only
                xs, ts = xs[~np.isnan(ts)], ts[~np.isnan(ts)]
            keep.append(b)
            self.rows.append(Curve(xs.tolist(), (ts * 1e-3 * heads_scale).tolist()))
        self.batch = keep
        self._log_b = [math.log(b) for b in keep]


class SiliconTables:
    """One GPU's shipped tables, read lazily from ``data/<name>.npz``."""

    def __init__(self, name: str) -> None:
        path = DATA_DIR / f"{name}.npz"
        if not path.is_file():
            raise ValueError(f"no measured kernel tables for {name!r} (shipped: {', '.join(available())})")
        self.name = name
        self._npz = np.load(path)
        self.keys = frozenset(self._npz.files)

    def array(self, key: str) -> np.ndarray | None:
        return self._npz[key] if key in self.keys else None

    def gemm(self, dtype: str) -> GemmTable | None:
        """The GEMM table of ``dtype`` ("bf16" or "fp8"), or None when it was not measured."""
        if f"gemm/{dtype}/ms" not in self.keys:
            return None
        a = self._npz
        return GemmTable(a[f"gemm/{dtype}/m"], a[f"gemm/{dtype}/n"], a[f"gemm/{dtype}/k"], a[f"gemm/{dtype}/ms"])

    def head_configs(self, phase: str, kv_dtype: str) -> list[tuple[int, int, int]]:
        """The measured (query heads, KV heads, head dim) of ``phase`` ("prefill"/"decode") per GPU."""
        out = set()
        for key in self.keys:
            parts = key.split("/")
            if parts[0] == phase and parts[1] == kv_dtype and parts[-1] == "ms":
                out.add((int(parts[2]), int(parts[3]), int(parts[4])))
        return sorted(out)

    def attention(
        self, phase: str, kv_dtype: str, heads: int, kv_heads: int, head_dim: int
    ) -> tuple[AttentionTable, str] | None:
        """The attention table for a head configuration and how it was found, or None.

        Exact when measured ("measured"); otherwise the measured configuration with the same KV
        heads and head dim and the nearest query-head count, its times scaled by the ratio of query
        heads (attention work grows with the query heads at a fixed KV layout: "scaled by heads").
        """
        configs = [c for c in self.head_configs(phase, kv_dtype) if c[1] == kv_heads and c[2] == head_dim]
        if not configs:
            return None
        exact = (heads, kv_heads, head_dim) in configs
        ref = (heads, kv_heads, head_dim) if exact else min(configs, key=lambda c: (abs(math.log(c[0] / heads)), c[0]))
        key = f"{phase}/{kv_dtype}/{ref[0]}/{ref[1]}/{ref[2]}"
        a = self._npz
        table = AttentionTable(a[f"{key}/batch"], a[f"{key}/len"], a[f"{key}/ms"], heads / ref[0])
        return table, "measured" if exact else f"scaled by heads from {ref[0]}"

    def allreduce_arrays(self) -> dict[str, np.ndarray]:
        return {k: self._npz[k] for k in self.keys if k.startswith("allreduce/")}

    def moe(self, key: str) -> Curve | None:
        """The fused MoE layer's seconds against token count for ``moe/<dtype>/<dist>/h/inter/topk/E/tp/ep``."""
        arr = self.array(key)
        if arr is None:
            return None
        return Curve(arr[0].tolist(), (arr[1].astype(np.float64) * 1e-3).tolist())


@cache
def load_tables(name: str) -> SiliconTables:
    """The tables of GPU ``name``, read once per process."""
    return SiliconTables(name)
