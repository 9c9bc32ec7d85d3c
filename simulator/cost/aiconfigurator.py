"""``aiconfigurator``: a second opinion, each step priced by NVIDIA aiconfigurator's own step estimator.

aiconfigurator-core (Apache-2.0, a dependency) compiles a model's op graph for a (GPU system,
framework, version, tp, ep, quantization) into a Rust engine (``aiconfigurator_core.sdk.engine.
EngineHandle``) that prices one engine step from its measured kernel tables. servesim's ``silicon``
model reads tables of the same family but composes the step itself (its op decomposition, its
equal-work attention shapes, its fallbacks); this model takes the estimator's composition whole, so
running one scenario under both says how much the answer depends on the step model.

**The model.** The estimator reads a Hugging Face ``config.json``. This model writes one from the
deployment's own ``ModelSpec`` numbers (a dense gated MLP as ``LlamaForCausalLM``, routed experts as
``MixtralForCausalLM``, or ``Qwen2MoeForCausalLM`` with shared experts, MLA as
``DeepseekV3ForCausalLM``) into a temporary folder named by its hash, so both cost models price the
same shapes. A model those cannot describe (a plain two-matrix MLP, MoE dense layers without MLA) is
refused.

**A step.** The estimator's mixed step (``EngineHandle.mixed_step_breakdown``) is three passes:
the non-attention ops at the step's token count, the context attention of one prompt of ``isl``
tokens (``prefix`` of them cached) divided by the chunks it is split into, and decode attention at
one context ``isl + osl // 2`` for every decoding sequence. servesim's ``BatchShape`` is priced with
those same passes, called per part so each part is exact for the shape:

    shared ops       mixed_step_breakdown(P, D, isl=P, osl=1)                   shared component
    each chunk       mixed_step_breakdown(c + n, 0, isl=c + n, osl=1, prefix=c) context attention
                     (n new tokens on c cached; one chunk, so the divisor is 1)
    decode attention mixed_step_breakdown(0, D, isl=s, osl=1)                   decode component
                     (s = the decode sequences' mean context, rounded)

where P is the step's prompt tokens and D its decoding sequences. A decode-only step is the
estimator's decode step, ``EngineHandle.decode_step_latency(D, isl=s, osl=1)``. The LM head is sized
by the estimator's own rule (it ignores ``num_sampled_tokens``), and no CUDA-graph padding is added.

**Engine CPU time.** The estimator's step is the GPU forward pass only (its op lists hold kernels
and collectives; the schedule, input preparation, sampling and output processing are not in them).
servesim adds the same engine overhead ``silicon`` charges by default, ``cpu_overhead =
step_s + per_seq_s x sequences (+ tp_step_s at tp > 1)`` (``simulator/cost/overhead.py``), so the
two models differ only in the forward pass; set ``overhead`` to zeros to compare that alone.

**Pipeline parallelism.** The engine is compiled for the whole model on ``tp`` GPUs (pp 1), which is
the sum of the stages' times; the stages split it evenly (``stage_s`` None); the stage-to-stage
send is left out.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost.overhead import EngineOverheadParams, engine_overhead_s, overlap_total
from simulator.cost.shape import COST_MODELS, BatchShape, OpCost, StepTime

FRAMEWORKS = ("vllm", "sglang", "trtllm")
DEFAULT_FRAMEWORK = "vllm"
MS = 1e-3  # the estimator answers in milliseconds
# Compiling an engine walks the model and loads the system's tables (about 0.8 s); engines are kept
# by identity so a sweep or a comparison building many cost models compiles each once.
_ENGINES: OrderedDict[tuple, Any] = OrderedDict()
_ENGINES_MAX = 16


class AiconfiguratorParams(BaseModel):
    """Parameters of the ``aiconfigurator`` cost model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["aiconfigurator"] = "aiconfigurator"
    system: str | None = Field(
        None,
        description="aiconfigurator's GPU system (e.g. h200_sxm); None: the hardware's silicon_tables.",
    )
    framework: Literal["vllm", "sglang", "trtllm"] | None = Field(
        None,
        description="Serving framework whose measured kernels price the step; None: the engine the batch policy "
        "models (sglang, trtllm; vLLM for the others).",
    )
    version: str | None = Field(None, description="Framework version of the tables; None: the newest shipped.")
    overhead: EngineOverheadParams = Field(
        default_factory=EngineOverheadParams,
        description="Engine CPU time per step, added to the estimator's forward pass (simulator/cost/overhead.py).",
    )
    cpu_overlap: bool | None = Field(
        None,
        description="The engine's CPU time runs beside the forward pass (async scheduling, overlap schedulers): a "
        "step takes the longer of the two. None: what the batch policy's engine does.",
    )


