"""The batch-policy registry: name -> (policy class, its pydantic parameter model, its traits).

A policy's capabilities are declared where it is registered (``BatchTraits``), never probed
with ``getattr``: the config refuses a setting the policy cannot serve, the engine reads
what it may do, and registration fails when a class lacks what its traits declare (or has a
capability its traits leave out, which would otherwise be silently ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from policies.interface import BatchPolicy
from policies.registry import Registry


@dataclass(frozen=True, slots=True)
class BatchTraits:
    """What a batch policy declares about itself."""

    steady_decode: bool = False
    """It implements ``SteadyDecode.steady_decode``, so the engine may fast-forward decode steps."""
    reserves_kv: bool = False
    """Admission reserves KV for prompt + output (``StepPlan.kv_tokens``); a running request may hold KV it does
    not use yet, and a decode engine reserves a received request's whole output."""
    kv_transfer: bool = True
    """It can serve a prefill or a decode group of a disaggregated cluster."""
    prefix_caching: bool = True
    """It reuses cached prefixes (``kv_cache.prefix_caching`` may be on)."""
    by_priority: bool = False
    """It schedules by request priority (a request's ``priority``, from the workload's classes or a trace column);
    the others would serve prioritised requests in arrival order, so a workload that sets priorities is refused
    under them (vLLM itself rejects a non-zero priority unless ``--scheduling-policy priority``)."""
    engine: str = "vllm"
    """The serving engine whose kernels it runs: the framework measured kernel tables are read for (``vllm``,
    ``sglang`` or ``trtllm``; the generic policies take vLLM's)."""
    overlaps_cpu: bool = False
    """Its engine prepares the next step on the CPU while the GPU runs this one (vLLM V1's async scheduling,
    SGLang's and TensorRT-LLM's overlap schedulers), so a step takes the longer of its GPU and CPU times."""
    eager_prefill: bool = False
    """Its engine runs a step holding a prefill without a CUDA graph, launching every kernel from the host (SGLang,
    TensorRT-LLM and vLLM V0 capture decode-only batches; simulator/cost/eager.py)."""
    recomputes_first_token: bool = False
    """On a decode replica of a disaggregated cluster, its engine computes a received request's last prompt token
    again to sample the first output token, which reaches the client at that step's end (vLLM V1: the scheduler's
    ``_update_waiting_for_remote_kv`` leaves the last prompt token uncomputed when the whole prompt's KV was received,
    ``vllm/v1/core/sched/scheduler.py``; the prefill instance's own token is not sent). Otherwise the first token
    comes with the KV and reaches the client when it lands, or when it is admitted (``first_token_at_admission``)."""
    first_token_at_admission: bool = False
    """On a decode replica of a disaggregated cluster, its engine streams the first token that came with a received
    request's KV when it admits the request into its running batch, at the start of that step, not when the KV
    lands: SGLang's decode server moves a transferred request to its waiting queue, and ``get_new_prebuilt_batch``
    takes waiting requests into a "prebuilt" batch only while its running requests are fewer than
    ``max_running_requests``; ``process_batch_result_prebuilt`` then streams their first token
    (``python/sglang/srt/disaggregation/decode.py``). A request waiting for room waits for its first token."""
    seats_before_transfer: bool = False
    """On a decode replica of a disaggregated cluster, a received request takes one of the engine's request seats
    before its KV is sent (``TransferSeats.decode_seats``): TensorRT-LLM's capacity scheduler schedules a generation
    server's ``DISAGG_GENERATION_INIT`` requests beside the running ones under ``max_num_requests`` (its
    ``max_batch_size``), and only a scheduled one starts its transfer (``tensorrt_llm/_torch/pyexecutor/
    scheduler.py``, ``_schedule_guaranteed_no_evict``). So the time a request waits for a seat on a full generation
    server comes before its first token, which the client receives from that server."""
    windows_sliding_kv: bool = False
    """Its engine keeps a sliding-window layer's keys for the window only, out of the pool the full layers' blocks
    come from (vLLM V1's hybrid KV cache manager, simulator/kv/window.py): a sequence holds its full layers' blocks
    per token and its sliding layers' per window. Otherwise every layer's keys are held for every token (TensorRT-LLM
    1.0-1.2 without ``max_attention_window``; SGLang's separate window pool is not modelled)."""
    dp_attention_local_mlp: bool = False
    """With attention data parallelism its engine runs everything but the routed experts on each rank's own tokens
    at the rank's attention TP (the dense layers' MLP, the shared experts, the MoE router, the LM head), and the
    routed experts alone on every rank's tokens: the MoE module all-gathers them before the experts and
    reduce-scatters the experts' output after, with no all-reduce in the layer (TensorRT-LLM:
    ``tensorrt_llm/_torch/models/modeling_deepseekv3.py``, ``_compute_mlp_tp_size`` and
    ``_compute_shared_expert_tp_size`` give 1 with attention DP and ``Deepseekv3MoE.forward`` all-reduces only
    without it; the fused-MoE modules' ``allgather`` of the quantized tokens with ``sizes=all_rank_num_tokens``,
    ``modules/fused_moe/fused_moe_cutlass.py``; vLLM, whose DP ranks are engines of their own sharing only the
    experts, reached by DeepEP's all-to-all with ep > 1, else by the all-gather and reduce-scatter). Otherwise every
    MLP runs on the gathered rows split over all tp
    GPUs, gathered and reduced by two all-reduces a layer (SGLang's ``LayerCommunicator``, ``moe_dense_tp_size``
    None): simulator/cost/dp_attention.py."""
    dp_attention_padding: Literal["sglang", "largest", "none"] = "sglang"
    """With attention data parallelism, the rows a decode-only step's shared layers run at: "sglang", every rank
    padded to the largest where 2 x sum > N x max (SGLang's ``DpPaddingMode``); "largest", every rank padded to the
    largest (vLLM's ``_post_process_dp_padding`` where the ranks replay CUDA graphs); "none", the ranks' sum
    (TensorRT-LLM's ``all_rank_num_tokens``, no padding on SM100). simulator/cost/dp_attention.py."""
    hardware_defaults: bool = False
    """Its parameters leave some defaults to the GPU (the engine's own per-device defaults): its parameter model
    has ``resolve_for_hardware(device_memory_bytes, device_name)``, which ``build`` calls for each replica group."""


