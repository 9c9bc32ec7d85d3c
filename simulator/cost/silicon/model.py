"""``silicon``: the roofline's op decomposition, each op's time looked up in measured kernel tables.

For a step on one replica of ``tp`` GPUs (per GPU; summed over layers)::

    qkv_proj, o_proj, mlp_gate_up, mlp_down   GEMM table (m = the step's tokens, n and k per GPU), x layers
    lm_head                                   GEMM table (m = sampled rows, n = vocab / tp)
    mlp (MoE)                                 fused-MoE table (tokens, hidden, inter, top-k, experts, tp)
    attn_prefill                              prefill-attention table at (chunks, equal-work length),
                                              a cached prefix scaled by the roofline's ratio, x layers
    attn_decode                               decode-attention table at (sequences, mean context), x layers
    all_reduce                                vLLM's custom all-reduce / NCCL tables, 2 per layer
    embed, norm, mlp_act, cpu_overhead        the roofline (no table measures them)

The tables (``simulator.cost.silicon.tables``) are NVIDIA aiconfigurator's measurements of
vLLM's kernels on A100, H100, H200, B200 and L40S. The dtype follows the deployment: FP8 GEMMs
(``ModelSpec.quantization == "fp8"``) and FP8 KV-cache attention (1-byte KV) where measured.

Outside a table (a shape beyond its range, an unmeasured head layout, a long sequence at a
large batch that was not run) an op falls back to the roofline scaled to meet the nearest
measured point, ``t = t_table(edge) x roofline(x) / roofline(edge)``, which keeps the curve
continuous; the model counts those lookups (``fallbacks``, ``fallback_fraction``) as the
``profiled`` model does. Where no table applies at all (no tables for the GPU, an MoE layout
that was not measured, FP8 on a GPU without FP8 tables) the op is the roofline's own time.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from simulator.config.precision import EXCHANGED_QUANTIZED, QUANTIZATIONS, MoeKernelName
from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost.overhead import padded_batch_size
from simulator.cost.roofline import (
    QK_NORM_VARIANCE_BYTES,
    RooflineCostModel,
    RooflineParams,
    _top_k_pairs,
    _total,
    gemm_peak_flops_per_s,
)
from simulator.cost.shape import COST_MODELS, MLP_OPS, BatchShape, OpCost, StepTime
from simulator.cost.silicon.tables import AttentionTable, Curve, GemmTable, load_tables, lower_within

GEMM_OPS = ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "lm_head")

# DeepSeek-V3's MLA shape, the one aiconfigurator's MLA module tables measure (its config.json: hidden_size 7168,
# q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128); R1 and Kimi K2
# share it (Kimi with 64 heads, a measured per-GPU head count).
DEEPSEEK_V3_MLA = {
    "hidden_size": 7168,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}

# The DeepSeek sparse attention (DSA) shapes aiconfigurator's DSA module tables measure, by the tables'
# ``architecture`` column: DeepSeek-V3.2's (DeepSeek-V3's MLA with a 64-head indexer) and GLM-5's (its config.json:
# hidden_size 6144, q_lora_rank 2048, qk_nope_head_dim 192, v_head_dim 256, a 32-head indexer); both attend the
# top 2048 keys through 128-wide indexer heads.
DSA_SHAPES = {
    "DeepseekV32ForCausalLM": DEEPSEEK_V3_MLA | {"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048},
    "GlmMoeDsaForCausalLM": {
        "hidden_size": 6144,
        "q_lora_rank": 2048,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64,
        "v_head_dim": 256,
        "index_n_heads": 32,
        "index_head_dim": 128,
        "index_topk": 2048,
    },
}

# The GEMM (and fused-MoE) tables each quantization reads, in preference: its own kernels where measured. Where
# none is (FP8 on Ampere, NVFP4 before Blackwell, MXFP4's weight-only kernels) the bf16 table is anchored by the
# roofline at the format's weight bytes.
GEMM_TABLES: dict[str | None, tuple[str, ...]] = {
    None: ("bf16",),
    "fp8": ("fp8", "fp8_block"),
    "fp8_block": ("fp8_block", "fp8"),
    "nvfp4": ("nvfp4",),
    "mxfp4": ("mxfp4",),
    "mxfp4_mxfp8": ("mxfp4_mxfp8",),  # W4A8 is the setting: another engine's W4A8 before the W4A16 kernel
    "int4_wo": ("int4_wo",),
}
DEEPEP_FORMATS = ("fp8_block",)
"""The formats SGLang's DeepEP MoE was measured in (aiconfigurator's ``collect_wideep_deepep_moe.py``: DeepGEMM's FP8
block-scaled grouped GEMMs), narrowest first."""
# The MoE tables an engine's MXFP4 experts (gpt-oss) read, most preferred first. On Blackwell TensorRT-LLM's TRTLLM
# MoE backend and SGLang's flashinfer_mxfp4 runner quantize the activations to MXFP8 (W4A8; TensorRT-LLM's gpt-oss
# deployment guide, SGLang's ``--flashinfer-mxfp4-moe-precision`` default), vLLM's default FlashInfer TRT-LLM MXFP4
# kernel keeps them in bf16 (W4A16: ``vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16`` in its table); Hopper
# measured W4A16 only.
MXFP4_MOE_TABLES = {
    "vllm": ("mxfp4", "mxfp4_mxfp8"),
    "sglang": ("mxfp4_mxfp8", "mxfp4"),
    "trtllm": ("mxfp4_mxfp8", "mxfp4"),
}
# The MLA (and DSA) module tables' GEMM dtype per quantization: DeepSeek's FP8 checkpoints are block-scaled; NVIDIA's
# NVFP4 checkpoints of MLA models leave MLA's projections in bf16 (the exclude_modules of every one aiconfigurator-core
# ships: DeepSeek-V3.1 and V3.2 q_a, q_b, kv_a and kv_b, and the indexer; GLM-5 those and o_proj; GLM-5.1-5.3 and
# Kimi-K2.5-K2.7 all of self_attn), so they read the bf16 module (TensorRT-LLM's B200 module at 16 heads, batch 8:
# 39 us bf16, 61 us with NVFP4 projections); any other quantization reads bf16 too.
MLA_GEMM_DTYPES = {"fp8": "fp8_block", "fp8_block": "fp8_block"}
# The recurrent state's bytes per element in each engine's measured Gated DeltaNet decode kernels, where the
# collector says: SGLang's runs the FLA packed decode on a float32 state, the configs' default (aiconfigurator's
# collector/sglang/collect_gdn.py, recurrent_state dtype=torch.float32). A run on a bf16 state (--mamba-ssm-dtype
# bfloat16) reads and writes half of it: the measured time is anchored by the roofline at the run's dtype. The other
# engines' collectors do not say which dtype their tables' decode ran on: read as measured.
GDN_TABLE_STATE_BYTES = {"sglang": 4.0}


def is_deepseek_v3_mla(model: ModelSpec) -> bool:
    return not model.is_dsa and all(getattr(model, field) == value for field, value in DEEPSEEK_V3_MLA.items())


def dsa_architecture(model: ModelSpec) -> str | None:
    """The architecture whose measured DSA module has ``model``'s attention shape (DSA_SHAPES), or None."""
    return next(
        (arch for arch, dims in DSA_SHAPES.items() if all(getattr(model, k) == v for k, v in dims.items())), None
    )


GDN_IN_PROJ_PARTS = ("qkv", "z", "b", "a")  # an unfused Gated DeltaNet layer's input projections (ModelSpec)
# OpCost(*fields) without the named tuple's Python __new__ (one call fewer for each op priced; the same tuple)
_new_op = partial(tuple.__new__, OpCost)
# the ops of a step that are not its linear ops (_step_parts prices them apart)
_NOT_LINEAR = frozenset(("attn_prefill", "attn_decode", "lm_head", "cpu_overhead", "eager_host"))
_NO_LM_HEAD = (0.0, 0, ())


class _Gemm:
    """One GEMM op of the model: its measured curve over m at its (n, k), clamped into the table's range."""

    __slots__ = (
        "curve",
        "exact_nk",
        "k",
        "k_table",
        "n",
        "n_table",
        "nk_on_grid",
        "note",
        "rate",
        "table",
        "unmeasured",
        "weight_bytes",
    )

    def __init__(self, table: GemmTable, n: float, k: float, weight_bytes: float, rate: float, note: str) -> None:
        self.table, self.n, self.k = table, n, k
        self.n_table, self.k_table = table.clamp_nk(n, k)
        self.curve: Curve = table.curve(self.n_table, self.k_table)
        self.weight_bytes, self.rate, self.note = weight_bytes, rate, note
        # what each lookup asks of the (n, k) alone, answered once
        self.unmeasured = table.unmeasured(self.n_table, self.k_table)
        self.exact_nk = (self.n_table, self.k_table) == (n, k)
        self.nk_on_grid = n in table.n and k in table.k


