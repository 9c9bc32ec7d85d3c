"""Attention data parallelism's step: every rank's attention side by side, then all their tokens through the MLPs.

With ``parallelism.dp_attention`` N a replica of tp GPUs runs N ranks of tp/N GPUs in lockstep (SGLang's
``--enable-dp-attention --dp-size N``, TensorRT-LLM's ``enable_attention_dp``). In SGLang's layout each layer (its
``LayerCommunicator``, python/sglang/srt/layers/communicator.py, and ``dp_gather``/``dp_scatter`` in
python/sglang/srt/layers/dp_attention.py):

- attention: each rank on its own requests, its heads split tp/N ways, the ranks in parallel;
- gather: every rank's hidden states to every GPU of the replica;
- MLP / MoE: all the ranks' tokens at once, split over the tp GPUs (experts over ep, as without DP);
- scatter: each rank takes its own rows back.

So one step takes::

    max over ranks r  attention part of rank r's shape        the ``attention`` model: tp/N GPUs, ep 1
  + shared part of the gathered shape                        the ``shared`` model: tp GPUs, the replica's ep
  (+ the engine's CPU time, the slowest rank's: beside the GPU time with ``cpu_overlap``, else after it)

Both models are the scenario's cost model (roofline, silicon, ...) built for those two layouts; each op of their
breakdowns (``OP_NAMES``) goes to one side:

- attention side, at the rank's own tokens: ``embed``, ``qkv_proj``, ``attn_prefill``, ``attn_decode``,
  ``o_proj``, ``norm`` (and a hybrid model's Gated DeltaNet ops, ``linear_in_proj``, ``attn_linear``,
  ``linear_out_proj``), and with tp/N > 1 the attention group's all-reduce after attention, one per layer (half
  of the attention model's ``all_reduce``, which counts two per layer);
- shared side, at the gathered rows: ``mlp_gate_up``, ``mlp_act``, ``mlp_down`` (routed experts, and the shared
  experts and dense layers, which SGLang keeps split over all tp by default: ``moe_dense_tp_size`` None),
  ``all_reduce`` (two per layer of the gathered rows over tp: the gather, an all-reduce in SGLang's SUM_LEN mode,
  and the MLP's own reduce), ``all_to_all`` (with ``expert_all_to_all``: DeepEP's dispatch and combine, which
  replace the MoE layers' gather and reduce, so ``all_reduce`` keeps only the dense layers' share) and
  ``lm_head`` (every rank's sampled rows, vocabulary split over tp: SGLang's ``enable_dp_lm_head`` is off by
  default), and any op a model names otherwise;
- scattered (``scattered``): SGLang runs a layer's MLP on each rank's own tokens instead of the gathered rows
  where nothing needs them gathered (``LayerScatterModes._compute_mlp_mode``: ``ScatterMode.SCATTERED``). An MoE
  layer is scattered where an all-to-all backend moves the routed experts' tokens (``--moe-a2a-backend deepep``:
  ``expert_all_to_all``), its router and its shared experts then on the rank's tokens (``DeepseekV2MoE`` builds
  the shared experts at TP 1 there: python/sglang/srt/models/deepseek_v2.py); a dense layer where
  ``--moe-dense-tp-size 1`` (``enable_moe_dense_fully_dp``); the LM head with ``--enable-dp-lm-head``. ``"moe"``,
  ``"dense"`` and ``"lm_head"`` in ``scattered`` move those ops to the attention side at the rank's own rows (at
  its attention TP, which is TP 1 in every DeepEP layout InferenceX runs; with a wider attention TP SGLang runs them
  at TP 1 on a slice of the rank's tokens, which this prices as the rank's tokens split over its attention TP: the
  same FLOPs, a 1/attention-TP share of the weights read), and a scattered layer's two all-reduces
  go (``all_reduce`` keeps the share of the layers still gathered). Without an all-to-all SGLang scatters its MoE
  layers too where the flashinfer_cutlass runner takes NVFP4 experts over as many GPUs as DP ranks
  (``should_use_flashinfer_cutlass_moe_fp4_allgather``, python/sglang/srt/layers/moe/utils.py): each rank's tokens,
  quantized to FP4, are all-gathered before the routed experts and their output reduce-scattered after
  (``moe_exchange``, as TensorRT-LLM's), priced as ``all_to_all``;
- ``cpu_overhead``: each rank's scheduler runs its own process, so the slowest rank's;
- ``eager_host``: a step with a prefill on any rank runs eagerly on every rank (TensorRT-LLM all-gathers
  ``can_run_cuda_graph``; SGLang replays a graph only when every rank's batch is decode or idle), so the step's
  GPU time is at least the host's launches of the gathered step (simulator/cost/eager.py).

Gathered rows (SGLang's ``DpPaddingMode.get_dp_padding_mode``): a step with a prefill on any rank gathers the sum
of the ranks' tokens (SUM_LEN); a decode-only step pads every rank, idle ones included, to the largest rank's
count when 2 x sum > N x max (MAX_LEN, ``all_gather_into_tensor``), else gathers the sum.

TensorRT-LLM lays the MLPs out otherwise (``local_mlp``; ``BatchTraits.dp_attention_local_mlp``, read in
``tensorrt_llm/_torch/models/modeling_deepseekv3.py`` and ``modules/fused_moe/``): with attention DP the dense layers'
MLP and the shared experts run at TP 1 (``_compute_mlp_tp_size``, ``_compute_shared_expert_tp_size``), the router on
each rank's own tokens (``Deepseekv3MoE.compute_routed_output``), and no all-reduce follows attention or the MoE
(``disable_attn_allreduce``; the MoE's all-reduce only ``if not self.use_dp``). Only the routed experts see every
rank's tokens: the fused-MoE module quantizes its rank's tokens and all-gathers them with their top-k ids and
weights (``allgather(..., sizes=all_rank_num_tokens)``: the sum of the ranks' tokens, no padding), runs its experts,
and reduce-scatters the output back. vLLM's DP ranks are engines of their own that share only the experts (its MoE
all-to-all, ``expert_all_to_all``): the same layout. So with ``local_mlp``:

- attention side, at the rank's own tokens: the ops above, ``moe_router``, ``lm_head`` and the MLP ops of the
  shared experts and dense layers (a dense model's whole MLP), at the rank's attention TP;
- shared side, at the sum of the ranks' tokens: the routed experts' MLP ops, and ``all_to_all`` the exchange
  (``moe_exchange``: an all-gather of ``exchange_bytes_per_row[0]`` a row before the experts, a reduce-scatter of
  ``exchange_bytes_per_row[1]`` after, each MoE layer; or DeepEP's dispatch and combine with
  ``expert_all_to_all``), no ``all_reduce``.

A model without a per-op breakdown (``constant``: its whole time is ``cpu_overhead``) gives the slowest rank's
time. Swaps before a step (host-link time) are the lockstep group's to add (``simulator/engine/lockstep.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.config.precision import EXCHANGED_QUANTIZED, QUANTIZATIONS
from simulator.cost.eager import eager_step_s
from simulator.cost.overhead import overlap_total
from simulator.cost.shape import MLP_OPS, BatchShape, CostModel, OpCost, StepTime, merge_op

_NOT_GPU = frozenset(("cpu_overhead", "eager_host"))
_NO_OPS: dict[str, OpCost] = {}  # a rank's attention side priced without its ops (``step_time_ranks``)
ATTENTION_OPS = frozenset(
    (
        "embed",
        "qkv_proj",
        "linear_in_proj",
        "attn_prefill",
        "attn_decode",
        "attn_linear",
        "linear_out_proj",
        "o_proj",
        "norm",
    )
)
"""Ops each rank runs on its own tokens with its tp/N GPUs."""
EMPTY = BatchShape()
"""An idle rank's step (SGLang's ``ForwardMode.IDLE``): no tokens of its own, it joins the collectives."""
SCATTERABLE = frozenset(("moe", "dense", "lm_head"))
"""What SGLang can run on each rank's own tokens under the gathered layout (``scattered``, module docstring)."""


