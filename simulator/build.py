"""The composition root: a validated ScenarioConfig becomes runnable objects.

The one place that resolves presets and files and looks names up in the registries.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import simpy

import policies
from policies.batching.sglang import sglang_chunked_prefill_size
from simulator.cluster.dp_attention import check_dp_attention, context_balance, rank_chooser, rank_policy
from simulator.cluster.replica import Replica
from simulator.cluster.simulation import KvTransfer, Simulation
from simulator.config.precision import (
    KV_CACHE_DTYPE_BYTES,
    QUANTIZATIONS,
    SCALED_FP8_MLA_ENGINES,
    STATE_DTYPE_BYTES,
    served_kv_cache_dtype,
)
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.schema import MAX_KV_BLOCKS, KvCacheConfig, ReplicaGroupConfig, ScenarioConfig
from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost import COST_MODELS
from simulator.cost.dp_attention import DpAttentionCostModel, exchange_bytes_per_row
from simulator.cost.eager import measured_eager_host_s_per_layer
from simulator.cost.link import Link
from simulator.cost.profile import CalibrationProfile, load_profile
from simulator.cost.shape import CostModel
from simulator.cost.speculative import SpeculativeCostModel
from simulator.engine.lockstep import LockstepEngine, LockstepGroup
from simulator.engine.loop import Engine
from simulator.engine.speculation import Speculation, acceptance_probabilities
from simulator.kv.blocks import BlockManager
from simulator.kv.host import HostPool
from simulator.kv.memory import MemoryPlan, plan_memory, plan_sglang_memory, plan_trtllm_memory
from simulator.kv.prefix_cache import PrefixCache
from simulator.kv.window import WindowedBlockManager, sliding_window_blocks
from simulator.metrics.recorder import MetricsRecorder
from workloads import RequestStream, generate
from workloads.rng import Stream, rng_for


@dataclass(frozen=True, slots=True)
class GroupSetup:
    """A replica group with every default filled in and its specs resolved."""

    name: str
    group: ReplicaGroupConfig
    model: ModelSpec
    hardware: HardwareSpec
    tp: int
    pp: int
    max_model_len: int
    num_blocks: int  # per replica (with attention DP, all its ranks' pools together)
    memory: MemoryPlan | None
    profile: CalibrationProfile | None = None
    ep: int = 1  # expert parallelism over each stage's tp GPUs
    policy: Any = None  # the batch policy's parameters, hardware-dependent defaults filled in for this GPU
    proposer: ModelSpec | None = None  # speculative decoding's draft model or MTP module
    cost_model: Any = None  # the cost model's parameters, the engine whose kernels it reads filled in
    dp_attention: int = 1  # attention data-parallel ranks, each with its own scheduler and KV pool
    windowed: bool = False  # sliding-window layers' KV held per window (``windowed_kv``), the blocks the full layers'


def deployed_model(
    model: ModelSpec,
    quantization: str | None,
    kv_cache_dtype: str = "auto",
    state_dtype: str = "auto",
    engine: str = "vllm",
) -> ModelSpec:
    """``model`` as ``engine`` serves it with the scenario's quantization, KV-cache and recurrent-state dtypes.

    ``quantization`` (``fp8``, ``fp8_block``, ``nvfp4``, ``mxfp4``) sets the weight format and its bytes per weight
    (simulator/config/precision.py); ``kv_cache_dtype`` other than ``auto`` sets the bytes per cached element,
    ``state_dtype`` (``--mamba-ssm-dtype``) a hybrid model's recurrent-state bytes. None / ``auto`` keep the spec's.
    A DeepSeek-sparse-attention model's FP8 cache takes DeepSeek's scaled format under the engines that store it so
    (``SCALED_FP8_MLA_ENGINES``).
    """
    update: dict[str, Any] = {}
    if quantization is not None:
        if QUANTIZATIONS[quantization].experts_only and not model.is_moe:
            raise ValueError(
                f"quantization {quantization} quantizes the routed experts only (gpt-oss's MXFP4); {model.name} has "
                "no routed experts: use fp8, fp8_block or nvfp4"
            )
        update |= {"quantization": quantization, "weight_bytes": QUANTIZATIONS[quantization].weight_bytes}
    if kv_cache_dtype != "auto":
        update["kv_cache_bytes"] = KV_CACHE_DTYPE_BYTES[kv_cache_dtype]
    if state_dtype != "auto" and model.num_linear_layers:
        update["linear_state_bytes"] = STATE_DTYPE_BYTES[state_dtype]
    fp8 = update.get("kv_cache_bytes", model.kv_cache_bytes) == 1
    scaled = model.is_dsa and fp8 and engine in SCALED_FP8_MLA_ENGINES
    if scaled != model.mla_scaled_fp8_cache:
        update["mla_scaled_fp8_cache"] = scaled
    return ModelSpec.model_validate(model.model_dump() | update) if update else model


def resolve_specs(cfg: ScenarioConfig, base_dir: Path | None = None) -> tuple[ModelSpec, HardwareSpec]:
    return resolve_model(cfg.model, base_dir), resolve_hardware(cfg.hardware, base_dir)


def profile_path(cost_params, base_dir: Path | None = None) -> Path | None:
    """The absolute path of the calibration profile a cost model reads, or None when it reads none.

    Raises ValueError when the ``profiled`` cost model names no profile file.
    """
    if cost_params.kind != "profiled":
        return None
    ref = getattr(cost_params, "profile", None)
    if ref is None:
        raise ValueError("cost_model.profile: the profiled cost model needs a profile file (servesim calibrate)")
    return ((base_dir or Path.cwd()) / ref).resolve()


def resolve_profile(cost_params, base_dir: Path | None = None) -> CalibrationProfile | None:
    """The calibration profile a cost model reads, or None when it reads none (ValueError as above)."""
    path = profile_path(cost_params, base_dir)
    return None if path is None else load_profile(path)


def setup_group(cfg: ScenarioConfig, g: ReplicaGroupConfig, index: int, base_dir: Path | None) -> GroupSetup:
    """Resolve one group: its specs, parallelism, max length and KV capacity (ValueError if it cannot run)."""
    name = g.name or (g.role if g.role != "mixed" else f"group{index}")
    kv = g.kv_cache or cfg.kv_cache
    hardware = resolve_hardware(g.hardware if g.hardware is not None else cfg.hardware, base_dir)
    # hardware-dependent policy defaults (vllm's None budget and max_num_seqs) for this GPU
    policy = policies.batching.resolve_for_hardware(g.policy or cfg.policy, hardware.memory_bytes, hardware.name)
    engine = policies.batching.traits_of(policy.kind).engine
    base = resolve_model(g.model if g.model is not None else cfg.model, base_dir)
    kv_dtype = served_kv_cache_dtype(kv.dtype, engine, base.is_dsa, hardware.compute_major)
    quantization = g.quantization if g.quantization is not None else cfg.quantization
    model = deployed_model(base, quantization, kv_dtype, kv.mamba_ssm_dtype, engine)
    par = g.parallelism or cfg.parallelism
    model.check_tensor_parallel(par.tp)
    model.check_expert_parallel(par.ep, par.tp)
    model.layers_per_stage(par.pp)
    dp = par.dp_attention
    check_dp_attention(model, par.tp, dp, speculative=cfg.speculative is not None)
    max_model_len = cfg.max_model_len or model.max_context_tokens
    if max_model_len > model.max_context_tokens:
        raise ValueError(
            f"max_model_len ({max_model_len}) exceeds {model.name}'s max context ({model.max_context_tokens})"
        )
    if kv.block_size > max_model_len:
        raise ValueError(
            f"{'' if g.kv_cache is None else f'group {name}: '}kv_cache.block_size ({kv.block_size:,}) exceeds "
            f"max_model_len ({max_model_len:,}): no sequence fills one block; use a block size like 16"
        )
    profile = resolve_profile(g.cost_model or cfg.cost_model, base_dir)
    proposer = _proposer(cfg, model, base_dir, quantization, kv_dtype, engine)
    if proposer is not None and par.pp > 1:
        raise ValueError("speculative decoding is modelled without pipeline parallelism: set parallelism.pp to 1")
    windowed = windowed_kv(policy.kind, model, kv, g.role)
    enforce_eager = bool(getattr(policy, "enforce_eager", False))
    if enforce_eager and g.role != "prefill":
        raise ValueError(
            f"group {name}: policy.enforce_eager launches decode steps without CUDA graphs too, which servesim does "
            "not price; set it on a prefill group (role: prefill) of a disaggregated cluster"
        )
    cost_model = resolve_cost_model(
        g.cost_model or cfg.cost_model,
        policy.kind,
        dp,
        par.ep,
        model,
        enforce_eager,
        int(getattr(policy, "piecewise_graph_max_tokens", 0)),
        policy,
    )
    memory = None
    if kv.num_blocks is None:
        # with a profile: the measured device memory, weights and (unless set) activation and runtime reserve
        measured = profile.memory if profile is not None else None
        reserve = kv.reserve_bytes
        if measured is not None and reserve is None:
            reserve = measured.reserve_bytes
        memory = _plan_memory(
            policy,
            kv,
            model,
            hardware,
            par.tp,
            par.pp,
            reserve,
            weight_bytes=measured.weight_bytes if measured is not None else None,
            memory_bytes=measured.device_memory_bytes if measured is not None else None,
            extra_weight_bytes=_proposer_weight_bytes(cfg, proposer),
            extra_kv_bytes_per_token=proposer.kv_bytes_per_token_per_gpu(par.tp) if proposer is not None else 0.0,
            dp_attention=dp,
            windowed=windowed,
            per_rank=per_rank_parts(cost_model) if dp > 1 else frozenset(),
        )
        if memory.state_slots is not None and "max_mamba_cache_size" in type(policy).model_fields:
            # SGLang's state pool caps its running requests (a hybrid linear-attention model)
            policy = policy.model_copy(update={"max_mamba_cache_size": memory.state_slots})
    if model.num_linear_layers and g.role != "mixed":
        raise ValueError(
            f"group {name}: role {g.role} with {model.name}, a hybrid linear-attention model, is not modelled (its "
            "recurrent state sent beside the KV cache); serve it in mixed groups"
        )
    if model.num_linear_layers and kv.prefix_caching:
        raise ValueError(
            f"group {name}: kv_cache.prefix_caching with {model.name}, a hybrid linear-attention model, is not "
            "modelled (its recurrent state would be cached per prefix); turn it off"
        )
    # each attention-DP rank has a pool of the per-GPU plan's blocks
    num_blocks = kv.num_blocks if memory is None else memory.num_blocks * dp
    if num_blocks > MAX_KV_BLOCKS:
        raise ValueError(
            f"group {name}: {model.name} on {hardware.name} leaves room for {num_blocks:,} KV blocks per replica, "
            f"more than the {MAX_KV_BLOCKS:,} servesim tracks; use a larger kv_cache.block_size or set "
            "kv_cache.num_blocks"
        )
    if num_blocks < par.pp:
        raise ValueError(f"group {name}: {num_blocks} KV blocks cannot be shared by {par.pp} pipeline engines")
    if num_blocks < dp:
        raise ValueError(f"group {name}: {num_blocks} KV blocks cannot be shared by {dp} attention-DP ranks")
    return GroupSetup(
        name,
        g,
        model,
        hardware,
        par.tp,
        par.pp,
        max_model_len,
        num_blocks,
        memory,
        profile,
        par.ep,
        rank_policy(policy, engine, dp),  # as each attention-DP rank runs it (the plan above read the flags given)
        proposer,
        cost_model,
        dp,
        windowed,
    )


def windowed_kv(policy_kind: str, model: ModelSpec, kv: KvCacheConfig, role: str) -> bool:
    """Whether a group's sliding-window layers hold their KV per window (simulator/kv/window.py): its engine does
    (``BatchTraits.windows_sliding_kv``: vLLM V1), the model has sliding layers beside full ones, and the group is
    mixed without a prefix cache (the two servesim models the window without). Otherwise every layer's KV is
    held for every token."""
    return (
        policies.batching.traits_of(policy_kind).windows_sliding_kv
        and model.windows_sliding_kv
        and not kv.prefix_caching
        and role == "mixed"
    )


def _plan_memory(
    policy: Any,
    kv: KvCacheConfig,
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    pp: int,
    reserve_bytes: float | None,
    windowed: bool = False,
    **measured: Any,
) -> MemoryPlan:
    """The KV capacity the policy's engine gives (its traits' ``engine``): SGLang's from ``mem_fraction_static``
    and its chunked prefill size, TensorRT-LLM's from ``free_gpu_memory_fraction`` and its ``max_num_tokens``,
    the others vLLM's from ``gpu_memory_utilization``. ``measured``: the profile's figures and the proposer's."""
    engine = policies.batching.traits_of(policy.kind).engine

    def present(*names: str) -> dict[str, Any]:  # the settings the policy has; the memory functions default the rest
        return {n: getattr(policy, n) for n in names if hasattr(policy, n)}

    if engine == "sglang":
        chunk = getattr(policy, "chunked_prefill_size", None)
        return plan_sglang_memory(
            model,
            hardware,
            tp,
            kv.block_size,
            pp,
            chunked_prefill_size=sglang_chunked_prefill_size(hardware.memory_bytes) if chunk is None else chunk,
            mem_fraction_static=kv.mem_fraction_static,
            **present("max_prefill_tokens", "max_running_requests", "max_mamba_cache_size"),
            **measured,
        )
    if engine == "trtllm":
        return plan_trtllm_memory(
            model,
            hardware,
            tp,
            kv.block_size,
            kv.free_gpu_memory_fraction,
            reserve_bytes,
            pp,
            **present("max_num_tokens", "max_batch_size"),
            **measured,
        )
    max_seqs = getattr(policy, "max_num_seqs", None) or getattr(policy, "max_batch_size", None)
    return plan_memory(
        model,
        hardware,
        tp,
        kv.block_size,
        kv.gpu_memory_utilization,
        reserve_bytes,
        pp,
        **measured,
        max_seqs=max_seqs,
        windowed=windowed,
    )


