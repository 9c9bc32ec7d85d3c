"""``trtllm``: TensorRT-LLM's in-flight batching: a capacity scheduler, then a micro-batch scheduler per step.

Models the batch manager of TensorRT-LLM 1.x (``cpp/tensorrt_llm/batch_manager/
capacityScheduler.cpp`` and ``microBatchScheduler.cpp``, read at NVIDIA/TensorRT-LLM commit
0a949d3 for the micro-batch scheduler; the defaults are the LLM API's and ``trtllm-serve``'s,
``tensorrt_llm/llmapi/llm_args.py``: ``BaseLlmArgs`` and ``SchedulerConfig``):

- Context (prefill) and generation (decode) requests share one step under ``max_num_tokens``
  (8192), at most ``max_batch_size`` (2048) requests. The micro-batch scheduler takes the
  requests the capacity scheduler passed, in order (running ones first, in admission order):
  each generation request one token; without chunked context a context request needs its whole
  prompt (after a pause, prompt plus generated tokens) in the budget left, and the first that does
  not fit ends the step's list (a ``break``); a prompt longer than ``max_num_tokens`` is refused, as
  it could never be scheduled (servesim spreads a paused request's recompute that outgrew the
  budget over steps, where TensorRT-LLM would need chunked context for it). With
  ``enable_chunked_prefill`` the contexts share what the generation tokens leave, first come first
  served: each gets ``min(remaining, budget left)`` tokens, cut to a multiple of the KV block size
  unless it is the prompt's last chunk or less than a block is left (the ``FIRST_COME_FIRST_SERVED``
  chunking policy, chunk unit = tokens per block).
- Capacity scheduler ``GUARANTEED_NO_EVICT`` (the default): every running request keeps running
  (its blocks to completion were reserved when it started); a waiting request is admitted, in
  queue order, only if the blocks it needs for its whole prompt plus ``max_tokens`` output fit
  in the free blocks less the blocks the running (and just admitted) requests still need to
  complete (``NoEvictScheduledBlocksManager``); the first that does not fit stops admission. KV is
  allocated as tokens are computed, only counted against the reservation, so nothing is ever
  preempted (with prefix reuse a cached block counted as free can be claimed by an admitted
  request, so this becomes a near-guarantee).
- ``MAX_UTILIZATION``: requests are admitted while the blocks of this step (their prompt or first
  chunk) fit, no reservation for their output; when a running request cannot get its next block
  the last started request is paused (its KV freed, recomputed later: servesim's recompute
  preemption) until it fits. servesim admits nothing in a step that paused.
- A request whose prompt plus output need more KV blocks than the cache holds is refused.

Defaults: ``max_batch_size`` 2048, ``max_num_tokens`` 8192, ``enable_chunked_prefill`` False
(``BaseLlmArgs``), ``capacity_scheduler_policy`` ``GUARANTEED_NO_EVICT`` (``SchedulerConfig``);
TensorRT-LLM's KV block reuse (``enable_block_reuse``, on by default) is servesim's
``kv_cache: {prefix_caching: true}``.

Left out: the "beneficial to skip" deferral of a request whose prefix blocks another scheduled
context is computing, ``STATIC_BATCH``, the ``EQUAL_PROGRESS`` chunking policy, two-step
lookahead (pipeline parallelism), overlap scheduling, beam search and draft tokens, LoRA/PEFT
pages, dynamic batch-size tuning (attention data parallelism: ``simulator/cluster/dp_attention.py``).

Batch waiting (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``; both 0, off, by default in
``TorchLlmArgs``): the PyTorch executor holds a step's contexts back while generation requests run beside them,
until the step's tokens reach the ratio of ``max_num_tokens`` or the timeout in steps (``_hold_contexts``);
TensorRT-LLM skips it under attention data parallelism, and so does servesim (``rank_policy``). Attention data
parallelism has its own waiting instead (``attention_dp_config``: ``enable_balance`` off by default): the ranks run
their contexts only together, decided across the ranks every step (``AttentionDpBalance`` in
``simulator/cluster/dp_attention.py``).

Piecewise CUDA graphs (``piecewise_cuda_graph_max_tokens``: ``torch_compile_config.enable_piecewise_cuda_graph``
with ``capture_num_tokens``, off by default): a step holding a context, launched eagerly otherwise (the eager host
time of ``simulator/cost/eager.py``), replays the captured pieces when it has at most the largest captured size
of tokens (sizes above ``max_num_tokens`` are dropped); larger steps are still launched eagerly.

Disaggregated serving (context and generation servers behind ``trtllm-serve disaggregated``):

- The disaggregated server sends a context server each request with ``max_tokens = 1``
  (``tensorrt_llm/serve/openai_disagg_server.py``, ``_process_context_server_request``), so on a prefill engine
  ``GUARANTEED_NO_EVICT`` reserves a request's prompt plus one token, not its whole output; a request leaves
  when its context is computed and its KV is sent on (the engine hands it off).
- On a generation server a request arrives with its prompt's KV (the engine's lease holds it and the first
  decode token) and waits to be scheduled as a generation request: ``GUARANTEED_NO_EVICT`` admits it, in queue
  order, only when the blocks it still needs to complete (output left, less what it holds) fit the free blocks
  the running requests leave, as for any request; it then decodes one token a step. TensorRT-LLM's capacity
  scheduler reserves those blocks before the transfer (``DISAGG_GENERATION_INIT``); servesim leases the prompt's
  KV first-come-first-served and reserves the rest at admission, so a running request can find its block taken
  by a lease and be paused (recomputed on the generation server), where TensorRT-LLM never evicts; and a generation
  server with nothing running admits the first received request whose completion does not fit (else the leases,
  holding blocks TensorRT-LLM would have reserved, could keep every request waiting).
- The capacity scheduler counts those ``DISAGG_GENERATION_INIT`` requests against ``max_batch_size`` with the
  running ones, so a generation server holds at most ``max_batch_size`` requests running, received or receiving
  (``decode_seats``): a prefilled request whose generation server is full keeps its KV on the context server and
  waits for a seat, and its first token, which the client receives from the generation server, waits with it.
  Recipes that give each generation server fewer seats than the clients it serves (InferenceX's disaggregated
  DeepSeek runs: e.g. 3 servers of ``max_batch_size`` 1 for 6 users) measure that wait as TTFT.
"""

