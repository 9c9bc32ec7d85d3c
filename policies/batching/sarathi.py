"""``sarathi``: Sarathi-Serve's stall-free batching: chunked prefill under a per-step token budget, decodes first.

Every step first gives each running decode its one token, then spends what is left of
``token_budget`` on prefill chunks: first continuing the prompts already being prefilled,
then admitting waiting requests (FCFS), splitting prompts into chunks that fill the
remaining budget. A long prompt therefore never stalls the decodes (no generation
stalls), at the cost of a longer time to first token for that prompt. KV blocks are
allocated as tokens are computed; when a running request cannot get a block the newest
running request is preempted by recompute, and nothing is admitted in that step.

Admission keeps headroom as Sarathi-Serve's scheduler does (its block manager, as Vidur's
``SarathiReplicaScheduler`` by the same authors implements it): a waiting request is
admitted only when the free blocks, less those the prompts already being prefilled still
need to finish, hold its whole prompt (for a recompute, prompt plus generated tokens) plus
a ``watermark`` fraction of the cache (Vidur's default 0.01). Without it a 512-token first
chunk always fits, the new request grows chunk by chunk into the memory the running
requests' decodes need, and is preempted by recompute, over and over (long prompts on a
small KV cache thrashed at hundreds of preemptions per request).

Default ``token_budget`` 2048: Sarathi-Serve (Agrawal et al., OSDI'24, section 5) runs
with a budget of 512 under its strict TBT SLO and 2048 under the relaxed one; 2048 is the
throughput-oriented setting and also vLLM V1's budget on smaller GPUs, where 512 costs more
in per-step overhead and TTFT than it saves in TBT on the default scenario.

Models Sarathi-Serve. vLLM's V1 scheduler, which grew out of it, is ``vllm`` (running
requests in admission order, one budget, no admission headroom). Left out: Sarathi's
dynamic budget tuning, tile-size alignment of chunks, and pipeline-parallel micro-batches.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policies.batching.common import (
    Budget,
    admission_order,
    admit_waiting,
    batch_lead,
    is_decode,
    never_fits,
    schedule_running,
)
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, RequestView, StepPlan


class SarathiParams(BaseModel):
    """Parameters of the ``sarathi`` policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sarathi"] = "sarathi"
    max_num_seqs: int = Field(256, ge=1, description="Most requests running at once.")
    token_budget: int = Field(
        2048, ge=1, description="Most tokens computed in one step (decodes plus prefill chunks); the paper's 512-2048."
    )
    watermark: float = Field(
        0.01, ge=0, lt=1, description="Fraction of KV blocks kept free beyond a new request's whole prompt."
    )

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
    """Decodes first, then prefill chunks filling the token budget; admission keeps whole-prompt headroom."""

    def __init__(self, params: SarathiParams) -> None:
        self.max_num_seqs = params.max_num_seqs
        self.token_budget = params.token_budget
        self.watermark = params.watermark

    def steady_decode(self, view: ReplicaView) -> bool:
        # nothing queued: running requests only (the engine fast-forwards once no prompt chunk is left)
        return not view.waiting

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        # the decode batch's members (counters possibly behind) lead the list as its first decodes where they can: only
        # the rest are read (else all are: a stale member is still computed past its prompt); the prompts in progress
        # are never members, so what is read below is current
        running, lead = batch_lead(view)
        members = lead[0] if lead is not None else 0
        rest = running[members:] if members else running
        decodes = [r for r in rest if is_decode(r)]
        prefills = [r for r in rest if not is_decode(r)]
        if members:
            decodes[:0] = running[:members]
        budget = Budget(self.token_budget, self.max_num_seqs - len(running), view.num_free_blocks)
        # Decodes first, then the prompts in progress; a victim is the newest admission among those left.
        schedule_running(view, decodes + prefills, plan, budget, admission_order(running), chunk=_chunk, lead=lead)
        if plan.preempt:
            return plan
        # Blocks the prompts in progress still need after this step's chunks: admission keeps them free.
        this_step = {id(r): n for r, n in plan.scheduled}
        owed = 0
        for r in prefills:
            done = r.num_computed_tokens + this_step.get(id(r), 0)
            owed += view.num_new_blocks(r, r.num_tokens) - view.num_new_blocks(r, done)
        # the watermark keeps headroom for running requests' growth: with none running, a prompt that fits
        # the cache is admitted (else one within the watermark of the whole cache would wait for ever)
        watermark_blocks = int(self.watermark * view.num_total_blocks) if running else 0

        def admissible(req: RequestView, need: int) -> bool:
            nonlocal owed
            whole = view.num_new_blocks(req, req.num_tokens)  # the rest of its prompt (less a cached prefix)
            if whole and budget.free_blocks - owed - whole < watermark_blocks:
                return False
            owed += whole - need
            return True

        admit_waiting(
            view, view.waiting, plan, budget, chunk=_chunk, reject=lambda r: never_fits(view, r), admissible=admissible
        )
        return plan