def _cpu_overlap(params: Any) -> bool:
    """Whether resolved cost-model parameters run the engine's CPU time beside the GPU's (theirs, or their
    nested roofline's); False for a model without the setting (a calibration profile's engine runs serially)."""
    if "cpu_overlap" in type(params).model_fields:
        return bool(params.cpu_overlap)
    if "roofline" in type(params).model_fields:
        return bool(params.roofline.cpu_overlap)
    return False


def per_rank_parts(params: Any) -> frozenset[str]:
    """What resolved cost-model parameters' attention-DP layout runs on each rank's own tokens beside attention, whose
    weights each rank then holds whole (``ModelSpec.attention_group_weight_bytes``): everything but the routed
    experts in the local layout, SGLang's scattered parts in the gathered one."""
    roofline = _roofline_params(params)
    if roofline is None:
        return frozenset()
    if roofline.dp_attention_mlp == "local":
        return frozenset(("moe", "dense", "lm_head"))
    return frozenset(roofline.dp_attention_scattered or ())


def _roofline_params(params: Any) -> Any:
    """Resolved cost-model parameters' roofline: theirs where they are the roofline's, their nested one, or None."""
    if "expert_all_to_all" in type(params).model_fields:
        return params
    return getattr(params, "roofline", None)


def _check_nvlink_all_to_all(params: Any, roofline: Any, nested: dict[str, Any], engine: str) -> None:
    """One line where TensorRT-LLM's NVLink all-to-all (``all_to_all_kernel``) is asked for but would not be read:
    only the silicon model prices it, only where tokens are dispatched (``expert_all_to_all``), and only TensorRT-LLM
    runs it."""
    kernel = roofline.all_to_all_kernel
    if roofline is params:
        raise ValueError(
            f"cost_model.all_to_all_kernel: {kernel} is TensorRT-LLM's measured all-to-all, which only the silicon "
            "cost model reads (cost_model: {kind: silicon, roofline: {all_to_all_kernel: ...}})"
        )
    if not nested.get("expert_all_to_all", roofline.expert_all_to_all):
        raise ValueError(
            f"cost_model.roofline.all_to_all_kernel: {kernel} needs expert_all_to_all: true (the tokens dispatched to "
            "their experts' GPUs)"
        )
    if engine != "trtllm":
        raise ValueError(
            f"cost_model.roofline.all_to_all_kernel: {kernel} is TensorRT-LLM's all-to-all; the {engine} engine "
            "runs its own (all_to_all_kernel: engine)"
        )


