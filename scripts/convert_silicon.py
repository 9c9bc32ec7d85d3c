"""Convert NVIDIA aiconfigurator's measured kernel tables into the compact form servesim ships.

Run by hand from the repository root when the tables in ../shared/data/silicon change:

    python scripts/convert_silicon.py [--shared ../shared/data/silicon]

For each GPU it writes ``simulator/cost/silicon/data/<gpu>.npz`` (float32 milliseconds on
rectilinear grids; ``simulator.cost.silicon.tables`` reads it) and copies the licence. What is
kept, per GPU, is what vLLM runs by default (its own version's tables, ``collection_meta.yaml``):

- GEMMs ``[m x k] . [k x n]``: ``bfloat16`` (torch linear) and ``fp8`` (per-tensor W8A8, the
  kernel ``--quantization fp8`` selects: CutlassFP8ScaledMMLinearKernel), on the m x n x k grid;
- prefill attention (one layer, ``batch`` requests of ``isl`` new tokens, no cached prefix) and
  decode attention (``batch`` requests reading ``step`` cached tokens), full attention only
  (window 0), per (query heads, KV heads, head dim, KV dtype), on the batch x length grid, with
  the attention backend vLLM picks on that GPU (``ATTENTION_KERNELS``);
- vLLM's custom all-reduce (CUDA-graph and eager) and NCCL's all-reduce by message size and GPU count;
- the fused MoE layer by token count, per (hidden, inter, top-k, experts, TP, EP, distribution, dtype).

A GEMM grid point the collector did not run (``latency`` 0 or absent: only n = k = 65,536) is
filled from its neighbours along m (log-log), else from the nearest measured column; the count is
printed. Attention grids keep NaN where the collector did not run (large batch x long sequence):
the cost model falls back there to the roofline anchored at the row's longest measured length.
"""

from __future__ import annotations

import argparse
import glob
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "simulator" / "cost" / "silicon" / "data"
GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "l40s")

# The attention backend vLLM selects by default on each GPU (its V1 attention-backend selection:
# FlashAttention 2 on Ampere and Ada, FlashAttention 3 on Hopper, FlashInfer's TRT-LLM kernels on Blackwell).
ATTENTION_KERNELS = {
    "a100_sxm": ("vllm_flash_attn", "vllm_flash_attn"),
    "h100_sxm": ("vllm_flash_attn_fa3", "vllm_flash_attn_fa3"),
    "h200_sxm": ("vllm_flash_attn_fa3", "vllm_flash_attn_fa3"),
    "b200_sxm": ("vllm_flashinfer_trtllmprefill", "vllm_flashinfer_trtllmdecode"),
    "l40s": ("vllm_flash_attn_fa2", "vllm_flash_attn_fa2"),
}
# vLLM 0.14 (the A100 tables) names its unquantized linear kernel "vllm_default"; later versions name torch's.
GEMM_KERNELS = {
    "bfloat16": ("torch.nn.functional.linear", "vllm_default"),
    "fp8": ("CutlassFP8ScaledMMLinearKernel",),
}
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block"}


def _one(shared: Path, gpu: str, pattern: str) -> Path | None:
    found = sorted(glob.glob(str(shared / "aiconfigurator" / gpu / pattern)))
    return Path(found[-1]) if found else None


def _required(shared: Path, gpu: str, pattern: str) -> Path:
    """The newest table matching ``pattern``; ValueError naming what is missing when there is none."""
    path = _one(shared, gpu, pattern)
    if path is None:
        raise ValueError(f"{shared / 'aiconfigurator' / gpu / pattern}: no such table (needed for {gpu})")
    return path


def fill_missing(grid: np.ndarray, axis0: np.ndarray) -> int:
    """Fill NaNs in place along axis 0 (log time over log coordinate), then by the nearest measured value."""
    filled = int(np.isnan(grid).sum())
    if not filled:
        return 0
    flat = grid.reshape(grid.shape[0], -1)
    x = np.log(axis0.astype(np.float64))
    for j in range(flat.shape[1]):
        col = flat[:, j]
        ok = ~np.isnan(col)
        if ok.all() or not ok.any():
            continue
        col[~ok] = np.exp(np.interp(x[~ok], x[ok], np.log(col[ok])))  # np.interp clamps at the ends
    if np.isnan(flat).any():  # whole columns missing: nearest column along the next axis
        for j in range(flat.shape[1]):
            if np.isnan(flat[:, j]).all():
                ok = [i for i in range(flat.shape[1]) if not np.isnan(flat[:, i]).all()]
                nearest = min(ok, key=lambda i: abs(i - j))
                flat[:, j] = flat[:, nearest]
    return filled


