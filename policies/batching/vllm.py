"""``vllm``: vLLM V1's scheduler: one token budget per step, running requests first, chunked prefill.

Models the V1 engine's ``Scheduler.schedule`` (``vllm/v1/core/sched/scheduler.py``) with its
default FCFS policy, as in vLLM v0.9 and later (the release that brought the defaults below;
read at vllm-project/vllm commits 00024d3 for the scheduler and 99d7eb5 for
``vllm/engine/arg_utils.py``):

- One unified budget of ``max_num_batched_tokens`` per step, shared by decodes and prompt
  chunks; no separate prefill and decode phases.
- The running requests first, in admission order: each gets ``min(remaining, budget
  left)`` tokens (one for a decode, the next chunk for a prompt in progress), capped by
  ``long_prefill_token_threshold`` when that is set (0 = off). When a running request
  cannot get its KV blocks, the lowest-priority running request, the last of the running
  list (the newest admission), is preempted by recompute (its KV is dropped, it goes back
  to the front of the queue), until the request fits or is itself the one preempted.
- Then, only in a step that preempted nothing, waiting requests FCFS (preempted ones
  first): each gets ``min(remaining, budget left)`` tokens (less any cached prefix), while
  fewer than ``max_num_seqs`` run; the first one whose chunk cannot get KV blocks stops
  admission (head of line). V1 keeps no free-block watermark (``KVCacheManager.
  allocate_slots`` only checks the blocks it needs against the free ones).
- Nothing is refused for its length against the budget: a prompt longer than the budget is
  chunked over several steps. A request whose prompt plus output need more KV blocks than
  the replica has is refused (vLLM refuses to start when a ``max_model_len`` sequence does
  not fit its KV cache).

Defaults (``EngineArgs.get_batch_defaults`` in ``vllm/engine/arg_utils.py``, the OpenAI API
server's usage context): ``None`` for ``max_num_batched_tokens`` and ``max_num_seqs`` means
vLLM's default for the replica's GPU, resolved when the replica is built
(``resolve_for_hardware``): 8192 tokens and 1024 sequences on a GPU with at least 70 GiB of
memory that is not an A100 (H100, H200, B200, MI300X), otherwise 2048 and 256 (A100, L40S);
a defaulted ``max_num_seqs`` is then capped at ``max_num_batched_tokens``, as vLLM does.
Where no GPU is known (a policy built outside a scenario) the second pair applies, as in
vLLM when it cannot query the device. The run's resolved config (``config.json``, a sweep's
keys and columns) holds the values used.

Prefix caching is on by default in V1 (``enable_prefix_caching``), but in servesim it is a
KV-cache setting whose default is off: set ``kv_cache: {prefix_caching: true}`` (or
``--prefix-caching``) to model a stock V1 deployment.

CUDA graphs (``piecewise_graph_max_tokens``, read by the cost model): V1 replays a step of at most its largest
capture size (``max_cudagraph_capture_size``, default ``min(2 x max_num_seqs, 512)``) from CUDA graphs and runs a
larger one without, its kernels launched from the host (simulator/cost/eager.py prices a step holding a prompt so).

Async scheduling (V1 schedules step N+1 while step N runs on the GPU) changes how the engine times
steps, not what a step holds, so it is not in this plan but in the engine and the cost model: the
trait ``overlaps_cpu`` hides the scheduler's CPU time behind the GPU's (``cpu_overlap``) and makes the
engine plan one step ahead, so a request arriving mid-step joins the step after the next
(simulator/engine/loop.py, ``plans_ahead``).

Left out: speculative decoding inside the
policy (it is a deployment setting, ``speculative:``, that every policy runs under),
priority scheduling (see ``priority``), structured outputs, multimodal encoder budgets,
and the ``max_num_partial_prefills`` option.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.common import (
    Budget,
    admission_order,
    admit_waiting,
    never_fits,
    schedule_running,
)
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, StepPlan

GIB = 2**30


def vllm_batch_defaults(device_memory_bytes: float, device_name: str) -> tuple[int, int]:
    """vLLM's (max_num_batched_tokens, max_num_seqs) for its OpenAI API server on this GPU.

    From ``EngineArgs.get_batch_defaults``: GPUs with at least 70 GiB that are not an A100
    get the larger pair (a large budget lowers A100 throughput, vLLM PR #17885).
    """
    if device_memory_bytes >= 70 * GIB and "a100" not in device_name.lower():
        return 8192, 1024
    return 2048, 256


def largest_cudagraph_size(max_num_seqs: int | None, max_num_batched_tokens: int | None, configured: int | None) -> int:
    """The largest step, in tokens, vLLM V1 captures CUDA graphs for.

    vLLM's ``VllmConfig._set_cudagraph_sizes`` (vllm/config/vllm.py, from vllm-project/vllm#20628, July 2025, through
    0.19): the capture sizes are 1, 2, 4, the multiples of 8 below 256, then the multiples of 16 up to
    ``max_cudagraph_capture_size`` (default ``min(2 x max_num_seqs, 512)``), none above ``max_num_batched_tokens``.
    A batch of more tokens runs without a graph (``CudagraphDispatcher``: ``CUDAGraphMode.NONE``). Unset values take
    vLLM's fallback pair (``vllm_batch_defaults`` with no GPU known).
    """
    fallback_tokens, fallback_seqs = vllm_batch_defaults(0, "")
    seqs = fallback_seqs if max_num_seqs is None else max_num_seqs
    tokens = fallback_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    top = min(configured if configured is not None else min(2 * seqs, 512), tokens)
    if top < 8:
        return max(s for s in (1, 2, 4) if s <= top)
    return top - top % 8 if top < 256 else top - top % 16


class VllmParams(BaseModel):
    """Parameters of the ``vllm`` policy (vLLM V1; names as in vLLM's SchedulerConfig)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["vllm"] = "vllm"
    max_num_seqs: int | None = Field(
        None, ge=1, description="Most requests running at once; None: vLLM's default for the GPU (1024 or 256)."
    )
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="Most tokens computed in one step (decodes plus prompt chunks); None: vLLM's default "
        "for the GPU (8192 on GPUs of 70 GiB or more other than the A100, else 2048).",
    )
    long_prefill_token_threshold: int = Field(
        0, ge=0, description="Most tokens of one prompt computed in one step; 0: no cap but the budget."
    )
    enforce_eager: bool = Field(
        False,
        description="vLLM's --enforce-eager: no CUDA graphs, every kernel launched from the host. A step holding a "
        "prompt takes the longer of its kernels' time and the host's launches (the measured figure for the "
        "model's architecture, simulator/cost/eager.py). Decode steps would be launched so too, which servesim "
        "does not price: allowed only on a disaggregated prefill group (as InferenceX's vLLM prefill workers run).",
    )

    max_cudagraph_capture_size: int | None = Field(
        None,
        ge=1,
        description="vLLM's --max-cudagraph-capture-size: the largest step (in tokens) CUDA graphs are captured for; "
        "a step holding a prompt above it runs torch.compile's code without a graph, its kernels launched from "
        "the host. None: vLLM's default, min(2 x max_num_seqs, 512).",
    )

    @property
    def piecewise_graph_max_tokens(self) -> int:
        """The most tokens of a step holding a prompt that replays CUDA graphs (0 with ``enforce_eager``)."""
        if self.enforce_eager:
            return 0
        return largest_cudagraph_size(self.max_num_seqs, self.max_num_batched_tokens, self.max_cudagraph_capture_size)

    @model_validator(mode="after")
    def _graphs_without_eager(self) -> VllmParams:
        if self.enforce_eager and self.max_cudagraph_capture_size is not None:
            raise ValueError(
                "max_cudagraph_capture_size: enforce_eager captures no CUDA graphs, so no size is read; give one or "
                "the other"
            )
        return self

    @model_validator(mode="after")
    def _check_budget(self) -> VllmParams:
        tokens, seqs = self.max_num_batched_tokens, self.max_num_seqs
        if tokens is not None and seqs is not None and tokens < seqs:
            raise ValueError(f"max_num_batched_tokens ({tokens}) must be at least max_num_seqs ({seqs})")
        return self

    def resolve_for_hardware(self, device_memory_bytes: float, device_name: str) -> VllmParams:
        """These parameters with ``None`` replaced by vLLM's defaults for the GPU (see the module docstring)."""
        tokens, seqs = vllm_batch_defaults(device_memory_bytes, device_name)
        if self.max_num_batched_tokens is not None:
            tokens = self.max_num_batched_tokens
        seqs = self.max_num_seqs if self.max_num_seqs is not None else min(seqs, tokens)
        # validated again: a max_num_seqs above the GPU's default budget is refused, as vLLM refuses it
        return VllmParams.model_validate(self.model_dump() | {"max_num_batched_tokens": tokens, "max_num_seqs": seqs})


