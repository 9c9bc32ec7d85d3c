"""The measured parquet tables of one deployment's selection, as the arrays the silicon model interpolates.

What is kept, per table (all times float32 milliseconds on rectilinear grids, NaN where not measured):

- ``gemm/<dtype>/{m,n,k,ms}``: ``[m x k] . [k x n]`` for ``bf16``, ``fp8`` (per-tensor W8A8), ``fp8_block``
  (128x128 block scales, DeepSeek-V3's checkpoints) and ``nvfp4`` / ``mxfp4`` where measured, with the kernel the
  engine runs by default (``GEMM_KERNELS``);
- ``prefill|decode/<kv dtype>/<heads>/<kv heads>/<head dim>/{batch,len,ms}``: one layer's attention (prefill:
  ``batch`` prompts of ``len`` new tokens; decode: ``batch`` sequences reading ``len`` cached tokens), full attention
  only, with the engine's default backend on that GPU (``ATTENTION_KERNELS``);
- ``mla_prefill|mla_decode/<kv dtype>/<gemm dtype>/<heads>/{batch,len,ms}``: one layer's whole MLA attention module
  of DeepSeek-V3's shape (projections, rotary, attention; ``heads`` per GPU);
- ``dsa@<architecture>_prefill|decode/<kv dtype>/<gemm dtype>/<heads>/{batch,len,ms}``: the same for DeepSeek sparse
  attention (the indexer, its top-k and sparse MLA) of each measured architecture (DeepSeek-V3.2's, GLM-5's);
- ``allreduce/<vllm_graph|vllm_eager|nccl>/<gpus>``: the engine's custom all-reduce (CUDA-graph and eager; the keys
  are the calibration profile's, named for vLLM, and hold SGLang's or TensorRT-LLM's kernel for those engines) and
  NCCL's, by message bytes;
- ``nccl/<all_gather|reduce_scatter>/<gpus>``: NCCL's all-gather and reduce-scatter by message bytes (nccl-tests'
  size: the whole gathered buffer, the whole buffer reduced), for the MoE token exchange of TensorRT-LLM's
  attention-DP layout;
- ``moe/<dtype>/<distribution>/<hidden>/<inter>/<topk>/<experts>/<tp>/<ep>``: the fused MoE layer by token count
  (the fastest kernel measured, as the engines' MoE kernel selection aims to take);
- ``moew/<context|generation>/<dtype>/...`` (the ``moe`` key's fields): SGLang's MoE experts under DeepEP by the EP
  group's tokens, in prefill (normal mode) and decode (low-latency mode) steps;
- ``a2a/<dispatch|combine>/<hidden>/<topk>/<experts>/<ep>``: the expert-parallel all-to-all (DeepEP) by tokens.

A GEMM grid point the collector did not run (only at the largest n x k) is filled from its neighbours along m.

**Timing glitches** (``monotone_in_m``). Each GEMM shape is timed once, and a glitch only ever makes a kernel measure
slower than it runs (another process, a clock dip, a cold cache, launch jitter). Some tables hold many: in vLLM
0.24.0's CUTLASS FP8 table on B200, 12 % of the points are more than 1.3x the time measured at some larger m, its
first row (m = 1, timed first for each n x k) in 81 % of the shapes; FP8 at n x k = 2560 x 8192 takes 27.2, 32.5,
12.9, 32.4, 12.8 us at m = 1-5, where one CUTLASS configuration serves m up to 16 (vLLM's
``scaled_mm_sm100_fp8_dispatch.cuh``). TensorRT-LLM's FP8 table on the same GPU has 0.1 %. One kernel does no less
work for more rows (m is padded up to its tile), so a GEMM's time does not fall as m grows. Each n x k column is read
as the non-decreasing curve in m nearest the measurements in absolute deviation (isotonic median regression: the
pool-adjacent-violators algorithm with each pooled block at its lower median): a measured curve that already rises
is kept as measured, an isolated glitch is outvoted by its neighbours, and ordinary noise is neither dropped nor
pushed down (a least-time rule would read every point at the luckiest timing above it: 2 % faster on average on the
tables that are clean, such as TensorRT-LLM's).

**Untuned GEMM tables** (``UNTUNED_GEMMS``): TensorRT-LLM's NVFP4 GEMM rows were timed outside the engine's
autotuner, which the serving engine runs at startup; they are read from another engine's NVFP4 table of the GPU.

**Host-bound GEMM tables.** A GEMM kernel timed outside a CUDA graph through its Python wrapper measures the host's
dispatch wherever that is longer than the kernel: its smallest problems then all take the same time, far above any
kernel's launch floor. Every other GEMM table of the dependency takes 6-13 us on its smallest shapes (one kernel
launch); vLLM 0.24.0's block-FP8 tables take 60-500 us there on every GPU, flat over m (h200_sxm DeepGEMM: 85 us from
m = 32 to 4096 at n x k = 1024 x 3072, where SGLang's collector times the same DeepGEMM ``fp8_gemm_nt`` kernel at
7-15 us). A decode step replays a CUDA graph, which pays the kernels only, so such a table (median over its
smallest-work 5 % of rows above ``HOST_BOUND_FLOOR_MS``) is not read: the same dtype is read from the other engines'
tables of the same GPU (SGLang's DeepGEMM, then TensorRT-LLM's), named in the source.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.cost.silicon.database import Selection, Table, newest, version_key

# The attention kernel each engine runs by default, most preferred first; the first one the table has is read.
# vLLM: FlashAttention 3 on Hopper, FlashInfer's TRT-LLM kernels on Blackwell, FlashAttention 2 on Ampere and Ada
# (vllm/platforms/cuda.py, get_attn_backend_cls). SGLang: fa3 on Hopper, trtllm_mha on Blackwell, flashinfer
# elsewhere (sglang/srt/server_args.py, the attention-backend defaults). TensorRT-LLM: its own TRTLLM backend
# (aiconfigurator names it torch_flow).
ATTENTION_KERNELS = {
    "vllm": {
        "prefill": (
            "vllm_flash_attn_fa3",
            "vllm_flashinfer_trtllmprefill",
            "vllm_flash_attn_fa2",
            "vllm_flash_attn",
            "vllm_flashinfer",
            "vllm_triton_attn",
        ),
        "decode": (
            "vllm_flash_attn_fa3",
            "vllm_flashinfer_trtllmdecode",
            "vllm_flash_attn_fa2",
            "vllm_flash_attn",
            "vllm_flashinfer",
            "vllm_triton_attn",
        ),
    },
    "sglang": {phase: ("fa3", "trtllm_mha", "flashinfer", "triton") for phase in ("prefill", "decode")},
    "trtllm": {phase: ("torch_flow", "torch_flow_flashinfer") for phase in ("prefill", "decode")},
}
# The linear kernel each engine runs for a weight dtype, most preferred first. vLLM: torch's linear for bf16
# (``vllm_default`` in 0.14), CUTLASS scaled-mm for per-tensor FP8, DeepGEMM for block FP8 (VLLM_USE_DEEP_GEMM is on
# by default), FlashInfer's CuTe DSL kernel for NVFP4. SGLang: torch linear, sgl-kernel fp8_scaled_mm, DeepGEMM,
# FlashInfer.
GEMM_KERNELS = {
    "vllm": {
        "bfloat16": ("torch.nn.functional.linear", "vllm_default"),
        "fp8": ("CutlassFP8ScaledMMLinearKernel",),
        "fp8_block": (
            "DeepGemmFp8BlockScaledMMKernel",
            "CutlassFp8BlockScaledMMKernel",
            "FlashInferFp8BlockScaledMMKernel",
        ),
        "nvfp4": ("FlashInferCuteDslNvFp4LinearKernel",),
    },
    "sglang": {
        "bfloat16": ("sglang_torch_linear",),
        "fp8": ("sglang_sgl_kernel_fp8_scaled_mm",),
        "fp8_block": ("sglang_deepgemm_gemm_nt_f8f8bf16",),
        "nvfp4": ("sglang_flashinfer_cutedsl_nvfp4",),
    },
    "trtllm": {dtype: ("torch_flow", "deepgemm") for dtype in ("bfloat16", "fp8", "fp8_block", "nvfp4")},
}
# The MLA backend each engine runs by default (vLLM: FlashMLA on Hopper, the CUTLASS or FlashInfer MLA kernels on
# Blackwell, vllm/platforms/cuda.py); a table without them is read at its most measured backend.
MLA_KERNELS = {
    "vllm": ("FLASHMLA", "CUTLASS_MLA", "FLASHINFER_MLA", "FLASH_ATTN_MLA", "TRITON_MLA"),
    "sglang": ("flashinfer", "flash_attention", "fa3"),
    "trtllm": ("default",),
}
# The DSA module's kernels each engine runs, most preferred first. SGLang 0.5.14 prefills up to index_topk (2048)
# tokens with dense MHA whichever NSA backend is set (the ``dense_mha`` rows, measured to 2048: aiconfigurator's
# note on its DSA tables), beyond with the sparse kernel of the KV dtype (TRT-LLM's on Blackwell for FP8, FlashMLA's
# sparse kernel for bf16; FlashMLA's FP8-KV kernel on Hopper; SGLang's nsa_backend.py set_nsa_prefill_impl). vLLM
# ranks FlashInfer's sparse MLA first on Blackwell with an FP8 KV cache or at most 16 heads a GPU, FlashMLA's sparse
# kernel otherwise and on Hopper, its only one there (vllm/platforms/cuda.py, the backend priorities).
DSA_KERNELS = {
    "sglang": {
        "prefill": (
            "sglang_dsa_dense_mha_trtllm_ragged",
            "sglang_dsa_dense_mha_fa3",
            "sglang_dsa_indexer_trtllm",
            "sglang_dsa_indexer_flashmla_kv",
            "sglang_dsa_indexer_flashmla_sparse",
        ),
        "decode": ("sglang_dsa_indexer_trtllm", "sglang_dsa_indexer_flashmla_kv", "sglang_dsa_indexer_fa3"),
    },
    "vllm": {phase: ("FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE") for phase in ("prefill", "decode")},
    "trtllm": {phase: ("default",) for phase in ("prefill", "decode")},
}
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}
KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
# A table with no bfloat16 rows (a device calibrated in float16, or float32 on a CPU) serves the 16-bit lookups
# from these, in order, named in the table's source.
UNQUANTIZED_FALLBACKS = ("float16", "float32")
MOE_DTYPES = {
    "bfloat16": "bf16",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "nvfp4",
    "w4a16_mxfp4": "mxfp4",
    "w4a8_mxfp4_mxfp8": "mxfp4_mxfp8",  # MXFP4 experts with the activations quantized to MXFP8 (Blackwell)
    "int4_wo": "int4_wo",  # INT4 weight-only experts, bf16 activations (W4A16)
}
# A GEMM table whose smallest problems take longer than this times the host, not the kernel (module docstring): one
# kernel launch takes 6-13 us in every GEMM table of aiconfigurator-core 0.12 measured through a CUDA graph or
# events on the kernel alone; the host-bound tables take 60 us and more.
HOST_BOUND_FLOOR_MS = 0.040
# A decode attention module table whose smallest shapes take more than this many times another engine's measurement
# of the same module on the same GPU times the host: a decode step replays a CUDA graph, which pays the kernels only,
# so the faster measurement is read (the host adds time, it never removes GPU time). In aiconfigurator-core 0.12
# vLLM 0.24.0's MLA generation module takes 83-115 us at batch 1 on B300, GB200, GB300, H100 and H200 where
# TensorRT-LLM's takes 45-53 us on each, vLLM 0.24.0's own on B200 46 us and vLLM 0.27.0's on GB300 44 us (on
# Blackwell both engines run TRT-LLM-gen's MLA decode kernels; FlashInfer's MLA wraps them). Measurements of the same
# module by two engines that both time the kernels differ by 1.2x at most (B200: vLLM 46 us, TensorRT-LLM 52 us).
# Applied to the MLA module only: the DSA modules' engines run different sparse kernels (vLLM 0.24.0's GLM-5 DSA
# decode takes 170 us at batch 1 on B200 against SGLang's 76 us and TensorRT-LLM's 93 us, and TensorRT-LLM's on
# H200 245 us against SGLang's 97 us), with no measurement that tells a host-bound table from a slower kernel.
HOST_BOUND_MODULE_RATIO = 1.5
# The engines whose tables stand in for a host-bound one, in order (SGLang's block-FP8 GEMM is DeepGEMM's
# fp8_gemm_nt, the kernel vLLM calls for block FP8 by default).
STAND_IN_FRAMEWORKS = ("sglang", "trtllm", "vllm")
# GEMM dtypes whose kernel an engine picks by its autotuner, timed by the engine's collector outside it: the table
# holds the fallback tactic, where the serving engine tunes every such op at startup. TensorRT-LLM's NVFP4 GEMM
# (``trtllm::nvfp4_gemm``, ``AutoTuner.choose_one`` over its runners' tactics) is tuned by the PyExecutor's
# ``_run_autotuner_warmup`` (``enable_autotuner`` defaults to True), while aiconfigurator's collector/trtllm/
# collect_gemm.py runs ``Linear.forward`` without ``autotune()`` (its MoE collector tunes): on B200 its rows take
# 22.3 us at m = 8 of n x k = 7168 x 8192, where SGLang's and vLLM's NVFP4 GEMMs take 12.5 and 13.3 us. Such a
# table is read from another engine's measurement of the dtype on the same GPU (``STAND_IN_FRAMEWORKS``).
UNTUNED_GEMMS = {"trtllm": ("nvfp4",)}


def preferred_kernel(frame: pd.DataFrame, preferences: tuple[str, ...]) -> str | None:
    """The first of ``preferences`` the frame has; else the kernel with the most rows (ties by name); None if empty."""
    present = set(frame.kernel_source.unique())
    for name in preferences:
        if name in present:
            return name
    if not present:
        return None
    counts = frame.kernel_source.value_counts()
    return min(present, key=lambda k: (-int(counts[k]), str(k)))


def by_preference(frame: pd.DataFrame, preferences: tuple[str, ...], axes: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """One measurement per point of ``axes``: the preferred kernel's where it was run, another kernel's where it was
    not (the collector ran some kernels over part of the grid only: vLLM's DeepGEMM block-FP8 GEMMs from m = 256,
    FlashInfer's below; its FLASH_ATTN_MLA context module up to 512 tokens), and the kernels used, in order."""
    ranked, used = [], []
    rest = frame[frame.latency > 0]
    while len(rest):
        kernel = preferred_kernel(rest, preferences)
        assert kernel is not None
        ranked.append(rest[rest.kernel_source == kernel])
        rest = rest[rest.kernel_source != kernel]
        used.append(str(kernel))
    if not ranked:
        return frame.iloc[:0], used
    return pd.concat(ranked).drop_duplicates(axes, keep="first"), used


def fill_missing(grid: np.ndarray, axis0: np.ndarray, work: np.ndarray | None = None) -> np.ndarray:
    """Fill NaNs in place: along axis 0 (log time over log coordinate) within a column measured somewhere, then a
    column never measured from the measured one nearest in log ``work`` (one value per column, e.g. n x k of a
    GEMM), scaled by the ratio of their work (a GEMM's weights read and FLOPs both grow with n x k).

    Returns the mask of the columns filled whole (not measured at any m), so a lookup there is not taken for a
    measurement.
    """
    flat = grid.reshape(grid.shape[0], -1)
    whole = np.isnan(flat).all(axis=0)
    if not np.isnan(flat).any():
        return whole.reshape(grid.shape[1:])
    x = np.log(axis0.astype(np.float64))
    for j in range(flat.shape[1]):
        col = flat[:, j]
        ok = ~np.isnan(col)
        if ok.all() or not ok.any():
            continue
        col[~ok] = np.exp(np.interp(x[~ok], x[ok], np.log(col[ok])))  # np.interp clamps at the ends
    if whole.any():
        measured = np.nonzero(~whole)[0]
        logw = np.log(work.reshape(-1)) if work is not None else np.arange(flat.shape[1], dtype=np.float64)
        for j in np.nonzero(whole)[0]:
            nearest = measured[np.argmin(np.abs(logw[measured] - logw[j]))]
            flat[:, j] = flat[:, nearest] * (np.exp(logw[j] - logw[nearest]) if work is not None else 1.0)
    return whole.reshape(grid.shape[1:])


def isotonic_median(values: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest ``values`` in absolute deviation (pool adjacent violators, each pooled
    block at its lower median, one of the L1-optimal values and the one a block holding an upward glitch leans
    away from)."""
    blocks: list[tuple[list[float], float]] = []
    for value in values.tolist():
        pooled, level = [value], value
        while blocks and blocks[-1][1] > level:
            earlier, _ = blocks.pop()
            pooled = earlier + pooled
            level = sorted(pooled)[(len(pooled) - 1) // 2]
        blocks.append((pooled, level))
    return np.array([level for pooled, level in blocks for _ in pooled], dtype=np.float64)


def monotone_in_m(grid: np.ndarray) -> np.ndarray:
    """``grid`` (times, axis 0 the GEMM's m) with each column read as the non-decreasing curve in m nearest its
    measurements (``isotonic_median``; module docstring, timing glitches); NaN (not measured) stays NaN, for
    ``fill_missing`` to fill from the fitted times after. Each time read is one of its column's own values (a lower
    median is an element: a measurement, the mean of repeated ones), so the fit is the same on times or on logs."""
    flat = grid.reshape(grid.shape[0], -1)
    out = np.array(flat, dtype=np.float64)
    for j in range(flat.shape[1]):
        measured = ~np.isnan(flat[:, j])
        if measured.sum() > 1:
            out[measured, j] = isotonic_median(flat[measured, j])
    return out.reshape(grid.shape)


def grid_from(frame: pd.DataFrame, axes: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
    """The frame's latencies on the rectilinear grid of its axes' values (NaN where not measured; repeats averaged)."""
    frame = frame[frame.latency > 0]
    frame = frame.groupby(axes, as_index=False).latency.mean()
    values = [np.array(sorted(frame[a].unique()), dtype=np.float64) for a in axes]
    grid = np.full([len(v) for v in values], np.nan, dtype=np.float64)
    index = [np.searchsorted(v, frame[a].to_numpy(np.float64)) for v, a in zip(values, axes, strict=True)]
    grid[tuple(index)] = frame.latency.to_numpy()
    return values, grid


# The columns each table must have for what is read from it (a folder's tables are checked, not trusted).
_COMMON = ("kernel_source", "latency")
_DSA = (*_COMMON, "op_name", "architecture", "kv_cache_dtype", "gemm_type", "num_heads", "batch_size")
REQUIRED_COLUMNS = {
    "gemm_perf.parquet": (*_COMMON, "gemm_dtype", "m", "n", "k"),
    "context_attention_perf.parquet": (
        *_COMMON,
        "kv_cache_dtype",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "batch_size",
        "isl",
    ),
    "generation_attention_perf.parquet": (
        *_COMMON,
        "kv_cache_dtype",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "batch_size",
        "step",
    ),
    "mla_context_module_perf.parquet": (*_COMMON, "kv_cache_dtype", "num_heads", "batch_size", "isl"),
    "mla_generation_module_perf.parquet": (*_COMMON, "kv_cache_dtype", "num_heads", "batch_size", "step"),
    "dsa_context_module_perf.parquet": (*_DSA, "isl"),
    "dsa_generation_module_perf.parquet": (*_DSA, "step"),
    "computescale_perf.parquet": ("latency", "m", "k"),
    "custom_allreduce_perf.parquet": ("latency", "num_gpus", "message_size"),
    "nccl_perf.parquet": ("latency", "op_name", "nccl_dtype", "num_gpus", "message_size"),
    "moe_perf.parquet": (
        "latency",
        "moe_dtype",
        "distribution",
        "hidden_size",
        "inter_size",
        "topk",
        "num_experts",
        "moe_tp_size",
        "moe_ep_size",
        "num_tokens",
    ),
    "moe_a2a_perf.parquet": ("latency", "phase", "hidden_size", "topk", "num_experts", "ep_size", "num_tokens"),
    "gdn_perf.parquet": (
        *_COMMON,
        "phase",
        "batch_size",
        "seq_len",
        "d_model",
        "num_k_heads",
        "head_k_dim",
        "num_v_heads",
        "head_v_dim",
    ),
}
for _phase in ("context", "generation"):  # SGLang's DeepEP MoE layer: the fused MoE table's columns
    REQUIRED_COLUMNS[f"wideep_{_phase}_moe_perf.parquet"] = REQUIRED_COLUMNS["moe_perf.parquet"]
# TensorRT-LLM's wide-EP MoE layer: the fused MoE table's columns and the experts' weight slots (before the layout, as
# its key reads them)
_MOE = REQUIRED_COLUMNS["moe_perf.parquet"]
REQUIRED_COLUMNS["wideep_moe_perf.parquet"] = (
    *_MOE[: _MOE.index("moe_tp_size")],
    "num_slots",
    *_MOE[_MOE.index("moe_tp_size") :],
)


def _read(table: Table | None) -> pd.DataFrame | None:
    """The table's rows; ValueError naming the file and the columns it lacks (ArrowInvalid, a ValueError, for a file
    that is not parquet)."""
    if table is None:
        return None
    frame = pd.read_parquet(table.path)
    missing = [c for c in REQUIRED_COLUMNS.get(table.path.name, ()) if c not in frame.columns]
    if missing:
        raise ValueError(f"{table.path}: no column {', '.join(missing)} (not a measured table in the database layout)")
    return frame


def host_bound_floor_ms(part: pd.DataFrame) -> float | None:
    """The median time of the smallest-work 5 % of a GEMM table's rows when it exceeds ``HOST_BOUND_FLOOR_MS`` (the
    table times the host: module docstring), else None."""
    work = 2.0 * part.m.to_numpy(np.float64) * part.n.to_numpy(np.float64) * part.k.to_numpy(np.float64)
    floor = float(np.median(part.latency.to_numpy(np.float64)[work <= np.quantile(work, 0.05)]))
    return floor if floor > HOST_BOUND_FLOOR_MS else None


def _gemm_rows(table: Table, frame: pd.DataFrame, dtype: str) -> tuple[pd.DataFrame, list[str]]:
    """One measurement per (m, n, k) of ``dtype`` in ``frame`` (``table``'s rows), by the engine's kernel preference."""
    part = frame[frame.gemm_dtype == dtype]
    if dtype == "bfloat16" and part.empty:  # a device measured at another 16-bit (or 32-bit) dtype
        for other in UNQUANTIZED_FALLBACKS:
            part = frame[frame.gemm_dtype == other]
            if not part.empty:
                break
    return by_preference(part, GEMM_KERNELS.get(table.framework, {}).get(dtype, ()), ["m", "n", "k"])


def _stand_in(sel: Selection, dtype: str) -> tuple[Table, pd.DataFrame, list[str]] | None:
    """Another engine's measurement of ``dtype`` on the same GPU that times its kernels, for a host-bound table."""
    gemm = sel.tables.versions().get("gemm", {})
    for framework in STAND_IN_FRAMEWORKS:
        if framework == sel.base or framework not in gemm:
            continue
        table = Selection(sel.tables, framework, newest(gemm[framework]), framework).table("gemm", "gemm_perf.parquet")
        frame = _read(table)
        if table is None or frame is None:
            continue
        part, kernels = _gemm_rows(table, frame, dtype)
        if len(part) >= 8 and host_bound_floor_ms(part) is None:
            return table, part, kernels
    return None


def _gemm(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    table = sel.table("gemm", "gemm_perf.parquet")
    frame = _read(table)
    if frame is None:
        return
    for dtype, key in GEMM_DTYPES.items():
        part, kernels = _gemm_rows(table, frame, dtype)
        if len(part) < 8:
            continue
        source, note = table, ""
        floor = host_bound_floor_ms(part)
        untuned = dtype in UNTUNED_GEMMS.get(table.framework, ())
        if floor is not None or untuned:
            stand_in = _stand_in(sel, dtype)
            if stand_in is not None:
                why = f"host-bound: {floor * 1e3:.0f} us on its smallest shapes" if floor is not None else "untuned"
                note = f" ({table.describe()} {kernels[0]} {why})"
                source, part, kernels = stand_in
        if source.framework == "trtllm" and dtype == "fp8":
            part, scale_note = _static_activation_scale(sel, part)
            note += scale_note
        kernel = kernels[0] + (f" (gaps: {', '.join(kernels[1:])})" if kernels[1:] else "")
        (m, n, k), grid = grid_from(part, ["m", "n", "k"])
        grid = monotone_in_m(grid)  # before the gaps are filled, so that only measured times vote
        filled = fill_missing(grid, m, np.outer(n, k))
        out[f"gemm/{key}/m"], out[f"gemm/{key}/n"], out[f"gemm/{key}/k"] = m, n, k
        out[f"gemm/{key}/ms"] = grid.astype(np.float32)
        out[f"gemm/{key}/filled"] = filled
        dtype_used = str(part.gemm_dtype.iloc[0])
        meta[f"gemm/{key}"] = (
            f"{source.describe()}, {kernel}" + (f", {dtype_used}" if dtype_used != dtype else "") + note
        )


def _static_activation_scale(sel: Selection, part: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """TensorRT-LLM's per-tensor FP8 GEMM rows without the activation's dynamic scale: its collector loads no
    input_scale, so every timed call computes one (a memset, an amax pass and a cast before the quantize kernel:
    aiconfigurator's collector/trtllm/collect_gemm.py, TensorRT-LLM's FP8QDQLinearMethod), where the per-tensor FP8
    checkpoints it serves (ModelOpt's) carry static input scales and quantize with them alone. The same engine's
    measurement of that difference (quantize/trtllm/<v>/computescale_perf, dynamic minus static per (m, k)) is
    subtracted, as aiconfigurator prices static FP8 (its fp8_static GEMM: fp8 minus compute_scale); a row whose
    difference is not below its time keeps its time."""
    table = sel.table("quantize", "computescale_perf.parquet")
    if table is None or table.framework != "trtllm":
        return part, ""
    scale = _read(table)
    assert scale is not None
    scale = scale[scale.latency > 0].groupby(["m", "k"]).latency.median().rename("scale_ms")
    merged = part.join(scale, on=["m", "k"])
    less = merged.latency - merged.scale_ms.fillna(0.0)
    part = part.assign(latency=less.where(less > 0, merged.latency).to_numpy())
    return part, f" (static activation scale: {table.describe()} compute_scale subtracted)"


def _batch_length_grid(out: dict[str, np.ndarray], key: str, part: pd.DataFrame, length: str) -> None:
    """``key/batch``, ``key/len`` and ``key/ms``: one layer's times on the batch x ``length`` grid of ``part``."""
    (batch, lengths), grid = grid_from(part, ["batch_size", length])
    out[f"{key}/batch"], out[f"{key}/len"], out[f"{key}/ms"] = batch, lengths, grid.astype(np.float32)


def _attention(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    for filename, phase, length in (
        ("context_attention_perf.parquet", "prefill", "isl"),
        ("generation_attention_perf.parquet", "decode", "step"),
    ):
        table = sel.table("attention", filename)
        frame = _read(table)
        if frame is None:
            continue
        if "window_size" in frame:
            frame = frame[frame.window_size == 0]
        prefs = ATTENTION_KERNELS.get(table.framework, {}).get(phase, ())
        if not (frame.kv_cache_dtype == "bfloat16").any():  # a 16- or 32-bit device table serves the bf16 lookups
            for other in UNQUANTIZED_FALLBACKS:
                if (frame.kv_cache_dtype == other).any():
                    frame = frame.assign(kv_cache_dtype=frame.kv_cache_dtype.replace(other, "bfloat16"))
                    break
        kernels: set[str] = set()
        for (kv_dtype, heads, kv_heads, dim), part in frame.groupby(
            ["kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim"]
        ):
            kernel = preferred_kernel(part, prefs)  # per layout: a backend may not run every KV dtype or head layout
            part = part[part.kernel_source == kernel]
            if kv_dtype not in KV_DTYPES or (part.latency > 0).sum() < 4:
                continue
            kernels.add(str(kernel))
            # large batch x long sequence was not run (memory): left NaN; the model anchors the roofline there
            key = f"{phase}/{KV_DTYPES[kv_dtype]}/{heads}/{kv_heads}/{dim}"
            _batch_length_grid(out, key, part, length)
            meta[key] = f"{table.describe()}, {kernel}"
        meta[phase] = f"{table.describe()}, {', '.join(sorted(kernels))}"


def _mla(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    for filename, phase, length in (
        ("mla_context_module_perf.parquet", "mla_prefill", "isl"),
        ("mla_generation_module_perf.parquet", "mla_decode", "step"),
    ):
        table = sel.table("mla", filename)
        frame = _read(table)
        if frame is None:
            continue
        if phase == "mla_decode":
            table, frame = _graph_timed(sel, "mla", table, frame, length)
        gemm_col = next((c for c in ("gemm_type", "mla_dtype") if c in frame), None)
        if gemm_col is None:
            raise ValueError(f"{table.path}: no column gemm_type or mla_dtype (the MLA module's GEMM dtype)")
        _modules(table, frame, gemm_col, phase, length, MLA_KERNELS.get(table.framework, ()), out, meta)


def _dsa(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """DeepSeek sparse attention modules per measured architecture: ``dsa@<architecture>_<phase>/...``. The rows of
    GLM-5.2's layers that reuse another layer's top-k (op_name ``..._skip_indexer``) are not read."""
    for filename, phase, length in (
        ("dsa_context_module_perf.parquet", "prefill", "isl"),
        ("dsa_generation_module_perf.parquet", "decode", "step"),
    ):
        table = sel.table("sparse_attention", filename)
        frame = _read(table)
        if frame is None:
            continue
        frame = frame[~frame.op_name.astype(str).str.endswith("skip_indexer")]
        prefs = DSA_KERNELS.get(table.framework, {}).get(phase, ())
        for arch, part in frame.groupby("architecture"):
            _modules(table, part, "gemm_type", f"dsa@{arch}_{phase}", length, prefs, out, meta)


def module_floor_ms(frame: pd.DataFrame, length: str) -> float:
    """The median time of an attention module table's smallest-work 5 % of rows (batch x length)."""
    frame = frame[frame.latency > 0]
    work = frame.batch_size.to_numpy(np.float64) * frame[length].to_numpy(np.float64)
    return float(np.median(frame.latency.to_numpy(np.float64)[work <= np.quantile(work, 0.05)]))


def _graph_timed(
    sel: Selection, family: str, table: Table, frame: pd.DataFrame, length: str
) -> tuple[Table, pd.DataFrame]:
    """The decode module table to read: ``table``, or the fastest other engine's measurement of the same module on
    the same GPU where ``table`` timed the host (HOST_BOUND_MODULE_RATIO)."""
    floor = module_floor_ms(frame, length)
    best: tuple[float, Table, pd.DataFrame] | None = None
    for framework in STAND_IN_FRAMEWORKS:
        versions = sel.tables.versions().get(family, {}).get(framework)
        if framework == table.framework or not versions:
            continue
        version = newest(versions)
        path = sel.tables.root / family / framework / version / table.path.name
        rows = _read(Table(path, framework, version)) if path.is_file() else None
        if rows is None or rows.empty:
            continue
        other_floor = module_floor_ms(rows, length)
        if best is None or other_floor < best[0]:
            best = (other_floor, Table(path, framework, version), rows)
    if best is None or floor <= HOST_BOUND_MODULE_RATIO * best[0]:
        return table, frame
    other_floor, other, rows = best
    note = (
        f"{table.describe()} host-bound: {floor * 1e3:.0f} us on its smallest shapes, {other_floor * 1e3:.0f} us here"
    )
    return Table(other.path, other.framework, other.version, note), rows


def _modules(
    table: Table,
    frame: pd.DataFrame,
    gemm_col: str,
    phase: str,
    length: str,
    prefs: tuple[str, ...],
    out: dict[str, np.ndarray],
    meta: dict[str, str],
) -> None:
    """One attention module's ``phase/<kv dtype>/<gemm dtype>/<heads>/{batch,len,ms}`` grids from ``frame``."""
    kernels: set[str] = set()
    for (kv_dtype, gemm_dtype, heads), part in frame.groupby(["kv_cache_dtype", gemm_col, "num_heads"]):
        part = part[part.latency > 0]
        if kv_dtype not in KV_DTYPES or gemm_dtype not in GEMM_DTYPES or len(part) < 4:
            continue
        # the default backend's points, and where it was not run another backend's measurement of the same
        # module, before any roofline
        part, used = by_preference(part, prefs, ["batch_size", length])
        kernels.update(used)
        key = f"{phase}/{KV_DTYPES[kv_dtype]}/{GEMM_DTYPES[gemm_dtype]}/{heads}"
        _batch_length_grid(out, key, part, length)
        meta[key] = f"{table.describe()}, {used[0]}" + (f" (gaps: {', '.join(used[1:])})" if used[1:] else "")
    meta[phase] = f"{table.describe()}, {', '.join(sorted(kernels))}"


def _all_reduce(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    custom = sel.table("comm", "custom_allreduce_perf.parquet")
    frames: list[tuple[str, pd.DataFrame]] = []
    frame = _read(custom)
    if frame is not None:
        meta["allreduce/custom"] = custom.describe()
        frame = frame[frame.op_name == "all_reduce"] if "op_name" in frame else frame
        if "backend" in frame:  # vLLM's and SGLang's: a CUDA-graph and an eager variant
            for name in ("graph", "eager"):
                frames.append((f"vllm_{name}", frame[frame.backend.astype(str).str.endswith(name)]))
        else:  # TensorRT-LLM's one kernel, timed as it runs (in its CUDA graphs for decode)
            frames += [("vllm_graph", frame), ("vllm_eager", frame)]
    nccl = sel.library()
    frame = _read(nccl)
    if frame is not None:
        meta["allreduce/nccl"] = nccl.describe()
        frames.append(("nccl", frame[(frame.op_name == "all_reduce") & (frame.nccl_dtype == "half")]))
        for op in ("all_gather", "reduce_scatter"):
            frames.append((f"nccl/{op}", frame[(frame.op_name == op) & (frame.nccl_dtype == "half")]))
    for backend, part in frames:
        part = part[part.latency > 0]
        for n_gpus, rows in part.groupby("num_gpus"):
            rows = rows.groupby("message_size").latency.mean().sort_index()
            # message_size counts 2-byte elements (bfloat16 / half): bytes and seconds
            key = f"{backend}/{n_gpus}" if backend.startswith("nccl/") else f"allreduce/{backend}/{n_gpus}"
            out[key] = np.stack([rows.index.to_numpy(np.float64) * 2, rows.to_numpy(np.float64) * 1e-3])


def _moe_tables(sel: Selection, table: Table) -> tuple[list[Table], list[Table]]:
    """The engine's MoE tables (``table``, then its older versions) and the other engines' on the same GPU (SGLang,
    TensorRT-LLM, vLLM; each newest first)."""
    own = [table, *sel.older_tables("moe", "moe_perf.parquet")]
    others = []
    folder = sel.tables.root / "moe"
    for framework in STAND_IN_FRAMEWORKS:
        if framework == table.framework:
            continue
        versions = sorted((p.parent.name for p in (folder / framework).glob("*/moe_perf.parquet")), key=version_key)
        others += [Table(folder / framework / v / "moe_perf.parquet", framework, v) for v in versions[::-1]]
    return own, others


# A measured MoE kernel's family, from the collectors' kernel_source names (the first that matches): a deployment
# names one where its engine runs a kernel other than the table's fastest. TensorRT-LLM's moe_config.backend TRTLLM
# runs the TRT-LLM-gen kernels that FlashInfer's trtllm MoE wraps, measured by SGLang's and vLLM's collectors as
# sglang_flashinfer_trtllm_moe and vllm_..._flashinfer_trtllm_...; vllm_fused_moe is vLLM's Triton fused MoE.
# OpenAI's triton_kernels (matmul_ogs: the MXFP4 MoE TensorRT-LLM's moe_config.backend TRITON runs,
# tensorrt_llm/_torch/modules/fused_moe/fused_moe_triton.py, and vLLM's OAITritonExperts) is a family of its own,
# apart from the fused-MoE Triton kernel vLLM and SGLang write themselves (sglang_fused_moe_triton: twice its time
# at 64 tokens on H200 for gpt-oss-120b at moe_tp 2, 0.80 against 0.38 ms).
MOE_KERNEL_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("trtllm_gen", ("flashinfer_trtllm",)),
    ("deepgemm", ("deepgemm",)),
    ("marlin", ("marlin",)),
    ("cutlass", ("cutlass",)),
    ("triton_kernels", ("oaitriton",)),
    ("triton", ("triton", "vllm_fused_moe")),
)


def moe_kernel_family(kernel_source: str) -> str | None:
    """The family (MOE_KERNEL_FAMILIES) of a MoE table's ``kernel_source``, or None."""
    return next((family for family, marks in MOE_KERNEL_FAMILIES if any(m in kernel_source for m in marks)), None)


def _moe(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """The fused MoE layer by token count per (dtype, distribution, shape, moe_tp, moe_ep), the fastest kernel:
    ``moe/...`` from the engine's own tables, ``moe_other/...`` from the other engines'.

    A shape the engine's table at the version read lacks is read from its older versions (the same engine's
    kernel; e.g. h200's vLLM 0.24.0 table dropped MiniMax-M2.5's shape that 0.19.0 measured). The silicon model
    reads the other engines' measurements (``moe_other``) only where no dtype it accepts was measured by the engine
    itself (e.g. the W4A8 MXFP4 experts vLLM runs with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 are FlashInfer's TRT-LLM
    kernel, which SGLang's collector measured and vLLM's did not), before any roofline.

    Each kernel family's fastest measurement is kept too, ``moek/<family>/...`` from the engine's tables and
    ``moek_other/<family>/...`` from the others' (MOE_KERNEL_FAMILIES), for a deployment that names the kernel its
    engine runs (``SiliconParams.moe_kernel``)."""
    table = sel.table("moe", "moe_perf.parquet")
    if table is None:
        return
    cols = [c for c in REQUIRED_COLUMNS["moe_perf.parquet"] if c not in ("latency", "num_tokens")]  # a shape's key
    own, others = _moe_tables(sel, table) if table.framework == sel.base else ([table], [])
    borrowed: dict[str, int] = {}
    for prefix, sources in (("moe", own), ("moe_other", others)):
        for source in sources:  # a shape is read from the first table that has it
            frame = _read(source)
            assert frame is not None
            frame = frame[(frame.latency > 0) & frame.moe_dtype.isin(list(MOE_DTYPES))]
            for keys, part in frame.groupby(cols):
                dtype, dist, *rest = keys
                shape = [MOE_DTYPES[dtype], dist, *map(str, rest)]
                if "kernel_source" in part.columns:
                    _moe_kernels(part, prefix.replace("moe", "moek", 1), shape, out)
                part = part.groupby("num_tokens").latency.min().sort_index()
                if len(part) < 2:
                    continue
                key = "/".join([prefix, *shape])
                if key in out:
                    continue
                out[key] = _curve(part)
                if source is not table:
                    label = f"{source.framework} {source.version}"
                    borrowed[label] = borrowed.get(label, 0) + 1
    meta["moe"] = f"{table.describe()}, fastest kernel per shape"
    if borrowed:
        meta["moe"] += "; shapes it lacks from " + ", ".join(f"{k} ({n})" for k, n in borrowed.items())


def _moe_kernels(part: pd.DataFrame, prefix: str, shape: list[str], out: dict[str, np.ndarray]) -> None:
    """Each kernel family's fastest curve of one MoE shape, where no earlier table gave that family's."""
    families = part.kernel_source.astype(str).map(moe_kernel_family)
    for family, kernel in part[families.notna()].groupby(families[families.notna()]):
        key = "/".join([prefix, str(family), *shape])
        fastest = kernel.groupby("num_tokens").latency.min().sort_index()
        if len(fastest) >= 2 and key not in out:
            out[key] = _curve(fastest)


def _wide_ep_moe(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """SGLang's MoE layer under DeepEP (``--moe-a2a-backend deepep``: DeepGEMM's grouped GEMMs on the tokens DeepEP
    dispatched to each GPU's experts), by the token count of the whole EP group: ``moew/context/...`` from its
    normal-mode (prefill) table, ``moew/generation/...`` from its low-latency (decode) table, keyed as ``moe/...``.

    aiconfigurator's collector (``collector/sglang/collect_wideep_deepep_moe.py``) times the experts' compute alone,
    ``run_moe_core`` on a dispatch output it builds, without the dispatch and combine (the ``a2a`` tables), and logs
    ``num_tokens`` as the tokens per rank times ``moe_ep_size``. Only SGLang's collector measured it."""
    if sel.base != "sglang":
        return
    cols = [c for c in REQUIRED_COLUMNS["moe_perf.parquet"] if c not in ("latency", "num_tokens")]
    described = []
    for phase in ("context", "generation"):
        table = sel.table("moe", f"wideep_{phase}_moe_perf.parquet")
        if table is None or table.framework != "sglang":
            continue
        frame = _read(table)
        assert frame is not None
        frame = frame[(frame.latency > 0) & frame.moe_dtype.isin(list(MOE_DTYPES))]
        for keys, part in frame.groupby(cols):
            dtype, dist, *rest = keys
            part = part.groupby("num_tokens").latency.min().sort_index()
            if len(part) >= 2:
                out["/".join(["moew", phase, MOE_DTYPES[dtype], dist, *map(str, rest)])] = _curve(part)
        described.append(f"{phase}: {table.describe()}")
    if described:
        meta["moew"] = "DeepEP MoE compute; " + "; ".join(described)


def _trt_wide_ep_moe(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """TensorRT-LLM's wide-EP MoE layer under its expert load balancer (EPLB) by the EP group's token count:
    ``moeb/<dtype>/<distribution>_eplb/h/inter/topk/E/<slots>/moe_tp/moe_ep`` (the hottest experts replicated into the
    slots beyond E, the slots packed over the ranks by load). The table's rows without the balancer are not read.

    aiconfigurator's collector (``collector/wideep/trtllm/collect_moe_compute.py``, placement by
    ``helper.compute_eplb``) times one rank's expert compute alone, without the all-to-all: the slowest rank's slots,
    laid out as rank 0's, on the tokens its power law routes there, placed as EPLB would place them. ``num_tokens`` is
    the whole EP group's tokens. Only TensorRT-LLM's collector measured it."""
    if sel.base != "trtllm":
        return
    table = sel.table("moe", "wideep_moe_perf.parquet")
    if table is None or table.framework != "trtllm":
        return
    frame = _read(table)
    assert frame is not None
    frame = frame[
        (frame.latency > 0) & frame.moe_dtype.isin(list(MOE_DTYPES)) & frame.distribution.str.endswith("_eplb")
    ]
    cols = [c for c in REQUIRED_COLUMNS["wideep_moe_perf.parquet"] if c not in ("latency", "num_tokens")]
    for keys, part in frame.groupby(cols):
        dtype, dist, *rest = keys
        part = part.groupby("num_tokens").latency.min().sort_index()
        if len(part) >= 2:
            out["/".join(["moeb", MOE_DTYPES[dtype], dist, *map(str, rest)])] = _curve(part)
    meta["moeb"] = f"{table.describe()}, wide-EP MoE compute under EPLB"


def _curve(latency_by_tokens: pd.Series) -> np.ndarray:
    """A [tokens, latency] array of a MoE table's latencies by token count."""
    tokens, latency = latency_by_tokens.index.to_numpy(np.float64), latency_by_tokens.to_numpy(np.float64)
    return np.stack([tokens, latency]).astype(np.float32)


def _all_to_all(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    table = sel.table("comm", "moe_a2a_perf.parquet")
    frame = _read(table)
    if frame is None:
        return
    frame = frame[(frame.latency > 0) & (frame.get("node_num", 1) == 1)]
    meta["a2a"] = f"{table.describe()}, DeepEP (fastest of its modes per token count)"
    cols = ["phase", "hidden_size", "topk", "num_experts", "ep_size"]
    for keys, part in frame.groupby(cols):
        part = part.groupby("num_tokens").latency.min().sort_index()  # latency in microseconds in this table
        if len(part) < 2:
            continue
        key = "/".join(["a2a", *map(str, keys)])
        out[key] = np.stack([part.index.to_numpy(np.float64), part.to_numpy(np.float64) * 1e-3]).astype(np.float32)


# The Gated DeltaNet kernels a layer runs, by phase: the causal convolution over q, k and v, then the delta rule
# (chunked over a prompt; one recurrent step a token in decode). aiconfigurator's collector times each apart
# (collector/*/collect_gdn.py), per GPU's heads.
GDN_KERNELS = {
    "context": (
        ("causal_conv1d_fn",),
        ("chunk_gated_delta_rule", "chunk_gated_delta_rule_flashinfer", "chunk_gated_delta_rule_triton"),
    ),
    "generation": (
        ("causal_conv1d_update",),
        ("fused_recurrent_gated_delta_rule_packed_decode", "fused_recurrent_gated_delta_rule"),
    ),
}


def _gdn(sel: Selection, out: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """One Gated DeltaNet layer's kernels (convolution plus delta rule) per head layout: prefill on the batch x
    prompt-length grid (``gdn_prefill/<nk>/<dk>/<nv>/<dv>``), decode against the batch (a [batch, ms] curve,
    ``gdn_decode/...``). Where the engine measured a kernel more than one way the first named in ``GDN_KERNELS``
    is read; the layouts of several models (their ``d_model``) are averaged, the kernels not reading it."""
    table = sel.table("linear_attention", "gdn_perf.parquet")
    frame = _read(table)
    if frame is None:
        return
    assert table is not None
    frame = frame[frame.latency > 0]
    layout = ["num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"]
    kernels: set[str] = set()
    for keys, shape in frame.groupby(layout):
        name = "/".join(map(str, keys))
        for phase, stages in GDN_KERNELS.items():
            part = shape[shape.phase == phase]
            total = None
            for names in stages:
                kernel = next((k for k in names if (part.kernel_source == k).any()), None)
                if kernel is None:
                    total = None
                    break
                kernels.add(kernel)
                axes = ["batch_size", "seq_len"] if phase == "context" else ["batch_size"]
                times = part[part.kernel_source == kernel].groupby(axes).latency.mean()
                total = times if total is None else total + times  # NaN where one kernel was not run at a cell
            if total is None or total.dropna().empty:
                continue
            total = total.dropna()
            if phase == "context":
                _batch_length_grid(out, f"gdn_prefill/{name}", total.reset_index(), "seq_len")
            elif len(total) >= 2:
                out[f"gdn_decode/{name}"] = np.stack(
                    [total.index.to_numpy(np.float64), total.to_numpy(np.float64)]
                ).astype(np.float32)
    if kernels:
        meta["gdn"] = f"{table.describe()}, {', '.join(sorted(kernels))}"


def convert(sel: Selection) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Every array the silicon model reads from ``sel``, and where each group of them came from."""
    out: dict[str, np.ndarray] = {}
    meta: dict[str, str] = {}
    for part in (_gemm, _attention, _mla, _dsa, _all_reduce, _moe, _wide_ep_moe, _trt_wide_ep_moe, _all_to_all, _gdn):
        part(sel, out, meta)
    return out, meta