def _check_eplb(slots: int, framework: str | None, ep: int, model: ModelSpec | None, kernel: str | None) -> None:
    """One line where TensorRT-LLM's expert load balancer (``eplb_slots``) is asked for but cannot be priced: it is
    measured on TensorRT-LLM's tables only, of its wide-EP CUTLASS kernels (no other ``moe_kernel``), places experts
    over expert-parallel ranks, and TensorRT-LLM needs its slots to hold every expert and to divide over the ranks
    (``MoeLoadBalancerConfig``)."""
    if kernel is not None:
        raise ValueError(
            f"cost_model.eplb_slots: the load balancer's MoE was measured with TensorRT-LLM's wide-EP CUTLASS kernels, "
            f"not {kernel}: leave cost_model.moe_kernel unset"
        )
    if framework != "trtllm":
        raise ValueError(
            f"cost_model.eplb_slots: TensorRT-LLM's expert load balancer is measured on its tables only; this cost "
            f"model reads {framework}'s (set cost_model.framework: trtllm, or the trtllm policy)"
        )
    if ep <= 1:
        raise ValueError(
            "cost_model.eplb_slots: the load balancer places experts over expert-parallel GPUs: set "
            "parallelism.ep above 1"
        )
    if model is not None and slots < model.num_experts:
        raise ValueError(
            f"cost_model.eplb_slots: {slots} slots hold fewer than the {model.num_experts} experts of {model.name}"
        )
    if slots % ep:
        raise ValueError(f"cost_model.eplb_slots: {slots} slots do not divide over the {ep} expert-parallel GPUs")