from __future__ import annotations

from itertools import starmap
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from policies.batching.common import (
    Budget,
    admission_order,
    admit_waiting,
    batch_lead,
    bring_up_to_date,
    members_owed,
    never_fits,
    oversized,
    schedule_running,
    total_tokens,
)
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, RequestView, StepPlan

CapacityPolicy = Literal["GUARANTEED_NO_EVICT", "MAX_UTILIZATION"]


class AttentionDpConfig(BaseModel):
    """TensorRT-LLM's ``attention_dp_config`` (``AttentionDpConfig`` in ``tensorrt_llm/llmapi/llm_args.py``, defaults
    as there): with attention data parallelism and ``enable_balance``, the ranks run their context requests only
    together (``simulator/cluster/dp_attention.py``, ``AttentionDpBalance``). Without attention DP it does nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enable_balance: bool = Field(
        False, description="Hold context requests back until every attention-DP rank has one (or the timeout)."
    )
    timeout_iters: int = Field(50, ge=0, description="Steps the contexts may be held back waiting for every rank.")
    batching_wait_iters: int = Field(
        10, ge=0, description="Steps every rank's contexts are held further, beside generation, to gather more."
    )


class TrtllmParams(BaseModel):
    """Parameters of the ``trtllm`` policy (names as in TensorRT-LLM's LLM API)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["trtllm"] = "trtllm"
    max_batch_size: int = Field(2048, ge=1, description="Most requests scheduled at once.")
    max_num_tokens: int = Field(8192, ge=1, description="Most tokens computed in one step (contexts plus decodes).")
    capacity_scheduler_policy: CapacityPolicy = Field(
        "GUARANTEED_NO_EVICT",
        description="GUARANTEED_NO_EVICT: admit only with KV reserved to completion (never preempts); "
        "MAX_UTILIZATION: admit while this step fits, pause the newest when KV runs out.",
    )
    enable_chunked_prefill: bool = Field(
        False, description="Chunked context: prompts are split to fit the token budget (else a prompt fits whole)."
    )
    batch_wait_timeout_iters: int = Field(
        0,
        ge=0,
        description="Batch waiting: steps a context may be held back beside generation requests to gather more "
        "(0: off; PyExecutor._waiting_requests).",
    )
    batch_wait_max_tokens_ratio: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Batch waiting: contexts are held back while the step's tokens (context sequences plus "
        "generation tokens) stay below this fraction of max_num_tokens (0: off).",
    )
    attention_dp_config: AttentionDpConfig = Field(
        default_factory=AttentionDpConfig,
        description="Attention data parallelism's context balancing (with parallelism.dp_attention only).",
    )
    piecewise_cuda_graph_max_tokens: int = Field(
        0,
        ge=0,
        description="torch_compile_config.enable_piecewise_cuda_graph with capture_num_tokens up to this many (the "
        "engine drops sizes above max_num_tokens): a step holding a context of at most that many tokens replays "
        "piecewise CUDA graphs instead of being launched eagerly; 0: off (TensorRT-LLM's default).",
    )

    @property
    def piecewise_graph_max_tokens(self) -> int:
        """The most tokens of a step holding a context that replays piecewise CUDA graphs (0: none)."""
        return min(self.piecewise_cuda_graph_max_tokens, self.max_num_tokens)


