"""``no_kv_cache``: every step recomputes each running sequence in full.

The counterfactual of the course material this project grew from: without a KV cache,
producing token t means a forward pass over all t - 1 earlier tokens, so the cost of a
request grows quadratically with its length. Iteration-level batching (requests join and
leave at step boundaries) under ``max_num_seqs`` and an optional token cap; KV for the
whole sequence exists only during the step and is freed after it. When memory or the
token cap cannot hold the grown batch, the newest running requests go back to the queue; one
whose sequence alone outgrows the cap ends there, finished short with the tokens it emitted
(as vLLM V0 ignores a recompute over its prompt limit, ``simulator/request.py``).

Models no production engine (none runs without a KV cache); it exists to show what the
cache buys.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from policies.batching.common import admission_order, newest_first, oversized
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, StepPlan


class NoKvCacheParams(BaseModel):
    """Parameters of the ``no_kv_cache`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["no_kv_cache"] = "no_kv_cache"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="Most tokens recomputed in one step; None: limited by memory only."
    )


# there is no KV to hand from a prefill to a decode replica, nor any to reuse
@BATCH_POLICIES.register(
    "no_kv_cache", params=NoKvCacheParams, traits=BatchTraits(kv_transfer=False, prefix_caching=False)
)
class NoKvCachePolicy:
    """Full recomputation of every running sequence at every step."""

    def __init__(self, params: NoKvCacheParams) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.max_num_batched_tokens = params.max_num_batched_tokens

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan(discard_kv=True)
        budget = self.max_num_batched_tokens
        free = view.num_free_blocks  # nothing is held between steps
        tokens = 0
        running = list(view.running)
        for i, req in enumerate(running):
            num_new = req.num_tokens - req.num_computed_tokens
            need = view.num_new_blocks(req, req.num_tokens)
            if need > free or (budget is not None and tokens + num_new > budget):
                plan.preempt.extend(newest_first(running[i:], admission_order(running)))
                break
            plan.scheduled.append((req, num_new))
            tokens += num_new
            free -= need
        if plan.preempt:
            return plan
        num_seqs = len(plan.scheduled)
        for req in view.waiting:
            if (reason := oversized(req, budget)) is not None:
                plan.reject.append((req, reason))
                continue
            num_new = req.num_tokens - req.num_computed_tokens
            need = view.num_new_blocks(req, req.num_tokens)
            if num_seqs >= self.max_num_seqs or need > free or (budget is not None and tokens + num_new > budget):
                break
            plan.scheduled.append((req, num_new))
            tokens += num_new
            free -= need
            num_seqs += 1
        return plan