def resolve_cost_model(
    params: Any,
    policy_kind: str,
    dp_attention: int = 1,
    ep: int = 1,
    model: ModelSpec | None = None,
    enforce_eager: bool = False,
    piecewise_graph_max_tokens: int = 0,
    policy: Any = None,
) -> Any:
    """The cost model's parameters with what the policy's engine decides filled in where unset (its traits):
    ``framework``, the engine whose measured kernel tables are read (``vllm``/``vllm_v0`` vLLM's, ``sglang``
    SGLang's, ``trtllm`` TensorRT-LLM's, the other policies vLLM's); ``cpu_overlap``, whether its CPU work runs
    beside the GPU's (vLLM V1, SGLang, TensorRT-LLM) or before it (vLLM V0 and the others); ``expert_all_to_all``,
    vLLM's all-to-all MoE kernels with attention data parallelism and ep > 1 (``use_all2all_kernels``);
    ``eager_host_s_per_layer``, the host's launches of a step holding a prefill where the engine runs it without a
    CUDA graph (SGLang, TensorRT-LLM, vLLM V0, vLLM V1), measured for ``model``'s architecture
    (simulator/cost/eager.py; 0 elsewhere, or without ``model``), and ``piecewise_graph_max_tokens``, the largest such
    step the engine replays from CUDA graphs instead (TensorRT-LLM's ``piecewise_cuda_graph_max_tokens``, vLLM V1's
    largest capture size, 0 with ``enforce_eager``); the last four also in a nested ``roofline``, with the
    attention-DP layout (``dp_attention_mlp``, ``dp_attention_padding``, and ``dp_attention_scattered`` from the
    ``policy``'s flags: ``scattered_layers``)."""
    traits = policies.batching.traits_of(policy_kind)
    if getattr(policy, "enable_dp_lm_head", False) and dp_attention == 1:
        raise ValueError(
            "policy.enable_dp_lm_head needs attention data parallelism (parallelism.dp_attention > 1), as SGLang's "
            "--enable-dp-lm-head does"
        )
    fields = type(params).model_fields
    update: dict[str, Any] = {}
    if "framework" in fields and params.framework is None:
        update["framework"] = traits.engine
    if "cpu_overlap" in fields and params.cpu_overlap is None:
        update["cpu_overlap"] = traits.overlaps_cpu
    if getattr(params, "eplb_slots", None) is not None:
        _check_eplb(params.eplb_slots, update.get("framework", params.framework), ep, model, params.moe_kernel)
    roofline = _roofline_params(params)
    where = "cost_model" if roofline is params else "cost_model.roofline"  # the roofline's fields, in errors
    if roofline is not None and dp_attention == 1:  # the attention-DP layout's settings, where there is none
        for name in ("dp_attention_mlp", "dp_attention_padding"):
            if getattr(roofline, name) is not None:
                raise ValueError(
                    f"{where}.{name}: it sets the attention-DP layout, which needs parallelism.dp_attention > 1"
                )
    if roofline is not None:
        nested: dict[str, Any] = {}
        if roofline.cpu_overlap is None and roofline is not params:
            nested["cpu_overlap"] = traits.overlaps_cpu
        if roofline.expert_all_to_all is None:
            nested["expert_all_to_all"] = traits.engine == "vllm" and dp_attention > 1 and ep > 1
        if roofline.all_to_all_kernel != "engine":
            _check_nvlink_all_to_all(params, roofline, nested, traits.engine)
        if roofline.dp_attention_mlp is None:
            nested["dp_attention_mlp"] = "local" if traits.dp_attention_local_mlp else "gathered"
        local = nested.get("dp_attention_mlp", roofline.dp_attention_mlp) == "local"
        if roofline.dp_attention_scattered and (dp_attention == 1 or local):
            raise ValueError(
                f"{where}.dp_attention_scattered: SGLang's scattered layers need attention data "
                "parallelism (parallelism.dp_attention > 1) in the gathered layout (dp_attention_mlp: gathered)"
            )
        if roofline.dp_attention_scattered is None:
            gathered = nested.get("dp_attention_mlp", roofline.dp_attention_mlp) == "gathered"
            all_to_all = nested.get("expert_all_to_all", roofline.expert_all_to_all)
            moving = (bool(all_to_all) and ep > 1) or fp4_allgather(policy, model, ep, dp_attention)
            nested["dp_attention_scattered"] = scattered_layers(gathered and dp_attention > 1, moving, policy)
        if roofline.dp_attention_padding is None:
            nested["dp_attention_padding"] = traits.dp_attention_padding
        if roofline.eager_host_s_per_layer is None:
            eager = (traits.eager_prefill or enforce_eager) and model is not None
            nested["eager_host_s_per_layer"] = measured_eager_host_s_per_layer(model) if eager else 0.0
        if piecewise_graph_max_tokens and not roofline.piecewise_graph_max_tokens:
            nested["piecewise_graph_max_tokens"] = piecewise_graph_max_tokens
        if roofline is params:
            update |= nested
        elif nested:
            update["roofline"] = roofline.model_copy(update=nested)
    return params.model_copy(update=update) if update else params


