"""``vllm``: continuous batching over a paged KV cache, prefill first.

Models vLLM's V0 scheduler without chunked prefill: at each step, if requests are
waiting it runs a prefill-only step admitting as many as fit (FCFS, under
``max_num_seqs``, ``max_num_batched_tokens`` and the free-block watermark); otherwise it
runs one decode token for every running request, preempting the newest running request
(recompute: its KV is dropped and its prompt plus generated tokens are prefilled again
later) whenever a decode cannot get a block.

Left out: chunked prefill (see ``sarathi``), speculative decoding, beam search, the
V1 engine's unified token budget, and prefix caching (a block-manager option).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.registry import BATCH_POLICIES
from policies.interface import ReplicaView, RequestView, StepPlan


class VllmParams(BaseModel):
    """Parameters of the ``vllm`` policy (names as in vLLM's SchedulerConfig)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["vllm"] = "vllm"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="Most tokens computed in one step; None means the model's max context "
        "(vLLM's default without chunked prefill). Requests whose prompt plus output exceed it "
        "are rejected.",
    )
    watermark: float = Field(0.01, ge=0, lt=1, description="Fraction of KV blocks kept free when admitting a prefill.")
    preemption_mode: Literal["recompute"] = Field(
        "recompute", description="What happens to a preempted request's KV: dropped and recomputed."
    )

    @model_validator(mode="after")
    def _check_budget(self) -> VllmParams:
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be at least "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        return self


@BATCH_POLICIES.register("vllm", params=VllmParams)
class VllmPolicy:
    """Prefill-first continuous batching with newest-first preemption (vLLM V0)."""

    def __init__(self, params: VllmParams) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.max_num_batched_tokens = params.max_num_batched_tokens
        self.watermark = params.watermark
        self.preemption_mode = params.preemption_mode

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan(preemption_mode=self.preemption_mode)
        if view.waiting:
            self._plan_prefills(view, plan)
            if plan.scheduled:
                return plan
        self._plan_decodes(view, plan)
        return plan

    def _plan_prefills(self, view: ReplicaView, plan: StepPlan) -> None:
        limit = self.max_num_batched_tokens or view.max_model_len
        budget = limit
        num_seqs = len(view.running)
        free = view.num_free_blocks
        watermark_blocks = int(self.watermark * view.num_total_blocks)
        for req in view.waiting:
            if req.num_prompt_tokens + req.num_output_tokens > limit:
                plan.reject.append(
                    (
                        req,
                        f"prompt + output of {req.num_prompt_tokens + req.num_output_tokens} "
                        f"tokens exceeds max_num_batched_tokens ({limit})",
                    )
                )
                continue
            num_new = req.num_tokens - req.num_computed_tokens
            need = view.num_new_blocks(req, req.num_computed_tokens + num_new)
            if view.num_new_blocks(req, req.num_prompt_tokens + req.num_output_tokens) > (
                view.num_total_blocks - watermark_blocks
            ):
                plan.reject.append((req, "needs more KV blocks than the cache holds above the watermark"))
                continue
            if num_seqs >= self.max_num_seqs or num_new > budget or free - need < watermark_blocks:
                break  # FCFS: the head of the queue blocks the rest, as in vLLM
            plan.scheduled.append((req, num_new))
            budget -= num_new
            free -= need
            num_seqs += 1

    def _plan_decodes(self, view: ReplicaView, plan: StepPlan) -> None:
        running: list[RequestView] = list(view.running)
        free = view.num_free_blocks
        i = 0
        while i < len(running):
            req = running[i]
            num_new = req.num_tokens - req.num_computed_tokens
            need = view.num_new_blocks(req, req.num_computed_tokens + num_new)
            while need > free:
                victim = running.pop()  # newest admission first
                plan.preempt.append(victim)
                free += victim.num_blocks
                if victim is req:
                    break
            else:
                free -= need
                plan.scheduled.append((req, num_new))
                i += 1
