"""Measured kernel tables as arrays, and the interpolation over them.

``load_tables`` reads one deployment's tables (``database.select``: a GPU of the aiconfigurator-core
package, NVIDIA's silicon database, Apache-2.0; or a folder ``servesim calibrate`` wrote) and keeps the
arrays ``convert`` derives from them in the user's cache folder: GEMMs on an m x n x k grid, prefill and
decode attention per head configuration and MLA modules on a batch x length grid (NaN where the collector
did not run), the custom all-reduce and NCCL's by message size, the fused MoE layer and the expert-parallel
all-to-all by token count. The cache file holds them packed (``LAYOUT``): a process reads a few flat blocks once
and each array is a read-only view into them.

Interpolation is piecewise linear in log(time) over log(coordinate) (a piecewise power law:
exact on the measured points, and between two of them it lies between their values). A lookup
outside what was measured answers None: the cost model decides how to extrapolate.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np

from simulator.cost.silicon import database
from simulator.cost.silicon.database import Selection

META_KEY = "__sources__"
_DAMAGED = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)  # what reading a broken cache file raises
LAYOUT = "packed1"
"""The cache file's layout: every array of one dtype in one flat block, an index of (dtype, offset, shape) per key
(``PackedArrays``). An ``.npz`` of one entry per array (the layout before) spends a second of a process that
reads every array parsing its ~20,000 zip entries; this one reads a few blocks and a JSON index."""
_BLOCKS = ("f4", "f8", "i8", "b1")


class PackedArrays(Mapping[str, np.ndarray]):
    """Arrays kept as read-only views into a few flat blocks, one per dtype (``pack``/``unpack``)."""

    def __init__(self, blocks: Mapping[str, np.ndarray], index: Mapping[str, list]) -> None:
        self._blocks = blocks
        self._index = index

    def __getitem__(self, key: str) -> np.ndarray:
        code, offset, shape = self._index[key]
        size = math.prod(shape)
        return self._blocks[code][offset : offset + size].reshape(shape)

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index


def pack(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` (float32/float64/int64/bool) as one flat block per dtype plus a JSON ``index``, for ``np.savez``."""
    parts: dict[str, list[np.ndarray]] = {code: [] for code in _BLOCKS}
    sizes = dict.fromkeys(_BLOCKS, 0)
    index = {}
    for key, array in arrays.items():
        code = np.asarray(array).dtype.str[1:]
        if code not in parts:
            raise ValueError(f"table {key}: dtype {array.dtype} cannot be packed")
        flat = np.ascontiguousarray(array).ravel()
        index[key] = (code, sizes[code], list(np.shape(array)))
        parts[code].append(flat)
        sizes[code] += flat.size
    out = {code: np.concatenate(p) if p else np.empty(0, np.dtype(code)) for code, p in parts.items()}
    out["index"] = np.array(json.dumps(index))
    return out


def unpack(stored: Mapping[str, np.ndarray]) -> PackedArrays:
    """The arrays ``pack`` stored (``stored`` as ``np.load`` reads it): read-only views, nothing copied per array."""
    blocks = {}
    for code in _BLOCKS:
        block = stored[code]
        block.flags.writeable = False  # views shared by every lookup: a table is never changed in place
        blocks[code] = block
    return PackedArrays(blocks, json.loads(str(stored["index"])))


def available() -> tuple[str, ...]:
    """Names of the GPUs whose measured tables the aiconfigurator-core dependency ships."""
    return database.systems()


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