def fp4_allgather(policy: Any, model: ModelSpec | None, ep: int, dp_attention: int) -> bool:
    """SGLang's ``should_use_flashinfer_cutlass_moe_fp4_allgather`` (python/sglang/srt/layers/moe/utils.py): the
    flashinfer_cutlass MoE runner with NVFP4 experts, attention DP and ep equal to the DP size all-gathers each rank's
    FP4-quantized tokens for the routed experts (without an all-to-all backend, the caller's other case)."""
    return (
        getattr(policy, "moe_runner_backend", None) == "flashinfer_cutlass"
        and model is not None
        and model.is_moe
        and model.quantization == "nvfp4"
        and dp_attention > 1
        and ep == dp_attention
    )


def scattered_layers(gathered_dp: bool, moe_scattered: bool, policy: Any) -> tuple[str, ...]:
    """What SGLang runs on each attention-DP rank's own tokens under the gathered layout (``gathered_dp``), from its
    flags (python/sglang/srt/layers/communicator.py, ``LayerScatterModes._compute_mlp_mode``): the MoE layers'
    router and shared experts where the routed experts' tokens travel by themselves (``moe_scattered``: an
    all-to-all backend, or ``fp4_allgather``), the dense layers with ``moe_dense_tp_size`` 1, the LM head with
    ``enable_dp_lm_head`` (the policy's, where it has them)."""
    if not gathered_dp:
        return ()
    out = ("moe",) if moe_scattered else ()
    if getattr(policy, "moe_dense_tp_size", None) == 1:
        out += ("dense",)
    if getattr(policy, "enable_dp_lm_head", False):
        out += ("lm_head",)
    return out