def _is_generation(req: RequestView, n: int) -> bool:
    """A generation request of a plan: one token after a computed sequence (anything else is a context request)."""
    return n == 1 and 0 < req.num_computed_tokens == req.num_tokens - 1


def num_generation(plan: StepPlan) -> int:
    """How many of ``plan``'s scheduled requests are generation requests (the decode batch's members that open it,
    ``num_lead_decodes``, each one: a member wants its next token after a computed sequence)."""
    lead = plan.num_lead_decodes
    if lead:
        return lead + sum(starmap(_is_generation, plan.scheduled[lead:]))
    return sum(starmap(_is_generation, plan.scheduled))


def hold_back_contexts(plan: StepPlan) -> None:
    """Leave ``plan``'s context requests (and the KV they would reserve) for a later step: it runs its generation
    requests alone."""
    generation: list[tuple[RequestView, int]] = []
    for i, (req, n) in enumerate(plan.scheduled):
        if _is_generation(req, n):
            generation.append((req, n))
        else:
            plan.kv_tokens.pop(req, None)
            if i < plan.num_lead_decodes:  # no longer opened by the members steady_decodes vouched for
                plan.num_lead_decodes = 0
    plan.scheduled = generation


def _context_only(req: RequestView) -> int:
    """The KV tokens a context-only request (``max_tokens = 1``) holds at completion: its prompt and one token."""
    return req.num_prompt_tokens + 1


