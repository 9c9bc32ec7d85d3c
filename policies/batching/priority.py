"""``priority``: prefill-first continuous batching ordered by request priority.

Like ``vllm``, but the queue is served in priority order (lower ``priority`` value first,
then arrival), a request short of memory evicts the lowest-priority running request
(newest among equals), and a waiting request that does not fit may preempt running
requests of strictly lower priority to make room. With ``aging`` a waiting request's
effective priority improves by one class per ``aging_s`` seconds waited, so low classes
cannot starve.

Models vLLM's priority scheduling policy (``--scheduling-policy priority``) and its
preemption of lower-priority requests. Left out: chunked prefill within this policy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from policies.batching.common import Budget, admit_waiting, oversized, schedule_running, total_tokens
from policies.batching.registry import BATCH_POLICIES
from policies.interface import PreemptionMode, ReplicaView, RequestView, StepPlan


class PriorityParams(BaseModel):
    """Parameters of the ``priority`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["priority"] = "priority"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="Most tokens computed in one step; None: the model's max context."
    )
    mode: Literal["strict", "aging"] = Field("strict", description="Strict classes, or classes that age.")
    aging_s: float = Field(10.0, gt=0, description="With aging: seconds of waiting worth one priority class.")
    preempt_for_admission: bool = Field(
        True, description="A waiting request may preempt running requests of strictly lower priority."
    )
    preemption_mode: PreemptionMode = Field("recompute", description="As for vllm: recompute or swap.")


@BATCH_POLICIES.register("priority", params=PriorityParams)
class PriorityPolicy:
    """Priority-ordered prefill-first batching; lowest-priority victims."""

    # Received KV must be admitted before requests waiting for blocks; priority order cannot promise it.
    supports_kv_transfer = False

    def __init__(self, params: PriorityParams) -> None:
        self.params = params

    def steady_decode(self, view: ReplicaView) -> bool:
        return not view.waiting

    def effective(self, req: RequestView, now_s: float) -> float:
        """Priority used for ordering (lower first); aging lowers it while the request waits."""
        if self.params.mode == "aging" and req.enqueued_s is not None:
            return req.priority - (now_s - req.enqueued_s) / self.params.aging_s
        return float(req.priority)

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        p = self.params
        plan = StepPlan(preemption_mode=p.preemption_mode)
        limit = p.max_num_batched_tokens or view.max_model_len
        rank = {id(r): i for i, r in enumerate(view.running)}

        def victim_key(r: RequestView) -> tuple[float, int]:
            return (self.effective(r, now_s), rank[id(r)])  # largest = lowest priority, newest

        if view.waiting:
            order = sorted(view.waiting, key=lambda r: (self.effective(r, now_s), r.arrival_s, r.request_id))
            budget = Budget(limit, p.max_num_seqs - len(view.running), view.num_free_blocks)
            candidates = sorted(view.running, key=victim_key, reverse=True)

            def make_room(req: RequestView, need_blocks: int) -> bool:
                if not p.preempt_for_admission:
                    return False
                mine = self.effective(req, now_s)
                while budget.seqs <= 0 or budget.free_blocks < need_blocks:
                    if not candidates or self.effective(candidates[0], now_s) <= mine:
                        return False
                    victim = candidates.pop(0)
                    plan.preempt.append(victim)
                    budget.free_blocks += view.num_freeable_blocks(victim)
                    budget.seqs += 1
                return True

            def reject(req: RequestView) -> str | None:
                if (reason := oversized(req, limit)) is not None:
                    return reason
                if view.num_new_blocks(req, total_tokens(req)) > view.num_total_blocks:
                    return "needs more KV blocks than the cache holds"
                return None

            admit_waiting(view, order, plan, budget, reject=reject, make_room=make_room)
            if plan.scheduled:
                return plan
            plan.preempt.clear()  # room made for nothing: keep the running requests
        budget = Budget(limit, p.max_num_seqs, view.num_free_blocks)
        schedule_running(view, view.running, plan, budget, lambda pending: max(pending, key=victim_key))
        return plan
