"""How many KV blocks a replica's GPUs leave after weights and the runtime, sized the way each engine sizes it.

The engines take different fractions of different figures: vLLM a fraction of device memory less weights and
the profiled reserve (``plan_memory``), SGLang a fraction of device memory for weights plus KV
(``plan_sglang_memory``), TensorRT-LLM a fraction of what weights and a profiling step leave free
(``plan_trtllm_memory``). Each function names the engine source it follows; all return a ``MemoryPlan``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.config.specs import HardwareSpec, ModelSpec

GIB = 2**30
MIB = 2**20

TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9
"""TensorRT-LLM's default ``free_gpu_memory_fraction`` (``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig``,
"Default is 90%"; ``trtllm-serve --kv_cache_free_gpu_memory_fraction`` defaults to 0.9 too)."""

# SGLang's default --mem-fraction-static, as sglang 0.5.23 computes it (python/sglang/srt/arg_groups/memory_hook.py,
# handle_gpu_memory_settings and reserve_for_graph_mb; server_args.py _handle_gpu_memory_settings before the
# arg_groups split, same terms). All figures in MiB, as SGLang reads the GPU's memory (nvidia-smi memory.total).
SGLANG_RESERVE_BASE_MIB = 512
"""``reserved_mem = 512``: "constant meta data (e.g., from attention backend)"."""
SGLANG_ACTIVATION_MIB_PER_TOKEN = 1.5
"""``activation_tokens * 1.5``: activation slack per token of the largest prefill step."""
SGLANG_MIN_ACTIVATION_TOKENS = 2048
"""``max(chunked_prefill_size, 2048)``: the activation term counts at least this many tokens."""
SGLANG_PARALLEL_MIB = 1024 / 8
"""``tp_size * pp_size / 8 * 1024``: "adjustments for large parallel size", per GPU of the replica."""
SGLANG_DECODE_GRAPH_MIB_PER_BS = 2
"""``decode max_bs * 2``: decode CUDA graphs, per request of the largest captured batch."""
SGLANG_PREFILL_GRAPH_MIB_PER_SIZE = 8
"""``len(prefill bs) * 8``: prefill (breakable) CUDA graphs, per captured token count, without MLA."""
SGLANG_MLA_PREFILL_GRAPH_MIB = 1.5 * 1024
"""``1.5 * 1024``: prefill CUDA graphs under an MLA attention backend ("much higher than expected")."""
SGLANG_PP_PREFILL_GRAPH_MAX_TOKENS = 8192
"""``_DEFAULT_PP_PREFILL_CUDA_GRAPH_MAX_TOKENS``: with pp > 1 prefill graphs are captured up to this many tokens."""
SGLANG_DP_GRAPH_MIB_PER_BS = 3
"""``decode max_bs * dp_size * 3``: decode CUDA graphs' DP-attention padding, per request of the largest batch and
DP rank."""
SGLANG_DP_LARGE_BS = 300
SGLANG_DP_LARGE_GRAPH_MIB_PER_BS = 1.5
"""``if max_bs > 300: += max_bs * dp_size * 1.5``: more again for large decode graphs under DP attention."""
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9
"""SGLang's ``--mamba-full-memory-ratio`` default (``ServerArgs.mamba_full_memory_ratio``, sglang 0.5.9 and 0.5.10):
a hybrid linear-attention model's state pool takes ``ratio / (1 + ratio)`` of the memory the weights leave in the
static pool, the full-attention KV cache the rest (``handle_max_mamba_cache``,
``model_runner_kv_cache_mixin.py``)."""
SGLANG_FLOOR_ABOVE_MIB = 60 * 1024
SGLANG_RESERVE_FLOOR_MIB = 10 * 1024
"""``if gpu_mem > 60 * 1024: reserved_mem = max(reserved_mem, 10 * 1024)``: at least 10 GiB on large GPUs."""


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-GPU memory budget of one replica and the KV blocks it leaves.

    For every engine ``kv_bytes = usable_bytes - weight_bytes - reserve_bytes``: ``usable_bytes`` is what the
    engine lets itself hold (weights, the reserve it counts and the KV cache).
    """

    usable_bytes: float
    weight_bytes: float
    reserve_bytes: float
    kv_bytes: float
    block_bytes: float
    num_blocks: int
    # a hybrid linear-attention model's recurrent states: the sequences the engine holds them for (SGLang's
    # MambaPool slots, sized apart from the KV blocks; vLLM and TensorRT-LLM: its most running sequences) and the
    # bytes they take per GPU (in reserve_bytes); None and 0 for a model without linear layers
    state_slots: int | None = None
    state_bytes: float = 0.0


