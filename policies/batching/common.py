"""Building blocks shared by the batch policies: budgets, admission and preemption loops.

They only read views and append to a StepPlan; the engine carries the plan out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Literal

from policies.interface import ReplicaView, RequestView, StepPlan

VictimKey = Callable[[RequestView], Any]
"""Orders requests for preemption: the one with the largest key is preempted first."""


@dataclass(slots=True)
class Budget:
    """What is left for the step being planned: tokens, sequence slots and free KV blocks."""

    tokens: int
    seqs: int
    free_blocks: int


@dataclass(frozen=True, slots=True)
class Admission:
    """What ``admit_waiting`` did: how many requests it admitted and what stopped it."""

    num_admitted: int
    stopped_by: Literal["queue", "tokens", "seqs_or_blocks"]  # the queue ran out, the token budget, or room


# vLLM's _DEFAULT_MAX_NUM_BATCHED_TOKENS (vllm/config.py): SchedulerConfig's budget without chunked prefill, when
# unset, is max(max_model_len, 2048) ("if max_model_len is too short, use _DEFAULT_MAX_NUM_BATCHED_TOKENS").
DEFAULT_BATCHED_TOKENS = 2048


def unchunked_budget(max_num_batched_tokens: int | None, max_model_len: int) -> int:
    """A prefill-first policy's token budget: as set, or vLLM V0's default ``max(max_model_len, 2048)``."""
    if max_num_batched_tokens is not None:
        return max_num_batched_tokens
    return max(max_model_len, DEFAULT_BATCHED_TOKENS)


def is_decode(req: RequestView) -> bool:
    """Its prompt is computed: each step now gives it one token (the engine's own test adds n == 1)."""
    return req.num_computed_tokens >= req.num_prompt_tokens


def admission_order(running: Sequence[RequestView]) -> VictimKey:
    """A key ranking ``running`` (oldest admission first, as a view lists them) by admission: the newest is largest.

    The ranks are built at the key's first use (most steps preempt nothing and never ask); ``running`` must not
    change in between (a policy only reads it while it plans)."""
    rank: dict[int, int] | None = None

    def key(r: RequestView) -> int:
        nonlocal rank
        if rank is None:
            rank = {id(q): i for i, q in enumerate(running)}
        return rank[id(r)]

    return key


def newest_first(requests: Iterable[RequestView], key: VictimKey) -> list[RequestView]:
    """``requests`` in preemption order under ``key``: largest key first."""
    return sorted(requests, key=key, reverse=True)


def total_tokens(req: RequestView) -> int:
    """Prompt plus the full output: the most KV a request can ever need."""
    return req.num_prompt_tokens + req.num_output_tokens


def oversized(req: RequestView, limit: int | None) -> str | None:
    """A rejection reason when the tokens a waiting request must prefill in one step exceed the per-step ``limit``.

    For a policy without chunked prefill: its prompt (or, after a recompute preemption, prompt
    plus generated tokens) must be computed in the step it joins, as vLLM V0 refuses a prompt
    longer than its prompt limit. Its output is generated one token a step and never counts
    against the limit.
    """
    n = req.num_tokens - req.num_computed_tokens
    if limit is not None and n > limit:
        what = "prompt" if req.num_generated_tokens == 0 else "recompute (prompt + generated)"
        return f"{what} of {n} tokens exceeds max_num_batched_tokens ({limit}), which must hold it in one step"
    return None


def never_fits(view: ReplicaView, req: RequestView) -> str | None:
    """A rejection reason when prompt plus output need more KV blocks than the replica has at all.

    Such a request would preempt itself at its last block for ever; a real engine refuses to
    start when one ``max_model_len`` sequence does not fit its KV cache.
    """
    need = -(-total_tokens(req) // view.block_size)
    if need > view.num_total_blocks:
        return f"needs {need} KV blocks for prompt + output but the cache holds {view.num_total_blocks}"
    return None


def running_unsynced(view: ReplicaView) -> Sequence[RequestView] | None:
    """The running requests of a view that keeps its decoding requests as a batch, the members' counters possibly
    behind (a member still wants one token); None for a view that lists them current only (``view.running``)."""
    return getattr(view, "running_unsynced", None)


def batch_lead(view: ReplicaView) -> tuple[Sequence[RequestView], tuple[int, int] | None]:
    """The running requests as a plan may list them (``running_unsynced`` where the view keeps a decode batch, else
    ``view.running``), and, when the batch's members are the first of them, how many they are and the KV blocks their
    next tokens take together (``steady_decodes``; each wants one token, its counters possibly behind); else None."""
    unsynced = running_unsynced(view)
    if unsynced is None:
        return view.running, None
    steady = getattr(view, "steady_decodes", None)
    return unsynced, steady(unsynced) if steady is not None else None


def members_owed(view: ReplicaView) -> int | None:
    """Where ``batch_lead`` found the decode batch leading: the KV blocks its members lack to hold prompt and output
    (``num_new_blocks(r, total_tokens(r))`` summed over them, their counters behind or not); None where the view
    cannot tell (then bring them current and read each)."""
    owed = getattr(view, "members_blocks_to_completion", None)
    return owed() if owed is not None else None


def bring_up_to_date(view: ReplicaView) -> None:
    """Bring the running requests' counters and blocks current, on a view that may keep them behind."""
    if (sync := getattr(view, "bring_up_to_date", None)) is not None:
        sync()


def schedule_running(
    view: ReplicaView,
    order: Sequence[RequestView],
    plan: StepPlan,
    budget: Budget,
    victim_key: VictimKey,
    chunk: Callable[[int, int], int] | None = None,
    lead: tuple[int, int] | None = None,
) -> None:
    """Give every running request in ``order`` its next tokens, preempting when blocks run out.

    Each request gets its ``remaining = num_tokens - num_computed_tokens`` tokens (1 for a
    decode), or ``chunk(remaining, tokens_left)`` when given (chunked prefill). When a request cannot get the
    blocks it needs, the request with the largest ``victim_key`` among those not yet
    scheduled (the request itself included) is preempted; a preempted request frees its
    blocks. vLLM's ``_schedule_running`` loop.

    A view that keeps its decoding requests as a batch may say (``steady_decodes``) that the first requests of
    ``order`` each want one token and how many new blocks they take together: when the budget holds them all they
    are scheduled at once, as the loop would (``chunk(1, t)`` is 1 for any ``t >= 1``: a decode fits what is left).
    Such a view may list them with their counters behind (``running_unsynced``): the loop brings them current
    (``bring_up_to_date``) before it walks them. ``lead``: the view's answer the caller has already (``batch_lead``),
    for members that also open ``order``; None: ask the view.
    """
    pending = list(order)
    i = 0  # pending[:i] are done (scheduled or given nothing)
    num_new_blocks = view.num_new_blocks
    scheduled = plan.scheduled
    tokens, free = budget.tokens, budget.free_blocks
    steady = getattr(view, "steady_decodes", None)
    decodes = lead if lead is not None or steady is None else steady(pending)
    if decodes is not None and decodes[0] <= tokens and decodes[1] <= free:
        i, need = decodes
        if not scheduled:  # they open the plan: say so (StepPlan.num_lead_decodes)
            plan.num_lead_decodes = i
        scheduled.extend(zip(pending[:i], repeat(1)))
        tokens -= i
        free -= need
    elif steady is not None and (sync := getattr(view, "bring_up_to_date", None)) is not None:
        sync()  # the members are walked one by one below: their counters current first (bring_up_to_date, inlined)
    while i < len(pending):
        req = pending[i]
        computed = req.num_computed_tokens
        want = req.num_tokens - computed
        n = chunk(want, tokens) if chunk is not None else want
        if n <= 0:
            i += 1
            continue
        need = num_new_blocks(req, computed + n)
        if need > free:
            victim = max(pending[i:], key=victim_key)  # the first of the largest keys, as max over the rest
            del pending[pending.index(victim, i)]
            plan.preempt.append(victim)
            free += view.num_freeable_blocks(victim)
            continue
        i += 1
        free -= need
        tokens -= n
        scheduled.append((req, n))
    budget.tokens, budget.free_blocks = tokens, free
    # vLLM's schedule() asserts the same: a step never computes more than its budget (without chunking, the
    # policy's parameters must make every running request's decode token fit: max_num_batched_tokens >= max_num_seqs)
    assert budget.tokens >= 0, f"the running requests' tokens overrun the step's budget by {-budget.tokens}"


def admit_waiting(
    view: ReplicaView,
    order: Iterable[RequestView],
    plan: StepPlan,
    budget: Budget,
    watermark_blocks: int = 0,
    chunk: Callable[[int, int], int] | None = None,
    reserve_full: bool = False,
    reject: Callable[[RequestView], str | None] | None = None,
    make_room: Callable[[RequestView, int], bool] | None = None,
    admissible: Callable[[RequestView, int], bool] | None = None,
) -> Admission:
    """Admit waiting requests in ``order`` while tokens, slots and blocks last (head-of-line blocking).

    A request gets all its remaining tokens (a full prefill, or a recompute, less any cached
    prefix), or ``chunk(remaining, tokens_left)`` when given. With ``reserve_full`` its KV is reserved for
    prompt + output at admission. ``reject(req)`` returns a reason when the request can
    never run under this policy (it is rejected and the loop goes on). When a request does
    not fit, ``make_room(req, need_blocks)`` may preempt running requests to free a slot
    and ``need_blocks`` blocks (priority scheduling); it returns whether it succeeded.
    ``admissible(req, need_blocks)``, when given, is a further admission test (a headroom rule)
    asked last; it is told the blocks this step allocates for the request, and False stops the loop.
    """
    admitted = 0
    for req in order:
        if reject is not None and (reason := reject(req)) is not None:
            plan.reject.append((req, reason))
            continue
        computed = req.num_computed_tokens or view.prefix_hit_tokens(req)  # a cached prefix is skipped
        remaining = req.num_tokens - computed
        n = chunk(remaining, budget.tokens) if chunk is not None else remaining
        if n <= 0 or n > budget.tokens:
            return Admission(admitted, "tokens")
        kv_tokens = total_tokens(req) if reserve_full else computed + n
        need = view.num_new_blocks(req, kv_tokens)
        # The watermark guards new allocations; a request already holding its KV (received by
        # transfer) needs none and must not be kept out by it.
        short = budget.free_blocks - need < (watermark_blocks if need else 0)
        if (budget.seqs <= 0 or short) and (make_room is None or not make_room(req, need + watermark_blocks)):
            return Admission(admitted, "seqs_or_blocks")
        if admissible is not None and not admissible(req, need):
            return Admission(admitted, "seqs_or_blocks")
        budget.free_blocks -= need
        budget.tokens -= n
        budget.seqs -= 1
        plan.scheduled.append((req, n))
        admitted += 1
        if reserve_full:
            plan.kv_tokens[req] = kv_tokens
    return Admission(admitted, "queue")