LOCAL_OPS = ATTENTION_OPS | {"moe_router", "lm_head"}
"""Ops each rank runs on its own tokens in the ``local_mlp`` layout, besides its shared experts' and dense layers'."""


def exchange_bytes_per_row(
    hidden_size: int, experts_per_token: int, quantization: str | None, activation_bytes: float
) -> tuple[float, float]:
    """Bytes a token carries in TensorRT-LLM's MoE exchange under attention DP: all-gathered, its hidden state as
    the experts take it plus its top-k expert ids (int32) and weights (fp32); reduce-scattered, the experts' output
    in the activation dtype. The fused-MoE modules quantize before the all-gather where their kernels take
    quantized activations (``quantize_input(..., post_quant_comm=True)``: NVFP4, one FP8 scale per 16 values; FP8
    per-tensor), and all-gather the bf16 state for DeepSeek's FP8 block scales (quantized inside the kernels:
    ``use_deepseek_fp8_block_scale``) and weight-only experts."""
    quantized = quantization in EXCHANGED_QUANTIZED  # the activation quantized to the weights' format
    per_value = QUANTIZATIONS[quantization].weight_bytes if quantized else activation_bytes
    return hidden_size * per_value + 8 * experts_per_token, hidden_size * activation_bytes


def gathered_shape(shapes: Sequence[BatchShape], padding: str = "sglang") -> BatchShape:
    """The rows the shared layers run at, as one shape: the ranks' prefill tokens as one chunk (the shared ops
    depend only on the row count) and their decodes; a decode-only step's padded as the engine pads it
    (``padding``): "sglang", every rank to the largest where 2 x sum > N x max (module docstring); "largest", every
    rank to the largest (vLLM's ``_post_process_dp_padding`` where the ranks replay CUDA graphs, a decode step's;
    a step with a prompt runs unpadded); "none", the sum (TensorRT-LLM's ``all_rank_num_tokens``)."""
    prefill = sum(sum(s.prefill_new_tokens) for s in shapes)
    decode = sum(s.num_decode_seqs for s in shapes)
    sampled = sum(s.num_sampled_tokens for s in shapes)
    if not prefill:
        most = max(s.num_decode_seqs for s in shapes)
        if padding == "largest" or (padding == "sglang" and 2 * decode > len(shapes) * most):
            decode = len(shapes) * most  # MAX_LEN: every rank padded to the largest
        return BatchShape((), (), decode, decode, sampled)
    return BatchShape((prefill,), (0,), decode, decode, sampled)