def default_reserve_bytes(model: ModelSpec, tp: int, max_batched_tokens: int = 8192, max_seqs: int = 256) -> float:
    """Activation peak and runtime memory besides weights and KV, per GPU (an estimate).

    1 GiB for the CUDA context, cuBLAS workspaces and graphs, plus the activations of a
    step of ``max_batched_tokens`` tokens (residual, QKV and MLP intermediates in bf16)
    and fp32 logits for ``max_seqs`` sampled rows. Calibration measures the real figure.
    """
    act = max_batched_tokens * (4 * model.hidden_size + 3 * model.intermediate_size / tp) * 2
    logits = max_seqs * model.vocab_size / tp * 4
    return float(2**30 + act + logits)


@dataclass(frozen=True, slots=True)
class _PerGpu:
    """What every engine starts from: one GPU's memory, its share of the weights, one KV block's bytes."""

    model: ModelSpec
    hardware: HardwareSpec
    tp: int
    pp: int
    block_size: int
    device_bytes: float
    weight_bytes: float
    block_bytes: float
    dp_attention: int = 1

    @property
    def layout(self) -> str:
        """``on H200 with tp=8, pp=1`` (and the attention-DP size when there is one), for error messages."""
        dp = f", dp_attention={self.dp_attention}" if self.dp_attention > 1 else ""
        return f"on {self.hardware.name} with tp={self.tp}, pp={self.pp}{dp}"


def _per_gpu(
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    pp: int,
    block_size: int,
    weight_bytes: float | None,
    memory_bytes: float | None,
    extra_weight_bytes: float,
    extra_kv_bytes_per_token: float,
    dp_attention: int = 1,
    windowed: bool = False,
    per_rank: frozenset[str] = frozenset(),
) -> _PerGpu:
    """With attention data parallelism (``dp_attention`` > 1) each GPU holds the attention group's weights split
    tp/dp_attention ways (``ModelSpec.weight_bytes_per_gpu``) and the KV of its own rank's requests only, their
    heads split tp/dp_attention ways: the block count is one rank's pool (``per_rank``: the parts the layout holds
    whole on each rank beside attention, ``ModelSpec.attention_group_weight_bytes``). ``windowed``: the engine holds a
    sliding-window layer's keys for the window only, so a block is the full-attention layers'
    (``ModelSpec.kv_bytes_per_token_per_gpu``)."""
    device = hardware.memory_bytes if memory_bytes is None else memory_bytes
    weights = (
        model.weight_bytes_per_gpu(tp, pp, dp_attention, per_rank) if weight_bytes is None else weight_bytes / (tp * pp)
    )
    weights += extra_weight_bytes / tp  # a speculative proposer's, split over the tp GPUs
    per_token = model.kv_bytes_per_token_per_gpu(tp, pp, dp_attention, windowed)
    block_bytes = (per_token + extra_kv_bytes_per_token) * block_size
    return _PerGpu(model, hardware, tp, pp, block_size, device, weights, block_bytes, dp_attention)