@BATCH_POLICIES.register(
    "trtllm",
    params=TrtllmParams,
    traits=BatchTraits(
        engine="trtllm",
        overlaps_cpu=True,
        steady_decode=True,
        kv_transfer=True,
        eager_prefill=True,
        seats_before_transfer=True,
        dp_attention_local_mlp=True,
        dp_attention_padding="none",
    ),
)
class TrtllmPolicy:
    """In-flight batching: decodes and contexts under one token budget, admission by the capacity policy."""

    def __init__(self, params: TrtllmParams) -> None:
        self.max_batch_size = params.max_batch_size
        self.max_num_tokens = params.max_num_tokens
        self.no_evict = params.capacity_scheduler_policy == "GUARANTEED_NO_EVICT"
        self.chunked = params.enable_chunked_prefill
        self.wait_iters = params.batch_wait_timeout_iters
        self.wait_tokens = params.batch_wait_max_tokens_ratio * params.max_num_tokens
        self._waited_iters = 0  # PyExecutor.batch_wait_iters_count: steps the contexts were held back in a row

    def decode_seats(self) -> int:
        # a generation server's DISAGG_GENERATION_INIT requests are scheduled under max_batch_size with the rest
        return self.max_batch_size

    def steady_decode(self, view: ReplicaView) -> bool:
        # nothing queued: every running request is scheduled, decodes one token each while they fit the budget
        return not view.waiting and view.num_running <= self.max_num_tokens

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        plan = StepPlan()
        # An engine that keeps its decoding requests as a batch lists them as they are, counters behind (as vLLM's
        # plan reads them): a member still wants one token, so the split below holds; schedule_running takes the
        # members through the batch's totals, and so does the admission test (the blocks they lack to completion).
        running, lead = batch_lead(view)
        unit = view.block_size

        def chunk(remaining: int, tokens_left: int) -> int:
            n = min(remaining, tokens_left)
            if n == remaining:
                return n
            if not self.chunked:
                # a context is computed whole, or waits; only a paused request's recompute longer than a step
                # (prompt plus generated tokens) is spread over steps
                return n if remaining > self.max_num_tokens else remaining
            # a chunk that is not the prompt's last is cut to whole blocks (when at least one block fits)
            return n // unit * unit or n

        def running_chunk(remaining: int, tokens_left: int) -> int:
            return chunk(remaining, tokens_left) if self.chunked else min(remaining, tokens_left)

        def reject(req: RequestView) -> str | None:
            if (reason := never_fits(view, req)) is not None:
                return reason
            fresh = req.num_generated_tokens == 0
            return oversized(req, self.max_num_tokens) if fresh and not self.chunked else None

        # generation requests first, then the contexts in progress (chunked), each in admission order
        # the decode batch's members, when they lead the list, are its first decodes: only the rest are read (else all
        # are, a stale member still wanting one token)
        members = lead[0] if lead is not None else 0
        rest = running[members:] if members else running
        decodes = [r for r in rest if r.num_tokens - r.num_computed_tokens == 1]
        contexts = [r for r in rest if r.num_tokens - r.num_computed_tokens > 1]
        budget = Budget(self.max_num_tokens, self.max_batch_size - len(running), view.num_free_blocks)
        if members == len(running):  # only the members run (schedule_running copies the list it is given)
            order = running
        else:
            if members:
                decodes[:0] = running[:members]
            order = decodes + contexts
        schedule_running(view, order, plan, budget, admission_order(running), chunk=running_chunk, lead=lead)
        if plan.preempt:
            return plan  # MAX_UTILIZATION paused the newest (GUARANTEED_NO_EVICT never gets here)
        # GUARANTEED_NO_EVICT: blocks left once every running request is driven to completion; a context server's
        # requests complete at their first token (max_tokens = 1)
        to_completion = _context_only if view.role == "prefill" else total_tokens
        spare: int | None = None  # counted at the first admission test (nothing is admitted on most steps)

        # a generation server with nothing running admits its first received request even when its completion does
        # not fit: the leases of received KV hold blocks TensorRT-LLM would have reserved before the transfer, and
        # with nothing running none would ever be freed
        unblock = view.role == "decode" and not running

        def reserves_to_completion(req: RequestView, need: int) -> bool:
            nonlocal spare
            if spare is None:
                # the members' blocks to completion as the decode batch's total (their counters behind), or each read
                owed = members_owed(view) if members and view.role != "prefill" else None
                if owed is None:
                    bring_up_to_date(view)
                    owed, others = 0, running
                else:
                    others = running[members:]
                spare = view.num_free_blocks - owed - sum(view.num_new_blocks(r, to_completion(r)) for r in others)
            whole = view.num_new_blocks(req, to_completion(req))
            if whole > spare and not (unblock and not plan.scheduled and req.num_generated_tokens):
                return False
            spare -= whole
            return True

        admit_waiting(
            view,
            view.waiting,
            plan,
            budget,
            chunk=chunk,
            reject=reject,
            admissible=reserves_to_completion if self.no_evict else None,
        )
        if self.wait_iters or self.wait_tokens:
            self._hold_contexts(plan)
        return plan

    def _hold_contexts(self, plan: StepPlan) -> None:
        """Batch waiting (``PyExecutor._schedule`` and ``_waiting_requests`` in TensorRT-LLM's
        ``tensorrt_llm/_torch/pyexecutor/py_executor.py``): a step that schedules both contexts and generation
        requests runs its contexts only once the step's tokens (each context's whole sequence, one per generation
        request) reach ``batch_wait_max_tokens_ratio x max_num_tokens`` or the contexts were held back
        ``batch_wait_timeout_iters`` steps in a row; until then it runs the generation requests alone."""
        scheduled = plan.scheduled
        generation = num_generation(plan)
        if not generation or generation == len(scheduled):
            return  # no generation request (TensorRT-LLM never waits then) or no context
        contexts = sum(req.num_tokens for req, n in scheduled if not _is_generation(req, n))
        if self._waited_iters >= self.wait_iters or contexts + generation >= self.wait_tokens:
            self._waited_iters = 0
            return
        self._waited_iters += 1
        hold_back_contexts(plan)