def _check_traits(name: str, factory: Any, traits: BatchTraits, params: Any = None) -> None:
    if not isinstance(traits, BatchTraits):
        raise TypeError(f"batch policy {name!r}: traits must be a BatchTraits, got {type(traits).__name__}")
    if not callable(getattr(factory, "plan_step", None)):
        raise TypeError(f"batch policy {name!r} has no plan_step method")
    has_resolve = callable(getattr(params, "resolve_for_hardware", None))
    if traits.hardware_defaults != has_resolve:
        raise TypeError(
            f"batch policy {name!r}: its traits {'declare' if traits.hardware_defaults else 'leave out'} "
            f"hardware_defaults but its parameters {'lack' if traits.hardware_defaults else 'have'} "
            "resolve_for_hardware"
        )
    if traits.first_token_at_admission and traits.recomputes_first_token:
        raise TypeError(
            f"batch policy {name!r}: its traits declare both recomputes_first_token and first_token_at_admission; "
            "a received request's first token is either sampled again or streamed when admitted"
        )
    has_seats = callable(getattr(factory, "decode_seats", None))
    if traits.seats_before_transfer != has_seats:
        raise TypeError(
            f"batch policy {name!r}: its traits {'declare' if traits.seats_before_transfer else 'leave out'} "
            f"seats_before_transfer but it {'lacks' if traits.seats_before_transfer else 'has'} a decode_seats method"
        )
    has_steady = callable(getattr(factory, "steady_decode", None))
    if traits.steady_decode and not has_steady:
        raise TypeError(f"batch policy {name!r} declares steady_decode but has no steady_decode method")
    if has_steady and not traits.steady_decode:
        raise TypeError(
            f"batch policy {name!r} has a steady_decode method but its traits do not declare it "
            "(register it with traits=BatchTraits(steady_decode=True))"
        )


BATCH_POLICIES: Registry[type[BatchPolicy]] = Registry("batch policy", BatchTraits(), _check_traits)