def _row_log_times(row: Curve, lengths: Sequence[float], logs: Sequence[float]) -> list[float]:
    """``row.log_at(x)`` of each of ``lengths`` (all inside the row; ``logs`` their ``math.log``): the same floats.
    A segment's constants are kept while the lengths stay in it (a window's lengths grow by one a step, and the
    measured lengths are far apart): ``bisect_left`` runs only where a length leaves the segment."""
    xs, lt, lx = row.xs, row._lt, row._lx
    out = [0.0] * len(lengths)
    below = above = 0.0  # the segment (below, above]: empty until the first length
    at = base = start = width = rise = 0.0
    for i, length in enumerate(lengths):
        if not below < length <= above:
            j = bisect.bisect_left(xs, length)
            above, at = xs[j], lt[j]
            if j:
                below, base, start = xs[j - 1], lt[j - 1], lx[j - 1]
                width, rise = lx[j] - start, at - base
            else:  # length == xs[0]
                below = -math.inf
        if length == above:
            out[i] = at
        else:  # log_at's lt[j - 1] + (log(x) - lx[j - 1]) / (lx[j] - lx[j - 1]) * (lt[j] - lt[j - 1])
            out[i] = base + (logs[i] - start) / width * rise
    return out


def _bracket_log_times(
    pairs: list[tuple[Curve, float, float]], lengths: Sequence[float], logs: Sequence[float]
) -> list[float]:
    """``0.0 + w0 log_at0(x) + w1 log_at1(x)`` of each of ``lengths`` between two batch rows (``_decode_attention``'s
    log-time, the same floats): ``_row_log_times`` of both rows in one pass."""
    (r0, w0, _), (r1, w1, _) = pairs
    xs0, lt0, lx0, xs1, lt1, lx1 = r0.xs, r0._lt, r0._lx, r1.xs, r1._lt, r1._lx
    out = [0.0] * len(lengths)
    below0 = above0 = below1 = above1 = 0.0
    at0 = base0 = start0 = width0 = rise0 = at1 = base1 = start1 = width1 = rise1 = 0.0
    for i, length in enumerate(lengths):
        if not below0 < length <= above0:
            j = bisect.bisect_left(xs0, length)
            above0, at0 = xs0[j], lt0[j]
            if j:
                below0, base0, start0 = xs0[j - 1], lt0[j - 1], lx0[j - 1]
                width0, rise0 = lx0[j] - start0, at0 - base0
            else:
                below0 = -math.inf
        if not below1 < length <= above1:
            j = bisect.bisect_left(xs1, length)
            above1, at1 = xs1[j], lt1[j]
            if j:
                below1, base1, start1 = xs1[j - 1], lt1[j - 1], lx1[j - 1]
                width1, rise1 = lx1[j] - start1, at1 - base1
            else:
                below1 = -math.inf
        a0 = at0 if length == above0 else base0 + (logs[i] - start0) / width0 * rise0
        a1 = at1 if length == above1 else base1 + (logs[i] - start1) / width1 * rise1
        out[i] = 0.0 + w0 * a0 + w1 * a1
    return out