def lower_within(a: Curve, b: Curve) -> Curve:
    """``a`` lowered to ``b`` where both bound one op's time from above: at each token count of ``a``'s range that
    either measures, the smaller of their times there. Outside ``a``'s range the caller's anchoring applies, as to
    ``a`` alone (``b`` measured further does not stand in for it there)."""
    xs = sorted(set(a.xs) | {x for x in b.xs if a.lo <= x <= a.hi})
    times = [min(t for t in (a(x), b(x)) if t is not None) for x in xs]
    return Curve(xs, times)


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

    def __init__(
        self, m: np.ndarray, n: np.ndarray, k: np.ndarray, ms: np.ndarray, filled: np.ndarray | None = None
    ) -> None:
        self.m, self.n, self.k = (np.asarray(a, dtype=np.float64) for a in (m, n, k))
        self._log_s = np.log(np.asarray(ms, dtype=np.float64) * 1e-3)
        # (n, k) columns measured at no m, filled from the nearest measured shape scaled by n x k (convert.py)
        self.filled = np.zeros((len(self.n), len(self.k)), dtype=bool) if filled is None else np.asarray(filled, bool)

    def unmeasured(self, n: float, k: float) -> bool:
        """Whether the curve at (n, k) leans on a column no m was measured at."""
        wn, wk = _log_weights(self.n, n), _log_weights(self.k, k)
        if wn is None or wk is None:
            return False
        (n0, n1, a), (k0, k1, b) = wn, wk
        corners = [(n0, k0, (1 - a) * (1 - b)), (n1, k0, a * (1 - b)), (n0, k1, (1 - a) * b), (n1, k1, a * b)]
        return any(w > 0 and self.filled[i, j] for i, j, w in corners)

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
        self.key = ""  # the arrays' key, set by SiliconTables (its source names framework, version and kernel)


