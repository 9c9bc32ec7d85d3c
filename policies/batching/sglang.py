"""``sglang``: SGLang's scheduler: a prefill batch or a decode batch per step, new-token-ratio admission, retraction.

Models SGLang's ``Scheduler`` (``python/sglang/srt/managers/scheduler.py``) and its
``PrefillAdder`` and ``SchedulePolicy`` (``python/sglang/srt/managers/schedule_policy.py``),
as in SGLang v0.5.x (read at sgl-project/sglang commit 00550cd for ``schedule_policy.py``;
the ratio constants are ``global_config.py``'s, v0.4.9 and after, now ``SGLANG_*`` environment
variables; ``server_args.py``'s ``_handle_gpu_memory_settings`` for the chunk size):

- Each step is either a prefill (extend) batch or a decode batch, not both: SGLang first tries
  to build a prefill batch (``get_new_batch_prefill``) and runs it whenever it admits anything
  or continues the chunked request; otherwise every running request decodes one token.
  ``enable_mixed_chunk`` (off by default) adds the running decodes to a prefill batch, one
  token each, taken from the prefill budget first.
- Prefill admission (``PrefillAdder``), over the waiting queue in policy order: the request in
  chunked prefill first, then waiting ones. Memory left for admission is the free KV less, for
  each running request, ``min(max_new_tokens - generated, CLIP) * new_token_ratio`` (``CLIP`` =
  4096, ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``); a request is admitted while its
  uncached prompt plus ``min(max_new_tokens, CLIP)`` stays under it (else admission stops), and
  while the batch's prompt tokens stay within ``max_prefill_tokens`` (16384; without chunking
  the first request may exceed it) and, with chunked prefill, ``chunked_prefill_size``: the
  request that does not fit the chunk budget is truncated to it and becomes the one chunked
  request (it reserves only its chunk until its last chunk). At most ``max_running_requests``
  run. A request whose prompt plus output cannot fit the whole KV cache is refused.
- ``new_token_ratio`` starts at ``init_new_token_ratio = min(0.7 * schedule_conservativeness,
  1)``, decays by ``(init - min) / 600`` after every decode step that retracted nothing, down to
  ``min_new_token_ratio = init * 0.14`` (0.098 by default), and is reset to ``init`` when the
  scheduler goes idle (no batch to run).
- Retraction (``ScheduleBatch.retract_decode``): when the free KV cannot hold the next token of
  every running request, requests are retracted (their KV dropped, recomputed later) in order of
  fewest output tokens, ties to the longest prompt, until the rest fit (one is always kept); the
  ratio is then set to ``min(1, (decoded + 20 * n) / (sum of max_new_tokens + 1))`` over the ``n``
  remaining requests (``SGLANG_RETRACT_DECODE_STEPS`` = 20), which raises it after a retraction.
- ``schedule_policy``: ``fcfs`` (SGLang's default in v0.5.x; the v0.3-era ``ServerArgs``
  defaulted to ``lpm``) keeps the queue's order; ``lpm`` (longest prefix match) sorts the queue by cached
  prefix length, longest first (``_sort_by_longest_prefix``; a stable sort, FCFS among equals),
  and, as SGLang does, falls back to FCFS when more than 128 requests wait or prefix caching is
  off (every hit is 0). Turn prefix caching on with ``kv_cache: {prefix_caching: true}``
  (SGLang's radix cache is on by default).

Defaults (``ServerArgs``): ``chunked_prefill_size`` ``None`` means SGLang's default for the GPU,
resolved when the replica is built (``resolve_for_hardware``): 2048 below 35 GiB of GPU memory
(T4, A10, L4, 4090), 4096 below 60 GiB (A100-40GB, L40S), 8192 below 160 GiB (A100-80GB, H100,
H200), 16384 above (B200, MI300X), 4096 where no GPU is known; 0 or -1 turns chunked prefill off.
``max_running_requests`` ``None`` means SGLang's rule from the KV pool:
``min(pool_tokens // 2, req_pool)`` with ``req_pool = clamp(pool_tokens / context_len * 512,
2048, 4096)`` (``Scheduler.__init__``, ``ModelRunner.init_memory_pool``).

Disaggregated prefill/decode (``--disaggregation-mode prefill|decode``; ``python/sglang/srt/disaggregation/``):

- A prefill server runs prefill batches only (``get_next_disagg_prefill_batch_to_run``): admission as above, but
  every request counts one output token (``PrefillBootstrapQueue._process_req`` sets ``max_new_tokens = 1``); a
  request leaves when its prompt is computed and its KV is sent on (the engine hands it off).
- A decode server takes the requests whose KV has arrived from its waiting queue, as many as
  ``max_running_requests`` leaves room for, in queue order, into the running batch without a forward pass
  (``get_new_prebuilt_batch``, ``process_batch_result_prebuilt``, which streams their first token: servesim's
  ``BatchTraits.first_token_at_admission``), and runs one decode batch of all of them
  (``get_next_disagg_decode_batch_to_run``): retraction and the ``new_token_ratio`` update as above, the received
  requests counted in the ratio but never retracted (they need no block: the lease that received their KV holds
  the first decode token). Which transfers may land is the engine's KV lease (prompt plus one token, first come
  first served), where SGLang's ``DecodePreallocQueue.pop_preallocated`` also keeps
  ``SGLANG_NUM_RESERVED_DECODE_TOKENS`` per running request and the clipped output back. A request retracted on a
  decode server is recomputed there (SGLang offloads its KV to host memory and loads it back).

servesim's KV is paged: SGLang's token arithmetic is kept in tokens (free blocks times the block
size), and a chunk must also get its blocks. Left out: the overlap scheduler (CPU scheduling of
step N+1 while step N runs), in-batch prefix deprioritization of LPM (it needs token contents),
the ``lof``/``dfs-weight``/``random`` policies, priority scheduling and its preemption, page-size
alignment of chunks, SGLang's own speculative-decoding scheduling paths, hierarchical cache, and where
retracted requests go: servesim queues them at the front, SGLang appends them to its queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from policies.batching.common import (
    Budget,
    batch_lead,
    bring_up_to_date,
    is_decode,
    never_fits,
    running_unsynced,
    schedule_running,
)
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import ReplicaView, RequestView, StepPlan

MIB = 2**20
CLIP_MAX_NEW_TOKENS = 4096
"""``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``: the most output tokens admission counts for one request."""
RETRACT_DECODE_STEPS = 20
"""``SGLANG_RETRACT_DECODE_STEPS``: decode steps per request the ratio allows for after a retraction."""
LPM_MAX_QUEUE = 128
"""Above this many waiting requests SGLang sorts nothing (LPM falls back to FCFS)."""


def sglang_chunked_prefill_size(device_memory_bytes: float) -> int:
    """SGLang's default ``chunked_prefill_size`` for a GPU of this memory (``_handle_gpu_memory_settings``)."""
    if device_memory_bytes <= 0:
        return 4096  # no GPU known
    mib = device_memory_bytes / MIB
    if mib < 35 * 1024:
        return 2048
    if mib < 60 * 1024:
        return 4096
    if mib < 160 * 1024:
        return 8192
    return 16384