def _plan(g: _PerGpu, usable: float, reserve: float, kv_bytes: float, budget: str, block_hint: str) -> MemoryPlan:
    """The plan, or ValueError naming the figures (``budget``) when not one KV block fits."""
    num_blocks = int(kv_bytes // g.block_bytes) if kv_bytes > 0 else 0
    if num_blocks < 1:
        where = f"{g.model.name} {g.layout}"
        if kv_bytes <= 0:
            raise ValueError(
                f"{g.model.name} does not fit {g.layout}: {budget}, which leaves "
                "nothing for the KV cache; use a larger tp or pp, or a device with more memory"
            )
        raise ValueError(
            f"{where}: one KV block of {g.block_size:,} tokens takes {g.block_bytes / GIB:,.3g} GiB per GPU, more "
            f"than the {kv_bytes / GIB:,.3g} GiB left for the KV cache ({budget}); use a smaller "
            f"kv_cache.block_size{block_hint}"
        )
    return MemoryPlan(usable, g.weight_bytes, reserve, kv_bytes, g.block_bytes, num_blocks)


def plan_memory(
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    block_size: int,
    gpu_memory_utilization: float,
    reserve_bytes: float | None = None,
    pp: int = 1,
    weight_bytes: float | None = None,
    memory_bytes: float | None = None,
    extra_weight_bytes: float = 0.0,
    extra_kv_bytes_per_token: float = 0.0,
    dp_attention: int = 1,
    max_seqs: int | None = None,
    windowed: bool = False,
    per_rank: frozenset[str] = frozenset(),
) -> MemoryPlan:
    """vLLM's KV blocks per replica: (memory x gpu_memory_utilization - weights/(tp pp) - reserve) / bytes per block.

    vLLM V1's ``Worker.determine_available_memory`` (``vllm/v1/worker/gpu_worker.py``): the memory requested,
    ``total x gpu_memory_utilization``, less what a profiling step of ``max_num_batched_tokens`` consumed
    (weights, the activation peak, memory outside torch); the reserve is servesim's estimate of the last two
    (``default_reserve_bytes``) unless given. The default utilization is ``kv_cache.gpu_memory_utilization``'s
    0.9, vLLM's up to 0.19; vLLM 0.20 to 0.33 default to 0.92 and also subtract a CUDA-graph memory estimate
    (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` on), vLLM 0.34 sizes the cache after graph capture.

    Every GPU holds its share of the weights and the KV of its layers for every token, so
    the block count is the same on all of them (the fullest pipeline stage decides).

    ``weight_bytes`` and ``memory_bytes`` replace the figures computed from the specs when
    given (a calibration profile measured them on the device: weights as loaded, total
    device memory). ``extra_weight_bytes`` (split over tp) and ``extra_kv_bytes_per_token``
    (per GPU) are a speculative proposer's weights and KV. ``dp_attention`` > 1 (attention data
    parallelism): each GPU holds the attention group's weights split tp/dp_attention ways and only its
    rank's KV, so the blocks are one rank's pool (each of the dp_attention ranks has its own). Raises
    ValueError with the figures when the weights do not leave room for one block.

    A hybrid linear-attention model's recurrent states (``ModelSpec.linear_state_bytes_per_seq_per_gpu``) come
    from the same pool in vLLM (a ``MambaSpec`` KV-cache group, one block a sequence, its page padded to the
    attention layers'; ``vllm/v1/core/kv_cache_utils.py``): they are set aside for ``max_seqs`` sequences (the
    policy's max_num_seqs), the most that run at once.

    ``windowed`` (vLLM V1 with sliding-window layers beside full ones): a block is ``block_size`` tokens of the
    full-attention layers, as vLLM's pages of one KV-cache group (``get_num_blocks``: memory / page bytes / group
    size); the sliding layers' window blocks come from the same pool per sequence (simulator/kv/window.py).
    """
    g = _per_gpu(
        model,
        hardware,
        tp,
        pp,
        block_size,
        weight_bytes,
        memory_bytes,
        extra_weight_bytes,
        extra_kv_bytes_per_token,
        dp_attention,
        windowed,
        per_rank=per_rank,
    )
    usable = g.device_bytes * gpu_memory_utilization
    reserve = default_reserve_bytes(model, tp) if reserve_bytes is None else reserve_bytes
    slots, state = _states(model, tp, dp_attention, max_seqs, "max_num_seqs")
    budget = (
        f"weights take {g.weight_bytes / GIB:,.1f} GiB per GPU and the reserve {reserve / GIB:,.1f} GiB"
        f"{_states_note(slots, state)}, of {usable / GIB:,.1f} GiB usable (memory x gpu_memory_utilization)"
    )
    plan = _plan(
        g, usable, reserve + state, usable - g.weight_bytes - reserve - state, budget, " (vLLM's default is 16)"
    )
    return _with_states(plan, slots, state)


def _states(
    model: ModelSpec, tp: int, dp_attention: int, max_seqs: int | None, setting: str
) -> tuple[int | None, float]:
    """A hybrid model's state slots and their bytes per GPU when set aside for ``max_seqs`` sequences (vLLM,
    TensorRT-LLM); (None, 0) without linear layers. ValueError where the engine's cap is unknown."""
    per_seq = model.linear_state_bytes_per_seq_per_gpu(tp // dp_attention)
    if not per_seq:
        return None, 0.0
    if max_seqs is None:
        raise ValueError(
            f"{model.name} keeps a recurrent state per sequence: the policy's {setting} must be known to size them"
        )
    return max_seqs, max_seqs * per_seq


def _states_note(slots: int | None, state: float) -> str:
    return "" if slots is None else f", the recurrent states of {slots:,} sequences {state / GIB:,.1f} GiB"


def _with_states(plan: MemoryPlan, slots: int | None, state: float) -> MemoryPlan:
    return plan if slots is None else replace(plan, state_slots=slots, state_bytes=state)


def sglang_decode_graph_max_bs(gpu_memory_mib: float, tp: int) -> int:
    """SGLang's default ``cuda_graph_config[decode].max_bs`` for a GPU (``handle_gpu_memory_settings``' tiers)."""
    if gpu_memory_mib < 20 * 1024:  # T4, 4080
        return 8
    if gpu_memory_mib < 35 * 1024:  # A10, 4090, 5090
        return 48 if tp < 4 else 160
    if gpu_memory_mib < 60 * 1024:  # A100-40GB, L40
        return 32 if tp < 4 else 160
    if gpu_memory_mib < 160 * 1024:  # H100, A100-80GB, H20, H200
        return 256 if tp < 4 else 512
    return 512  # B200, MI300


def sglang_prefill_graph_count(max_tokens: int) -> int:
    """How many prefill token counts SGLang captures up to ``max_tokens`` (``generate_prefill_cuda_graph_batch_sizes``:
    4-32 by 4, 48-256 by 16, 288-512 by 32, 576-1024 by 64, 1280-4096 by 256, then by 512)."""
    steps = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256), (4608, max_tokens, 512))
    return sum(len(range(lo, min(hi, max_tokens) + 1, step)) for lo, hi, step in steps)