class SiliconTables:
    """One deployment's measured tables: the arrays ``convert`` derives from its selection, read lazily."""

    def __init__(self, arrays: Mapping[str, np.ndarray], sources: Mapping[str, str], selection: Selection) -> None:
        self.name = selection.tables.name
        self.selection = selection
        self.sources = dict(sources)  # array group -> "vllm 0.24.0, <kernel>"
        self._npz = arrays
        self.keys = frozenset(k for k in arrays if k != META_KEY)
        self._head_configs: dict[tuple[str, str], list[tuple[int, int, int]]] = {}  # head_configs' scans

    def array(self, key: str) -> np.ndarray | None:
        return self._npz[key] if key in self.keys else None

    def describe(self) -> str:
        """``h200_sxm, vllm 0.24.0 (aiconfigurator-core 0.12.0)``."""
        sel = self.selection
        fw = sel.framework if sel.base == sel.framework else f"{sel.base}'s ({sel.framework} not measured)"
        return f"{self.name}, {fw} {sel.version} ({sel.tables.source})"

    def gemm(self, dtype: str) -> GemmTable | None:
        """The GEMM table of ``dtype`` ("bf16", "fp8", "fp8_block", "nvfp4"), or None when it was not measured."""
        if f"gemm/{dtype}/ms" not in self.keys:
            return None
        a = self._npz
        filled = a[f"gemm/{dtype}/filled"] if f"gemm/{dtype}/filled" in self.keys else None
        return GemmTable(
            a[f"gemm/{dtype}/m"], a[f"gemm/{dtype}/n"], a[f"gemm/{dtype}/k"], a[f"gemm/{dtype}/ms"], filled
        )

    def head_configs(self, phase: str, kv_dtype: str) -> list[tuple[int, int, int]]:
        """The measured (query heads, KV heads, head dim) of ``phase`` ("prefill"/"decode") per GPU."""
        found = self._head_configs.get((phase, kv_dtype))
        if found is None:
            out = set()
            for key in self.keys:
                parts = key.split("/")
                if parts[0] == phase and parts[1] == kv_dtype and parts[-1] == "ms":
                    out.add((int(parts[2]), int(parts[3]), int(parts[4])))
            found = self._head_configs[(phase, kv_dtype)] = sorted(out)
        return list(found)

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
        table.key = key
        return table, "measured" if exact else f"scaled by heads from {ref[0]}"

    def mla(self, phase: str, kv_dtype: str, gemm_dtype: str, heads: int) -> tuple[AttentionTable, str] | None:
        """One layer's MLA attention module (DeepSeek-V3's shape) at ``heads`` query heads per GPU, or None.

        ``phase`` is "mla_prefill" or "mla_decode". The module's GEMMs run in ``gemm_dtype`` where measured, else
        in bf16 ("bf16 module"); an unmeasured head count takes the nearest measured one scaled by heads.
        """
        for dtype in dict.fromkeys((gemm_dtype, "bf16")):
            found = sorted(
                int(k.split("/")[3])
                for k in self.keys
                if k.startswith(f"{phase}/{kv_dtype}/{dtype}/") and k.endswith("/ms")
            )
            if not found:
                continue
            ref = heads if heads in found else min(found, key=lambda h: (abs(math.log(h / heads)), h))
            key = f"{phase}/{kv_dtype}/{dtype}/{ref}"
            a = self._npz
            table = AttentionTable(a[f"{key}/batch"], a[f"{key}/len"], a[f"{key}/ms"], heads / ref)
            table.key = key
            how = "measured" if ref == heads else f"scaled by heads from {ref}"
            return table, how if dtype == gemm_dtype else f"{how}, bf16 module"
        return None

    def allreduce_arrays(self) -> dict[str, np.ndarray]:
        return {k: self._npz[k] for k in self.keys if k.startswith("allreduce/")}

    def nccl_arrays(self, op: str) -> dict[int, np.ndarray]:
        """NCCL's ``op`` ("all_gather", "reduce_scatter") by number of GPUs: (message bytes, seconds) rows."""
        prefix = f"nccl/{op}/"
        return {int(k[len(prefix) :]): self._npz[k] for k in self.keys if k.startswith(prefix)}

    def moe(self, key: str) -> Curve | None:
        """The fused MoE layer's seconds against token count for ``moe/<dtype>/<dist>/h/inter/topk/E/tp/ep``."""
        arr = self.array(key)
        if arr is None:
            return None
        return Curve(arr[0].tolist(), (arr[1].astype(np.float64) * 1e-3).tolist())

    def deepep_moe(self, phase: str, stem: str, ep: int) -> Curve | None:
        """SGLang's MoE experts under DeepEP in ``phase`` ("context" or "generation"): seconds against the EP group's
        tokens, for ``moew/<phase>/<stem>/<ep>`` (``stem``: dtype/distribution/h/inter/topk/E/moe_tp), or None.

        An EP size the collector did not run lies between two it ran: each GPU computes its 1/ep share of the same
        expert tokens, so the time is interpolated log-linearly in ep between the nearest measured sizes, at the
        token counts both measured."""
        found = self.moe(f"moew/{phase}/{stem}/{ep}")
        if found is not None:
            return found
        prefix = f"moew/{phase}/{stem}/"
        sizes = sorted(int(k[len(prefix) :]) for k in self.keys if k.startswith(prefix) and k[len(prefix) :].isdigit())
        below, above = [e for e in sizes if e < ep], [e for e in sizes if e > ep]
        if not below or not above:
            return None
        lo, hi = self.moe(f"{prefix}{below[-1]}"), self.moe(f"{prefix}{above[0]}")
        assert lo is not None and hi is not None
        xs = sorted(set(lo.xs) & set(hi.xs))
        if len(xs) < 2:
            return None
        w = (math.log(ep) - math.log(below[-1])) / (math.log(above[0]) - math.log(below[-1]))
        logs = [(lo.log_at(x), hi.log_at(x)) for x in xs]  # measured points of both: never None
        return Curve(xs, [math.exp((1 - w) * a + w * b) for a, b in logs])  # type: ignore[operator]

    def gdn(
        self, key_heads: int, key_dim: int, value_heads: int, value_dim: int
    ) -> tuple[AttentionTable, Curve] | None:
        """One Gated DeltaNet layer's kernels at a head layout per GPU (``convert._gdn``): prefill on the batch x
        prompt-length grid, decode against the batch; None where the layout was not measured."""
        key = f"{key_heads}/{key_dim}/{value_heads}/{value_dim}"
        decode = self.moe(f"gdn_decode/{key}")
        if decode is None or f"gdn_prefill/{key}/ms" not in self.keys:
            return None
        a = self._npz
        prefill = AttentionTable(a[f"gdn_prefill/{key}/batch"], a[f"gdn_prefill/{key}/len"], a[f"gdn_prefill/{key}/ms"])
        prefill.key = f"gdn_prefill/{key}"
        return prefill, decode

    def all_to_all(self, phase: str, hidden: int, topk: int, experts: int, ep: int) -> Curve | None:
        """DeepEP's ``phase`` ("dispatch"/"combine") seconds against tokens per GPU, for one MoE layer, or None."""
        return self.moe(f"a2a/{phase}/{hidden}/{topk}/{experts}/{ep}")