class DpAttentionCostModel:
    """Prices a lockstep step of ``dp_attention`` ranks from their shapes (module docstring); as a ``CostModel`` a
    single shape is one busy rank beside idle ones."""

    MEMO_SIZE = 1 << 16

    def __init__(
        self,
        attention: CostModel,
        shared: CostModel,
        dp_attention: int,
        *,
        attention_tp: int,
        dense_layer_share: float,
        cpu_overlap: bool,
        local_mlp: bool = False,
        exchange_bytes_per_row: tuple[float, float] | None = None,
        padding: str = "sglang",
        scattered: frozenset[str] = frozenset(),
        moe: bool = True,
    ) -> None:
        assert dp_attention > 1
        assert scattered <= SCATTERABLE and not (local_mlp and scattered), scattered
        if local_mlp and exchange_bytes_per_row is not None:  # an MoE model: its MLP is split by part
            for model, needs in ((attention, ("mlp_by_part",)), (shared, ("mlp_by_part", "moe_exchange"))):
                if not all(callable(getattr(model, name, None)) for name in needs):
                    raise ValueError(
                        f"the {type(model).__name__} cost model cannot split its MLP by part, which the local "
                        "attention-DP layout (TensorRT-LLM's, vLLM's) needs (the routed experts on all ranks' "
                        "tokens, the rest on each rank's own): use cost_model kind silicon, roofline or profiled"
                    )
        # the MLP parts (mlp_by_part's) each rank runs on its own rows: an MoE layer's shared experts, the dense
        # layers (a dense model's whole MLP, its "routed" part)
        kinds = {"moe": ("shared",) if moe else (), "dense": ("dense",) if moe else ("routed",)}
        self._scattered_parts = frozenset(k for part in scattered for k in kinds.get(part, ()))
        self._scattered_ops = frozenset(
            op
            for part, op in (("moe", "moe_router"), ("lm_head", "lm_head"))
            if part in scattered and (moe or op != "moe_router")
        )
        if self._scattered_parts and not all(callable(getattr(m, "mlp_by_part", None)) for m in (attention, shared)):
            raise ValueError(
                f"the {type(attention).__name__} cost model cannot split its MLP by part, which SGLang's scattered "
                "attention-DP layers need (dp_attention_scattered: the shared experts or the dense layers on each "
                "rank's own tokens): use cost_model kind silicon, roofline or profiled"
            )
        # the share of the layers whose MLP stays on the gathered rows (their two all-reduces remain): an MoE
        # layer's where it is not scattered (an all-to-all replaces its gather and reduce all the same), a dense
        # layer's where it is not; None where nothing is scattered (the share then follows the all-to-all alone)
        moe_scattered = "moe" in scattered if moe else "dense" in scattered
        moe_gathered = 0.0 if moe_scattered else 1.0 - dense_layer_share
        dense_gathered = 0.0 if "dense" in scattered else dense_layer_share
        self._gathered_share = (moe_gathered, dense_gathered) if scattered else None
        self._moe_scattered = moe and "moe" in scattered
        self.attention = attention
        self.shared = shared
        self.dp_attention = dp_attention
        self.attention_tp = attention_tp
        self.dense_layer_share = dense_layer_share  # dense layers / all layers: their gathers remain with all-to-all
        self.cpu_overlap = cpu_overlap
        self.local_mlp = local_mlp  # TensorRT-LLM's layout (module docstring)
        self.exchange_bytes_per_row = exchange_bytes_per_row  # None: no routed experts (a dense model)
        self.padding = padding  # how a decode-only step's gathered rows are padded (gathered_shape)
        self._attention_memo: dict[BatchShape, tuple[float, float, dict[str, OpCost]]] = {}
        # a decode-only rank's attention side without its ops: every op but attn_decode depends on the sequences only,
        # so they are priced once per (sequences, sampled rows) and attn_decode read at each context
        # (``decode_attention_s``, where the attention model has one: the silicon model's decode tables)
        self._decode_s = getattr(attention, "decode_attention_s", None)
        self._decode_rest: dict[tuple[int, int], tuple[tuple[tuple[str, float], ...], float] | None] = {}
        self.fast = True  # the decode-only shortcut (tests compare it with the plain pricing)
        self._shared_memo: dict[BatchShape, tuple[float, dict[str, OpCost]]] = {}
        self._memo: dict[tuple[BatchShape, ...], StepTime] = {}

    # -- the lockstep group's questions ---------------------------------------------------------------

    def step_time_ranks(self, shapes: Sequence[BatchShape]) -> StepTime:
        """The step of ranks whose shapes are ``shapes`` (one per rank, ``EMPTY`` for an idle one)."""
        key = tuple(shapes)
        step = self._memo.get(key)
        if step is None:
            step = self._step(key, with_ops=False)
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = step
        return step

    def breakdown_ranks(self, shapes: Sequence[BatchShape]) -> StepTime:
        """``step_time_ranks`` with its ops: the slowest rank's attention ops, the shared ops, the CPU time."""
        return self._step(tuple(shapes), with_ops=True)

    # -- CostModel ------------------------------------------------------------------------------------

    def _alone(self, shape: BatchShape) -> tuple[BatchShape, ...]:
        return (shape, *(EMPTY,) * (self.dp_attention - 1))

    def step_time(self, shape: BatchShape) -> StepTime:
        return self.step_time_ranks(self._alone(shape))

    def breakdown(self, shape: BatchShape) -> StepTime:
        return self.breakdown_ranks(self._alone(shape))

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        return [self.step_time(BatchShape((), (), num_seqs, int(c), num_seqs)).total_s for c in context_tokens]

    # -- composition ----------------------------------------------------------------------------------

    def _step(self, shapes: tuple[BatchShape, ...], with_ops: bool) -> StepTime:
        assert len(shapes) == self.dp_attention, f"{len(shapes)} shapes for {self.dp_attention} ranks"
        if all(s.is_empty for s in shapes):
            return StepTime(0.0, {} if with_ops else None)
        attention_s, cpu_s, slowest, first = 0.0, 0.0, {}, True
        for s in shapes:
            if s.is_empty:
                continue
            found = None if with_ops or not self.fast else self._decode_attention_part(s)
            gpu, cpu, ops = self._attention_part(s) if found is None else found
            if gpu > attention_s or first:
                attention_s, slowest, first = gpu, ops, False
            cpu_s = max(cpu_s, cpu)
        shared_s, shared_ops, eager_s = self._shared_part(gathered_shape(shapes, self.padding))
        gpu_s = eager_step_s(attention_s + shared_s, eager_s)  # one rank's prefill makes every rank's step eager
        total = overlap_total(gpu_s, cpu_s) if self.cpu_overlap else gpu_s + cpu_s
        if not with_ops:
            return StepTime(total)
        ops = dict(slowest)
        for name, op in shared_ops.items():
            merge_op(ops, name, op)  # the all-reduce is on both sides with tp/N > 1
        ops["cpu_overhead"] = OpCost(cpu_s)
        if eager_s:
            ops["eager_host"] = OpCost(eager_s)
        return StepTime(total, ops)

    def _attention_part(self, shape: BatchShape) -> tuple[float, float, dict[str, OpCost]]:
        """One rank's attention-side GPU seconds, CPU seconds and ops (memoised by shape)."""
        found = self._attention_memo.get(shape)
        if found is not None:
            return found
        ops = self.attention.breakdown(shape).ops or {}
        reduce = ops.get("all_reduce")
        if self.local_mlp:
            part = {name: op for name, op in ops.items() if name in LOCAL_OPS}
            if self.exchange_bytes_per_row is None:  # a dense model: its whole MLP on the rank's tokens
                part |= {name: op for name, op in ops.items() if name in MLP_OPS}
            else:
                for kind, kind_ops in self.attention.mlp_by_part(shape).items():
                    if kind == "routed":  # the experts run on the gathered rows (the shared side)
                        continue
                    for name, op in kind_ops.items():
                        merge_op(part, name, op)
            if reduce is not None and self.attention_tp > 1:  # the rank's own TP group: attention's and the MLP's
                part["all_reduce"] = reduce
        else:
            part = {name: op for name, op in ops.items() if name in ATTENTION_OPS or name in self._scattered_ops}
            if self._scattered_parts:
                for kind, kind_ops in self.attention.mlp_by_part(shape).items():
                    if kind in self._scattered_parts:
                        for name, op in kind_ops.items():
                            merge_op(part, name, op)
            if reduce is not None and self.attention_tp > 1:  # one of the two per layer: after attention
                part["all_reduce"] = OpCost(reduce.seconds / 2, reduce.flops / 2, reduce.bytes / 2)
        cpu = ops.get("cpu_overhead")
        found = (sum(op.seconds for op in part.values()), cpu.seconds if cpu is not None else 0.0, part)
        if len(self._attention_memo) >= self.MEMO_SIZE:
            self._attention_memo.clear()
        self._attention_memo[shape] = found
        return found

    def _decode_attention_part(self, shape: BatchShape) -> tuple[float, float, dict[str, OpCost]] | None:
        """``_attention_part``'s seconds (ops left out) of a decode-only rank, summed in its order from the ops priced
        once per sequence count and attn_decode at this context; None for any other shape, or where the attention
        model has no ``decode_attention_s``."""
        if shape.prefill_new_tokens or self._decode_s is None:
            return None
        nd = shape.num_decode_seqs
        key = (nd, shape.num_sampled_tokens)
        rest = self._decode_rest.get(key, False)
        if rest is False:
            gpu, cpu, part = self._attention_part(shape)
            decode = part.get("attn_decode")
            same = decode is not None and self._decode_s(nd, shape.decode_context_tokens) == decode.seconds
            self._decode_rest[key] = (tuple((name, op.seconds) for name, op in part.items()), cpu) if same else None
            return gpu, cpu, part
        if rest is None:
            return None
        decode_s = self._decode_s(nd, shape.decode_context_tokens)
        entries, cpu = rest
        total = 0
        for name, seconds in entries:  # sum()'s order over the part's ops
            total += decode_s if name == "attn_decode" else seconds
        return total, cpu, _NO_OPS

    def _shared_part(self, gathered: BatchShape) -> tuple[float, dict[str, OpCost], float]:
        """The shared layers' GPU seconds and ops at the gathered rows, and the host seconds of launching the
        whole step eagerly (0 for a step replayed from a CUDA graph; memoised by shape)."""
        found = self._shared_memo.get(gathered)
        if found is not None:
            return found
        ops = self.shared.breakdown(gathered).ops or {}
        if self.local_mlp:
            part = {}
            if self.exchange_bytes_per_row is not None:  # the routed experts, and the tokens' way to them and back
                part |= self.shared.mlp_by_part(gathered).get("routed", {})
                exchange = ops.get("all_to_all")  # DeepEP's, with expert_all_to_all
                if exchange is None:
                    rows = gathered.num_new_tokens
                    exchange = self.shared.moe_exchange(rows, *self.exchange_bytes_per_row)
                part["all_to_all"] = exchange
        else:
            part = {
                name: op
                for name, op in ops.items()
                if name not in ATTENTION_OPS and name not in _NOT_GPU and name not in self._scattered_ops
            }
            if self._scattered_parts:  # the MLP's gathered parts only
                for name in MLP_OPS:
                    part.pop(name, None)
                for kind, kind_ops in self.shared.mlp_by_part(gathered).items():
                    if kind not in self._scattered_parts:
                        for name, op in kind_ops.items():
                            merge_op(part, name, op)
            if self._moe_scattered and "all_to_all" not in part and self.exchange_bytes_per_row is not None:
                # no all-to-all backend: the routed experts' tokens all-gathered and their output reduce-scattered
                part["all_to_all"] = self.shared.moe_exchange(gathered.num_new_tokens, *self.exchange_bytes_per_row)
            reduce = part.get("all_reduce")
            if reduce is not None and self._gathered_share is not None:  # a scattered layer's gather and reduce go
                moe_share, dense_share = self._gathered_share
                share = dense_share + (0.0 if "all_to_all" in part else moe_share)
                if share <= 0.0:
                    del part["all_reduce"]
                elif share < 1.0:
                    part["all_reduce"] = OpCost(reduce.seconds * share, reduce.flops * share, reduce.bytes * share)
            elif reduce is not None and "all_to_all" in part:  # DeepEP replaces the MoE layers' gather and reduce
                share = self.dense_layer_share
                part["all_reduce"] = OpCost(reduce.seconds * share, reduce.flops * share, reduce.bytes * share)
        eager = ops.get("eager_host")
        found = (sum(op.seconds for op in part.values()), part, eager.seconds if eager is not None else 0.0)
        if len(self._shared_memo) >= self.MEMO_SIZE:
            self._shared_memo.clear()
        self._shared_memo[gathered] = found
        return found
