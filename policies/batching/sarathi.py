"""``sarathi``: chunked prefill under a per-step token budget, decodes first.

Every step first gives each running decode its one token, then spends what is left of
``token_budget`` on prefill chunks: first continuing the prompts already being prefilled,
then admitting waiting requests (FCFS), splitting prompts into chunks that fill the
remaining budget. A long prompt therefore never stalls the decodes (no generation
stalls), at the cost of a longer time to first token for that prompt. KV blocks are
allocated as tokens are computed; when a running request cannot get a block the newest
running request is preempted by recompute.

Models Sarathi-Serve (Agrawal et al., OSDI'24) and vLLM's V1 scheduler with chunked
prefill. Left out: Sarathi's dynamic budget tuning and tile-size alignment of chunks.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.common import Budget, admission_order, admit_waiting, is_decode, schedule_running
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, StepPlan


class SarathiParams(BaseModel):
    """Parameters of the ``sarathi`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sarathi"] = "sarathi"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    token_budget: int = Field(512, ge=1, description="Most tokens computed in one step (decodes plus prefill chunks).")

    @model_validator(mode="after")
    def _check_budget(self) -> SarathiParams:
        if self.token_budget < self.max_num_seqs:
            raise ValueError(
                f"token_budget ({self.token_budget}) must be at least max_num_seqs ({self.max_num_seqs}), "
                "so every running decode fits in a step"
            )
        return self


def _chunk(remaining: int, tokens_left: int) -> int:
    return min(remaining, tokens_left)


@BATCH_POLICIES.register("sarathi", params=SarathiParams, traits=BatchTraits(steady_decode=True))
class SarathiPolicy:
    """Decodes first, then prefill chunks filling the token budget."""

    def __init__(self, params: SarathiParams) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.token_budget = params.token_budget

    def steady_decode(self, view: ReplicaView) -> bool:
        # nothing queued: running requests only (the engine fast-forwards once no prompt chunk is left)
        return not view.waiting

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        running = view.running
        decodes = [r for r in running if is_decode(r)]
        prefills = [r for r in running if not is_decode(r)]
        budget = Budget(self.token_budget, self.max_num_seqs - len(running), view.num_free_blocks)
        # Decodes first, then the prompts in progress; a victim is the newest admission among those left.
        schedule_running(view, decodes + prefills, plan, budget, admission_order(running), chunk=_chunk)
        if not plan.preempt:
            admit_waiting(view, view.waiting, plan, budget, chunk=_chunk)
        return plan