def sglang_mem_fraction_static(
    gpu_memory_bytes: float,
    chunked_prefill_size: int,
    tp: int,
    pp: int = 1,
    *,
    max_prefill_tokens: int = 16384,
    max_running_requests: int | None = None,
    mla: bool = False,
    dp_attention: int = 1,
) -> float:
    """SGLang's default ``--mem-fraction-static``: ``round((gpu_mem - reserved_mem) / gpu_mem, 3)``, in MiB.

    sglang 0.5.23 ``handle_gpu_memory_settings`` (``python/sglang/srt/arg_groups/memory_hook.py``), for a
    replica serving both phases without DP attention or DeepEP: ``reserved_mem`` = 512 + 1.5 x max(the
    chunked prefill size, or max_prefill_tokens without chunking, 2048) + tp x pp / 8 x 1024 + the CUDA
    graphs (``reserve_for_graph_mb``: 2 per request of the decode graphs' max batch, capped by
    ``max_running_requests``; 8 per captured prefill size up to the chunk, or 1.5 GiB under MLA), at least
    10 GiB on GPUs of more than 60 GiB. SGLang turns prefill graphs off in some deployments (DP attention,
    DeepSeek-V3 on the trtllm_mla backend, multimodal models), leaving out their term; not modelled here.
    With attention data parallelism (``dp_attention`` > 1, ``--enable-dp-attention --dp-size``) the graphs
    take ``max_bs x dp x 3`` more, and ``max_bs x dp x 1.5`` more again above a max_bs of 300 ("DP attention
    needs more padding for some operations", ``reserve_for_graph_mb``, sgl-project/sglang 031ed82; a prefill
    server, ``--disaggregation-mode prefill``, skips it: not told apart here).
    """
    gpu_mib = gpu_memory_bytes / MIB
    activation_tokens = max(chunked_prefill_size if chunked_prefill_size > 0 else max_prefill_tokens, 2048)
    max_bs = sglang_decode_graph_max_bs(gpu_mib, tp)
    if max_running_requests is not None:
        max_bs = min(max_bs, max_running_requests)
    if mla:
        prefill_graphs = SGLANG_MLA_PREFILL_GRAPH_MIB
    else:
        prefill_max = chunked_prefill_size if pp == 1 else min(chunked_prefill_size, SGLANG_PP_PREFILL_GRAPH_MAX_TOKENS)
        prefill_graphs = sglang_prefill_graph_count(prefill_max) * SGLANG_PREFILL_GRAPH_MIB_PER_SIZE
    reserved = (
        SGLANG_RESERVE_BASE_MIB
        + max(activation_tokens, SGLANG_MIN_ACTIVATION_TOKENS) * SGLANG_ACTIVATION_MIB_PER_TOKEN
        + tp * pp * SGLANG_PARALLEL_MIB
        + max_bs * SGLANG_DECODE_GRAPH_MIB_PER_BS
        + prefill_graphs
    )
    if dp_attention > 1:
        reserved += max_bs * dp_attention * SGLANG_DP_GRAPH_MIB_PER_BS
        if max_bs > SGLANG_DP_LARGE_BS:
            reserved += max_bs * dp_attention * SGLANG_DP_LARGE_GRAPH_MIB_PER_BS
    if gpu_mib > SGLANG_FLOOR_ABOVE_MIB:
        reserved = max(reserved, SGLANG_RESERVE_FLOOR_MIB)
    return round((gpu_mib - reserved) / gpu_mib, 3)