def _speculation(cfg: ScenarioConfig, replica_id: int, engine_id: int) -> Speculation | None:
    spec = cfg.speculative
    if spec is None:
        return None
    probs = acceptance_probabilities(spec.num_tokens, spec.acceptance_rate, spec.acceptance_lengths)
    return Speculation(spec.num_tokens, probs, rng_for(cfg.seed, Stream.SPECULATION, replica_id, engine_id))


def _proposer(
    cfg: ScenarioConfig,
    model: ModelSpec,
    base_dir: Path | None,
    quantization: str | None,
    kv_dtype: str,
    engine: str,
) -> ModelSpec | None:
    """Speculative decoding's proposer: the draft model (deployed as the model is: its quantization and KV
    dtype), or the MTP module (one decoder layer of the deployed model's shapes, routed if the model's are,
    sharing its embedding and LM head); None without speculation."""
    spec = cfg.speculative
    if spec is None:
        return None
    if spec.method == "draft":
        assert spec.draft_model is not None
        try:
            draft = resolve_model(spec.draft_model, base_dir)
        except ValueError as exc:
            raise ValueError(f"speculative.draft_model: {exc}") from None
        return deployed_model(draft, quantization, kv_dtype, engine=engine)
    # a hybrid model's MTP layer is a full-attention decoder layer (Qwen3.5's mtp_num_hidden_layers)
    mtp = model.model_copy(update={"name": f"{model.name} MTP", "num_layers": 1, "num_dense_layers": 0})
    return mtp.as_full_attention() if mtp.num_linear_layers else mtp


def _proposer_weight_bytes(cfg: ScenarioConfig, proposer: ModelSpec | None) -> float:
    """Weights the proposer adds: a whole draft model, or the MTP module's one layer (the embedding and LM head
    are the model's own)."""
    if proposer is None:
        return 0.0
    assert cfg.speculative is not None
    if cfg.speculative.method == "draft":
        return proposer.weight_bytes_total()
    two = proposer.model_copy(update={"num_layers": 2})
    return two.weight_bytes_total() - proposer.weight_bytes_total()