class SiliconParams(BaseModel):
    """Parameters of the ``silicon`` cost model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["silicon"] = "silicon"
    tables: str | None = Field(
        None,
        description="Measured tables to read: a GPU of aiconfigurator-core's silicon database (h200_sxm, b200_sxm, "
        "...; `servesim presets` lists them) or a folder `servesim calibrate` wrote; None: the hardware's own "
        "(its silicon_tables).",
    )
    framework: Literal["vllm", "sglang", "trtllm"] | None = Field(
        None,
        description="The engine whose measured kernels are read; None: the one the batch policy models (sglang, "
        "trtllm; vLLM's for the others).",
    )
    version: str | None = Field(
        None,
        max_length=64,
        description="The engine version whose tables are read (e.g. 0.24.0); None: the newest measured on the GPU. "
        "Each table then comes from the newest version measured at or before it.",
    )
    moe_kernel: MoeKernelName | None = Field(
        None,
        description="The MoE kernel family the engine runs, read from any engine's measurement of it on the GPU "
        "(TensorRT-LLM's moe_config.backend TRTLLM: trtllm_gen, DEEPGEMM: deepgemm, CUTLASS: cutlass, TRITON: "
        "triton_kernels, OpenAI's matmul_ogs; SGLang's --moe-runner-backend flashinfer_trtllm: trtllm_gen; triton: "
        "the engines' own fused-MoE Triton kernel); a family timed at the model's shape on other GPUs only: theirs, "
        "scaled by this GPU's time over theirs on the shapes both timed (cost/silicon/borrow.py); None, or a family "
        "it cannot be read or carried over for (no GPU timed it at the shape, none shares a timed shape at the same "
        "release, or the tables are a folder): the fastest kernel measured.",
    )
    eplb_slots: int | None = Field(
        None,
        ge=1,
        description="TensorRT-LLM's expert load balancer (moe_config.load_balancer.num_slots: the experts' weight "
        "slots over the EP ranks, the hottest experts copied into the slots beyond their number, the slots placed "
        "over the ranks by load): the MoE layer from aiconfigurator-core's measurement of TensorRT-LLM's wide-EP MoE "
        "under that balancer at that many slots (wideep_moe_perf.parquet); None: no balancer. Needs TensorRT-LLM's "
        "tables, expert parallelism, and a measurement at the model's shape, slots and EP size.",
    )
    roofline: RooflineParams = Field(
        default_factory=RooflineParams,
        description="The roofline behind the fallbacks and the unmeasured ops (embedding, norms, activation, "
        "the engine's CPU time).",
    )


@COST_MODELS.register("silicon", params=SiliconParams)
class SiliconCostModel:
    """Per-op times from measured kernel tables, the anchored roofline outside them."""

    MEMO_SIZE = RooflineCostModel.MEMO_SIZE

    def __init__(
        self, params: SiliconParams, model: ModelSpec, hardware: HardwareSpec, tp: int = 1, pp: int = 1, ep: int = 1
    ) -> None:
        self.params = params
        self.model = model
        self.hardware = hardware
        self.tp = tp
        self.pp = pp
        self.ep = ep
        self.roofline = RooflineCostModel(params.roofline, model, hardware, tp, pp, ep)
        name = params.tables or hardware.silicon_tables
        self.tables = None
        if name is not None:
            field = "cost_model.tables" if params.tables is not None else f"hardware {hardware.name}: silicon_tables"
            try:
                self.tables = load_tables(name, params.framework or "vllm", params.version)
            except ValueError as exc:
                raise ValueError(f"{field}: {exc}") from None
        elif params.eplb_slots is not None and ep > 1 and model.is_moe:
            raise ValueError(
                f"cost_model.eplb_slots: TensorRT-LLM's expert load balancer is priced from measured tables, and "
                f"{hardware.name} has none (name cost_model.tables, or leave eplb_slots unset)"
            )
        self.fallbacks: Counter[str] = Counter()
        self.num_lookups = 0
        p, m = params.roofline, model
        self._gemm_rate = gemm_peak_flops_per_s(model, hardware) * p.gemm_flops_efficiency
        self._gemm_dtype = "bf16"  # the GEMM table the linear layers read
        self._attn_rate = hardware.flops_per_s * p.attention_flops_efficiency
        self._bw = hardware.memory_bandwidth_bytes_per_s * p.memory_bandwidth_efficiency
        self._q = m.q_size // tp
        self._kv_heads = m.kv_heads_per_gpu(tp)
        self._kv = self._kv_heads * m.head_dim
        self._gemm: dict[str, _Gemm] = {}  # the GEMM ops a table applies to
        self._decode: tuple[AttentionTable, str] | None = None
        self._prefill: tuple[AttentionTable, str] | None = None
        self._moe: Curve | None = None
        self._moe_source: str | None = None  # where the MoE curve is not one of this GPU's tables (borrow.py)
        self._moe_note: str | None = None  # what the MoE curve measured, where not the fused MoE layer (eplb_slots)
        self._moe_deepep: dict[bool, Curve] = {}  # SGLang's DeepEP MoE by "the step holds a prefill"
        self._deepep_notes: dict[bool, str] = {}  # by phase: what a DeepEP curve is where the format was not measured
        self._all_reduce = None
        self._all_to_all: tuple[Curve, ...] | None = None  # DeepEP's dispatch and combine (or NVLink's kernels)
        self._all_to_all_source = "DeepEP"  # whose all-to-all those curves time (the engines' tables are DeepEP's)
        self._exchange: dict[str, Any] = {}  # NCCL's all-gather and reduce-scatter (moe_exchange)
        self._mla_module = False  # MLA attention priced by the measured module (projections included)
        self._module_name = "DSA" if m.is_dsa else "MLA"
        # the attention module tables' key prefix (read only where the shape was measured: _load)
        self._module_family = f"dsa@{dsa_architecture(m)}_" if m.is_dsa else "mla_"
        self._decode_roof, self._prefill_roof = self._decode_roofline, self._prefill_roofline
        self._mlp_extra = bool(m.num_shared_experts or m.num_dense_layers)  # MLP parts besides the routed one
        self._gdn: tuple[AttentionTable, Curve] | None = None  # a hybrid model's Gated DeltaNet kernels, measured
        self._gdn_state_bytes: float | None = None  # the bytes per element of the state those decode kernels ran on
        # the layers each per-layer GEMM runs on (the rest: every layer)
        self._op_layers = {
            "lm_head": 1,
            "moe_router": m.num_moe_layers,
            "qkv_proj": m.num_full_attention_layers,
            "o_proj": m.num_full_attention_layers,
            "linear_in_proj": m.num_linear_layers,
            "linear_out_proj": m.num_linear_layers,
        }
        self._is_mla = m.is_mla
        if self.tables is not None:
            self._load()
        self._count_ops: dict[tuple[str, int], tuple[float, str]] = {}
        self._memo: dict[BatchShape, StepTime] = {}
        # step_time's parts (_step_parts): by (rows, has a prefill) the linear ops, by sampled rows the LM head, by
        # chunks prefill attention; with the lookups each counts
        # (a hybrid model's Gated DeltaNet kernels depend on the step's chunks and decode count, which the parts do
        # not key: its steps are priced whole, memoized by shape)
        self._fast = pp == 1 and self._prefill is not None and self._decode is not None and not m.num_linear_layers
        self._rows_memo: dict[tuple[int, bool], tuple[float, tuple[float, ...], int, tuple[str, ...], tuple[str, ...]]]
        self._rows_memo = {}
        self._lm_memo: dict[int, tuple[float, int, tuple[str, ...]]] = {}
        self._prefill_memo: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, bool]] = {}
        self._decode_fixed: dict[int, tuple[float, float | None]] = {}  # as the roofline's
        self._decode_brackets: dict[int, tuple[float, list[tuple[Curve, float, float]]]] = {}

    # -- tables -------------------------------------------------------------------------

    def _load(self) -> None:
        t, m, tp = self.tables, self.model, self.tp
        assert t is not None
        bf16 = t.gemm("bf16")
        linear, note = bf16, ""
        quant = m.quantization
        if quant is not None and QUANTIZATIONS[quant].experts_only:  # the linears outside the experts are bf16
            quant = None
        for dtype in GEMM_TABLES[quant]:
            if t.gemm(dtype) is not None:
                linear, self._gemm_dtype = t.gemm(dtype), dtype
                break
        else:
            if quant is not None:  # not measured here (FP8 on Ampere, FP4 before Blackwell): weight-only, anchored
                note = f"bf16 table, {m.weight_bytes:g}-byte weights by roofline"
        up = 2 if m.gated_mlp else 1
        shapes = {"o_proj": (m.hidden_size, m.attn_out_size // tp)}
        if not m.is_mla:  # MLA's several projections before attention: the roofline (no table lookup)
            q_out = self._q * (2 if m.attn_output_gate else 1)  # the output gate's second query width
            shapes = {"qkv_proj": (q_out + 2 * self._kv, m.hidden_size)} | shapes
        if m.num_linear_layers:  # Gated DeltaNet's projections, split over tp by heads
            if self.params.roofline.gdn_input_projections == "fused":
                shapes["linear_in_proj"] = (m.linear_in_proj_width() / tp, m.hidden_size)
            else:  # four GEMMs, looked up at their own widths (``_ops``), and the copies of q, k and v; a GEMM
                # narrower than any the table measured (beta's and the decay's, a head's column each) takes the
                # narrowest's time at its k: a small kernel's latency, which the roofline's scaling would shrink
                narrowest = float(min(linear.n)) if linear is not None else 0.0
                for part, width in zip(GDN_IN_PROJ_PARTS, m.linear_in_proj_widths(), strict=True):
                    shapes[f"linear_in_proj/{part}"] = (max(width / tp, narrowest), m.hidden_size)
            shapes["linear_out_proj"] = (m.hidden_size, m.linear_value_size / tp)
        if not m.is_moe:
            shapes["mlp_gate_up"] = (up * m.intermediate_size / tp, m.hidden_size)
            shapes["mlp_down"] = (m.hidden_size, m.intermediate_size / tp)
        if m.num_shared_experts:  # the shared experts: one dense MLP, split by tp
            shapes["shared/mlp_gate_up"] = (up * m.shared_intermediate_size / tp, m.hidden_size)
            shapes["shared/mlp_down"] = (m.hidden_size, m.shared_intermediate_size / tp)
        if m.num_dense_layers:
            width = m.dense_intermediate_size or m.intermediate_size
            shapes["dense/mlp_gate_up"] = (up * width / tp, m.hidden_size)
            shapes["dense/mlp_down"] = (m.hidden_size, width / tp)
        bf16_rate = self.hardware.flops_per_s * self.params.roofline.gemm_flops_efficiency
        if linear is not None:
            for op, (n, k) in shapes.items():
                self._gemm[op] = _Gemm(linear, n, k, m.dense_weight_bytes, self._gemm_rate, note)
        if bf16 is not None:  # vLLM leaves the LM head unquantized: bf16 kernels and weights
            self._gemm["lm_head"] = _Gemm(bf16, m.vocab_size / tp, m.hidden_size, 2.0, bf16_rate, "")
            if m.is_moe:  # the router: a bf16 GEMM to the experts' logits on every GPU (RooflineModel._router)
                self._gemm["moe_router"] = _Gemm(bf16, m.num_experts, m.hidden_size, 2.0, bf16_rate, "")
        kv_dtype = "fp8" if m.kv_cache_bytes == 1 else "bf16"
        heads = m.num_attention_heads // tp
        if not m.is_mla:
            self._decode = t.attention("decode", kv_dtype, heads, self._kv_heads, m.head_dim)
            self._prefill = t.attention("prefill", kv_dtype, heads, self._kv_heads, m.head_dim)
        elif is_deepseek_v3_mla(m) or dsa_architecture(m):  # the measured module: projections, rotary (DSA: the
            # indexer and its top-k), attention and o_proj
            gemm_dtype = MLA_GEMM_DTYPES.get(m.quantization, "bf16")
            decode = t.mla(f"{self._module_family}decode", kv_dtype, gemm_dtype, heads)
            prefill = t.mla(f"{self._module_family}prefill", kv_dtype, gemm_dtype, heads)
            if decode is not None and prefill is not None:
                self._decode, self._prefill, self._mla_module = decode, prefill, True
                self._decode_roof, self._prefill_roof = self._mla_decode_roofline, self._mla_prefill_roofline
                self._gemm.pop("o_proj", None)
        if m.num_linear_layers:
            assert m.linear_num_key_heads is not None and m.linear_num_value_heads is not None
            assert m.linear_key_head_dim is not None and m.linear_value_head_dim is not None
            # the engine whose GDN table was read (another's where this engine's was not measured on this GPU)
            self._gdn_state_bytes = GDN_TABLE_STATE_BYTES.get(t.sources.get("gdn", "").split(" ", 1)[0])
            if not (m.linear_num_key_heads % tp or m.linear_num_value_heads % tp):
                self._gdn = t.gdn(
                    m.linear_num_key_heads // tp,
                    m.linear_key_head_dim,
                    m.linear_num_value_heads // tp,
                    m.linear_value_head_dim,
                )
        if m.is_moe:
            dist = self.params.roofline.distribution_for(m)
            # the table's moe_tp x moe_ep layout: the routed experts over ep groups of tp/ep GPUs
            shape = f"{m.hidden_size}/{m.intermediate_size}/{m.num_experts_per_token}/{m.num_experts}"
            dtypes = GEMM_TABLES[m.quantization]  # the format's own kernels (FP8: per-tensor, else block-wise)
            if m.quantization == "mxfp4":
                dtypes = MXFP4_MOE_TABLES.get(t.selection.framework, dtypes)
            # the engine's own measurement of any dtype it accepts first, then another engine's of the same kernel
            layout = f"{dist}/{shape}/{tp // self.ep}/{self.ep}"
            slots = self.params.eplb_slots
            if slots is not None and self.ep > 1:  # TensorRT-LLM's wide-EP MoE under its balancer, at the slots
                # (an attention-DP rank's own model, ep 1, runs no routed experts: the gathered side does)
                stem = f"{dist}_eplb/{shape}/{slots}/{tp // self.ep}/{self.ep}"
                self._moe = next((c for c in (t.moe(f"moeb/{d}/{stem}") for d in dtypes) if c is not None), None)
                if self._moe is None:
                    raise ValueError(
                        f"cost_model.eplb_slots: no measurement of TensorRT-LLM's wide-EP MoE under its load balancer "
                        f"at {slots} slots for {m.name} ({m.quantization or 'bf16'} experts, {shape}, ep {self.ep}, "
                        f"{dist}) in {t.selection.base}'s {t.selection.tables.name} tables; leave eplb_slots unset"
                    )
                self._moe_note = f"TensorRT-LLM's wide-EP MoE under EPLB, {slots} slots"
            kernel = self.params.moe_kernel if self._moe is None else None
            if kernel:
                named = (f"{p}/{kernel}/{d}/{layout}" for p in ("moek", "moek_other") for d in dtypes)
                self._moe = next((curve for curve in map(t.moe, named) if curve is not None), None)
            if self._moe is None and kernel:  # the named kernel timed at this shape on other GPUs only
                from simulator.cost.silicon.borrow import borrowed_moe  # pandas: only where a kernel is named

                dims = (m.hidden_size, m.intermediate_size, m.num_experts_per_token, m.num_experts)
                found = borrowed_moe(t.selection, kernel, dtypes, dims, (dist, tp // self.ep, self.ep))
                if found is not None:
                    self._moe, self._moe_source = found
            if self._moe is None:
                keys = (f"{p}/{d}/{layout}" for p in ("moe", "moe_other") for d in dtypes)
                self._moe = next((curve for curve in map(t.moe, keys) if curve is not None), None)
            if self.ep > 1 and self.params.roofline.expert_all_to_all and t.selection.base == "sglang":
                # SGLang's DeepEP MoE (--moe-a2a-backend deepep): DeepGEMM's grouped GEMMs on the dispatched tokens,
                # measured apart from the fused-MoE kernels, normal mode in a step holding a prefill, low-latency
                # mode in a decode-only one (DeepEP's auto mode; the disaggregated recipes fix each pool's). A
                # format narrower than every one measured under DeepEP (NVFP4: SGLang's flashinfer_cutedsl grouped
                # GEMM on the dispatched tokens) has two measured upper bounds, and takes the lower at each token
                # count: the narrowest measured format's DeepEP table (the same tokens per expert on wider weights)
                # and its own fused-MoE table (the same weights, and work on every rank's gathered tokens besides)
                formats = dtypes
                narrow = m.quantization is not None and QUANTIZATIONS[m.quantization].weight_bytes < 1
                if narrow:
                    formats += tuple(d for d in DEEPEP_FORMATS if d not in dtypes)
                for prefill, phase in ((True, "context"), (False, "generation")):
                    for d in formats:
                        found = t.deepep_moe(phase, f"{d}/{dist}/{shape}/{tp // self.ep}", self.ep)
                        if found is None:
                            continue
                        if d not in dtypes:
                            quant = m.quantization
                            note = f"{d} under DeepEP (no {quant} DeepEP measurement)"
                            if self._moe is not None and self._moe_source is None:
                                found = lower_within(found, self._moe)
                                note = (
                                    f"the lower of {d} under DeepEP and {quant} fused (no {quant} DeepEP measurement)"
                                )
                            self._deepep_notes[prefill] = note
                        self._moe_deepep[prefill] = found
                        break
        if m.is_moe and self.ep > 1 and self.params.roofline.expert_all_to_all:
            shape = (m.hidden_size, m.num_experts_per_token, m.num_experts, self.ep)
            kernel = self.params.roofline.all_to_all_kernel
            if kernel == "engine":
                dispatch, combine = t.all_to_all("dispatch", *shape), t.all_to_all("combine", *shape)
                if dispatch is not None and combine is not None:
                    self._all_to_all = (dispatch, combine)
            else:
                from simulator.cost.silicon.nvlink_a2a import nvlink_all_to_all  # pandas: only where it is asked for

                found = nvlink_all_to_all(t.selection.tables.name, kernel, self._a2a_dtype(), *shape)
                if found is None:
                    raise ValueError(
                        f"cost_model.roofline.all_to_all_kernel: no measurement of TensorRT-LLM's {kernel} all-to-all "
                        f"for {t.selection.tables.name} with {self._a2a_dtype()} tokens at hidden {m.hidden_size}, top "
                        f"{m.num_experts_per_token} of {m.num_experts} experts, ep {self.ep} "
                        "(cost/silicon/nvlink_a2a.py: GB200 and GB300, DeepSeek-V3's shape); use all_to_all_kernel: "
                        "engine"
                    )
                self._all_to_all, self._all_to_all_source = found
        if tp > 1:
            from simulator.cost.collectives import MeasuredAllReduce, MeasuredCollective, ScaleOut

            arrays = t.allreduce_arrays()
            # vLLM's table times its whole all-reduce dispatch (custom, symmetric-memory, pynccl) at every size
            self._all_reduce = MeasuredAllReduce.from_arrays(arrays, custom_max_bytes=None) if arrays else None
            if m.is_moe:
                for op in ("all_gather", "reduce_scatter"):
                    found = t.nccl_arrays(op)
                    if found:
                        self._exchange[op] = MeasuredCollective(found, ScaleOut.of(self.hardware))

    # -- public -------------------------------------------------------------------------

    def step_time(self, shape: BatchShape) -> StepTime:
        step = self._memo.get(shape)
        if step is None:
            total = self._step_parts(shape) if self._fast else None
            if total is not None:
                step = StepTime(total)
            else:
                ops = self._ops(shape)
                step = StepTime(_total(ops, self.roofline.cpu_overlap), None, self.roofline._stages(ops))
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            self._memo[shape] = step
        return step

    def _step_parts(self, shape: BatchShape) -> float | None:
        """``_total(self._ops(shape), cpu_overlap)`` from memoized parts, counting the same lookups and fallbacks;
        None where it does not apply (a step with no rows).

        A step's ops split by what they depend on: the linear ops (embed, qkv_proj and the rotary, o_proj, the MLP,
        norm, all_reduce, all_to_all) on the rows and whether a prefill is in the step (a decode-only step's rows are
        padded and its all-reduce runs in a CUDA graph); lm_head on the sampled rows; prefill attention on the
        chunks; decode attention on the decode count and context total (every step a new one); the engine's CPU
        time on the sequences. Each part is remembered apart, so a new decode total reuses the rest. A part not yet
        remembered is priced by ``_ops`` on the whole step, which remembers its parts. The sum runs in ``_total``'s
        order (floating-point addition is not associative): embed and qkv_proj (remembered as their sum), prefill
        attention, the other linear ops one by one, lm_head, the CPU time where it does not overlap, decode
        attention last; then the eager host's launches and the overlapped CPU time."""
        new = shape.prefill_new_tokens
        nd = shape.num_decode_seqs
        rows = sum(new) + nd
        if not new and rows and self.roofline.params.cuda_graph_padding:
            rows = padded_batch_size(rows)
        if not rows:
            return None
        has_prefill = new != ()
        linear = self._rows_memo.get((rows, has_prefill))
        sampled = shape.num_sampled_tokens
        lm = self._lm_memo.get(sampled) if sampled else _NO_LM_HEAD
        if linear is None or lm is None:  # price the whole step, and remember its parts
            trace: list[tuple[str, float, int, int]] = []
            ops = self._ops(shape, None, trace)
            self._remember_parts(shape, rows, has_prefill, sampled, trace)
            return _total(ops, self.roofline.cpu_overlap)
        head, tail, num_linear, head_fallbacks, tail_fallbacks = linear
        L = self.model.num_layers
        fallbacks = self.fallbacks
        total = head
        if has_prefill:
            cached = shape.prefill_cached_tokens
            prefill = self._prefill_memo.get((new, cached))
            if prefill is None:
                seconds, source = self._prefill_total(new, cached)
                prefill = (seconds, source.startswith("roofline"))
                if len(self._prefill_memo) >= self.MEMO_SIZE:
                    self._prefill_memo.clear()
                self._prefill_memo[(new, cached)] = prefill
            total += prefill[0]
        for seconds in tail:
            total += seconds
        if sampled:
            total += lm[0]
        # the counts, in _ops' order (a Counter keeps its first-seen order)
        self.num_lookups += num_linear + has_prefill + (nd != 0) + lm[1]
        for name in head_fallbacks:
            fallbacks[name] += 1
        if has_prefill and prefill[1]:
            fallbacks["attn_prefill"] += 1
        if nd:
            decode, anchored = self._decode_total(nd, shape.decode_context_tokens)
            if anchored:
                fallbacks["attn_decode"] += 1
        for name in tail_fallbacks:
            fallbacks[name] += 1
        for name in lm[2]:
            fallbacks[name] += 1
        # engine_overhead_s, inlined
        overhead = self.roofline._overhead
        cpu = overhead.step_s + overhead.per_seq_s * (len(new) + nd)
        if self.tp > 1:
            cpu = cpu + overhead.tp_step_s
        overlap = self.roofline.cpu_overlap
        if not overlap:
            total += cpu
        if nd:
            total += decode
        params = self.roofline.params
        host = params.eager_host_s_per_layer
        if host and has_prefill and rows > params.piecewise_graph_max_tokens:  # launched_eagerly, eager_step_s inlined
            eager = host * L
            total = total if total >= eager else eager
        if overlap:  # overlap_total, inlined
            total = total if total >= cpu else cpu
        return total

    def _remember_parts(
        self, shape: BatchShape, rows: int, has_prefill: bool, sampled: int, trace: list[tuple[str, float, int, int]]
    ) -> None:
        """Keep the parts of a step ``_ops`` priced (``trace``) for ``_step_parts``: the linear ops', the LM head's
        and prefill attention's."""
        head = 0.0
        tail: list[float] = []
        num_linear = 0
        head_fallbacks: list[str] = []
        tail_fallbacks: list[str] = []
        attention_seen = False
        for name, seconds, lookups, fallbacks in trace:
            if name in _NOT_LINEAR:
                attention_seen = attention_seen or name in ("attn_prefill", "attn_decode")
                if name == "lm_head":
                    self._lm_memo[sampled] = (seconds, lookups, ("lm_head",) * fallbacks)
                elif name == "attn_prefill":
                    if len(self._prefill_memo) >= self.MEMO_SIZE:
                        self._prefill_memo.clear()
                    self._prefill_memo[(shape.prefill_new_tokens, shape.prefill_cached_tokens)] = (
                        seconds,
                        fallbacks > 0,
                    )
                continue
            num_linear += lookups
            if name in ("embed", "qkv_proj"):
                assert not attention_seen
                head += seconds
                head_fallbacks += [name] * fallbacks
            else:
                tail.append(seconds)
                tail_fallbacks += [name] * fallbacks
        self._rows_memo[(rows, has_prefill)] = (
            head,
            tuple(tail),
            num_linear,
            tuple(head_fallbacks),
            tuple(tail_fallbacks),
        )

    def breakdown(self, shape: BatchShape) -> StepTime:
        ops = self._ops(shape)
        return StepTime(_total(ops, self.roofline.cpu_overlap), ops, self.roofline._stages(ops))

    def sources(self, shape: BatchShape) -> dict[str, str]:
        """Where each op's time of ``shape`` comes from: measured, interpolated, or the roofline (and how)."""
        out: dict[str, str] = {}
        counts = self.fallbacks.copy(), self.num_lookups
        self._ops(shape, out)
        self.fallbacks, self.num_lookups = counts
        return out

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        """Step times of decode-only steps of ``num_seqs`` sequences, one per total context given.

        The same floats as ``step_time``: only decode attention depends on the context, and the
        step's total adds it last to the other ops' sum, which is remembered per batch size.
        """
        n = num_seqs
        m = self.model
        window: tuple[list[float], int] | None = None
        if self._decode is not None and m.sliding_window is not None:  # the sliding layers' keys, each step
            window = self._decode_attention_steps(n, [min(int(c), n * m.sliding_window) for c in context_tokens])
        if self._decode is None or (window is not None and window[1]):
            # step by step: the roofline's decode attention (no shortcut needed for correctness), or a sliding
            # window's anchored lookups, which step_time counts once a step whichever layers anchor
            return [
                self.step_time(
                    BatchShape(num_decode_seqs=n, decode_context_tokens=int(c), num_sampled_tokens=n)
                ).total_s
                for c in context_tokens
            ]
        memo = self._decode_fixed.get(n)
        if memo is None:
            counts = self.fallbacks.copy(), self.num_lookups  # this probe's lookups are not the run's
            ops = self._ops(BatchShape(num_decode_seqs=n, decode_context_tokens=n, num_sampled_tokens=n))
            self.fallbacks, self.num_lookups = counts
            del ops["attn_decode"]
            cpu = ops.pop("cpu_overhead").seconds if self.roofline.cpu_overlap else None
            memo = self._decode_fixed[n] = (_total(ops), cpu)
        fixed, cpu = memo
        layers = m.num_full_attention_layers
        per_layer, anchored_steps = self._decode_attention_steps(n, context_tokens)
        if window is not None:  # _windowed_decode's sum: the full layers, then the sliding ones (none anchored)
            sliding = m.num_sliding_layers
            per_layer = [t * (layers - sliding) + w * sliding for t, w in zip(per_layer, window[0], strict=True)]
            layers = 1  # per_layer now holds all layers' attention (x 1 is exact)
        if cpu is None:
            out = [fixed + t * layers for t in per_layer]
        else:  # overlap_total(fixed + t * layers, cpu), inlined (a call per step saved)
            out = [g if (g := fixed + t * layers) >= cpu else cpu for t in per_layer]
        self.num_lookups += len(out)  # decode attention, once per step, as step_time counts it
        if anchored_steps:
            self.fallbacks["attn_decode"] += anchored_steps
        return out

    def tables_of(self, shape: BatchShape) -> dict[str, str]:
        """The measured table each op of ``shape`` reads: framework, version and kernel (``vllm 0.24.0,
        torch.nn.functional.linear``), or "" for an op no table prices."""
        if self.tables is None:
            return {}
        src = self.tables.sources
        gemm_group = f"gemm/{self._gemm_dtype}"
        groups = dict.fromkeys(
            ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "linear_in_proj", "linear_out_proj"), gemm_group
        )
        if self._gdn is not None:
            groups["attn_linear"] = "gdn"
        groups |= {
            "lm_head": "gemm/bf16",
            "moe_router": "gemm/bf16",
            "attn_prefill": "prefill",
            "attn_decode": "decode",
            "all_to_all": "a2a",
        }
        if self._mla_module:
            groups |= {
                "attn_prefill": f"{self._module_family}prefill",
                "attn_decode": f"{self._module_family}decode",
                "qkv_proj": "",
                "o_proj": "",
            }
        if self._moe_deepep:
            groups |= dict.fromkeys(MLP_OPS, "moew")
        elif self._moe is not None:
            groups |= dict.fromkeys(MLP_OPS, "moeb" if self._moe_note is not None else "moe")
        for op, found in (("attn_decode", self._decode), ("attn_prefill", self._prefill)):
            if found is not None:
                groups[op] = found[0].key
        ops = self.breakdown(shape).ops
        assert ops is not None
        out = {}
        for name in ops:
            if name == "all_reduce":
                out[name] = "; ".join(src[k] for k in ("allreduce/custom", "allreduce/nccl") if k in src)
            elif name in MLP_OPS and self._moe_source is not None and not self._moe_deepep:
                out[name] = self._moe_source
            else:
                out[name] = src.get(groups.get(name, ""), "")
        return out

    @property
    def fallback_fraction(self) -> float:
        """Share of op lookups that fell back to the roofline (0 before any)."""
        return sum(self.fallbacks.values()) / self.num_lookups if self.num_lookups else 0.0

    # -- the decomposition --------------------------------------------------------------

    def _ops(
        self, shape: BatchShape, sources: dict[str, str] | None = None, trace: list | None = None
    ) -> dict[str, OpCost]:
        """Each op's cost of ``shape`` (the reference the step-time fast path is checked against). ``trace``: a list
        that gets each op's ``(name, seconds, lookups counted, fallbacks counted)``, in order."""
        roof = self.roofline._ops(shape)  # (not breakdown: its total and stages are not needed here)
        L = self.model.num_layers
        rows = self.roofline.linear_rows(shape)  # the same rows the roofline costs
        ops: dict[str, OpCost] = {}
        moe = None
        fallbacks = self.fallbacks
        for name, r in roof.items():
            looked, fell = True, None  # a lookup counted (num_lookups); a fallback: None, where the source says
            if self._mla_module and name in ("qkv_proj", "o_proj"):
                seconds, source = 0.0, f"in the measured {self._module_name} module (attn_prefill, attn_decode)"
                looked = False
            elif name == "linear_in_proj" and f"{name}/qkv" in self._gemm:  # unfused (gdn_input_projections)
                seconds = self.roofline._gdn_copies(rows).seconds
                found_sources = []
                for part in GDN_IN_PROJ_PARTS:
                    key = (f"{name}/{part}", rows)
                    found = self._count_ops.get(key)
                    if found is None:
                        found = self._count_ops[key] = self._gemm_lookup(key[0], rows)
                    seconds += found[0] * self.model.num_linear_layers
                    found_sources.append(found[1])
                fell = any(x.startswith("roofline") for x in found_sources)
                worst = next((x for x in found_sources if x.startswith("roofline")), found_sources[0])
                source = f"{worst} GEMMs ({', '.join(GDN_IN_PROJ_PARTS)}) + roofline copies"
            elif name in self._gemm:
                count = shape.num_sampled_tokens if name == "lm_head" else rows
                key = (name, count)
                found = self._count_ops.get(key)
                if found is None:
                    found = self._count_ops[key] = self._gemm_lookup(name, count)
                per, source = found
                fell = source.startswith("roofline")
                if name == "qkv_proj":  # the rotary embedding of q and k: memory-bound, by the roofline
                    per += self._rope_s(rows)
                    source += " GEMM + roofline rotary"
                seconds = per * self._op_layers.get(name, L)
            elif name in MLP_OPS and (self._moe is not None or self._moe_deepep or self._mlp_extra):
                if moe is None:
                    moe = self._mlp_split(rows, bool(shape.prefill_new_tokens))
                seconds, source = moe[name]
            elif name == "attn_decode" and self._decode is not None:
                seconds, fell = self._decode_total(shape.num_decode_seqs, shape.decode_context_tokens)
                source = (
                    "" if sources is None else self._decode_source(shape.num_decode_seqs, shape.decode_context_tokens)
                )
            elif name == "attn_prefill" and self._prefill is not None:
                seconds, source = self._prefill_total(shape.prefill_new_tokens, shape.prefill_cached_tokens)
            elif name == "attn_linear" and self._gdn is not None:
                seconds, source = self._linear_attention(shape.prefill_new_tokens, shape.num_decode_seqs)
            elif name == "all_to_all" and self._all_to_all is not None:
                seconds, source = self._all_to_all_lookup(rows)
            elif name == "all_reduce" and self._all_reduce is not None:
                seconds, source = self._all_reduce_lookup(shape, rows, r.seconds)
            elif name in ("attn_prefill", "attn_decode", "qkv_proj") and self._is_mla:
                seconds = r.seconds
                source = f"roofline (no {self._module_name} table)"
            else:
                seconds = r.seconds
                source = "roofline (no table)" if name != "cpu_overhead" else "engine overhead model"
                looked = False
            if looked:
                if fell is None:
                    fell = source.startswith("roofline")
                self.num_lookups += 1
                if fell:
                    fallbacks[name] += 1
            else:
                fell = False
            if sources is not None:
                sources[name] = source
            if trace is not None:
                trace.append((name, seconds, int(looked), int(fell)))
            ops[name] = _new_op((seconds, r.flops, r.bytes))
        return ops

    # GEMMs --------------------------------------------------------------------------------

    def _gemm_roofline(self, g: _Gemm, m: float, n: float, k: float, weight_bytes: float) -> float:
        a = self.params.roofline.activation_bytes
        return max(2 * m * n * k / g.rate, (weight_bytes * n * k + a * m * (n + k)) / self._bw)

    def _rope_s(self, rows: int) -> float:
        """One layer's rotary embedding: read and write q and k of every row, one kernel."""
        a = self.params.roofline.activation_bytes
        return 2 * a * rows * (self._q + self._kv) / self._bw + self.params.roofline.kernel_launch_s

    def _gemm_lookup(self, op: str, rows: int) -> tuple[float, str]:
        """Seconds of one layer's ``op`` GEMM at ``rows`` tokens (once per step for the LM head)."""
        g = self._gemm[op]
        curve = g.curve
        mc = min(max(rows, curve.lo), curve.hi)  # curve.clamp(rows)
        t = curve(mc)
        assert t is not None
        exact_nk = g.exact_nk
        if g.unmeasured:  # a shape no m was measured at: its neighbour scaled by n x k
            return t * self._gemm_roofline(g, rows, g.n, g.k, g.weight_bytes) / self._gemm_roofline(
                g, mc, g.n_table, g.k_table, g.weight_bytes
            ), "roofline-scaled from the nearest measured (n, k)"
        if mc == rows and exact_nk and not g.note:
            on_grid = g.nk_on_grid and rows in g.curve.xs
            return t, "measured" if on_grid else "interpolated"
        table_weight_bytes = 2.0 if g.note else g.weight_bytes  # a bf16 table's kernels read bf16 weights
        t *= self._gemm_roofline(g, rows, g.n, g.k, g.weight_bytes) / self._gemm_roofline(
            g, mc, g.n_table, g.k_table, table_weight_bytes
        )
        where = []
        if mc != rows:
            where.append(f"m={mc:g}")
        if not exact_nk:
            where.append(f"n={g.n_table:g}, k={g.k_table:g}")
        if g.note:
            where.append(g.note)
        return t, "roofline anchored at " + ", ".join(where)

    # attention ----------------------------------------------------------------------------

    def _decode_roofline(self, b: float, ctx_per_seq: float) -> float:
        p, m = self.params.roofline, self.model
        a, kvb, q, kv = p.activation_bytes, m.kv_cache_bytes, self._q, self._kv
        ctx = b * ctx_per_seq
        return max(4 * q * ctx / self._attn_rate, (kvb * ctx * 2 * kv + 2 * a * b * q + kvb * b * 2 * kv) / self._bw)

    def _prefill_roofline(self, b: float, new: float, cached: float = 0.0) -> float:
        p, m = self.params.roofline, self.model
        a, kvb, q, kv = p.activation_bytes, m.kv_cache_bytes, self._q, self._kv
        pairs = b * (new * cached + new * (new + 1) / 2)
        nbytes = b * (2 * a * new * q + kvb * (cached + new) * 2 * kv + kvb * new * 2 * kv)
        return max(4 * q * pairs / self._attn_rate, nbytes / self._bw)

    def _table_lookup(self, table: AttentionTable, b: float, length: float, roofline) -> tuple[float, str]:
        """One layer's seconds at batch ``b`` and per-sequence ``length``, anchored outside the measured rows."""
        batches = table.batch
        anchored: list[str] = []
        bc = min(max(b, batches[0]), batches[-1])
        if bc != b:
            anchored.append(f"batch {bc:g}")
        j = bisect.bisect_left(batches, bc)
        if batches[j] == bc:
            pairs = [(j, 1.0)]
        else:
            w = (math.log(bc) - table._log_b[j - 1]) / (table._log_b[j] - table._log_b[j - 1])
            pairs = [(j - 1, 1.0 - w), (j, w)]
        log_t = 0.0
        exact = True
        for i, weight in pairs:
            row, rb = table.rows[i], batches[i]
            lc = row.clamp(length)
            t = row(lc)
            assert t is not None
            if lc != length:
                t *= roofline(rb, length) / roofline(rb, lc)
                anchored.append(f"length {lc:g} at batch {rb:g}")
            elif length not in row.xs:
                exact = False
            log_t += weight * math.log(t)
        t = math.exp(log_t)
        if bc != b:
            t *= roofline(b, length) / roofline(bc, length)
        if anchored:
            return t, "roofline anchored at " + "; ".join(dict.fromkeys(anchored))
        return t, "measured" if exact and len(pairs) == 1 else "interpolated"

    def _decode_rows(self, num_seqs: int) -> tuple[float, list[tuple[Curve, float, float]]]:
        """The batch rows that bracket ``num_seqs`` (clamped into the table) and their log-space weights."""
        rows = self._decode_brackets.get(num_seqs)
        if rows is None:
            assert self._decode is not None
            table = self._decode[0]
            batches = table.batch
            bc = min(max(float(num_seqs), batches[0]), batches[-1])
            j = bisect.bisect_left(batches, bc)
            if batches[j] == bc:
                pairs = [(table.rows[j], 1.0, batches[j])]
            else:
                w = (math.log(bc) - table._log_b[j - 1]) / (table._log_b[j] - table._log_b[j - 1])
                pairs = [(table.rows[j - 1], 1.0 - w, batches[j - 1]), (table.rows[j], w, batches[j])]
            rows = self._decode_brackets[num_seqs] = (bc, pairs)
        return rows

    def _decode_attention(self, num_seqs: int, context_tokens: int) -> tuple[float, bool]:
        """One layer's decode attention at ``num_seqs`` sequences of mean context ``context_tokens / num_seqs``,
        and whether the roofline was anchored (the hot path of fast-forward windows; ``_table_lookup`` says
        the same number's source in words)."""
        bc, pairs = self._decode_rows(num_seqs)
        length = context_tokens / num_seqs
        log_t = 0.0
        anchored = bc != num_seqs
        for row, weight, rb in pairs:
            lt = row.log_at(length)
            if lt is None:
                lc = row.clamp(length)
                lt = row.log_at(lc)
                assert lt is not None
                lt += math.log(self._decode_roof(rb, length) / self._decode_roof(rb, lc))
                anchored = True
            log_t += weight * lt
        t = math.exp(log_t)
        if bc != num_seqs:
            t *= self._decode_roof(num_seqs, length) / self._decode_roof(bc, length)
        return t, anchored

    def _decode_attention_steps(self, num_seqs: int, context_tokens: Sequence[int]) -> tuple[list[float], int]:
        """``_decode_attention`` of each total context at ``num_seqs`` sequences (the same floats), and how many
        anchored.

        Where ``num_seqs`` lies inside the table's batches and every mean context inside the bracketing rows'
        lengths (no roofline anchor), the steps are priced at once: the logs and exps of all lengths by ``map``
        (the same ``math`` functions on the same floats), each row's segment found by walking an index along the
        lengths (a window's lengths grow step by step) where ``bisect_left`` would search, and each step's
        log-time summed as ``_decode_attention`` sums it (``0.0 + w0 a0 (+ w1 a1)``). Otherwise each step goes
        by ``_decode_attention``."""
        n = num_seqs
        bc, pairs = self._decode_rows(n)
        lengths = [int(c) / n for c in context_tokens]
        if lengths and bc == n:
            lo = max(row.lo for row, _, _ in pairs)
            hi = min(row.hi for row, _, _ in pairs)
            if lo <= min(lengths) and max(lengths) <= hi:
                logs = list(map(math.log, lengths))
                if len(pairs) == 1:
                    ((row, weight, _),) = pairs
                    args = [0.0 + weight * x for x in _row_log_times(row, lengths, logs)]
                else:
                    args = _bracket_log_times(pairs, lengths, logs)
                return list(map(math.exp, args)), 0
        out, anchored = [], 0
        for c in context_tokens:
            t, a = self._decode_attention(n, int(c))
            out.append(t)
            anchored += a
        return out, anchored

    def decode_attention_s(self, num_seqs: int, context_tokens: int) -> float | None:
        """The ``attn_decode`` op's seconds of a decode-only step of ``num_seqs`` sequences over ``context_tokens``,
        the same float ``breakdown`` gives it; None where this model prices it by the roofline. Counts no lookup."""
        if self._decode is None:
            return None
        return self._decode_total(num_seqs, context_tokens)[0]

    def _decode_total(self, num_seqs: int, context_tokens: int) -> tuple[float, bool]:
        """Decode attention over all layers, and whether the roofline was anchored."""
        if self.model.num_sliding_layers:
            return self._windowed_decode(num_seqs, context_tokens)
        per, anchored = self._decode_attention(num_seqs, context_tokens)
        return per * self.model.num_full_attention_layers, anchored

    def _prefill_total(self, new: Sequence[int], cached: Sequence[int]) -> tuple[float, str]:
        """Prefill attention over all layers (a sliding-window layer's at its window), and the full layers' source."""
        m = self.model
        per, source = self._prefill_attention(new, cached)
        if not m.num_sliding_layers:
            return per * m.num_full_attention_layers, source
        window = self._prefill_attention(new, cached, m.sliding_window)[0]
        sliding = m.num_sliding_layers
        return per * (m.num_layers - sliding) + window * sliding, source

    def _windowed_decode(self, num_seqs: int, context_tokens: int) -> tuple[float, bool]:
        """Decode attention over all layers of a model with sliding-window layers, and whether the roofline was
        anchored: the full layers at the step's context, a sliding layer at ``min(context, num_seqs x window)``
        (RooflineCostModel._windowed_decode)."""
        m = self.model
        assert m.sliding_window is not None
        full, anchored = self._decode_attention(num_seqs, context_tokens)
        part, anchored_window = self._decode_attention(num_seqs, min(context_tokens, num_seqs * m.sliding_window))
        sliding = m.num_sliding_layers
        return full * (m.num_layers - sliding) + part * sliding, anchored or anchored_window

    def _decode_source(self, num_seqs: int, context_tokens: int) -> str:
        assert self._decode is not None
        table, how = self._decode
        source = self._table_lookup(table, num_seqs, context_tokens / num_seqs, self._decode_roof)[1]
        return source if how == "measured" or source.startswith("roofline") else f"{source}, {how}"

    def _prefill_attention(
        self, new: Sequence[int], cached: Sequence[int], window: int | None = None
    ) -> tuple[float, str]:
        """The step's chunks as one varlen kernel: the table at (chunks, equal-work length).

        The table measures ``batch`` prompts of ``isl`` tokens with no cached prefix, whose causal
        work is isl (isl + 1) / 2 query-key pairs each. A chunk of n new tokens on c cached ones does
        n c + n (n + 1) / 2 pairs (on a sliding-window layer, ``window``: each query at most that many);
        it is looked up at the prompt length of equal work, and a step's chunks at the root mean square of
        those lengths (equal total work over the batch).
        """
        assert self._prefill is not None
        table, how = self._prefill
        b = len(new)
        sq = 0.0
        for n, c in zip(new, cached, strict=True):
            pairs = n * c + n * (n + 1) / 2 if window is None else _top_k_pairs(n, c, window)
            length = (math.sqrt(1 + 8 * pairs) - 1) / 2  # l (l + 1) / 2 = pairs
            sq += length * length
        t, source = self._table_lookup(table, b, math.sqrt(sq / b), self._prefill_roof)
        if any(cached) and not source.startswith("roofline"):
            source = "interpolated at equal causal work"
        if how != "measured" and not source.startswith("roofline"):
            source = f"{source}, {how}"
        return t, source

    def _linear_attention(self, new: Sequence[int], num_decode_seqs: int) -> tuple[float, str]:
        """The Gated DeltaNet kernels of a step over the linear layers, from the measured tables: the prompt chunks
        as one varlen call at (chunks, mean chunk length) (the chunked kernel's work grows with the tokens, not
        their pairs), the decoding sequences at their count; the roofline anchored outside the grid."""
        assert self._gdn is not None
        prefill, decode = self._gdn
        r = self.roofline
        seconds, sources = 0.0, []
        if new:
            t, source = self._table_lookup(prefill, len(new), sum(new) / len(new), r.gdn_prefill_layer_s)
            seconds += t
            sources.append(f"prefill {source}")
        if num_decode_seqs:
            n = float(num_decode_seqs)
            nc = decode.clamp(n)
            t = decode(nc)
            assert t is not None
            if nc != n:
                t *= r.gdn_decode_layer_s(n) / r.gdn_decode_layer_s(nc)
                sources.append(f"decode roofline anchored at batch {nc:g}")
            else:
                sources.append("decode measured" if n in decode.xs else "decode interpolated")
            measured_state = self._gdn_state_bytes
            if measured_state is not None and measured_state != self.model.linear_state_bytes:
                # the table's recurrent state read and written in another dtype than this run's: anchored at its own
                t *= r.gdn_decode_layer_s(n) / r.gdn_decode_layer_s(n, measured_state)
                sources[-1] += f", its {measured_state:g}-byte state anchored"
            seconds += t
        source = ", ".join(sources)
        if "roofline" in source:  # a fallback (the op's source starts so)
            source = "roofline anchored: " + source
        return seconds * self.model.num_linear_layers, source

    def _mla_o_proj_s(self, T: int) -> float:
        r, m, p = self.roofline, self.model, self.params.roofline
        o, h = r._o, m.hidden_size
        flops, nbytes = 2 * T * o * h, m.dense_weight_bytes * o * h + p.activation_bytes * T * (o + h)
        return max(flops / self._gemm_rate, nbytes / self._bw) + p.kernel_launch_s

    def _mla_decode_roofline(self, b: float, ctx_per_seq: float) -> float:
        """One layer's MLA module by the roofline (projections, absorbed decode attention, o_proj): the module
        table's anchor."""
        r, L = self.roofline, self.model.num_layers
        n = max(1, round(b))
        ctx = max(1, round(b * ctx_per_seq))
        return (r._mla_qkv(n).seconds + r._mla_decode(n, ctx).seconds) / L + self._mla_o_proj_s(n)

    def _mla_prefill_roofline(self, b: float, new: float, cached: float = 0.0) -> float:
        """One layer's MLA module over ``b`` prompts of ``new`` tokens by the roofline: the module table's anchor."""
        r, L = self.roofline, self.model.num_layers
        n, length = max(1, round(b)), max(1, round(new))
        T = n * length
        attn = r._mla_prefill((length,) * n, (round(cached),) * n).seconds
        return (r._mla_qkv(T).seconds + attn) / L + self._mla_o_proj_s(T)

    # MoE, all-to-all and all-reduce --------------------------------------------------------

    def _a2a_dtype(self) -> str:
        """The format TensorRT-LLM's MoE sends its tokens in (``EXCHANGED_QUANTIZED``, as ``exchange_bytes_per_row``
        prices them): NVFP4 or FP8 per-tensor experts take them quantized, any other in bf16."""
        quant = self.model.quantization
        return quant if quant in EXCHANGED_QUANTIZED else "bfloat16"

    def _all_to_all_lookup(self, rows: int) -> tuple[float, str]:
        """Expert parallelism's dispatch and combine per MoE layer, each GPU sending its ``rows / ep`` share of the
        step's tokens: the engine's measured DeepEP times (the faster of its normal and low-latency kernels at that
        count), or TensorRT-LLM's NVLink kernels (``all_to_all_kernel``: prepare, dispatch and combine summed), the
        roofline anchored at the edge of the measured token counts."""
        assert self._all_to_all is not None
        tokens = max(1.0, rows / self.ep)
        total = 0.0
        beyond = False
        for curve in self._all_to_all:
            tc = curve.clamp(tokens)
            t = curve(tc)
            assert t is not None
            if tokens > tc:  # past the largest count measured: the bytes, and so the time, grow with the tokens
                t *= tokens / tc
                beyond = True
            total += t  # below the smallest count: its time (the kernels' latency floor)
        who = self._all_to_all_source
        source = f"interpolated ({who})" if not beyond else f"roofline anchored at tokens={tc:g} ({who})"
        return total * self.model.num_moe_layers, source

    def _mlp_split(self, rows: int, has_prefill: bool = False) -> dict[str, tuple[float, str]]:
        """The MLP ops' seconds over all layers (``_mlp_parts``' parts summed: routed, then shared, then dense)."""
        parts = iter(self._mlp_parts(rows, has_prefill).items())
        _, routed = next(parts)
        out = dict(routed)
        for part, ops in parts:
            for name, (seconds, source) in ops.items():
                t, s = out[name]
                out[name] = (t + seconds, s if s == source else f"{s}; {part}: {source}")
        return out

    def _mlp_parts(self, rows: int, has_prefill: bool = False) -> dict[str, dict[str, tuple[float, str]]]:
        """The MLP ops' seconds over all layers and their sources, by part: the routed experts from the fused-MoE
        table, or SGLang's DeepEP MoE table of the step's kind (split over the ops in the roofline's proportions;
        the roofline where no table matches), shared experts and dense layers from the GEMM table (their
        activation by the roofline)."""
        parts = self.roofline.mlp_parts(rows)
        curve = self._moe_deepep.get(has_prefill, self._moe)
        routed = (
            self._moe_split(rows, parts["routed"], curve)
            if curve is not None
            else {name: (op.seconds, "roofline (no MoE table)") for name, op in parts["routed"].items()}
        )
        out = {"routed": routed}
        for part, layers in (("shared", self.model.num_moe_layers), ("dense", self.model.num_dense_layers)):
            if part not in parts:
                continue
            ops = out[part] = {}
            for name, op in parts[part].items():
                key = f"{part}/{name}"
                if key in self._gemm:
                    found = self._count_ops.get((key, rows))
                    if found is None:
                        found = self._count_ops[(key, rows)] = self._gemm_lookup(key, rows)
                    ops[name] = (found[0] * layers, found[1])
                else:
                    ops[name] = (op.seconds, "roofline (no table)")
        return out

    def mlp_by_part(self, shape: BatchShape) -> dict[str, dict[str, OpCost]]:
        """The MLP ops (``mlp_gate_up``, ``mlp_act``, ``mlp_down``) of ``shape`` by part (routed, shared, dense), the
        seconds ``breakdown`` sums for them (the router is an op of its own); a dense model's MLP is its routed
        part, as the roofline names it."""
        if self._moe is None and not self._moe_deepep and not self._mlp_extra:  # a dense MLP: the step's own ops
            counts = self.fallbacks.copy(), self.num_lookups  # priced with the step already: not the run's lookups
            ops = self._ops(shape)
            self.fallbacks, self.num_lookups = counts
            return {"routed": {name: ops[name] for name in MLP_OPS if name in ops}}
        roof = self.roofline.mlp_by_part(shape)
        out = {}
        for part, ops in self._mlp_parts(self.roofline.linear_rows(shape), bool(shape.prefill_new_tokens)).items():
            out[part] = {
                name: OpCost(seconds, roof[part][name].flops, roof[part][name].bytes)
                for name, (seconds, _) in ops.items()
                if name in MLP_OPS
            }
        return out

    def _moe_split(self, rows: int, roof: dict[str, OpCost], curve: Curve) -> dict[str, tuple[float, str]]:
        """The MoE layer's measured time (``curve``), split over the MLP ops in the roofline's proportions."""
        rc = curve.clamp(rows)
        t = curve(rc)
        assert t is not None
        roof_total = sum(roof[name].seconds for name in MLP_OPS if name in roof)
        source = "measured" if rc == rows and rows in curve.xs else "interpolated"
        if self._moe_source is not None and curve is self._moe:  # another GPU's curve (borrow.py)
            source = f"carried over from other GPUs, {source}"
        elif self._moe_note is not None and curve is self._moe:
            source = f"{source}: {self._moe_note}"
        elif curve is not self._moe:
            note = next((self._deepep_notes.get(k) for k, c in self._moe_deepep.items() if c is curve), None)
            source = f"{source}: {note}" if note is not None else source
        if rc != rows:  # anchored: the roofline's routed MLP at the edge of the measured token counts
            edge = self.roofline.mlp_parts(round(rc))["routed"]
            t *= roof_total / sum(edge[name].seconds for name in MLP_OPS if name in edge)
            source = f"roofline anchored at tokens={rc:g}"
        total = t * self.model.num_moe_layers
        return {name: (total * roof[name].seconds / roof_total, source) for name in MLP_OPS if name in roof}

    def moe_exchange(self, rows: float, gather_bytes_per_row: float, scatter_bytes_per_row: float) -> OpCost:
        """The roofline's ``moe_exchange`` (an all-gather before the routed experts and a reduce-scatter after, each
        MoE layer, over the tp GPUs) timed by NCCL's measured all-gather and reduce-scatter where this GPU's tables
        hold both (``MeasuredCollective``: nccl-tests' message is the whole buffer, ``rows`` x the bytes a row)."""
        roof = self.roofline.moe_exchange(rows, gather_bytes_per_row, scatter_bytes_per_row)
        if self.tp <= 1 or rows <= 0 or len(self._exchange) < 2:
            return roof
        gather = self._exchange["all_gather"].seconds(rows * gather_bytes_per_row, self.tp)
        scatter = self._exchange["reduce_scatter"].seconds(rows * scatter_bytes_per_row, self.tp)
        return OpCost((gather + scatter) * self.model.num_moe_layers, 0.0, roof.bytes)

    def _all_reduce_lookup(self, shape: BatchShape, rows: int, roofline_s: float) -> tuple[float, str]:
        """Two all-reduces of the step's activations per layer; a decode-only step runs in a CUDA graph."""
        assert self._all_reduce is not None
        message = self.params.roofline.activation_bytes * rows * self.model.hidden_size
        graph = not shape.prefill_new_tokens
        one = self._all_reduce.seconds(message, self.tp, cuda_graph=graph)
        if one is None:
            return roofline_s, "roofline (fitted all-reduce model)"
        per_layer = 2 * one
        if self.model.qk_norm_across_heads:  # the q/k variance's own all-reduce (roofline.QK_NORM_VARIANCE_BYTES)
            qk = self._all_reduce.tiny_seconds(QK_NORM_VARIANCE_BYTES * rows, self.tp, cuda_graph=graph)
            if qk is None:
                return roofline_s, "roofline (fitted all-reduce model)"
            per_layer += qk
        return per_layer * self.model.num_layers, "interpolated"