def grid_from(frame: pd.DataFrame, axes: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
    """The frame's latencies on the rectilinear grid of its axes' values (NaN where not measured)."""
    frame = frame[frame.latency > 0]
    values = [np.array(sorted(frame[a].unique())) for a in axes]
    grid = np.full([len(v) for v in values], np.nan, dtype=np.float64)
    index = [np.searchsorted(v, frame[a].to_numpy()) for v, a in zip(values, axes, strict=True)]
    grid[tuple(index)] = frame.latency.to_numpy()
    return values, grid


def convert(shared: Path, gpu: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    filled = 0
    gemm = pd.read_parquet(_required(shared, gpu, "gemm/vllm/*/gemm_perf.parquet"))
    for dtype, kernel in GEMM_KERNELS.items():
        part = gemm[(gemm.gemm_dtype == dtype) & gemm.kernel_source.isin(kernel)]
        if part.empty:
            continue
        (m, n, k), grid = grid_from(part, ["m", "n", "k"])
        filled += fill_missing(grid, m)
        key = "bf16" if dtype == "bfloat16" else dtype
        out[f"gemm/{key}/m"], out[f"gemm/{key}/n"], out[f"gemm/{key}/k"] = m, n, k
        out[f"gemm/{key}/ms"] = grid.astype(np.float32)

    prefill_kernel, decode_kernel = ATTENTION_KERNELS[gpu]
    for table, kernel, length in (
        ("context_attention_perf", prefill_kernel, "isl"),
        ("generation_attention_perf", decode_kernel, "step"),
    ):
        frame = pd.read_parquet(_required(shared, gpu, f"attention/vllm/*/{table}.parquet"))
        frame = frame[frame.kernel_source == kernel]
        if "window_size" in frame:
            frame = frame[frame.window_size == 0]
        name = "prefill" if length == "isl" else "decode"
        for (kv_dtype, heads, kv_heads, dim), part in frame.groupby(
            ["kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim"]
        ):
            if kv_dtype not in KV_DTYPES or (part.latency > 0).sum() < 4:
                continue
            (batch, lengths), grid = grid_from(part, ["batch_size", length])
            # large batch x long sequence was not run (memory): left NaN, the cost model anchors the
            # roofline at each batch row's longest measured length there
            key = f"{name}/{KV_DTYPES[kv_dtype]}/{heads}/{kv_heads}/{dim}"
            out[f"{key}/batch"], out[f"{key}/len"], out[f"{key}/ms"] = batch, lengths, grid.astype(np.float32)

    custom = _one(shared, gpu, "comm/vllm/*/custom_allreduce_perf.parquet")
    nccl = _one(shared, gpu, "comm/nccl/*/nccl_perf.parquet")
    frames = []
    if custom is not None:
        c = pd.read_parquet(custom)
        frames += [(b, c[c.backend == b]) for b in ("vllm_graph", "vllm_eager")]
    if nccl is not None:
        c = pd.read_parquet(nccl)
        frames.append(("nccl", c[(c.op_name == "all_reduce") & (c.nccl_dtype == "half")]))
    for backend, frame in frames:
        frame = frame[frame.latency > 0]
        for n_gpus, part in frame.groupby("num_gpus"):
            part = part.sort_values("message_size")
            # message_size counts 2-byte elements (bfloat16 / half): bytes and seconds
            out[f"allreduce/{backend}/{n_gpus}"] = np.stack(
                [part.message_size.to_numpy(np.float64) * 2, part.latency.to_numpy(np.float64) * 1e-3]
            )

    moe_path = _one(shared, gpu, "moe/vllm/*/moe_perf.parquet")
    if moe_path is not None:
        moe = pd.read_parquet(moe_path)
        moe = moe[(moe.latency > 0) & moe.moe_dtype.isin(list(MOE_DTYPES))]
        cols = [
            "moe_dtype",
            "distribution",
            "hidden_size",
            "inter_size",
            "topk",
            "num_experts",
            "moe_tp_size",
            "moe_ep_size",
        ]
        for keys, part in moe.groupby(cols):
            # several kernels for one configuration: the fastest, as vLLM's MoE kernel selection aims to take
            part = part.groupby("num_tokens").latency.min().sort_index()
            if len(part) < 2:
                continue
            dtype, dist, *rest = keys
            key = "/".join(["moe", MOE_DTYPES[dtype], dist, *map(str, rest)])
            out[key] = np.stack([part.index.to_numpy(np.float64), part.to_numpy(np.float64)]).astype(np.float32)
    print(f"{gpu}: {len(out)} arrays, {filled} GEMM grid points filled from neighbours")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data" / "silicon")
    args = parser.parse_args()
    if not (args.shared / "aiconfigurator").is_dir():
        parser.error(f"--shared {args.shared}: no aiconfigurator/ folder (this script needs ../shared/data/silicon)")
    try:
        tables = {gpu: convert(args.shared, gpu) for gpu in GPUS}  # every table read before any is written
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    OUT.mkdir(parents=True, exist_ok=True)
    for gpu, arrays in tables.items():
        np.savez_compressed(OUT / f"{gpu}.npz", **arrays)
    shutil.copyfile(args.shared / "aiconfigurator" / "LICENSE", OUT / "LICENSE-aiconfigurator")
    total = sum(p.stat().st_size for p in OUT.glob("*.npz"))
    print(f"wrote {OUT} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