class SglangParams(BaseModel):
    """Parameters of the ``sglang`` policy (names as in SGLang's ServerArgs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sglang"] = "sglang"
    max_running_requests: int | None = Field(
        None, ge=1, description="Most requests running at once; None: SGLang's rule from the KV pool size."
    )
    max_mamba_cache_size: int | None = Field(
        None,
        ge=1,
        description="A hybrid linear-attention model's recurrent-state slots (SGLang's MambaPool), which cap the "
        "running requests; None: sized from memory (max_running_requests where given, else SGLang's "
        "mamba_full_memory_ratio 0.9 share of the static pool the weights leave: simulator/kv/memory.py). Read "
        "only for a model with linear-attention layers.",
    )
    chunked_prefill_size: int | None = Field(
        None,
        ge=-1,
        description="Most prompt tokens of one prefill batch, a longer prompt chunked; None: SGLang's default "
        "for the GPU (8192 on A100-80GB, H100, H200; 16384 on B200, MI300X); 0 or -1: no chunked prefill.",
    )
    max_prefill_tokens: int = Field(16384, ge=1, description="Most prompt tokens of one prefill batch.")
    schedule_policy: Literal["fcfs", "lpm"] = Field(
        "fcfs", description="Queue order: first come first served, or longest cached prefix first."
    )
    schedule_conservativeness: float = Field(
        1.0, ge=0, description="Scales init_new_token_ratio (larger: more KV reserved for running requests)."
    )
    enable_mixed_chunk: bool = Field(False, description="Running decodes join prefill batches.")
    init_new_token_ratio: float = Field(
        0.7, gt=0, le=1, description="SGLANG_INIT_NEW_TOKEN_RATIO: share of remaining output reserved at first."
    )
    min_new_token_ratio_factor: float = Field(
        0.14, ge=0, le=1, description="SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the ratio's floor, times its start."
    )
    new_token_ratio_decay_steps: int = Field(
        600, ge=1, description="SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: decode steps from the start to the floor."
    )
    moe_runner_backend: Literal[
        "auto",
        "deep_gemm",
        "triton",
        "triton_kernel",
        "flashinfer_trtllm",
        "flashinfer_cutlass",
        "flashinfer_mxfp4",
        "flashinfer_cutedsl",
        "cutlass",
    ] = Field(
        "auto",
        description="--moe-runner-backend. Read for the attention-DP layout only: flashinfer_cutlass with NVFP4 "
        "experts, attention DP and ep equal to the DP size runs each rank's MoE layers on its own tokens, all-gathered "
        "quantized to FP4 for the routed experts (should_use_flashinfer_cutlass_moe_fp4_allgather, "
        "python/sglang/srt/layers/moe/utils.py; simulator/cost/dp_attention.py). The experts' kernel times are the "
        "measured SGLang tables' whatever the runner.",
    )
    moe_dense_tp_size: Literal[1] | None = Field(
        None,
        description="--moe-dense-tp-size: 1 runs the dense layers' MLP on each attention-DP rank's own tokens "
        "(enable_moe_dense_fully_dp, python/sglang/srt/layers/communicator.py); None, on every rank's tokens split "
        "over all tp. Read only with attention data parallelism (simulator/cost/dp_attention.py).",
    )
    enable_dp_lm_head: bool = Field(
        False,
        description="--enable-dp-lm-head: each attention-DP rank runs the LM head on its own tokens instead of on "
        "every rank's tokens split over all tp. Read only with attention data parallelism.",
    )
    scheduler_recv_interval: int = Field(
        1,
        ge=1,
        le=10_000,
        description="--scheduler-recv-interval: the scheduler takes new requests in after this many decode steps "
        "(a step with a prefill counts in full: python/sglang/srt/managers/scheduler_recv_skipper.py); 1: every step.",
    )

    def resolve_for_hardware(self, device_memory_bytes: float, device_name: str) -> SglangParams:
        """These parameters with a ``None`` chunk size replaced by SGLang's default for the GPU."""
        if self.chunked_prefill_size is not None:
            return self
        return self.model_copy(update={"chunked_prefill_size": sglang_chunked_prefill_size(device_memory_bytes)})