def _refuse(why: str) -> ValueError:
    return ValueError(f"cost_model.kind aiconfigurator: {why}")


def hf_config(model: ModelSpec) -> dict[str, Any]:
    """A Hugging Face ``config.json`` for ``model``'s shapes, in the architecture the estimator models it by.

    Raises ValueError for a model none of those architectures describes.
    """
    if not model.gated_mlp:
        raise _refuse(f"model {model.name}: a plain two-matrix MLP has no aiconfigurator architecture")
    if model.num_linear_layers:
        raise _refuse(
            f"model {model.name}: its Gated DeltaNet layers are not mapped to an aiconfigurator architecture; use "
            "cost_model.kind silicon"
        )
    cfg: dict[str, Any] = {
        "num_hidden_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_key_value_heads": model.num_kv_heads,
        "head_dim": model.head_dim,
        "intermediate_size": model.intermediate_size,
        "vocab_size": model.vocab_size,
        "max_position_embeddings": model.max_context_tokens,
        "tie_word_embeddings": model.tie_word_embeddings,
        "torch_dtype": "bfloat16",
    }
    if model.is_mla:
        return cfg | {
            "architectures": ["DeepseekV3ForCausalLM"],
            "intermediate_size": model.dense_intermediate_size or model.intermediate_size,
            "moe_intermediate_size": model.intermediate_size,
            "n_routed_experts": model.num_experts,
            "num_experts_per_tok": model.num_experts_per_token,
            "n_shared_experts": model.num_shared_experts,
            "first_k_dense_replace": model.num_dense_layers,
            "q_lora_rank": model.q_lora_rank,
            "kv_lora_rank": model.kv_lora_rank,
            "qk_rope_head_dim": model.qk_rope_head_dim,
            "qk_nope_head_dim": model.qk_nope_head_dim,
            "v_head_dim": model.v_head_dim,
        }
    if not model.is_moe:
        return cfg | {"architectures": ["LlamaForCausalLM"]}
    if model.num_dense_layers:
        raise _refuse(f"model {model.name}: MoE dense layers are modelled for MLA (DeepSeek) models only")
    moe = {"num_experts_per_tok": model.num_experts_per_token}
    if not model.num_shared_experts:
        return cfg | moe | {"architectures": ["MixtralForCausalLM"], "num_local_experts": model.num_experts}
    shared = model.num_shared_experts * (model.shared_expert_intermediate_size or model.intermediate_size)
    return (
        cfg
        | moe
        | {
            "architectures": ["Qwen2MoeForCausalLM"],
            "num_experts": model.num_experts,
            "moe_intermediate_size": model.intermediate_size,
            "shared_expert_intermediate_size": shared,
        }
    )


