"""``vllm_v0``: continuous batching over a paged KV cache, prefill first (vLLM V0).

Models vLLM's V0 scheduler (``vllm/core/scheduler.py``, v0.6-v0.8, the engine before V1
became the default) without chunked prefill: at each step, if requests are
waiting it runs a prefill-only step admitting as many as fit (FCFS, under
``max_num_seqs``, ``max_num_batched_tokens`` and the free-block watermark); otherwise it
runs one decode token for every running request, preempting the newest running request
whenever a decode cannot get a block. A preempted request either drops its KV and
prefills its prompt plus generated tokens again later (``recompute``) or has its KV
swapped to host memory and back before it resumes (``swap``); swapped requests resume,
joining the decode batch, before any new prefill is admitted.

A waiting request whose tokens to prefill (its prompt, or prompt plus generated tokens for
a recompute) exceed ``max_num_batched_tokens`` is refused, as V0 ignores a prompt longer
than its prompt limit (``min(max_model_len, max_num_batched_tokens)`` without chunked
prefill): without chunking a prompt must be computed in one step. A recompute so refused
has emitted tokens: it ends finished short, with them (V0's ``FINISHED_IGNORED``). Prompt plus output may
exceed the budget; only the prompt must fit.

Left out: chunked prefill (see ``sarathi`` and ``vllm``, vLLM V1), speculative decoding,
beam search, and the CPU-side cost of block tables.
"""

from __future__ import annotations

import itertools
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.common import (
    Budget,
    admission_order,
    admit_waiting,
    oversized,
    schedule_running,
    total_tokens,
    unchunked_budget,
)
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import PreemptionMode, ReplicaView, RequestView, StepPlan


class VllmV0Params(BaseModel):
    """Parameters of the ``vllm_v0`` policy (names as in vLLM's SchedulerConfig)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["vllm_v0"] = "vllm_v0"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="Most tokens computed in one step; None means max(max_model_len, 2048) "
        "(vLLM's default without chunked prefill). A prompt longer than it is rejected "
        "(it must be prefilled in one step).",
    )
    watermark: float = Field(0.01, ge=0, lt=1, description="Fraction of KV blocks kept free when admitting a prefill.")
    preemption_mode: PreemptionMode = Field(
        "recompute",
        description="A preempted request's KV is dropped and recomputed, or swapped to host memory "
        "(kv_cache.swap_space_bytes per GPU) and back; when host memory is full, recompute.",
    )

    @model_validator(mode="after")
    def _check_budget(self) -> VllmV0Params:
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be at least "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        return self


@BATCH_POLICIES.register("vllm_v0", params=VllmV0Params, traits=BatchTraits(steady_decode=True, eager_prefill=True))
class VllmV0Policy:
    """Prefill-first continuous batching with newest-first preemption (vLLM V0)."""

    def __init__(self, params: VllmV0Params) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.max_num_batched_tokens = params.max_num_batched_tokens
        self.watermark = params.watermark
        self.preemption_mode = params.preemption_mode

    def steady_decode(self, view: ReplicaView) -> bool:
        # nothing queued: every step decodes all running requests (prefills finish in one step)
        return not view.waiting

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan(preemption_mode=self.preemption_mode)
        limit = unchunked_budget(self.max_num_batched_tokens, view.max_model_len)
        # the budget must hold a decode token of every running request (vLLM refuses a budget below max_num_seqs;
        # unset, it can be below a max_num_seqs over 2048 on a short max_model_len): no more run than it holds
        max_num_seqs = min(self.max_num_seqs, limit)
        watermark_blocks = int(self.watermark * view.num_total_blocks)
        waiting = view.waiting
        if waiting and not view.is_swapped(waiting[0]):
            budget = Budget(limit, max_num_seqs - view.num_running, view.num_free_blocks)

            def reject(req: RequestView) -> str | None:
                if (reason := oversized(req, limit)) is not None:
                    return reason
                need = view.num_new_blocks(req, total_tokens(req))
                if need > view.num_total_blocks - watermark_blocks:
                    return (
                        f"needs {need} KV blocks but the cache holds {view.num_total_blocks} with a "
                        f"watermark of {watermark_blocks}"
                    )
                return None

            if admit_waiting(view, waiting, plan, budget, watermark_blocks, reject=reject).num_admitted:
                return plan
        budget = Budget(limit, max_num_seqs, view.num_free_blocks)
        running = view.running
        schedule_running(view, running, plan, budget, admission_order(running))
        if waiting and view.is_swapped(waiting[0]) and not plan.preempt:
            budget.seqs = max_num_seqs - len(plan.scheduled)
            swapped = itertools.takewhile(view.is_swapped, waiting)
            admit_waiting(view, swapped, plan, budget, watermark_blocks)
        return plan