def _to_compute(req: RequestView) -> int:
    return req.num_tokens - req.num_computed_tokens


def _output_left(req: RequestView) -> int:
    return min(req.num_output_tokens - req.num_generated_tokens, CLIP_MAX_NEW_TOKENS)


def _max_new(view: ReplicaView, req: RequestView) -> int:
    """The output tokens admission counts for ``req``: on a prefill server SGLang sets every request's
    ``max_new_tokens`` to 1 (``PrefillBootstrapQueue._process_req``), as the request leaves once its prompt is done."""
    return 1 if view.role == "prefill" else _output_left(req)


def _received(view: ReplicaView, seats: int) -> list[RequestView]:
    """Waiting requests whose prompt's KV arrived by transfer (a decode server's), at most ``seats``, queue order."""
    if seats <= 0:
        return []
    return [r for r in view.waiting if r.num_generated_tokens and is_decode(r)][:seats]


def _retract_key(req: RequestView) -> tuple[int, int]:
    # retract_decode keeps the most advanced: the first retracted has the fewest output tokens, then the longest prompt
    return (-req.num_generated_tokens, req.num_prompt_tokens)


@BATCH_POLICIES.register(
    "sglang",
    params=SglangParams,
    traits=BatchTraits(
        engine="sglang",
        overlaps_cpu=True,
        steady_decode=True,
        kv_transfer=True,
        hardware_defaults=True,
        eager_prefill=True,
        first_token_at_admission=True,
    ),
)
class SglangPolicy:
    """SGLang: prefill batches when something can be admitted, else decode; new-token-ratio admission."""

    def __init__(self, params: SglangParams) -> None:
        if params.chunked_prefill_size is None:
            params = params.resolve_for_hardware(0, "")  # no GPU known: SGLang's fallback
        size = params.chunked_prefill_size
        assert size is not None
        self.chunked_prefill_size: int | None = size if size > 0 else None
        self.max_prefill_tokens = params.max_prefill_tokens
        self.max_running_requests = params.max_running_requests
        self.max_mamba_cache_size = params.max_mamba_cache_size
        self.lpm = params.schedule_policy == "lpm"
        self.mixed = params.enable_mixed_chunk
        self.init_new_token_ratio = min(params.init_new_token_ratio * params.schedule_conservativeness, 1.0)
        self.min_new_token_ratio = min(self.init_new_token_ratio * params.min_new_token_ratio_factor, 1.0)
        self.new_token_ratio_decay = (
            self.init_new_token_ratio - self.min_new_token_ratio
        ) / params.new_token_ratio_decay_steps
        self.new_token_ratio = self.init_new_token_ratio
        # the engine's step count once the last plan's step ran: after steady_decode said yes the engine may run
        # decode steps without asking (fast-forward), and the ratio decays once per decode step all the same
        self._steps_after_plan = 0
        self._may_have_skipped = False

    # -- state kept across steps -----------------------------------------------------------------------

    def _decay(self) -> None:
        self.new_token_ratio = max(self.new_token_ratio - self.new_token_ratio_decay, self.min_new_token_ratio)

    def _catch_up(self, view: ReplicaView) -> None:
        """Decay the ratio once for every decode step the engine ran since the last plan beyond it (a fast-forward
        window's steps: the engine's step count, since the requests that ran them may all have finished)."""
        if not self._may_have_skipped:
            return
        self._may_have_skipped = False
        extra = view.num_steps - self._steps_after_plan
        for _ in range(max(extra, 0)):
            self._decay()

    def _remember(self, view: ReplicaView, plan: StepPlan) -> None:
        # the steps the engine will have run once this plan's step is recorded (a plan scheduling nothing runs none)
        self._steps_after_plan = view.num_steps + (1 if plan.scheduled else 0)

    def steady_decode(self, view: ReplicaView) -> bool:
        # nothing queued and no chunked prefill in progress: every step is a decode batch of all running requests
        # a decode batch's member still wants one token with its counters behind: they need not be brought current
        unsynced = running_unsynced(view)
        running = view.running if unsynced is None else unsynced
        steady = not view.waiting and all(_to_compute(r) == 1 for r in running)
        self._may_have_skipped = self._may_have_skipped or steady
        return steady

    def max_running(self, view: ReplicaView) -> int:
        if self.max_running_requests is not None:
            limit = self.max_running_requests
        else:
            pool = view.num_total_blocks * view.block_size
            req_pool = min(max(int(pool / max(view.max_model_len, 1) * 512), 2048), 4096)
            limit = max(1, min(pool // 2, req_pool))
        # a hybrid model's running requests each hold a state slot (ModelRunner's max_running_requests takes
        # min(..., max_mamba_cache_size // ratio), the ratio 1 with the radix cache off; the build sets the slots
        # only for such a model)
        if self.max_mamba_cache_size is not None:
            limit = min(limit, self.max_mamba_cache_size)
        return limit

    def queue_order(self, view: ReplicaView) -> Sequence[RequestView]:
        waiting = view.waiting
        if not self.lpm or len(waiting) > LPM_MAX_QUEUE:
            return waiting
        return sorted(waiting, key=lambda r: -(r.num_computed_tokens or view.prefix_hit_tokens(r)))

    def _refuse(self, view: ReplicaView, req: RequestView) -> str | None:
        if (reason := never_fits(view, req)) is not None:
            return reason
        pool = view.num_total_blocks * view.block_size
        need = req.num_tokens + _max_new(view, req)
        if need >= pool:
            return f"needs {need} KV tokens for prompt + output; admission needs fewer than the cache's {pool}"
        return None

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan:
        self._catch_up(view)
        # An engine that keeps its decoding requests as a batch lists them with their counters behind (as vLLM's plan
        # reads them). When the members lead the list they are its first decodes (each wants one token) and their
        # next tokens' blocks are the batch's total (``lead``); what reads a member's own counters or blocks (the
        # prefill batch's memory check, a retraction) brings them current first. Otherwise they are read current.
        running, lead = batch_lead(view)
        if lead is None:
            running = view.running
            decodes = [r for r in running if _to_compute(r) == 1]
            chunked = [r for r in running if _to_compute(r) > 1]
        else:
            rest = running[lead[0] :]
            decodes = running[: lead[0]] + [r for r in rest if _to_compute(r) == 1]
            chunked = [r for r in rest if _to_compute(r) > 1]
        received = _received(view, self.max_running(view) - len(running)) if view.role == "decode" else []
        if received:
            # a decode server: the received requests join the running ones without a forward pass of their own
            # (get_new_prebuilt_batch, process_batch_result_prebuilt) and this step decodes them all
            plan = StepPlan()
            self._decode(view, decodes, plan, received, lead)
            prefilled = True
        else:
            if lead is not None and (view.waiting or chunked or (self.mixed and decodes)):
                bring_up_to_date(view)  # the prefill batch's memory check reads every decode's counters and blocks
                lead = None
            plan, prefilled = self._prefill(view, decodes, chunked)
        if not prefilled:
            # nothing to prefill: a decode batch of every running request (rejections kept)
            plan = StepPlan(reject=plan.reject)
            if decodes:
                self._decode(view, decodes, plan, (), lead)
            elif chunked:  # the chunked request cannot get memory and nothing decodes: its chunk runs anyway
                size = self.chunked_prefill_size or 2**62
                budget = Budget(size, 2**62, view.num_free_blocks)
                schedule_running(view, chunked, plan, budget, _retract_key, chunk=min)
        if not plan.scheduled and not plan.preempt and not plan.reject:
            self.new_token_ratio = self.init_new_token_ratio  # idle: SGLang re-inits the ratio
        self._remember(view, plan)
        return plan

    def _prefill(
        self, view: ReplicaView, decodes: list[RequestView], chunked: list[RequestView]
    ) -> tuple[StepPlan, bool]:
        """SGLang's ``get_new_batch_prefill``: the prefill batch's plan, and whether it prefills anything."""
        plan = StepPlan()
        bs = view.block_size
        free_blocks = view.num_free_blocks
        mixed_tokens = 0
        if self.mixed and decodes:
            need = sum(view.num_new_blocks(r, r.num_computed_tokens + 1) for r in decodes)
            if need > free_blocks:
                return plan, False  # the decodes need a retraction first
            plan.scheduled = [(r, 1) for r in decodes]
            free_blocks -= need
            mixed_tokens = len(decodes)
        seats = self.max_running(view) - len(decodes) - len(chunked)
        if not view.waiting and not chunked:
            return plan, False
        rem_total = free_blocks * bs - sum(_output_left(r) * self.new_token_ratio for r in decodes)
        rem_input = self.max_prefill_tokens - mixed_tokens
        rem_chunk = None if self.chunked_prefill_size is None else self.chunked_prefill_size - mixed_tokens
        admitted = 0
        for r in chunked:  # add_chunked_req: the next chunk, cut to the memory left
            left = _to_compute(r)
            n = min(left, rem_chunk if rem_chunk is not None else left, int(rem_total))
            need = view.num_new_blocks(r, r.num_computed_tokens + n) if n > 0 else 0
            if n <= 0 or need > free_blocks:
                return plan, False
            rem_total -= n + (_max_new(view, r) if n == left else 0)
            rem_input -= n
            rem_chunk = None if rem_chunk is None else rem_chunk - n
            free_blocks -= need
            plan.scheduled.append((r, n))
            admitted += 1
        for req in self.queue_order(view):
            if (reason := self._refuse(view, req)) is not None:
                plan.reject.append((req, reason))
                continue
            if seats <= 0 or rem_total <= 0 or rem_input <= 0 or (rem_chunk is not None and rem_chunk <= 0):
                break
            computed = req.num_computed_tokens or view.prefix_hit_tokens(req)
            extend = req.num_tokens - computed
            max_new = _max_new(view, req)
            if extend + max_new >= rem_total:
                break  # NO_TOKEN
            if rem_chunk is None and admitted and extend >= rem_input:
                break  # without chunking only the first request may exceed max_prefill_tokens
            if rem_chunk is None or extend <= rem_chunk:
                n, reserve = extend, extend + max_new
            else:
                n, reserve = rem_chunk, rem_chunk  # the new chunked request: only its chunk until the last one
            need = view.num_new_blocks(req, computed + n)
            if need > free_blocks:
                break
            rem_total -= reserve
            rem_input -= n
            rem_chunk = None if rem_chunk is None else rem_chunk - n
            free_blocks -= need
            seats -= 1
            plan.scheduled.append((req, n))
            admitted += 1
        return plan, admitted > 0

    def _decode(
        self,
        view: ReplicaView,
        decodes: list[RequestView],
        plan: StepPlan,
        received: Sequence[RequestView] = (),
        lead: tuple[int, int] | None = None,
    ) -> None:
        """SGLang's ``update_running_batch``: retract when the next tokens do not fit, else decay the ratio.

        ``received``: on a decode server, waiting requests whose KV arrived, merged into this decode batch. Their
        KV lease holds their first decode token, so they need no block; only running requests are retracted.
        """
        free = view.num_free_blocks
        if lead is not None:  # the batch's members lead ``decodes``, their counters behind: their blocks as a total
            members, members_need = lead
            short = members_need + sum(view.num_new_blocks(r, r.num_computed_tokens + 1) for r in decodes[members:])
            short -= free
            if short > 0:  # a retraction reads each request's blocks and counters
                bring_up_to_date(view)
                lead = None
        if lead is None:  # (also after a sync for a retraction)
            need = {id(r): view.num_new_blocks(r, r.num_computed_tokens + 1) for r in decodes}
            short = sum(need.values()) - free
        keep = list(decodes)
        if short > 0:
            order = sorted(decodes, key=_retract_key)  # the last is retracted first
            while short > 0 and len(order) > 1:
                victim = order.pop()
                plan.preempt.append(victim)
                freed = view.num_freeable_blocks(victim)
                free += freed
                short -= freed + need[id(victim)]
            gone = {id(r) for r in plan.preempt}
            keep = [r for r in decodes if id(r) not in gone]
            batch = [*keep, *received]
            decoded = sum(r.num_generated_tokens for r in batch)
            budget = sum(r.num_output_tokens for r in batch)
            self.new_token_ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(batch)) / (budget + 1))
        else:
            self._decay()
        budget_left = Budget(2**62, 2**62, free)
        schedule_running(view, keep, plan, budget_left, _retract_key, lead=lead)
        for r in received:
            need = view.num_new_blocks(r, r.num_computed_tokens + 1)
            if need > budget_left.free_blocks:
                break  # (a lease always holds the first decode token; kept for a view that does not)
            budget_left.free_blocks -= need
            plan.scheduled.append((r, 1))