# async scheduling: on by default in vLLM V1 (SchedulerConfig.async_scheduling None resolves to on in
# vllm/config/vllm.py unless a feature in use rules it out), and passed by InferenceX's recipe (--async-scheduling)
@BATCH_POLICIES.register(
    "vllm",
    params=VllmParams,
    traits=BatchTraits(
        steady_decode=True,
        hardware_defaults=True,
        overlaps_cpu=True,
        recomputes_first_token=True,
        eager_prefill=True,  # above the largest CUDA-graph capture size only: ``piecewise_graph_max_tokens``
        windows_sliding_kv=True,
        dp_attention_local_mlp=True,  # each DP rank its own engine and model but for the experts (EP over all)
        dp_attention_padding="largest",
    ),
)
class VllmPolicy:
    """vLLM V1: running requests first under one token budget, then waiting ones, chunked to fit."""

    def __init__(self, params: VllmParams) -> None:
        if params.max_num_batched_tokens is None or params.max_num_seqs is None:
            params = params.resolve_for_hardware(0, "")  # no GPU known: vLLM's fallback pair
        assert params.max_num_batched_tokens is not None and params.max_num_seqs is not None
        self.max_num_batched_tokens = params.max_num_batched_tokens
        self.max_num_seqs = params.max_num_seqs
        self.long_prefill_token_threshold = params.long_prefill_token_threshold

    def steady_decode(self, view: ReplicaView) -> bool:
        # nothing queued: every running request gets what it still needs (the budget holds
        # max_num_seqs decodes); the engine fast-forwards once no prompt chunk is left
        return not view.waiting

    def _chunk(self, remaining: int, tokens_left: int) -> int:
        threshold = self.long_prefill_token_threshold
        if 0 < threshold < remaining:
            remaining = threshold
        return min(remaining, tokens_left)

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        # An engine that keeps its decoding requests as a batch lists them as they are, counters behind: the loop
        # below reads them through the batch's totals, or brings them current before walking them.
        unsynced = getattr(view, "running_unsynced", None)  # running_unsynced(view), inlined: the default's hot path
        running = view.running if unsynced is None else unsynced
        budget = Budget(self.max_num_batched_tokens, self.max_num_seqs - len(running), view.num_free_blocks)
        # Running requests in admission order; a victim is the last of the running list.
        schedule_running(view, running, plan, budget, admission_order(running), chunk=self._chunk)
        if not plan.preempt:  # V1 admits nothing in a step that preempted
            admit_waiting(view, view.waiting, plan, budget, chunk=self._chunk, reject=lambda r: never_fits(view, r))
        return plan
