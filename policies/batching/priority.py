"""``priority``: prefill-first continuous batching ordered by request priority.

Like ``vllm``, but the queue is served in priority order (lower ``priority`` value first,
then arrival), a request short of memory evicts the lowest-priority running request
(newest among equals), and a waiting request that does not fit may preempt running
requests of strictly lower priority to make room (only when that is enough for it to run:
no request is preempted for one that then still waits). With ``aging`` a waiting request's
effective priority improves by one class per ``aging_s`` seconds waited, so low classes
cannot starve.

Models vLLM's priority scheduling policy (``--scheduling-policy priority``) and its
preemption of lower-priority requests. Left out: chunked prefill within this policy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.common import (
    Budget,
    VictimKey,
    admission_order,
    admit_waiting,
    newest_first,
    oversized,
    schedule_running,
    unchunked_budget,
)
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import PreemptionMode, ReplicaView, RequestView, StepPlan


class PriorityParams(BaseModel):
    """Parameters of the ``priority`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["priority"] = "priority"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="Most tokens computed in one step; None: max(max_model_len, 2048), as vllm_v0."
    )
    mode: Literal["strict", "aging"] = Field("strict", description="Strict classes, or classes that age.")
    aging_s: float = Field(10.0, gt=0, description="With aging: seconds of waiting worth one priority class.")
    preempt_for_admission: bool = Field(
        True, description="A waiting request may preempt running requests of strictly lower priority."
    )
    preemption_mode: PreemptionMode = Field("recompute", description="As for vllm: recompute or swap.")

    @model_validator(mode="after")
    def _aging_with_aging(self) -> PriorityParams:
        if self.mode == "strict" and self.aging_s != type(self).model_fields["aging_s"].default:
            raise ValueError("aging_s: classes age only with mode aging (strict classes never do); set mode: aging")
        return self

    @model_validator(mode="after")
    def _check_budget(self) -> PriorityParams:
        # vLLM's SchedulerConfig refuses a token budget below max_num_seqs, whatever the scheduling policy (as
        # vllm and vllm_v0 here): every running request decodes one token a step, and the step must hold them all.
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be at least "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        return self


# Received KV must be admitted before requests waiting for blocks; priority order cannot promise it.
@BATCH_POLICIES.register(
    "priority", params=PriorityParams, traits=BatchTraits(steady_decode=True, kv_transfer=False, by_priority=True)
)
class PriorityPolicy:
    """Priority-ordered prefill-first batching; lowest-priority victims."""

    def __init__(self, params: PriorityParams) -> None:
        self.params = params
        self._keys: dict[int, tuple[float, float, int]] = {}

    def steady_decode(self, view: ReplicaView) -> bool:
        return not view.waiting

    def effective(self, req: RequestView, now_s: float) -> float:
        """Priority used for ordering (lower first); aging lowers it while the request waits."""
        if self.params.mode == "aging" and req.enqueued_s is not None:
            return req.priority - (now_s - req.enqueued_s) / self.params.aging_s
        return float(req.priority)

    def _queue_key(self, req: RequestView, now_s: float) -> tuple[float, float, int]:
        """Waiting order: ``effective`` less the ``now_s / aging_s`` all aged requests share (no clock
        arithmetic per request and step), then arrival, then id."""
        aging = self.params.aging_s
        if self.params.mode == "aging":
            shifted = req.enqueued_s if req.enqueued_s is not None else now_s  # not aging: as if enqueued now
            return (req.priority + shifted / aging, req.arrival_s, req.request_id)
        return (float(req.priority), req.arrival_s, req.request_id)

    def _cached_key(self, view: ReplicaView, now_s: float):
        """``_queue_key`` remembered per request id: it does not change while a request waits
        (its ``enqueued_s`` is set once), and a long queue is re-sorted every step."""
        keys = self._keys
        if len(keys) > 2 * len(view.waiting) + 1024:  # forget requests that left the queue
            keys.clear()

        def key(req: RequestView) -> tuple[float, float, int]:
            k = keys.get(req.request_id)
            if k is None:
                k = self._queue_key(req, now_s)
                if req.enqueued_s is not None:  # otherwise it depends on now_s
                    keys[req.request_id] = k
            return k

        return key

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        p = self.params
        plan = StepPlan(preemption_mode=p.preemption_mode)
        limit = unchunked_budget(p.max_num_batched_tokens, view.max_model_len)
        max_num_seqs = min(p.max_num_seqs, limit)  # as vllm_v0: the budget holds a decode token of each
        newest: VictimKey | None = None  # built when a victim is first needed

        def victim_key(r: RequestView) -> tuple[float, int]:
            nonlocal newest
            if newest is None:
                newest = admission_order(view.running)
            return (self.effective(r, now_s), newest(r))  # largest = lowest priority, newest

        if view.waiting:
            order = sorted(view.waiting, key=self._cached_key(view, now_s))
            budget = Budget(limit, max_num_seqs - view.num_running, view.num_free_blocks)
            candidates: list[RequestView] | None = None  # victims, lowest priority first, sorted when first needed

            def make_room(req: RequestView, need_blocks: int) -> bool:
                """Preempt lower-priority requests until ``req`` fits; nothing is preempted unless it then does."""
                nonlocal candidates
                if not p.preempt_for_admission:
                    return False
                if candidates is None:
                    candidates = newest_first(view.running, victim_key)
                mine = self.effective(req, now_s)
                seqs, free, taken = budget.seqs, budget.free_blocks, 0
                while seqs <= 0 or free < need_blocks:
                    if taken == len(candidates) or self.effective(candidates[taken], now_s) <= mine:
                        return False
                    free += view.num_freeable_blocks(candidates[taken])
                    seqs += 1
                    taken += 1
                plan.preempt.extend(candidates[:taken])
                del candidates[:taken]
                budget.seqs, budget.free_blocks = seqs, free
                return True

            admit_waiting(view, order, plan, budget, reject=lambda r: oversized(r, limit), make_room=make_room)
            if plan.scheduled:
                return plan
        budget = Budget(limit, max_num_seqs, view.num_free_blocks)
        schedule_running(view, view.running, plan, budget, victim_key)
        return plan
