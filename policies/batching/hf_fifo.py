"""``hf_fifo``: decode-first continuous batching with chunked prefill under a token budget.

Mirrors the FIFO scheduler of Hugging Face transformers' continuous batching (the
``transformers`` version pinned in the ``calibrate`` extra), so that ``servesim validate
--engine hf`` compares like with like. Each step:

1. candidates in order: running requests that decode (admission order), running requests
   whose prompt is part-way through a chunked prefill, then waiting requests (FCFS);
2. each candidate takes ``min(tokens it still needs, token budget left)`` tokens, so the
   last prompt admitted is cut into chunks;
3. once fewer than ``safety_margin x total`` blocks are free, only decodes (and a first
   prefill, when nothing else runs) are scheduled;
4. a candidate whose blocks cannot be allocated is skipped; a waiting one with no free
   block at all ends the scan;
5. at most ``max_num_seqs`` requests and ``max_num_batched_tokens`` tokens per step;
6. when a running request cannot get a block and nothing could be scheduled, the newest
   running requests are preempted by recompute (transformers' "soft reset" when no CPU
   offload space is configured) until it fits, never the last one.

Left out: transformers' one-block over-allocation at some block boundaries, its prefix
sharing (validation runs turn it off), CPU offloading and forked requests.
"""

from __future__ import annotations

import itertools
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.common import admission_order, is_decode, newest_first
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, RequestView, StepPlan


class HfFifoParams(BaseModel):
    """Parameters of the ``hf_fifo`` policy (transformers' ContinuousBatchingConfig names in brackets)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["hf_fifo"] = "hf_fifo"
    max_num_seqs: int = Field(32, ge=1, description="Most requests in one step [max_requests_per_batch].")
    max_num_batched_tokens: int = Field(512, ge=1, description="Token budget of one step [max_batch_tokens].")
    safety_margin: float = Field(
        0.15, ge=0, le=1, description="Below this fraction of free blocks, no new prefill joins a busy step."
    )

    @model_validator(mode="after")
    def _check_budget(self) -> HfFifoParams:
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be at least "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        return self


# transformers' engine has no disaggregated prefill/decode, and validation runs it with prefix sharing off
@BATCH_POLICIES.register("hf_fifo", params=HfFifoParams, traits=BatchTraits(kv_transfer=False, prefix_caching=False))
class HfFifoPolicy:
    """Decode-first, chunked-prefill FIFO scheduling (transformers' FIFOScheduler)."""

    def __init__(self, params: HfFifoParams) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.max_num_batched_tokens = params.max_num_batched_tokens
        self.safety_margin = params.safety_margin

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        running = list(view.running)
        decoding = [r for r in running if is_decode(r)]
        prefilling = [r for r in running if not is_decode(r)]
        budget = self.max_num_batched_tokens
        free = view.num_free_blocks
        margin_blocks = self.safety_margin * view.num_total_blocks
        starved: list[RequestView] = []
        # candidates in order, without copying the (possibly long) queue: position k tells the kind
        for k, req in enumerate(itertools.chain(decoding, prefilling, view.waiting)):
            if free < margin_blocks and plan.scheduled and k >= len(decoding):
                break
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            need = view.num_new_blocks(req, req.num_computed_tokens + n)
            if need > free:
                if k < len(running):
                    starved.append(req)
                elif free == 0:
                    break
                continue
            plan.scheduled.append((req, n))
            budget -= n
            free -= need
            if budget == 0 or len(plan.scheduled) >= self.max_num_seqs:
                break
        if not plan.scheduled and starved:
            self._preempt_for(starved[0], view, running, plan, self.max_num_batched_tokens)
        return plan

    @staticmethod
    def _preempt_for(
        req: RequestView, view: ReplicaView, running: list[RequestView], plan: StepPlan, budget: int
    ) -> None:
        """Preempt the newest running requests (never ``req``) until ``req`` fits, then schedule it alone."""
        n = min(req.num_tokens - req.num_computed_tokens, budget)
        need = view.num_new_blocks(req, req.num_computed_tokens + n)
        free = view.num_free_blocks
        victims = newest_first((r for r in running if r is not req), admission_order(running))
        for victim in victims:
            if need <= free:
                break
            plan.preempt.append(victim)
            free += view.num_freeable_blocks(victim)
        assert need <= free, "a running request cannot fit even alone; enqueue should have rejected it"
        plan.scheduled.append((req, n))
