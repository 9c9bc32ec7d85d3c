"""``continuous``: Orca-style iteration-level scheduling with KV reserved for the maximum length.

Requests join and leave the batch at step boundaries. A joining request's whole prompt is
prefilled in the step it joins, alongside the decodes of the running ones (Orca's
selective batching). KV for prompt + full output is reserved at admission, so a running
request never runs out of memory and nothing is ever preempted; the price is memory held
for tokens not yet generated, which limits the batch.

Models Orca (Yu et al., OSDI'22) with its maximum-length reservation. Left out: Orca's
pipeline-parallel scheduling across micro-batches.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from policies.batching.common import Budget, admit_waiting, oversized
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, StepPlan


class ContinuousParams(BaseModel):
    """Parameters of the ``continuous`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["continuous"] = "continuous"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="Most tokens computed in one step (decodes plus joining prompts); None: no cap."
    )


@BATCH_POLICIES.register(
    "continuous", params=ContinuousParams, traits=BatchTraits(steady_decode=True, reserves_kv=True)
)
class ContinuousPolicy:
    """Iteration-level batching; admission reserves KV for prompt + output."""

    def __init__(self, params: ContinuousParams) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.max_num_batched_tokens = params.max_num_batched_tokens

    def steady_decode(self, view: ReplicaView) -> bool:
        return not view.waiting

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        plan.scheduled = [(req, req.num_tokens - req.num_computed_tokens) for req in view.running]
        limit = self.max_num_batched_tokens
        budget = Budget(
            (limit if limit is not None else 2**62) - len(plan.scheduled),
            self.max_num_seqs - len(view.running),
            view.num_free_blocks,
        )
        admit_waiting(view, view.waiting, plan, budget, reserve_full=True, reject=lambda r: oversized(r, limit))
        return plan