def _make_replica(
    env: simpy.Environment,
    replica_id: int,
    setup: GroupSetup,
    cfg: ScenarioConfig,
    recorder: MetricsRecorder,
    cost_model: CostModel,
    check_invariants: bool,
    fast_forward: bool = True,
) -> Replica:
    g, model, hw, tp, pp = setup.group, setup.model, setup.hardware, setup.tp, setup.pp
    kvc = g.kv_cache or cfg.kv_cache
    policy_params = setup.policy
    policy_entry = policies.BATCH_POLICIES.entry(policy_params.kind)
    dp = setup.dp_attention
    kv_per_token = model.kv_bytes_per_token_per_gpu(tp, pp, dp, setup.windowed)
    if setup.proposer is not None:  # the proposer keeps its own KV for every token, in the same blocks
        kv_per_token += setup.proposer.kv_bytes_per_token_per_gpu(tp)
    block_bytes = kv_per_token * kvc.block_size
    window = None
    if setup.windowed:  # the sliding layers' blocks per sequence, in the pool's blocks
        window = sliding_window_blocks(model, tp, pp, dp, kvc.block_size, setup.proposer)
    host_link = Link(hw.host_link_bandwidth_bytes_per_s, hw.host_link_latency_s)
    interconnect = Link(hw.interconnect_bandwidth_bytes_per_s, hw.interconnect_latency_s)
    stages = [simpy.Resource(env, capacity=1) for _ in range(pp)] if pp > 1 else None

    def handoff_s(shape) -> float:
        # activations of every token computed, split over the tp GPUs of a stage
        return interconnect.time_s(shape.num_new_tokens * model.hidden_size * 2 / tp)

    engines: list[Engine] = []
    group = None
    if dp > 1:  # attention data parallelism: dp ranks stepping together
        assert isinstance(cost_model, DpAttentionCostModel) and stages is None
        group = LockstepGroup(env, cost_model, context_balance(policy_params, policy_entry.traits.engine, dp))
    for e in range(pp * dp):  # pipeline virtual engines, or attention-DP ranks (never both)
        blocks = setup.num_blocks // (pp * dp)
        swap = HostPool(int(kvc.swap_space_bytes // block_bytes))
        if kvc.prefix_caching:
            kv = PrefixCache(blocks, kvc.block_size, int(kvc.host_cache_bytes // block_bytes), swap)
        elif window is not None:
            budget = getattr(policy_params, "max_num_batched_tokens", None)
            kv = WindowedBlockManager(blocks, kvc.block_size, window, swap, budget)
        else:
            kv = BlockManager(blocks, kvc.block_size, swap)
        engine_kwargs = {} if group is None else {"group": group}
        engines.append(
            (Engine if group is None else LockstepEngine)(
                env,
                policy_entry.factory(policy_params),
                policy_entry.traits,
                cost_model,
                kv,
                recorder,
                setup.max_model_len,
                replica_id=replica_id,
                engine_id=e,
                role=g.role,
                host_link=host_link,
                block_bytes=block_bytes,
                stages=stages,
                handoff_s=handoff_s if stages else None,
                check_invariants=check_invariants,
                speculation=_speculation(cfg, replica_id, e),
                fast_forward=fast_forward,
                plans_ahead=_cpu_overlap(setup.cost_model),
                **engine_kwargs,
                recv_interval=getattr(policy_params, "scheduler_recv_interval", 1),
            )
        )
    if group is None:
        return Replica(replica_id, setup.name, g.role, engines, env)
    return Replica(replica_id, setup.name, g.role, engines, env, rank_chooser(policy_entry.traits.engine, engines))


def make_cost_model(
    params: Any,
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int = 1,
    pp: int = 1,
    profile: CalibrationProfile | None = None,
    ep: int = 1,
    dp_attention: int = 1,
) -> CostModel:
    """A cost model from its validated parameters (``profile`` for those that read one).

    ``build`` makes one per replica group, shared by its replicas and engines: step times
    are pure functions of the batch shape, so its memos serve them all. With attention data
    parallelism (``dp_attention`` > 1) it is a ``DpAttentionCostModel`` over two of them: the
    ranks' attention on tp/dp_attention GPUs (ep 1) and the shared layers on all tp (and ep).
    """
    kwargs: dict[str, Any] = {} if profile is None else {"profile": profile}
    if ep != 1:
        kwargs["ep"] = ep
    shared = COST_MODELS.get(params.kind)(params, model, hardware, tp, pp, **kwargs)
    if dp_attention == 1:
        return shared
    kwargs.pop("ep", None)
    attention_tp = tp // dp_attention
    attention = COST_MODELS.get(params.kind)(params, model, hardware, attention_tp, pp, **kwargs)
    # the engine's attention-DP layout (RooflineParams.dp_attention_*); SGLang's for a model without the settings
    roofline = _roofline_params(params)
    local = roofline is not None and roofline.dp_attention_mlp == "local"
    scattered = frozenset(roofline.dp_attention_scattered or ()) if roofline is not None and not local else frozenset()
    exchange = None
    if (local or "moe" in scattered) and model.is_moe:
        exchange = exchange_bytes_per_row(
            model.hidden_size, model.num_experts_per_token, model.quantization, roofline.activation_bytes
        )
    return DpAttentionCostModel(
        attention,
        shared,
        dp_attention,
        attention_tp=attention_tp,
        dense_layer_share=model.num_dense_layers / model.num_layers,
        cpu_overlap=_cpu_overlap(params),
        local_mlp=local,
        exchange_bytes_per_row=exchange,
        padding=(roofline.dp_attention_padding if roofline is not None else None) or "sglang",
        scattered=scattered,
        moe=model.is_moe,
    )


def _kv_transfer(cfg: ScenarioConfig, setups: list[GroupSetup]) -> KvTransfer | None:
    prefill = [s for s in setups if s.group.role == "prefill"]
    if not prefill:
        return None
    hw = prefill[0].hardware
    t = cfg.kv_transfer
    others = sorted({s.hardware.name for s in prefill} - {hw.name})
    if others and (t.bandwidth_bytes_per_s is None or t.latency_s is None):
        raise ValueError(
            f"kv_transfer: the prefill groups run on {hw.name} and {', '.join(others)}, whose interconnects differ; "
            "give the link's bandwidth_bytes_per_s and latency_s"
        )
    link = Link(
        t.bandwidth_bytes_per_s if t.bandwidth_bytes_per_s is not None else hw.interconnect_bandwidth_bytes_per_s,
        t.latency_s if t.latency_s is not None else hw.interconnect_latency_s,
    )
    return KvTransfer(link, t.layerwise_overlap)


def _check_priorities(cfg: ScenarioConfig, stream: RequestStream) -> None:
    """ValueError when requests carry priorities that a group's policy would not read (it serves them in arrival
    order): vLLM refuses a non-zero priority unless it schedules by priority (``--scheduling-policy priority``)."""
    if stream.priority is None or not stream.priority.any():
        return
    for g in cfg.replica_groups():
        kind = (g.policy or cfg.policy).kind
        if not policies.batching.traits_of(kind).by_priority:
            raise ValueError(
                f"workload: its requests carry priorities (workload.classes' priority, or a trace's priority column), "
                f"which policy {kind} does not schedule by; use policy priority (vLLM's --scheduling-policy "
                "priority), or leave the priorities at 0"
            )


def build(
    cfg: ScenarioConfig,
    base_dir: Path | None = None,
    stream: RequestStream | None = None,
    check_invariants: bool = False,
    record_steps: bool = True,
    fast_forward: bool = True,
    cost_model_for: Callable[..., CostModel] | None = None,
) -> Simulation:
    """Wire a simulation of ``cfg``; ``stream`` replaces the generated workload when given.

    ``fast_forward=False`` keeps the plain path: the policy plans every single step (the
    reference the fast path is tested against). ``cost_model_for`` makes each group's cost
    model in place of ``make_cost_model`` (same arguments): a caller that runs many scenarios
    of one deployment may hand back a model it kept, step times being pure functions of the
    batch shape (``simulator/planning/search/shared.py``).

    Raises ValueError for configurations that cannot run (unknown presets, a model that
    does not fit, a tp that does not divide the heads).
    """
    setups = [setup_group(cfg, g, i, base_dir) for i, g in enumerate(cfg.replica_groups())]
    if stream is None:
        stream = generate(cfg.workload, cfg.seed, base_dir)
    _check_priorities(cfg, stream)
    env = simpy.Environment()
    recorder = MetricsRecorder(record_steps=record_steps)
    ids = itertools.count()
    replicas = []
    make = cost_model_for or make_cost_model
    for s in setups:
        params = s.cost_model
        cost_model = make(params, s.model, s.hardware, s.tp, s.pp, s.profile, s.ep, s.dp_attention)
        if s.proposer is not None and cfg.speculative is not None:
            # a profile times its own model only: the proposer takes the datasheet roofline then
            proposer_params = COST_MODELS.entry("roofline").params() if params.kind == "profiled" else params
            # the MTP module's experts are split as the model's; a draft model is dense or runs ep 1
            ep = s.ep if cfg.speculative.method == "mtp" else 1
            proposer_cost = make(proposer_params, s.proposer, s.hardware, s.tp, 1, None, ep)
            cost_model = SpeculativeCostModel(
                cost_model, proposer_cost, cfg.speculative.num_tokens, cpu_overlap=_cpu_overlap(params)
            )
        replicas += [
            _make_replica(env, next(ids), s, cfg, recorder, cost_model, check_invariants, fast_forward)
            for _ in range(s.group.count)
        ]
    # one router per pool: a disaggregated cluster routes arrivals over its prefill replicas and
    # prefilled requests over its decode replicas, each pool with its own router state
    make_router = policies.ROUTERS.get(cfg.router.kind)
    router = make_router(cfg.router, rng_for(cfg.seed, Stream.ROUTING))
    disaggregated = any(s.group.role == "decode" for s in setups)
    decode_router = make_router(cfg.router, rng_for(cfg.seed, Stream.DECODE_ROUTING)) if disaggregated else None
    return Simulation(
        env,
        replicas,
        router,
        stream,
        recorder,
        resolved_config(cfg, setups, base_dir),
        cfg.slo.model_dump(),
        cfg.client.ingest_delay_s,
        cfg.client.stream_delay_s,
        _kv_transfer(cfg, setups),
        tokenize_s_per_token=cfg.client.tokenize_s_per_token,
        decode_router=decode_router,
    )


def resolved_config(cfg: ScenarioConfig, setups: list[GroupSetup], base_dir: Path | None = None) -> dict[str, Any]:
    """The config as run: presets spelt out, a profile by its absolute path, and per group its
    resolved specs and KV capacity."""
    first = setups[0]
    out = cfg.model_dump(mode="json") | {
        "model": first.model.model_dump(mode="json"),
        "hardware": first.hardware.model_dump(mode="json"),
        "max_model_len": first.max_model_len,
        "kv_cache": cfg.kv_cache.model_dump(mode="json") | {"num_blocks": first.num_blocks},
    }
    if first.group.policy is None:  # the scenario's policy as the first group runs it
        out["policy"] = first.policy.model_dump(mode="json")
    path = profile_path(cfg.cost_model, base_dir)
    if path is not None:  # so that a report read from elsewhere finds it
        out["cost_model"]["profile"] = str(path)
    out["resolved_groups"] = [
        {
            "name": s.name,
            "role": s.group.role,
            "count": s.group.count,
            "model": s.model.model_dump(mode="json"),
            "hardware": s.hardware.model_dump(mode="json"),
            "tp": s.tp,
            "pp": s.pp,
            "ep": s.ep,
            "dp_attention": s.dp_attention,
            "policy": s.policy.model_dump(mode="json"),
            "cost_model": s.cost_model.model_dump(mode="json"),
            "num_blocks_per_replica": s.num_blocks,
            "max_model_len": s.max_model_len,
        }
        for s in setups
    ]
    return out
