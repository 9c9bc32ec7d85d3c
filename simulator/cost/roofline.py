"""``roofline``: an analytic per-op cost model from datasheet figures.

Each op of a decoder layer costs ``max(FLOPs / achievable FLOP/s, bytes / achievable
bandwidth) + kernels x launch overhead``, summed over layers; then embedding, LM head on
the sampled rows, tensor-parallel all-reduces (measured alpha-beta model) and a CPU overhead per step.
All figures are per GPU: with tensor parallelism each GPU holds 1/tp of every weight
matrix and of the attention heads.

Default efficiencies (fractions of datasheet peak that real kernels reach), from public
measurements:

- GEMMs, 0.70: cuBLAS bf16 GEMMs at LLM shapes reach roughly 600-750 of the H100 SXM's
  989 TFLOP/s (NVIDIA's Transformer Engine and MLPerf inference submissions; the H200
  lent to this project measures ~790 on large square bf16 matmuls, 0.80, an upper bound).
- Attention, 0.55: FlashAttention-2 reports 50-73% of peak for the forward pass on A100
  (Dao, 2023); FlashAttention-3 about 75% on H100 at long sequences, less at short ones.
- Memory, 0.85: sustained HBM copy/STREAM bandwidth is about 85-92% of the datasheet
  figure (e.g. ~3.0 of 3.35 TB/s on H100 SXM); decode GEMVs and paged attention land a
  little lower, which Databricks' "LLM inference performance engineering" (2023) reports
  as model bandwidth utilisation of 55-80%.
- Interconnect: each tensor-parallel all-reduce (two per layer, of tokens x hidden x 2 bytes)
  costs what ``AllReduceLatencyModel`` (simulator/cost/collectives.py) gives: on a GPU with
  measured tables (``HardwareSpec.silicon_tables``) an alpha-beta fit to vLLM's custom
  all-reduce (CUDA graph) under 8 MiB and NCCL above (a flat ~4-7 us at decode sizes on
  NVLink, barely growing with tp); otherwise one link latency for a one-shot and two for a
  two-shot all-reduce, at ``interconnect_efficiency`` (0.80: nccl-tests all-reduce bus
  bandwidth on NVLink 4 is about 360-370 of 450 GB/s per direction) x the link bandwidth.
- Kernel launch 2 us per kernel (CUDA-graph replay gaps are 1-3 us).
- The engine's CPU time per step (scheduling, input preparation, sampling, output
  processing): ``step_overhead_s + per_seq_overhead_s x sequences``, plus
  ``tp_step_overhead_s`` when tp > 1; defaults 0.54 ms, 43.7 us and 0.85 ms, fitted to
  Vidur's measured per-iteration CPU overheads on A100 (simulator/cost/overhead.py says which
  components, and why they are an upper bound for vLLM V1). It adds to the step's GPU time, or,
  for engines that overlap it (``cpu_overlap``: vLLM V1, SGLang, TensorRT-LLM), the step takes
  the longer of the two.
- CUDA graphs (``cuda_graph_padding``): a decode-only step's linear layers (embedding, QKV, O,
  MLP, norms, all-reduces) run at the next batch size vLLM V1 captures a graph for
  (``VLLM_CAPTURE_SIZES``: 1, 2, 4, multiples of 8 to 256, of 16 to 512; eager beyond);
  attention, the LM head (computed outside the graph, on the sampled rows) and the CPU time
  use the real count.

Quantized (``ModelSpec.quantization``, simulator/config/precision.py): the linear layers read the
format's weight bytes and their GEMMs run at the dense peak of its tensor cores x the GEMM
efficiency: FP8 (``fp8``, ``fp8_block``) at ``HardwareSpec.fp8_flops_per_s``, NVFP4 at
``fp4_flops_per_s``; the LM head stays 16-bit (bf16 rate and weight bytes) and attention keeps
the bf16 rate. vLLM's "FP8 W8A8" page: Ada Lovelace, Hopper and Blackwell run FP8 W8A8 GEMMs,
Turing/Ampere run FP8 checkpoints weight-only (W8A16) with FP8 Marlin kernels, and every Linear
module but the final lm_head is quantized; NVFP4 runs on Blackwell's FP4 tensor cores and
weight-only (FP4 Marlin) elsewhere, MXFP4 weight-only (W4A16). So on a GPU without the format's
tensor cores only the weight bytes shrink.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from simulator.config.precision import QUANTIZATIONS
from simulator.config.specs import UNQUANTIZED_WEIGHT_BYTES, HardwareSpec, ModelSpec
from simulator.cost.collectives import AllReduceLatencyModel
from simulator.cost.eager import eager_step_s, launched_eagerly
from simulator.cost.moe_load import DISTRIBUTIONS, busiest_group_share, default_distribution
from simulator.cost.overhead import (
    DEFAULT_PER_SEQ_S,
    DEFAULT_STEP_S,
    DEFAULT_TP_STEP_S,
    EngineOverheadParams,
    engine_overhead_s,
    overlap_total,
    padded_batch_size,
)
from simulator.cost.shape import COST_MODELS, BatchShape, OpCost, StepTime, merge_op, sum_ops
from workloads.validators import MAX_TOKENS


class RooflineParams(BaseModel):
    """Achievable fractions of peak and fixed overheads of the roofline model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["roofline"] = "roofline"
    gemm_flops_efficiency: float = Field(0.70, gt=0, le=1, description="Fraction of peak FLOP/s GEMMs reach.")
    attention_flops_efficiency: float = Field(
        0.55, gt=0, le=1, description="Fraction of peak FLOP/s attention kernels reach."
    )
    memory_bandwidth_efficiency: float = Field(
        0.85, gt=0, le=1, description="Fraction of peak memory bandwidth kernels reach."
    )
    interconnect_efficiency: float = Field(
        0.80, gt=0, le=1, description="Fraction of interconnect bandwidth all-reduces reach."
    )
    kernel_launch_s: float = Field(2e-6, ge=0, description="Launch gap per kernel, seconds.")
    step_overhead_s: float = Field(
        DEFAULT_STEP_S, ge=0, description="Engine CPU time per step, seconds (simulator/cost/overhead.py)."
    )
    per_seq_overhead_s: float = Field(
        DEFAULT_PER_SEQ_S, ge=0, description="Engine CPU time per scheduled sequence, seconds."
    )
    tp_step_overhead_s: float = Field(
        DEFAULT_TP_STEP_S, ge=0, description="Engine CPU time per step added when tp > 1, seconds."
    )
    cpu_overlap: bool | None = Field(
        None,
        description="The engine prepares the next step on the CPU while this one runs on the GPU (vLLM V1's async "
        "scheduling, SGLang's and TensorRT-LLM's overlap schedulers): a step takes the longer of its GPU time and "
        "the engine's CPU time, not their sum. None: what the batch policy's engine does (its traits).",
    )
    expert_all_to_all: bool | None = Field(
        None,
        description="With ep > 1, dispatch each token to its experts' GPUs and combine the results back (DeepEP-style "
        "all-to-all). False: tensor x expert parallelism as vLLM, SGLang and TensorRT-LLM run it without attention "
        "DP: every GPU holds all the step's tokens, computes its own experts' share and the tensor-parallel "
        "all-reduce combines them. None (the default): the engine's rule, all-to-all where vLLM runs it, with "
        "attention data parallelism and ep > 1 (FusedMoEParallelConfig.use_all2all_kernels is dp_size > 1 and "
        "use_ep, vllm/model_executor/layers/fused_moe/config.py); SGLang's and TensorRT-LLM's default attention-DP "
        "layout gathers the tokens instead (no all-to-all).",
    )
    all_to_all_kernel: Literal["engine", "nvlink_two_sided", "nvlink_one_sided"] = Field(
        "engine",
        description="With expert_all_to_all, whose measured kernels move the tokens (the silicon cost model): "
        "'engine', the engine's own all-to-all table (DeepEP's under SGLang and TensorRT-LLM's collectors, vLLM's "
        "all2all); 'nvlink_two_sided' or 'nvlink_one_sided', TensorRT-LLM's NVLink all-to-all "
        "(TRTLLM_FORCE_COMM_METHOD NVLINK_TWO_SIDED or NVLINK_ONE_SIDED; measured on GB200 NVL72, read for GB300: "
        "simulator/cost/silicon/nvlink_a2a.py).",
    )
    dp_attention_mlp: Literal["gathered", "local"] | None = Field(
        None,
        description="With attention data parallelism, where the MLPs run (simulator/cost/dp_attention.py): "
        "'gathered', every MLP on all the ranks' tokens split over tp, gathered and reduced by two all-reduces a "
        "layer (SGLang's default layout); 'local', the dense layers' MLP, the shared experts, the router and the LM "
        "head on each rank's own tokens and the routed experts alone on all the ranks' tokens, all-gathered before "
        "them and reduce-scattered after (TensorRT-LLM; vLLM through its all-to-all). None: what the batch "
        "policy's engine does (its traits).",
    )
    dp_attention_scattered: tuple[Literal["moe", "dense", "lm_head"], ...] | None = Field(
        None,
        description="With attention data parallelism in the 'gathered' layout, what SGLang runs on each rank's own "
        "tokens instead of the gathered rows (its LayerCommunicator's ScatterMode.SCATTERED, "
        "python/sglang/srt/layers/communicator.py; simulator/cost/dp_attention.py): 'moe', the MoE layers' router "
        "and shared experts, where the routed experts' tokens travel by themselves (expert_all_to_all: "
        "--moe-a2a-backend deepep; or the sglang policy's moe_runner_backend flashinfer_cutlass with NVFP4 experts "
        "over as many GPUs as DP ranks, which all-gathers them quantized); 'dense', the dense layers' MLP "
        "(--moe-dense-tp-size 1); 'lm_head', the LM head (--enable-dp-lm-head). None: what the engine's flags give "
        "(expert_all_to_all, and the sglang policy's moe_runner_backend, moe_dense_tp_size and enable_dp_lm_head).",
    )
    dp_attention_padding: Literal["sglang", "largest", "none"] | None = Field(
        None,
        description="With attention data parallelism, how a decode-only step's gathered rows are padded: 'sglang' "
        "(every rank to the largest where 2 x sum > N x max), 'largest' (every rank to the largest: vLLM under CUDA "
        "graphs), 'none' (the sum: TensorRT-LLM). None: what the batch policy's engine does (its traits).",
    )
    gdn_input_projections: Literal["fused", "separate"] = Field(
        "fused",
        description="How a Gated DeltaNet layer's input projections run: 'fused', one GEMM of their width (SGLang from "
        "0.5.10: in_proj_qkvz with in_proj_ba beside it on a second stream, sgl-project/sglang#21019); 'separate', "
        "four GEMMs (q/k/v, the gate z, beta, the decay a) and q, k and v copied contiguous for the recurrent "
        "kernel (SGLang 0.5.9's qwen3_5.py runs in_proj_qkv, in_proj_z, in_proj_b and in_proj_a in turn, and its "
        "Triton decode kernel's input_guard makes the split views contiguous).",
    )
    cuda_graph_padding: bool = Field(
        True, description="Run a decode-only step's linear layers at the next captured CUDA-graph batch size."
    )
    eager_host_s_per_layer: float | None = Field(
        None,
        ge=0,
        description="Host seconds to launch one decoder layer's kernels in a step the engine runs without a CUDA "
        "graph (a step holding a prefill, under SGLang and TensorRT-LLM): such a step takes the longer of its GPU "
        "time and this x the layers (simulator/cost/eager.py). None: the engine's rule, the measured figure for "
        "the model's architecture where the policy's engine runs prefills eagerly, else 0.",
    )
    piecewise_graph_max_tokens: int = Field(
        0,
        ge=0,
        le=MAX_TOKENS,
        description="A step holding a prefill of at most this many tokens (its prompt chunks plus one per decode) "
        "replays piecewise CUDA graphs instead of being launched eagerly: no eager host time (TensorRT-LLM's "
        "torch_compile_config.enable_piecewise_cuda_graph up to its largest capture_num_tokens; "
        "simulator/cost/eager.py). 0: every step holding a prefill of an eager engine is launched eagerly.",
    )
    activation_bytes: float = Field(2.0, gt=0, description="Bytes per activation element (bf16).")
    moe_token_distribution: Literal["auto", "balanced", "power_law_1.01", "power_law_1.2"] = Field(
        "auto",
        description="MoE tokens over experts, as the measured MoE tables name them: balanced, or aiconfigurator's "
        "power law (1.01 fitted to DeepSeek-V3/R1, 1.2 to Qwen3-235B); with ep > 1 the busiest GPU's expert "
        "tokens set the MoE layer's time (simulator/cost/moe_load.py). auto: aiconfigurator's default for the "
        "model, 1.01 for DeepSeek-V3-built MLA models, 1.2 for the other MoE models (moe_load.default_distribution).",
    )

    def distribution_for(self, model: ModelSpec) -> str:
        """``moe_token_distribution`` with ``auto`` resolved for ``model``."""
        dist = self.moe_token_distribution
        return default_distribution(model) if dist == "auto" else dist


