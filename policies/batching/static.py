"""``static`` and ``dynamic``: request-level batching.

A batch of up to ``max_batch_size`` waiting requests starts together, prefilling all
prompts in one step, then decodes until its longest member finishes; nothing joins
mid-batch, and KV for prompt + full output is reserved for every member at the start, so
there is never a preemption. ``static`` launches a batch as soon as the replica is free
and anything waits; ``dynamic`` (Triton's dynamic batcher) waits until ``max_batch_size``
requests wait or the oldest has waited ``max_wait_s``.

Models request-level serving such as FasterTransformer behind Triton, or Hugging Face
``generate`` on a padded batch. Left out: members that finish early return at once here
and stop costing compute, where a padded batch keeps computing their rows and returns
them at the end; servesim's static batching is therefore slightly flattering.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from policies.batching.common import Budget, admit_waiting, oversized
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, StepPlan


class StaticParams(BaseModel):
    """Parameters of the ``static`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["static"] = "static"
    max_batch_size: int = Field(32, ge=1, description="Most requests in one batch.")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="Most prompt tokens prefilled together when a batch starts; None: no cap."
    )


class DynamicParams(StaticParams):
    """Parameters of the ``dynamic`` policy."""

    kind: Literal["dynamic"] = "dynamic"  # type: ignore[assignment]
    max_wait_s: float = Field(
        0.1, ge=0, description="Launch a partial batch once its oldest request has waited this long, seconds."
    )


@BATCH_POLICIES.register("static", params=StaticParams, traits=BatchTraits(steady_decode=True, reserves_kv=True))
class StaticPolicy:
    """A batch runs to completion before the next one starts."""

    def __init__(self, params: StaticParams) -> None:
        self.max_batch_size = params.max_batch_size
        self.max_num_batched_tokens = params.max_num_batched_tokens

    def steady_decode(self, view: ReplicaView) -> bool:
        # a running batch decodes to its end whatever waits; nobody joins
        return view.num_running > 0

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        if view.running:
            plan.scheduled = [(req, req.num_tokens - req.num_computed_tokens) for req in view.running]
            return plan
        if view.waiting and self._should_launch(view, now_s, plan):
            limit = self.max_num_batched_tokens
            budget = Budget(limit if limit is not None else 2**62, self.max_batch_size, view.num_free_blocks)
            admit_waiting(view, view.waiting, plan, budget, reserve_full=True, reject=lambda r: oversized(r, limit))
        return plan

    def _should_launch(self, view: ReplicaView, now_s: float, plan: StepPlan) -> bool:
        return True


@BATCH_POLICIES.register("dynamic", params=DynamicParams, traits=BatchTraits(steady_decode=True, reserves_kv=True))
class DynamicPolicy(StaticPolicy):
    """Static batches launched when full or when the oldest request has waited ``max_wait_s``."""

    def __init__(self, params: DynamicParams) -> None:
        super().__init__(params)
        self.max_wait_s = params.max_wait_s

    def _should_launch(self, view: ReplicaView, now_s: float, plan: StepPlan) -> bool:
        if len(view.waiting) >= self.max_batch_size:
            return True
        oldest = view.waiting[0].enqueued_s
        assert oldest is not None
        deadline = oldest + self.max_wait_s
        if now_s >= deadline:
            return True
        plan.wake_at_s = deadline
        return False