def _config_dir(config: dict[str, Any]) -> str:
    """A folder holding ``config.json`` = ``config``, named by its hash (written once, atomically)."""
    text = json.dumps(config, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "servesim-aiconfigurator" / digest
    path = folder / "config.json"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"config.json.{os.getpid()}"
        tmp.write_text(text)
        os.replace(tmp, path)
    return str(folder)


def _engine(key: tuple, compile_kwargs: dict[str, Any]) -> Any:
    """The compiled engine for ``key``, compiled on first use (the estimator's INFO/WARNING logs muted)."""
    engine = _ENGINES.get(key)
    if engine is not None:
        _ENGINES.move_to_end(key)
        return engine
    from aiconfigurator_core.sdk.engine import EngineHandle

    log = logging.getLogger("aiconfigurator_core")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        engine = EngineHandle.compile(**compile_kwargs)
    finally:
        log.setLevel(level)
    _ENGINES[key] = engine
    if len(_ENGINES) > _ENGINES_MAX:
        _ENGINES.popitem(last=False)
    return engine


def _versions(system: str, framework: str) -> list[str]:
    from aiconfigurator_core.sdk.perf_database import get_supported_databases

    log = logging.getLogger("aiconfigurator_core")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        return list(get_supported_databases().get(system, {}).get(framework, []))
    finally:
        log.setLevel(level)


def _op_name(aic_name: str, ep: int) -> str:
    """servesim's op (``OP_NAMES``) for one of the estimator's ops; its own name where none fits.

    The MoE block's ``moe_pre_dispatch`` / ``moe_post_dispatch`` are its token exchange: an
    all-to-all with expert parallelism, the tensor-parallel reduction without; the router GEMM goes under
    ``moe_router`` and the fused expert kernel (``moe``) under ``mlp_gate_up``.
    """
    name = aic_name.removeprefix("context_").removeprefix("generation_")
    if "attention" in name or name.startswith(("mla", "dsa")):
        return "attn_prefill" if aic_name.startswith("context_") else "attn_decode"
    if "dispatch" in name:
        return "all_to_all" if ep > 1 else "all_reduce"
    table = (
        ("embedding_ar", "all_reduce"),
        ("embedding", "embed"),
        ("norm", "norm"),
        ("qkv", "qkv_proj"),
        ("proj_gemm", "o_proj"),
        ("gate_ffn1", "mlp_gate_up"),
        ("act", "mlp_act"),
        ("ffn2", "mlp_down"),
        ("logits", "lm_head"),
        ("alltoall", "all_to_all"),
        ("router", "moe_router"),
        ("_ar", "all_reduce"),
        ("ar_", "all_reduce"),
        ("allreduce", "all_reduce"),
        ("moe", "mlp_gate_up"),
    )
    for part, op in table:
        if part in name:
            return op
    return name


@COST_MODELS.register("aiconfigurator", params=AiconfiguratorParams)
class AiconfiguratorCostModel:
    """Step times from aiconfigurator's compiled step estimator, plus servesim's engine CPU time."""

    MEMO_SIZE = 1 << 16

    def __init__(
        self,
        params: AiconfiguratorParams,
        model: ModelSpec,
        hardware: HardwareSpec,
        tp: int = 1,
        pp: int = 1,
        ep: int = 1,
    ) -> None:
        model.check_tensor_parallel(tp)
        model.check_expert_parallel(ep, tp)
        self.params, self.model, self.hardware, self.tp, self.pp, self.ep = params, model, hardware, tp, pp, ep
        system = params.system or hardware.silicon_tables
        if system is None:
            raise _refuse(f"hardware {hardware.name} has no aiconfigurator system; set cost_model.system")
        self.framework = params.framework or DEFAULT_FRAMEWORK
        versions = _versions(system, self.framework)
        if not versions:
            raise _refuse(f"no {self.framework} tables for system {system!r}")
        if params.version is not None and params.version not in versions:
            raise _refuse(f"no {self.framework} {params.version} tables for {system} (shipped: {', '.join(versions)})")
        self.system = system
        folder = _config_dir(hf_config(model))
        quant = "fp8" if model.quantization == "fp8" else None
        kwargs: dict[str, Any] = {
            "model_path": folder,
            "system": system,
            "backend": self.framework,
            "backend_version": params.version,
            "tp_size": tp,
            "gemm_quant_mode": quant,
            "kvcache_quant_mode": "fp8" if model.kv_cache_bytes == 1 else None,
        }
        if model.is_moe:
            kwargs |= {"moe_tp_size": tp // ep, "moe_ep_size": ep, "moe_quant_mode": quant}
        key = tuple(sorted((k, v) for k, v in kwargs.items()))
        try:
            self.engine = _engine(key, kwargs)
            # price a small step of each kind now, so a shape the tables cannot answer fails here, not mid-run
            self.engine.mixed_step_breakdown(16, 1, 16, 1, 0)
            self.engine.decode_step_latency(1, 16, 1)
        except Exception as exc:  # the estimator raises ValueError, KeyError, NotImplementedError, ...
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise _refuse(f"cannot price {model.name} on {system} with {self.framework}: {detail}") from exc
        self._memo: dict[BatchShape, StepTime] = {}
        # the estimator's passes, memoised per instance and bounded (decode contexts grow every step)
        self._shared_s = functools.lru_cache(maxsize=self.MEMO_SIZE)(self._shared_pass_s)
        self._chunk_s = functools.lru_cache(maxsize=self.MEMO_SIZE)(self._chunk_pass_s)
        self._decode_attn_s = functools.lru_cache(maxsize=self.MEMO_SIZE)(self._decode_attn_pass_s)
        self._decode_only_s = functools.lru_cache(maxsize=self.MEMO_SIZE)(self._decode_only_pass_s)

    # -- the estimator's passes (seconds) -------------------------------------------------

    def _shared_pass_s(self, prompt_tokens: int, decode_seqs: int) -> float:
        """The step's ops but attention, for ``prompt_tokens`` prompt tokens beside ``decode_seqs`` decodes."""
        return self.engine.mixed_step_breakdown(prompt_tokens, decode_seqs, prompt_tokens, 1, 0)[1] * MS

    def _chunk_pass_s(self, new: int, cached: int) -> float:
        """One chunk's attention: ``new`` tokens on ``cached`` ones."""
        return self.engine.mixed_step_breakdown(cached + new, 0, cached + new, 1, cached)[2] * MS

    def _decode_attn_pass_s(self, seqs: int, context: int) -> float:
        """Decode attention of ``seqs`` sequences at mean context ``context``."""
        return self.engine.mixed_step_breakdown(0, seqs, context, 1, 0)[3] * MS

    def _decode_only_pass_s(self, seqs: int, context: int) -> float:
        """A decode-only step, the estimator's own."""
        return self.engine.decode_step_latency(seqs, context, 1) * MS

    @staticmethod
    def _mean_context(shape: BatchShape) -> int:
        return max(1, int(shape.decode_context_tokens / shape.num_decode_seqs + 0.5))

    def _overhead_s(self, num_seqs: int) -> float:
        return engine_overhead_s(self.params.overhead, num_seqs, self.tp)

    def _total_s(self, shape: BatchShape) -> float:
        if shape.is_empty:
            return 0.0
        d = shape.num_decode_seqs
        if not shape.prefill_new_tokens:
            return self._with_cpu(self._decode_only_s(d, self._mean_context(shape)), self._overhead_s(d))
        prompt = sum(shape.prefill_new_tokens)
        total = self._shared_s(prompt, d)
        for new, cached in zip(shape.prefill_new_tokens, shape.prefill_cached_tokens, strict=True):
            total += self._chunk_s(new, cached)
        if d:
            total += self._decode_attn_s(d, self._mean_context(shape))
        return self._with_cpu(total, self._overhead_s(shape.num_seqs))

    def _with_cpu(self, gpu_s: float, cpu_s: float) -> float:
        """The step: the forward pass and the engine's CPU time, one after the other or overlapped."""
        return overlap_total(gpu_s, cpu_s) if self.params.cpu_overlap else gpu_s + cpu_s

    # -- public -------------------------------------------------------------------------

    def step_time(self, shape: BatchShape) -> StepTime:
        step = self._memo.get(shape)
        if step is None:
            step = StepTime(self._total_s(shape))
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            self._memo[shape] = step
        return step

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        """Decode-only step times of ``num_seqs`` sequences, one per total context: ``step_time``'s floats."""
        over = self._overhead_s(num_seqs)
        return [
            self._with_cpu(self._decode_only_s(num_seqs, max(1, int(c / num_seqs + 0.5))), over) if num_seqs else 0.0
            for c in context_tokens
        ]

    def _per_op(self, shape: BatchShape) -> list[tuple[str, float, str]]:
        """The estimator's ops of ``shape`` as (aiconfigurator name, seconds, source), unfolded."""
        e, d = self.engine, shape.num_decode_seqs
        if not shape.prefill_new_tokens:
            entries = e.decode_step_per_op(d, self._mean_context(shape), 1)
            return [(n, ms * MS, src) for n, ms, _, src in entries]
        prompt = sum(shape.prefill_new_tokens)
        shared, _, _ = e.mixed_step_breakdown_per_op(prompt, d, prompt, 1, 0)
        out = [(n, ms * MS, src) for n, ms, _, src in shared]
        for new, cached in zip(shape.prefill_new_tokens, shape.prefill_cached_tokens, strict=True):
            _, attn, _ = e.mixed_step_breakdown_per_op(cached + new, 0, cached + new, 1, cached)
            out += [(n, ms * MS, src) for n, ms, _, src in attn]
        if d:
            _, _, attn = e.mixed_step_breakdown_per_op(0, d, self._mean_context(shape), 1, 0)
            out += [(n, ms * MS, src) for n, ms, _, src in attn]
        return out

    def breakdown(self, shape: BatchShape) -> StepTime:
        """``step_time`` with the estimator's ops folded into servesim's op names (``OP_NAMES`` where one fits).

        The ops sum to the total up to float rounding; ``total_s`` is ``step_time``'s own float.
        """
        if shape.is_empty:
            return StepTime(0.0, {})
        ops: dict[str, OpCost] = {}
        for name, seconds, _ in self._per_op(shape):
            if seconds == 0.0:  # e.g. all-reduces at tp 1, the stage send at pp 1
                continue
            op = _op_name(name, self.ep)
            ops[op] = OpCost(ops[op].seconds + seconds if op in ops else seconds)
        ops["cpu_overhead"] = OpCost(self._overhead_s(shape.num_seqs))
        return StepTime(self.step_time(shape).total_s, ops)

    def sources(self, shape: BatchShape) -> dict[str, str]:
        """Where each op's time of ``shape`` comes from, as the estimator tags it (silicon, empirical, mixed)."""
        out: dict[str, str] = {}
        for name, seconds, src in self._per_op(shape):
            if seconds == 0.0:
                continue
            op = _op_name(name, self.ep)
            out[op] = src if out.get(op, src) == src else "mixed"
        out["cpu_overhead"] = "servesim engine overhead (simulator/cost/overhead.py)"
        return out