QK_NORM_VARIANCE_BYTES = 8
"""A token's q and k variance, one fp32 each, all-reduced over tp where the q/k norm spans all heads
(``ModelSpec.qk_norm_across_heads``: vLLM's ``MiniMaxText01RMSNormTP.forward_qk`` concatenates the two and
all-reduces them once a layer)."""
_NOT_SUMMED = frozenset(("attn_decode", "eager_host"))
# Tokens a chunk of the chunked Gated DeltaNet kernel (FLA's chunk_gated_delta_rule, which vLLM, SGLang and
# TensorRT-LLM run: its forward kernels' BT = 64, fla/ops/gated_delta_rule/chunk.py)
GDN_CHUNK = 64
# OpCost(*fields) without the named tuple's Python __new__: the same tuple, one call fewer
_new_op = partial(tuple.__new__, OpCost)


def _total(ops: dict[str, OpCost], cpu_overlap: bool = False) -> float:
    """A step's time: its ops summed in order, decode attention (the only op that grows with the
    context) last, so that ``decode_step_times`` adds it to a memoised sum with the same floats; a step
    launched eagerly (``eager_host``, simulator/cost/eager.py) the longer of that sum and the host's launches.

    With ``cpu_overlap`` the engine's CPU time (``cpu_overhead``) runs beside the GPU's, not before it: the step
    takes the longer of the two (``overlap_total``).
    """
    total = 0.0
    for name, op in ops.items():
        if name not in _NOT_SUMMED and not (cpu_overlap and name == "cpu_overhead"):
            total += op.seconds
    decode = ops.get("attn_decode")
    if decode is not None:
        total += decode.seconds
    eager = ops.get("eager_host")
    if eager is not None:  # launched eagerly: the GPU's kernels wait for the host's launches
        total = eager_step_s(total, eager.seconds)
    if cpu_overlap:
        cpu = ops.get("cpu_overhead")
        return overlap_total(total, cpu.seconds if cpu is not None else 0.0)
    return total