def cache_dir() -> Path:
    """Where derived arrays are kept: ``$SERVESIM_CACHE_DIR``, else the user's cache folder (platformdirs)."""
    env = os.environ.get("SERVESIM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("servesim", appauthor=False))


@cache
def _converter_digest() -> str:
    """The derivation's own version: a change to ``convert.py`` derives every cached table set again."""
    return hashlib.sha256((Path(__file__).parent / "convert.py").read_bytes()).hexdigest()[:12]


def _cache_path(sel: Selection, layout: str = LAYOUT) -> Path:
    """Where ``sel``'s derived arrays are kept in ``layout`` (``""``: the one-entry-per-array layout before)."""
    suffix = f".{layout}.npz" if layout else ".npz"
    t = sel.tables
    if t.source.startswith(database.DEPENDENCY):
        name = f"{t.name}-{sel.framework}-{sel.version}-{_converter_digest()}{suffix}"
        return cache_dir() / "silicon" / t.source.replace(" ", "-") / name
    # a folder's tables change when their sizes or modification times do
    fingerprint = ";".join(
        f"{p.relative_to(t.root)}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in sorted(t.root.rglob("*.parquet"))
    )
    key = f"{t.root}|{sel.framework}|{sel.version}|{fingerprint}|{_converter_digest()}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return cache_dir() / "silicon" / "folders" / f"{digest}{suffix}"


@cache
def load_tables(tables: str, framework: str = "vllm", version: str | None = None) -> SiliconTables:
    """The tables of ``tables`` (a GPU of the dependency, or a folder) for ``framework`` and ``version``.

    Derived once per dependency version (or folder contents) and kept in :func:`cache_dir` as a ``.npz``;
    later processes read that (milliseconds, where reading the parquet tables takes about a second).
    """
    sel = database.select(database.resolve(tables), framework, version)
    path = _cache_path(sel)
    if path.is_file():
        try:
            with np.load(path) as stored:
                sources = json.loads(str(stored[META_KEY]))
                arrays = unpack(stored)
            return SiliconTables(arrays, sources, sel)
        except _DAMAGED:  # a damaged cache file: derive again
            pass
    derived = _read_unpacked(_cache_path(sel, ""))  # kept by an earlier version in the layout before: no derivation
    if derived is None:
        from simulator.cost.silicon.convert import convert  # pandas and pyarrow: only when deriving

        derived = convert(sel)
    arrays, sources = derived
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            np.savez(f, **pack(arrays), **{META_KEY: np.array(json.dumps(sources))})
        os.replace(f.name, path)  # atomic: another process reads the old file or the new one, never half of one
    except OSError:  # a read-only cache folder: derived again next time
        pass
    return SiliconTables(arrays, sources, sel)


def _read_unpacked(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]] | None:
    """The arrays and sources of a cache file in the one-entry-per-array layout, or None (absent or damaged)."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as stored:
            sources = json.loads(str(stored[META_KEY]))
            return {k: stored[k] for k in stored.files if k != META_KEY}, sources
    except _DAMAGED:
        return None