def plan_sglang_memory(
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    block_size: int,
    pp: int = 1,
    *,
    chunked_prefill_size: int,
    mem_fraction_static: float | None = None,
    max_prefill_tokens: int = 16384,
    max_running_requests: int | None = None,
    weight_bytes: float | None = None,
    memory_bytes: float | None = None,
    extra_weight_bytes: float = 0.0,
    extra_kv_bytes_per_token: float = 0.0,
    dp_attention: int = 1,
    max_mamba_cache_size: int | None = None,
    per_rank: frozenset[str] = frozenset(),
) -> MemoryPlan:
    """SGLang's KV blocks per replica: (memory x mem_fraction_static - weights/(tp pp)) / bytes per block.

    SGLang's static pool (weights and KV) is ``mem_fraction_static`` of the memory free before the weights
    load; the KV cache is what the loaded weights leave of it (``KVCacheConfigurator._profile_available_bytes``,
    ``python/sglang/srt/mem_cache/kv_cache_configurator.py``: free memory after loading less
    ``pre_model_load_memory x (1 - mem_fraction_static)``). The memory free before loading is taken as the
    device's (the CUDA context and NCCL buffers SGLang measures around are not modelled); activations and CUDA
    graphs live in the rest, so no reserve is subtracted. ``mem_fraction_static`` None: SGLang's default
    (``sglang_mem_fraction_static``; ``max_prefill_tokens`` defaults to SGLang's 16384, ``ServerArgs``).
    Arguments otherwise as ``plan_memory``'s; ValueError with the figures when not one block fits.

    A hybrid linear-attention model's recurrent states live in a pool of their own, carved out first
    (``handle_max_mamba_cache``, ``model_runner_kv_cache_mixin.py``, sglang 0.5.9 and 0.5.10): its slots are
    ``max_mamba_cache_size`` when given, else ``max_running_requests`` when given (the radix cache off, as
    servesim's SGLang runs it), each divided among the attention-DP ranks, else
    ``SGLANG_MAMBA_FULL_MEMORY_RATIO / (1 + ratio)`` of what the weights leave, divided by one sequence's state;
    the KV cache takes the rest. ``state_slots`` caps the running requests (of a rank).
    """
    g = _per_gpu(
        model,
        hardware,
        tp,
        pp,
        block_size,
        weight_bytes,
        memory_bytes,
        extra_weight_bytes,
        extra_kv_bytes_per_token,
        dp_attention,
        per_rank=per_rank,
    )
    fraction = mem_fraction_static
    if fraction is None:
        fraction = sglang_mem_fraction_static(
            g.device_bytes,
            chunked_prefill_size,
            tp,
            pp,
            max_prefill_tokens=max_prefill_tokens,
            max_running_requests=max_running_requests,
            mla=model.is_mla,
            dp_attention=dp_attention,
        )
    usable = g.device_bytes * fraction
    rest = usable - g.weight_bytes
    per_seq = model.linear_state_bytes_per_seq_per_gpu(tp // dp_attention)
    slots: int | None = None
    state = 0.0
    if per_seq:
        # with attention DP each rank's pool is its share (handle_max_mamba_cache divides both by the dp size)
        given = max_mamba_cache_size or max_running_requests
        slots = None if given is None else max(given // dp_attention, 1)
        if slots is None:
            share = rest * SGLANG_MAMBA_FULL_MEMORY_RATIO / (1 + SGLANG_MAMBA_FULL_MEMORY_RATIO)
            slots = max(int(share // per_seq), 0)
        state = slots * per_seq
    budget = (
        f"weights take {g.weight_bytes / GIB:,.1f} GiB per GPU{_states_note(slots, state)} of the "
        f"{usable / GIB:,.1f} GiB static pool (memory x mem_fraction_static {fraction:g})"
    )
    if slots == 0:
        raise ValueError(
            f"{model.name} does not fit {g.layout}: {budget}, which leaves no room for one sequence's recurrent "
            f"state ({per_seq / GIB:,.3g} GiB)"
        )
    return _with_states(_plan(g, usable, state, rest - state, budget, ""), slots, state)


def plan_trtllm_memory(
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    block_size: int,
    free_gpu_memory_fraction: float | None = None,
    reserve_bytes: float | None = None,
    pp: int = 1,
    *,
    max_num_tokens: int = 8192,
    weight_bytes: float | None = None,
    memory_bytes: float | None = None,
    extra_weight_bytes: float = 0.0,
    extra_kv_bytes_per_token: float = 0.0,
    dp_attention: int = 1,
    max_batch_size: int | None = None,
    per_rank: frozenset[str] = frozenset(),
) -> MemoryPlan:
    """TensorRT-LLM's KV blocks per replica: free_gpu_memory_fraction x (memory - weights/(tp pp) - reserve).

    The PyTorch backend's ``KvCacheCreator._cal_max_memory`` (``tensorrt_llm/_torch/pyexecutor/_util.py``,
    read at NVIDIA/TensorRT-LLM 0004396): ``(total - peak + estimation KV) x fraction``, the peak measured over
    a profiling run of dummy requests filling ``max_num_tokens`` (weights, activations, memory outside torch:
    NCCL, CUDA graphs). The reserve is servesim's estimate of the activations and runtime for a
    ``max_num_tokens`` step (``default_reserve_bytes``; 8192 is TensorRT-LLM's default, ``BaseLlmArgs``) unless
    given. ``free_gpu_memory_fraction`` None: TensorRT-LLM's 0.9. Arguments otherwise as ``plan_memory``'s;
    ValueError with the figures when not one block fits. A hybrid linear-attention model's recurrent states are
    set aside for ``max_batch_size`` sequences first (TensorRT-LLM's ``MambaHybridCacheManager`` holds one state
    per request of the batch, ``tensorrt_llm/_torch/pyexecutor/mamba_cache_manager.py``).
    """
    g = _per_gpu(
        model,
        hardware,
        tp,
        pp,
        block_size,
        weight_bytes,
        memory_bytes,
        extra_weight_bytes,
        extra_kv_bytes_per_token,
        dp_attention,
        per_rank=per_rank,
    )
    fraction = TRTLLM_FREE_GPU_MEMORY_FRACTION if free_gpu_memory_fraction is None else free_gpu_memory_fraction
    reserve = default_reserve_bytes(model, tp, max_num_tokens) if reserve_bytes is None else reserve_bytes
    slots, state = _states(model, tp, dp_attention, max_batch_size, "max_batch_size")
    reserve += state
    free = g.device_bytes - g.weight_bytes - reserve
    kv_bytes = free * fraction
    budget = (
        f"weights take {g.weight_bytes / GIB:,.1f} GiB per GPU and the reserve {reserve / GIB:,.1f} GiB"
        f"{_states_note(slots, state)} of {g.device_bytes / GIB:,.1f} GiB, leaving {free / GIB:,.1f} GiB free "
        f"(KV: free_gpu_memory_fraction {fraction:g} of it)"
    )
    plan = _plan(
        g, g.weight_bytes + reserve + kv_bytes, reserve, kv_bytes, budget, " (TensorRT-LLM's tokens_per_block is 32)"
    )
    return _with_states(plan, slots, state)