def gemm_peak_flops_per_s(model: ModelSpec, hardware: HardwareSpec) -> float:
    """The dense peak the linear layers' GEMMs run at: the quantization's tensor cores where the GPU has them
    (FP8, FP4), else the 16-bit rate (weight-only kernels dequantize to it)."""
    fmt = QUANTIZATIONS[model.quantization].tensor_cores if model.quantization is not None else None
    peak = {"fp8": hardware.fp8_flops_per_s, "fp4": hardware.fp4_flops_per_s}.get(fmt) if fmt else None
    return peak or hardware.flops_per_s


@COST_MODELS.register("roofline", params=RooflineParams)
class RooflineCostModel:
    """Roofline cost of each op of a step on one replica of ``tp`` GPUs."""

    def __init__(
        self, params: RooflineParams, model: ModelSpec, hardware: HardwareSpec, tp: int = 1, pp: int = 1, ep: int = 1
    ) -> None:
        model.check_tensor_parallel(tp)
        model.check_expert_parallel(ep, tp)
        self.ep = ep
        self._alpha = DISTRIBUTIONS[params.distribution_for(model)]
        self.pp = pp
        self._stage_layers = model.layers_per_stage(pp)
        self.params = params
        self.model = model
        self.hardware = hardware
        self.tp = tp
        self._gemm_rate = gemm_peak_flops_per_s(model, hardware) * params.gemm_flops_efficiency
        self._head_rate = hardware.flops_per_s * params.gemm_flops_efficiency  # the LM head is not quantized
        self._attn_rate = hardware.flops_per_s * params.attention_flops_efficiency
        self._bw = hardware.memory_bandwidth_bytes_per_s * params.memory_bandwidth_efficiency
        self._ic_bw = hardware.interconnect_bandwidth_bytes_per_s * params.interconnect_efficiency
        self._ar = AllReduceLatencyModel.for_hardware(hardware, params.interconnect_efficiency)
        self._q = model.q_size // tp
        self._kv = model.kv_heads_per_gpu(tp) * model.head_dim
        self._inter = model.intermediate_size / tp
        self._o = model.attn_out_size // tp  # the O projection's input width per GPU (q_size // tp without MLA)
        self._heads = model.num_attention_heads // tp
        self._is_mla, self._is_moe = model.is_mla, model.is_moe  # (properties: read once)
        # per batch size: the decode step's ops but attention summed, and its CPU time when that overlaps
        self._decode_fixed: dict[int, tuple[float, float | None]] = {}
        self._memo: dict[BatchShape, StepTime] = {}
        self._overhead = EngineOverheadParams(
            step_s=params.step_overhead_s, per_seq_s=params.per_seq_overhead_s, tp_step_s=params.tp_step_overhead_s
        )
        self.cpu_overlap = bool(params.cpu_overlap)  # None (no policy resolved it): serial, the safe bound

    # -- public -------------------------------------------------------------------------

    MEMO_SIZE = 1 << 16  # step times remembered by shape (prefill shapes repeat: prompt lengths do)

    def step_time(self, shape: BatchShape) -> StepTime:
        step = self._memo.get(shape)
        if step is None:
            ops = self._ops(shape)
            step = StepTime(_total(ops, self.cpu_overlap), None, self._stages(ops))
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            self._memo[shape] = step
        return step

    def breakdown(self, shape: BatchShape) -> StepTime:
        ops = self._ops(shape)
        return StepTime(_total(ops, self.cpu_overlap), ops, self._stages(ops))

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        """Step times of decode-only steps of ``num_seqs`` sequences, one per total context given.

        The same floats as ``step_time`` on ``BatchShape(num_decode_seqs=num_seqs,
        decode_context_tokens=c, num_sampled_tokens=num_seqs)``: only decode attention
        depends on the context, and ``step_time`` adds it last to the other ops' sum, which
        is memoised per batch size. Short runs are computed in plain floats, long ones with
        numpy (the same IEEE operations in the same order).
        """
        memo = self._decode_fixed.get(num_seqs)
        if memo is None:
            ops = self._ops(BatchShape(num_decode_seqs=num_seqs, decode_context_tokens=1, num_sampled_tokens=num_seqs))
            del ops["attn_decode"]
            cpu = ops.pop("cpu_overhead").seconds if self.cpu_overlap else None
            memo = self._decode_fixed[num_seqs] = (_total(ops), cpu)
        fixed, cpu = memo
        m, p = self.model, self.params
        if m.is_mla or m.num_sliding_layers:  # step_time adds decode attention last to the same sum
            decode = self._mla_decode if m.is_mla else self._windowed_decode
            gpu = [fixed + decode(num_seqs, int(c)).seconds for c in context_tokens]
            return gpu if cpu is None else [overlap_total(g, cpu) for g in gpu]
        a, kvb, q, kv = p.activation_bytes, m.kv_cache_bytes, self._q, self._kv
        n = num_seqs
        # as _op(4 q ctx, kvb ctx 2 kv + 2 a n q + kvb n 2 kv, 2, attn, L), elementwise
        flops_per_ctx, rate, bw = 4 * q, self._attn_rate, self._bw
        queries, keys = 2 * a * n * q, kvb * n * 2 * kv
        launch, layers = 2 * p.kernel_launch_s, m.num_full_attention_layers
        if len(context_tokens) <= 32:  # numpy pays off beyond about 30 steps
            gpu = [
                (max(flops_per_ctx * c / rate, (kvb * c * 2 * kv + queries + keys) / bw) + launch) * layers + fixed
                for c in context_tokens
            ]
            return gpu if cpu is None else [overlap_total(g, cpu) for g in gpu]
        ctx = np.asarray(context_tokens, dtype=np.float64)
        attn = np.maximum(flops_per_ctx * ctx / rate, (kvb * ctx * 2 * kv + queries + keys) / bw)
        attn += launch
        attn *= layers
        attn += fixed
        if cpu is not None:
            np.maximum(attn, cpu, out=attn)
        return attn.tolist()

    # Ops that run once per step rather than per layer, and the stage that runs them.
    _FIRST_STAGE_OPS = ("embed", "cpu_overhead")
    _LAST_STAGE_OPS = ("lm_head",)

    def _stages(self, ops: dict[str, OpCost]) -> tuple[float, ...] | None:
        """Each pipeline stage's time: its share of the layers, plus embedding/overhead first and LM head last."""
        if self.pp == 1:
            return None
        once = self._FIRST_STAGE_OPS + self._LAST_STAGE_OPS + ("eager_host",)
        per_layer = sum(op.seconds for name, op in ops.items() if name not in once) / self.model.num_layers
        stages = [per_layer * n for n in self._stage_layers]
        if "eager_host" in ops:  # each stage launches its own layers
            host = ops["eager_host"].seconds / self.model.num_layers
            stages = [eager_step_s(s, host * n) for s, n in zip(stages, self._stage_layers, strict=True)]
        first = [n for n in self._FIRST_STAGE_OPS if n in ops and not (self.cpu_overlap and n == "cpu_overhead")]
        stages[0] += sum(ops[n].seconds for n in first)
        stages[-1] += sum(ops[n].seconds for n in self._LAST_STAGE_OPS if n in ops)
        if self.cpu_overlap and "cpu_overhead" in ops:  # the engine's CPU work beside the first stage's GPU work
            stages[0] = overlap_total(stages[0], ops["cpu_overhead"].seconds)
        return tuple(stages)

    # -- the decomposition --------------------------------------------------------------

    def _op(self, flops: float, nbytes: float, kernels: float, rate: float, layers: int) -> OpCost:
        compute, memory = flops / rate, nbytes / self._bw
        # max(compute, memory) and OpCost(...) inlined (the same floats; two calls fewer an op)
        per_layer = (memory if memory > compute else compute) + kernels * self.params.kernel_launch_s
        return _new_op((per_layer * layers, flops * layers, nbytes * layers))

    def linear_rows(self, shape: BatchShape) -> int:
        """Rows the linear layers run at: the step's tokens, a decode-only step's padded to its CUDA graph's batch."""
        T = shape.num_new_tokens
        if T and self.params.cuda_graph_padding and not shape.prefill_new_tokens:
            return padded_batch_size(T)
        return T

    def _ops(self, shape: BatchShape) -> dict[str, OpCost]:
        m, p = self.model, self.params
        a, w = p.activation_bytes, m.dense_weight_bytes  # attention's linears
        h, q, kv, L = m.hidden_size, self._q, self._kv, m.num_layers
        Lf = m.num_full_attention_layers  # the layers with softmax attention (all but Gated DeltaNet's)
        T = self.linear_rows(shape)
        S = shape.num_sampled_tokens
        gemm = self._gemm_rate
        ops: dict[str, OpCost] = {}
        if T:
            ops["embed"] = self._op(0.0, (w + a) * T * h, 1, gemm, 1)
            if self._is_mla:
                ops["qkv_proj"] = self._mla_qkv(T)
            else:
                qkv_out = q * (2 if m.attn_output_gate else 1) + 2 * kv  # the output gate: a second query's width
                ops["qkv_proj"] = self._op(
                    2 * T * h * qkv_out,
                    w * h * qkv_out + a * T * (h + qkv_out) + 2 * a * T * (q + kv),  # + rotary
                    2,
                    gemm,
                    Lf,
                )
            if m.num_linear_layers:
                ops["linear_in_proj"] = self._linear_in_proj(T)
        if self._is_mla:
            if shape.prefill_new_tokens:
                ops["attn_prefill"] = self._mla_prefill(shape.prefill_new_tokens, shape.prefill_cached_tokens)
            if shape.num_decode_seqs:
                ops["attn_decode"] = self._mla_decode(shape.num_decode_seqs, shape.decode_context_tokens)
        elif shape.prefill_new_tokens:
            new, cached = shape.prefill_new_tokens, shape.prefill_cached_tokens
            if m.num_sliding_layers:
                ops["attn_prefill"] = self._windowed_prefill(new, cached)
            else:
                ops["attn_prefill"] = self._gqa_prefill(new, cached, None, Lf)
        if shape.num_decode_seqs and not self._is_mla:
            n, ctx = shape.num_decode_seqs, shape.decode_context_tokens
            if m.num_sliding_layers:
                ops["attn_decode"] = self._windowed_decode(n, ctx)
            else:
                ops["attn_decode"] = self._gqa_decode(n, ctx, Lf)
        if m.num_linear_layers and (shape.prefill_new_tokens or shape.num_decode_seqs):
            ops["attn_linear"] = self.linear_attention(shape.prefill_new_tokens, shape.num_decode_seqs)
        if T and m.num_linear_layers:
            ops["linear_out_proj"] = self._linear_proj(T, m.hidden_size, m.linear_value_size / self.tp)
        if T:
            o = self._o
            ops["o_proj"] = self._op(2 * T * o * h, w * o * h + a * T * (o + h), 1, gemm, Lf)
            self._mlp_ops(T, ops)
            ops["norm"] = self._op(10 * T * h, 8 * a * T * h, 2, gemm, L)
            if self.tp > 1:
                ops["all_reduce"] = self._all_reduce(a * T * h, 2 * L)
                if m.qk_norm_across_heads:  # each token's q and k variance (2 fp32), once a layer
                    ops["all_reduce"] = sum_ops(ops["all_reduce"], self._all_reduce(QK_NORM_VARIANCE_BYTES * T, L))
            if self.ep > 1 and self.params.expert_all_to_all:
                ops["all_to_all"] = self._all_to_all(T)
        if S:
            vocab = m.vocab_size / self.tp
            head_bytes = m.embedding_weight_bytes * h * vocab  # the LM head is not quantized
            ops["lm_head"] = self._op(2 * S * h * vocab, head_bytes + a * S * h + 4 * S * vocab, 2, self._head_rate, 1)
        if shape.num_seqs:
            ops["cpu_overhead"] = OpCost(engine_overhead_s(self._overhead, shape.num_seqs, self.tp))
        host = self.params.eager_host_s_per_layer
        if host and shape.prefill_new_tokens and launched_eagerly(T, p.piecewise_graph_max_tokens):
            ops["eager_host"] = OpCost(host * m.num_layers)  # a step holding a prefill, run without a CUDA graph
        return ops

    def _mlp_ops(self, T: int, ops: dict[str, OpCost]) -> None:
        """The MLP's three ops: the routed (or only) MLP, plus an MoE model's shared experts and dense layers."""
        for part in self.mlp_parts(T).values():
            for name, op in part.items():
                merge_op(ops, name, op)

    def mlp_by_part(self, shape: BatchShape) -> dict[str, dict[str, OpCost]]:
        """The MLP ops (``mlp_gate_up``, ``mlp_act``, ``mlp_down``) of ``shape`` by part (``mlp_parts``' parts at the
        step's linear rows), each summed over its layers as ``breakdown`` sums them; the router is an op of its own."""
        return {
            part: {name: op for name, op in ops.items() if name != "moe_router"}
            for part, ops in self.mlp_parts(self.linear_rows(shape)).items()
        }

    def moe_exchange(self, rows: float, gather_bytes_per_row: float, scatter_bytes_per_row: float) -> OpCost:
        """The MoE layers' token exchange over the tp GPUs where each expert GPU sees every token (TensorRT-LLM's
        attention-DP layout, ``BatchTraits.dp_attention_local_mlp``): an all-gather of ``rows`` x
        ``gather_bytes_per_row`` before the experts and a reduce-scatter of ``rows`` x ``scatter_bytes_per_row``
        after, each one link latency plus the (tp - 1)/tp share of its bytes each GPU sends and receives at
        ``interconnect_efficiency`` x the link bandwidth (as ``_all_to_all``), once per MoE layer."""
        n = self.tp
        if n <= 1 or rows <= 0:
            return OpCost(0.0)
        share = (n - 1) / n
        sent = share * rows * (gather_bytes_per_row + scatter_bytes_per_row)
        one = 2 * self.hardware.interconnect_latency_s + sent / self._ic_bw
        layers = self.model.num_moe_layers
        return OpCost(one * layers, 0.0, sent * layers)

    def mlp_parts(self, T: int) -> dict[str, dict[str, OpCost]]:
        """The MLP ops of a step of ``T`` tokens by part: ``routed`` (a dense model's MLP, an MoE model's
        routed experts and router over its MoE layers), ``shared`` (shared experts, on every MoE layer,
        split by tp and not by ep) and ``dense`` (an MoE model's dense layers, split by tp)."""
        m, p = self.model, self.params
        a, w, h, inter, L = p.activation_bytes, m.weight_bytes, m.hidden_size, self._inter, m.num_moe_layers
        k, E = m.num_experts_per_token, m.num_experts
        up = 2 if m.gated_mlp else 1  # gate and up, or up only
        parts: dict[str, dict[str, OpCost]] = {}
        if self.ep > 1:
            parts["routed"] = self._ep_routed(T)
        else:
            touched = E * (1 - (1 - k / E) ** T) if self._is_moe else 1.0  # experts whose weights are read
            parts["routed"] = {
                "mlp_gate_up": self._op(
                    2 * T * k * h * up * inter,
                    w * touched * h * up * inter + a * T * h + a * T * k * up * inter,
                    2 if self._is_moe else 1,
                    self._gemm_rate,
                    L,
                ),
                "mlp_act": self._op(5 * T * k * inter, a * T * k * (up + 1) * inter, 1, self._gemm_rate, L),
                "mlp_down": self._op(
                    2 * T * k * inter * h,
                    w * touched * inter * h + a * T * k * inter + a * T * h,
                    2 if self._is_moe else 1,
                    self._gemm_rate,
                    L,
                ),
            }
        if self._is_moe:
            parts["routed"] = {"moe_router": self._router(T)} | parts["routed"]
        if m.num_shared_experts:
            parts["shared"] = self._dense_mlp(T, m.shared_intermediate_size / self.tp, L)
        if m.num_dense_layers:
            width = m.dense_intermediate_size or m.intermediate_size
            parts["dense"] = self._dense_mlp(T, width / self.tp, m.num_dense_layers)
        return parts

    def _router(self, T: int) -> OpCost:
        """The MoE layers' router: one GEMM of every token's hidden state by the gate's hidden x experts weights,
        unquantized (bf16) in every checkpoint, the same on every GPU (vLLM's ``ReplicatedLinear`` gate), to fp32
        logits. A kernel of its own before the fused experts, which take the logits as input: aiconfigurator emits
        it as its own bf16 GEMM (``router_gemm`` in ``sdk/models/blocks/moe.py``) beside the fused-MoE tables."""
        m, a = self.model, self.params.activation_bytes
        h, E = m.hidden_size, m.num_experts
        return self._op(2 * T * h * E, 2.0 * h * E + a * T * h + 4 * T * E, 1, self._head_rate, m.num_moe_layers)

    def _dense_mlp(self, T: int, inter: float, layers: int) -> dict[str, OpCost]:
        """A dense (gated) MLP of per-GPU inner width ``inter`` on ``T`` tokens, over ``layers`` layers."""
        m, p = self.model, self.params
        a, w, h = p.activation_bytes, m.dense_weight_bytes, m.hidden_size
        up = 2 if m.gated_mlp else 1
        return {
            "mlp_gate_up": self._op(
                2 * T * h * up * inter, w * h * up * inter + a * T * h + a * T * up * inter, 1, self._gemm_rate, layers
            ),
            "mlp_act": self._op(5 * T * inter, a * T * (up + 1) * inter, 1, self._gemm_rate, layers),
            "mlp_down": self._op(
                2 * T * inter * h, w * inter * h + a * T * inter + a * T * h, 1, self._gemm_rate, layers
            ),
        }

    def expert_rows(self, T: int) -> float:
        """Expert-token rows on the busiest GPU of a step of ``T`` tokens: ``T k`` without ep; with ep its
        group's share under ``moe_token_distribution`` (simulator/cost/moe_load.py)."""
        m = self.model
        if self.ep == 1:
            return float(T * m.num_experts_per_token)
        share = busiest_group_share(T, m.num_experts, m.num_experts_per_token, self.ep, self._alpha)
        return T * m.num_experts_per_token * share

    def _ep_routed(self, T: int) -> dict[str, OpCost]:
        """The routed experts under expert parallelism, per GPU: E/ep whole experts split tp/ep ways, the
        busiest group's expert tokens, the router on every token."""
        m, p = self.model, self.params
        a, w, h, L = p.activation_bytes, m.weight_bytes, m.hidden_size, m.num_moe_layers
        k, E, ep = m.num_experts_per_token, m.num_experts, self.ep
        inter = m.intermediate_size / (self.tp // ep)
        up = 2 if m.gated_mlp else 1
        rows = self.expert_rows(T)
        touched = E / ep * (1 - (1 - k / E) ** T)  # local experts whose weights are read
        return {
            "mlp_gate_up": self._op(
                2 * rows * h * up * inter,
                w * touched * h * up * inter + a * T * h + a * rows * up * inter,
                2,
                self._gemm_rate,
                L,
            ),
            "mlp_act": self._op(5 * rows * inter, a * rows * (up + 1) * inter, 1, self._gemm_rate, L),
            "mlp_down": self._op(
                2 * rows * inter * h, w * touched * inter * h + a * rows * inter + a * T * h, 2, self._gemm_rate, L
            ),
        }

    def _all_to_all(self, T: int) -> OpCost:
        """Expert parallelism's dispatch and combine, each MoE layer: each token is sent once, from one of the
        ep GPUs (each dispatches its T/ep share of the step's tokens), its top-k copies (tokens x k x hidden x
        activation bytes) going to the GPUs holding those experts, the (ep - 1)/ep share of them leaving the
        GPU; the combine brings as many back. Each is one link latency plus the bytes at
        ``interconnect_efficiency`` x the link bandwidth (as the derived all-reduce in collectives.py)."""
        m, p = self.model, self.params
        ep = self.ep
        sent = T / ep * m.num_experts_per_token * m.hidden_size * p.activation_bytes * (ep - 1) / ep
        one = self.hardware.interconnect_latency_s + sent / self._ic_bw
        count = 2 * m.num_moe_layers
        return OpCost(one * count, 0.0, sent * count)

    # -- MLA (DeepSeek-V2/V3) -------------------------------------------------------------

    def _mla_qkv(self, T: int) -> OpCost:
        """MLA's projections before attention, per GPU: the down-projections q_a (h x q_lora) and kv_a
        (h x (kv_lora + rope)), replicated on every tp rank (vLLM's DeepseekV2MLAAttention builds them as
        ReplicatedLinear), and q_b (or q) split by heads; plus the rotary embedding of q and k."""
        m, p = self.model, self.params
        a, w, h = p.activation_bytes, m.dense_weight_bytes, m.hidden_size
        assert m.qk_nope_head_dim is not None and m.qk_rope_head_dim is not None
        qk = self._heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        latent = m.mla_latent_size
        mats = [(h, latent)]  # (k, n) of each GEMM
        mats += [(h, m.q_lora_rank), (m.q_lora_rank, qk)] if m.q_lora_rank is not None else [(h, qk)]
        if m.is_dsa:  # the indexer's query (from the compressed query), key and head-weight projections, on every
            # rank whole (vLLM's Indexer builds them as ReplicatedLinear)
            assert m.index_n_heads is not None and m.index_head_dim is not None
            q_in = m.q_lora_rank if m.q_lora_rank is not None else h
            mats += [(q_in, m.index_n_heads * m.index_head_dim), (h, m.index_head_dim), (h, m.index_n_heads)]
        flops = sum(2 * T * k * n for k, n in mats)
        nbytes = sum(w * k * n + a * T * (k + n) for k, n in mats)
        nbytes += 2 * a * T * (self._heads * m.qk_rope_head_dim + m.qk_rope_head_dim)  # rotary of q and k
        return self._op(flops, nbytes, len(mats) + 1, self._gemm_rate, m.num_layers)

    def _mla_prefill(self, new: Sequence[int], cached: Sequence[int]) -> OpCost:
        """MLA prefill as vLLM runs it (the uncompressed form): kv_b up-projects every key's latent to
        per-head K_nope and V, then attention with (nope + rope)-wide query-key and v-wide value heads."""
        m, p = self.model, self.params
        a, w = p.activation_bytes, m.dense_weight_bytes
        assert m.kv_lora_rank is not None and m.qk_nope_head_dim is not None
        assert m.qk_rope_head_dim is not None and m.v_head_dim is not None
        heads, r = self._heads, m.kv_lora_rank
        qk, v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        up = heads * (m.qk_nope_head_dim + v)  # kv_b's output width per GPU
        pairs = 0
        keys = 0
        queries = 0
        scored = 0  # DSA: the query-key pairs the indexer scores, every causal one
        for n, c in zip(new, cached, strict=True):
            causal = n * c + n * (n + 1) // 2
            pairs += causal if not m.is_dsa else _top_k_pairs(n, c, m.index_topk)
            scored += causal
            keys += c + n
            queries += n
        flops = 2 * heads * (qk + v) * pairs + 2 * keys * r * up
        if m.is_dsa:  # the indexer's FP8 scores of every causal pair (its keys written and read once)
            assert m.index_n_heads is not None and m.index_head_dim is not None
            flops += 2 * m.index_n_heads * m.index_head_dim * scored
        entry = m.mla_entry_bytes  # a token's cached latent and rotary key, bytes
        nbytes = (
            entry * keys  # the cached latents read
            + entry * queries  # the new ones written
            + w * r * up  # kv_b's weights
            + a * keys * up  # the up-projected K_nope and V
            + a * queries * heads * (qk + v)  # queries in, outputs out
            + m.indexer_key_bytes * (keys + queries)  # DSA: the indexer's keys read and the new ones written
        )
        return self._op(flops, nbytes, 3 + 2 * m.is_dsa, self._attn_rate, m.num_layers)

    def _linear_in_proj(self, T: int) -> OpCost:
        """The Gated DeltaNet layers' input projections at ``T`` rows: one GEMM of their width, or four and the copies
        of q, k and v (``gdn_input_projections``: ``_gdn_copies``)."""
        m = self.model
        if self.params.gdn_input_projections == "fused":
            return self._linear_proj(T, m.linear_in_proj_width() / self.tp, m.hidden_size)
        out = self._gdn_copies(T)
        for width in m.linear_in_proj_widths():
            out = sum_ops(out, self._linear_proj(T, width / self.tp, m.hidden_size))
        return out

    def _gdn_copies(self, T: int) -> OpCost:
        """An unfused Gated DeltaNet layer's three copies at ``T`` rows (``gdn_input_projections`` 'separate'): q, k
        and v, views of the projection's output, made contiguous for the recurrent kernel, each read and written
        once; one kernel each."""
        m = self.model
        width = (2 * m.linear_key_size + m.linear_value_size) / self.tp
        return self._op(0.0, 2 * self.params.activation_bytes * T * width, 3, self._gemm_rate, m.num_linear_layers)

    def _linear_proj(self, T: int, n: float, k: float) -> OpCost:
        """One of the Gated DeltaNet layers' projections at ``T`` rows, ``k`` inputs to ``n`` outputs per GPU (the
        heads' side split over tp): in_proj (hidden to q, k, v, the gate z, beta and the decay:
        ``ModelSpec.linear_in_proj_width``), out_proj (the value heads to hidden)."""
        m, p = self.model, self.params
        a, w = p.activation_bytes, m.dense_weight_bytes
        return self._op(2 * T * n * k, w * n * k + a * T * (n + k), 1, self._gemm_rate, m.num_linear_layers)

    def linear_attention(self, new: Sequence[int], num_decode_seqs: int) -> OpCost:
        """The Gated DeltaNet kernels of a step over its linear layers: each prompt chunk's convolution and chunked
        delta rule, and each decoding sequence's convolution update and recurrent step."""
        m = self.model
        out = None
        if new:
            out = self._op(*self.gdn_prefill_work(len(new), sum(new) / len(new)), self._attn_rate, m.num_linear_layers)
        if num_decode_seqs:
            decode = self._op(*self.gdn_decode_work(num_decode_seqs), self._attn_rate, m.num_linear_layers)
            out = decode if out is None else sum_ops(out, decode)
        assert out is not None
        return out

    def gdn_prefill_layer_s(self, num_seqs: float, tokens_per_seq: float) -> float:
        """One linear layer's prefill seconds (``gdn_prefill_work`` at the roofline, its kernels' launches)."""
        return self._op(*self.gdn_prefill_work(num_seqs, tokens_per_seq), self._attn_rate, 1).seconds

    def gdn_decode_layer_s(self, num_seqs: float, state_bytes: float | None = None) -> float:
        """One linear layer's decode seconds (``gdn_decode_work`` at the roofline, its kernels' launches)."""
        return self._op(*self.gdn_decode_work(num_seqs, state_bytes), self._attn_rate, 1).seconds

    def _gdn_sizes(self) -> tuple[float, float, float, float]:
        """Per GPU: value heads, the recurrent state's elements a sequence, the convolution's channels (q, k, v),
        and each key and value head's width product (the state of one head)."""
        m, tp = self.model, self.tp
        assert m.linear_num_value_heads is not None and m.linear_key_head_dim is not None
        assert m.linear_value_head_dim is not None
        heads = m.linear_num_value_heads / tp
        per_head = m.linear_key_head_dim * m.linear_value_head_dim
        channels = (2 * m.linear_key_size + m.linear_value_size) / tp
        return heads, heads * per_head, channels, per_head

    def gdn_decode_work(self, num_seqs: float, state_bytes: float | None = None) -> tuple[float, float, float]:
        """One linear layer's decode step of ``num_seqs`` sequences: (FLOPs, bytes, kernels). Each sequence's
        state is read and written once (the recurrent step: decay, the delta rule's rank-one update, the output
        read, about 6 FLOPs a state element), its convolution window read and shifted, q, k, v read and the output
        written. ``state_bytes``: the state's bytes per element (None: the model's)."""
        m, a = self.model, self.params.activation_bytes
        assert m.linear_conv_kernel_dim is not None
        heads, state, channels, _ = self._gdn_sizes()
        conv = (m.linear_conv_kernel_dim - 1) * channels * UNQUANTIZED_WEIGHT_BYTES
        sb = m.linear_state_bytes if state_bytes is None else state_bytes
        per_seq = 2 * state * sb + 2 * conv + a * (channels + heads * m.linear_value_head_dim)
        return 6 * state * num_seqs, per_seq * num_seqs, 2

    def gdn_prefill_work(self, num_seqs: float, tokens_per_seq: float) -> tuple[float, float, float]:
        """One linear layer's prefill of ``num_seqs`` prompts of ``tokens_per_seq`` tokens: (FLOPs, bytes,
        kernels). The chunked delta rule (FLA's chunk_gated_delta_rule, chunks of ``GDN_CHUNK`` tokens) per value
        head and chunk of C tokens: K K^T, the WY transform of keys and values and Q K^T (about 3 C^2 dk + 2 C^2
        dv multiply-adds), then the state's update and read (2 C dk dv); the state kept at every chunk's start;
        q, k, v read and the output written once. Convolution: the channels' K taps a token."""
        m, a = self.model, self.params.activation_bytes
        assert m.linear_key_head_dim is not None and m.linear_value_head_dim is not None
        assert m.linear_conv_kernel_dim is not None
        heads, state, channels, per_head = self._gdn_sizes()
        C, dk, dv = GDN_CHUNK, m.linear_key_head_dim, m.linear_value_head_dim
        tokens = num_seqs * tokens_per_seq
        per_token = heads * 2 * (3 * C * dk + 2 * C * dv + 2 * per_head) + 2 * m.linear_conv_kernel_dim * channels
        chunks = num_seqs * math.ceil(tokens_per_seq / C)
        nbytes = tokens * a * (2 * channels + heads * dv) + chunks * state * 4 + 2 * num_seqs * state * 4
        return per_token * tokens, nbytes, 7

    def _gqa_decode(self, num_seqs: int, context_tokens: int, layers: int) -> OpCost:
        """Decode attention (GQA/MHA) over ``layers`` layers: every key of ``context_tokens`` read once."""
        m, p = self.model, self.params
        a, kvb, q, kv, n, ctx = p.activation_bytes, m.kv_cache_bytes, self._q, self._kv, num_seqs, context_tokens
        return self._op(4 * q * ctx, kvb * ctx * 2 * kv + 2 * a * n * q + kvb * n * 2 * kv, 2, self._attn_rate, layers)

    def _gqa_prefill(self, new: Sequence[int], cached: Sequence[int], window: int | None, layers: int) -> OpCost:
        """Prefill attention (GQA/MHA) of the step's chunks over ``layers`` layers: causal (new token i attends to
        c + i keys), or with a sliding ``window`` each query at most that many keys (``_top_k_pairs``) and at most
        that many cached ones read."""
        m, p = self.model, self.params
        a, kvb, q, kv = p.activation_bytes, m.kv_cache_bytes, self._q, self._kv
        pairs = 0
        nbytes = 0.0
        for n, c in zip(new, cached, strict=True):
            if window is None:
                pairs += n * c + n * (n + 1) // 2
            else:
                pairs += _top_k_pairs(n, c, window)
                c = min(c, window)
            nbytes += 2 * a * n * q + kvb * (c + n) * 2 * kv + kvb * n * 2 * kv
        return self._op(4 * q * pairs, nbytes, 2, self._attn_rate, layers)

    def _windowed_decode(self, num_seqs: int, context_tokens: int) -> OpCost:
        """Decode attention of a model with sliding-window layers: the full layers read every cached key, a sliding
        layer at most the newest ``sliding_window`` of each sequence (``context_tokens`` is the step's total:
        ``min(total, num_seqs x window)``, exact when every sequence is past the window or none is)."""
        m = self.model
        assert m.sliding_window is not None
        window = min(context_tokens, num_seqs * m.sliding_window)
        full = m.num_layers - m.num_sliding_layers
        sliding = self._gqa_decode(num_seqs, window, m.num_sliding_layers)
        return sliding if not full else sum_ops(self._gqa_decode(num_seqs, context_tokens, full), sliding)

    def _windowed_prefill(self, new: Sequence[int], cached: Sequence[int]) -> OpCost:
        """Prefill attention of a model with sliding-window layers: the full layers causal, the sliding ones within
        the window."""
        m = self.model
        full = m.num_layers - m.num_sliding_layers
        sliding = self._gqa_prefill(new, cached, m.sliding_window, m.num_sliding_layers)
        return sliding if not full else sum_ops(self._gqa_prefill(new, cached, None, full), sliding)

    def _mla_decode(self, num_seqs: int, context_tokens: int) -> OpCost:
        """MLA decode in the absorbed form (vLLM's MLA decode; DeepSeek-V2 sec. 2.1.2): W_UK folds into the
        query, so each head scores the cached latent directly and W_UV applies after; every key's latent
        and rotary key (kv_lora + rope elements) is read once per step for all heads (MQA over the latent)."""
        m, p = self.model, self.params
        a, w = p.activation_bytes, m.dense_weight_bytes
        assert m.kv_lora_rank is not None and m.qk_nope_head_dim is not None and m.v_head_dim is not None
        heads, r, latent = self._heads, m.kv_lora_rank, m.mla_latent_size
        n, ctx = num_seqs, context_tokens
        absorb = heads * r * (m.qk_nope_head_dim + m.v_head_dim)  # W_UK and W_UV per GPU
        # DSA: each sequence attends its top index_topk keys (from the total alone, at most that many per sequence)
        attended = ctx if m.index_topk is None else min(ctx, n * m.index_topk)
        flops = 2 * n * absorb + 2 * heads * (latent + r) * attended
        nbytes = m.mla_entry_bytes * (attended + n) + w * absorb + a * n * heads * (latent + r)
        if m.is_dsa:  # the indexer scores every cached key: its FP8 keys read, n x ctx x heads x dim MACs
            assert m.index_n_heads is not None and m.index_head_dim is not None
            flops += 2 * m.index_n_heads * m.index_head_dim * ctx
            nbytes += m.indexer_key_bytes * (ctx + n)
        return self._op(flops, nbytes, 4 + 2 * m.is_dsa, self._attn_rate, m.num_layers)

    def _all_reduce(self, message_bytes: float, count: int) -> OpCost:
        """``count`` all-reduces of ``message_bytes`` over the tp GPUs, timed by ``AllReduceLatencyModel``
        (simulator/cost/collectives.py); bytes: what a ring sends per GPU, 2(tp-1)/tp x the message."""
        tp = self.tp
        sent = 2 * (tp - 1) / tp * message_bytes
        return OpCost(self._ar.seconds(message_bytes, tp) * count, 0.0, sent * count)


def _top_k_pairs(new: int, cached: int, top_k: int | None) -> int:
    """Query-key pairs of a chunk of ``new`` tokens on ``cached`` ones when each query attends at most ``top_k`` keys
    (DSA; None: all of its causal keys): query j (1-based) sees ``min(cached + j, top_k)``."""
    causal = new * cached + new * (new + 1) // 2
    if top_k is None or cached + new <= top_k:
        return causal
    if cached >= top_k:
        return new * top_k
    below = top_k - cached  # queries that still see fewer than top_k keys
    return below * cached + below * (below + 1) // 2 + (new - below) * top_k
