"""Multi-turn conversations and agent loops whose prompts carry the whole previous context.

A session starts at a time drawn from an arrival process. It has a number of user turns;
each user turn is one LLM call followed by a number of tool calls, each of which is one
more LLM call after the tool returns. Every call's prompt is the session's whole context
so far plus its new tokens::

    call c prompt = system prompt + sum over earlier calls (new tokens + output tokens) + new tokens of c

where the new tokens are the user's message (first call of a turn) or the tool's output
(a tool call). The first call of a session is a root request; every later call is sent
``think_s`` (user turns) or ``tool_s`` (tool calls) after the previous call of its session
completes (RequestStream ``parent`` / ``think_s``).

Prefix blocks: every request carries one hash per ``hash_block_tokens`` tokens of prompt
(see ``workloads.stream``). All prompts of a session are prefixes of one growing token
sequence, so a call shares every full block of the previous call's context with it. The
system prompt (one of ``num_system_prompts``, picked per session) is the same token
sequence in every session that uses it, so blocks lying entirely inside it are shared
across those sessions.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

from workloads import hashing
from workloads.arrivals import ArrivalConfig, PoissonArrivals, arrival_times, check_schedule, expected_arrivals
from workloads.classes import RequestClass, assign_classes, check_classes
from workloads.durations import FixedSeconds, TimeDistribution, draw_seconds
from workloads.lengths import TokenDistribution, draw_tokens
from workloads.rng import Stream, rng_for
from workloads.stream import RequestStream
from workloads.validators import (
    FINITE,
    MAX_NUM_REQUESTS,
    REQUEST_LIMIT,
    Count,
    NumRequests,
    PositiveSeconds,
    Tokens,
    TokensOrZero,
    field_error,
)

DEFAULT_NUM_SESSIONS = 100
DEFAULT_HASH_BLOCK_TOKENS = 16
_HASH_CHUNK_BLOCKS = 1 << 18  # measured fastest: the temporaries stay in cache
_SYSTEM_NAMESPACE = hashing.text_key("servesim sessions: system prompt")
_SESSION_NAMESPACE = hashing.text_key("servesim sessions: session")
# The most prefix-block hashes a session workload may make (8 bytes each: 8 GB).
MAX_HASH_BLOCKS = 1_000_000_000


class _Frozen(BaseModel):
    model_config = FINITE


class FixedCount(_Frozen):
    """Always the same count."""

    kind: Literal["fixed"] = "fixed"
    count: Count = Field(description="The count.")


class UniformCount(_Frozen):
    """Integers uniform on [min_count, max_count]."""

    kind: Literal["uniform"] = "uniform"
    min_count: Count = Field(description="Smallest count, inclusive.")
    max_count: Count = Field(description="Largest count, inclusive.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformCount:
        if self.min_count > self.max_count:
            raise ValueError(f"min_count ({self.min_count}) exceeds max_count ({self.max_count})")
        return self


class GeometricCount(_Frozen):
    """min_count plus a geometric number of extra steps, with mean ``mean_count`` in all.

    Each further turn (call) happens with the same probability: the memoryless model of
    how long a conversation goes on.
    """

    kind: Literal["geometric"] = "geometric"
    mean_count: float = Field(gt=0, le=MAX_NUM_REQUESTS, description="Mean count.")
    min_count: Count = Field(1, description="Smallest count.")

    @model_validator(mode="after")
    def _mean_above_min(self) -> GeometricCount:
        if self.mean_count < self.min_count:
            raise ValueError(f"mean_count ({self.mean_count}) is below min_count ({self.min_count})")
        return self


CountDistribution = Annotated[FixedCount | UniformCount | GeometricCount, Field(discriminator="kind")]


def count_bounds(dist: CountDistribution) -> tuple[int, float]:
    """(smallest, largest) value ``dist`` can draw (largest may be inf)."""
    if isinstance(dist, FixedCount):
        return dist.count, dist.count
    if isinstance(dist, UniformCount):
        return dist.min_count, dist.max_count
    return dist.min_count, (np.inf if dist.mean_count > dist.min_count else dist.min_count)


def count_mean(dist: CountDistribution) -> float:
    """The mean of ``dist``."""
    if isinstance(dist, FixedCount):
        return dist.count
    if isinstance(dist, UniformCount):
        return (dist.min_count + dist.max_count) / 2
    return dist.mean_count


def draw_counts(dist: CountDistribution, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` counts (int64)."""
    if isinstance(dist, FixedCount):
        return np.full(n, dist.count, dtype=np.int64)
    if isinstance(dist, UniformCount):
        return rng.integers(dist.min_count, dist.max_count + 1, size=n, dtype=np.int64)
    extra = dist.mean_count - dist.min_count
    if extra == 0:
        return np.full(n, dist.min_count, dtype=np.int64)
    # numpy's geometric counts trials to the first success (>= 1, mean 1 / p).
    return (rng.geometric(1.0 / (extra + 1.0), size=n) - 1 + dist.min_count).astype(np.int64)


class SessionWorkload(_Frozen):
    """Multi-turn sessions (chat or agent loops) whose prompts grow with the conversation.

    Give ``num_sessions`` or ``duration_s`` (sessions that start before it), not both; with
    neither, ``DEFAULT_NUM_SESSIONS`` (100) sessions.
    """

    kind: Literal["sessions"] = "sessions"
    num_sessions: NumRequests | None = Field(
        None,
        description=f"How many sessions start; give this or duration_s. With neither: {DEFAULT_NUM_SESSIONS} sessions.",
    )
    duration_s: PositiveSeconds | None = Field(
        None,
        description="Sessions start before this time, seconds; give this or num_sessions (None: num_sessions "
        "bounds them).",
    )
    arrival: ArrivalConfig = Field(
        default_factory=lambda: PoissonArrivals(rate_per_s=1.0), description="When sessions start."
    )
    turns: CountDistribution = Field(description="User turns per session (at least 1).")
    user_tokens: TokenDistribution = Field(description="New tokens of each user message.")
    output_tokens: TokenDistribution = Field(description="Output tokens of each LLM call.")
    think_s: TimeDistribution = Field(
        default_factory=lambda: FixedSeconds(seconds=0.0),
        description="User time between an answer and the next user message, seconds.",
    )
    system_prompt_tokens: TokensOrZero = Field(0, description="Tokens of the system prompt every session starts with.")
    num_system_prompts: NumRequests = Field(
        1, description="Distinct system prompts; each session uses one, picked uniformly."
    )
    tool_calls: CountDistribution = Field(
        default_factory=lambda: FixedCount(count=0),
        description="Tool calls after each user message; each is one more LLM call (0: plain chat).",
    )
    tool_tokens: TokenDistribution | None = Field(
        None, description="Tokens of each tool result appended to the context (needed with tool calls)."
    )
    tool_s: TimeDistribution = Field(
        default_factory=lambda: FixedSeconds(seconds=0.0), description="Time a tool runs, seconds."
    )
    max_context_tokens: Tokens | None = Field(
        None,
        description="A session ends before a call whose prompt plus output would exceed this "
        "(None: sessions run all their turns).",
    )
    hash_block_tokens: Tokens = Field(
        DEFAULT_HASH_BLOCK_TOKENS, description="Tokens per prefix block (the prefix cache's granularity)."
    )
    classes: tuple[RequestClass, ...] | None = Field(
        None, description="Request classes, drawn per session by weight (None: unlabelled)."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_stop_rule(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("num_sessions") is not None and data.get("duration_s") is not None:
            raise ValueError("give num_sessions or duration_s, not both")
        return data

    @field_validator("turns")
    @classmethod
    def _at_least_one_turn(cls, value: CountDistribution) -> CountDistribution:
        if count_bounds(value)[0] < 1:
            raise ValueError("every session needs at least one turn (smallest count 1)")
        return value

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: tuple[RequestClass, ...] | None) -> tuple[RequestClass, ...] | None:
        return check_classes(value)

    @model_validator(mode="after")
    def _tools_have_tokens(self) -> SessionWorkload:
        if count_bounds(self.tool_calls)[1] > 0 and self.tool_tokens is None:
            raise ValueError("tool_calls can be above 0, so give tool_tokens (the tool results' length)")
        return self

    @model_validator(mode="after")
    def _size(self) -> SessionWorkload:
        check_schedule(
            "SessionWorkload",
            self.arrival,
            "num_sessions",
            self.num_sessions,
            self.resolved_num_sessions,
            self.duration_s,
            "sessions",
        )
        sessions = (
            expected_arrivals(self.arrival, self.duration_s)
            if self.duration_s is not None
            else self.resolved_num_sessions or 0
        )
        calls = sessions * count_mean(self.turns) * (1 + count_mean(self.tool_calls))
        if calls > MAX_NUM_REQUESTS:
            raise field_error(
                "SessionWorkload",
                ("turns",),
                f"about {sessions:,.0f} sessions of {count_mean(self.turns):,.3g} turns and "
                f"{count_mean(self.tool_calls):,.3g} tool calls a turn make about {calls:.3g} LLM calls, more "
                f"than the {MAX_NUM_REQUESTS:,} requests a run can hold ({REQUEST_LIMIT})",
                self.turns.model_dump(),
            )
        return self

    @property
    def resolved_num_sessions(self) -> int | None:
        """The session count, or None when bounded by duration."""
        if self.duration_s is not None:
            return None
        return self.num_sessions if self.num_sessions is not None else DEFAULT_NUM_SESSIONS


def _segment_starts(counts: np.ndarray) -> np.ndarray:
    """Index of each segment's first element when segments of ``counts`` elements are laid end to end."""
    return (np.cumsum(counts) - counts).astype(np.int64)


def generate_sessions(cfg: SessionWorkload, seed: int, base_dir: Path | None = None) -> RequestStream:
    """The requests of ``cfg``: session-major rows (sessions by start time, calls in order).

    Random streams: ARRIVALS (session starts), SESSIONS (turns, tool calls, system prompt
    choice), LENGTHS (new and output tokens), THINK (think and tool times), CLASSES.
    """
    starts = _session_starts(cfg, seed)
    num_sessions = len(starts)
    srng = rng_for(seed, Stream.SESSIONS)
    turns = draw_counts(cfg.turns, num_sessions, srng)
    system = srng.integers(0, cfg.num_system_prompts, size=num_sessions)
    num_turns = int(turns.sum())
    _check_drawn(num_turns, "user turns")
    calls_per_turn = 1 + draw_counts(cfg.tool_calls, num_turns, srng)
    _check_drawn(int(calls_per_turn.sum()), "LLM calls")
    turn_session = np.repeat(np.arange(num_sessions), turns)
    call_session = np.repeat(turn_session, calls_per_turn)
    num_calls = len(call_session)
    is_user = np.zeros(num_calls, dtype=bool)
    is_user[_segment_starts(calls_per_turn)] = True
    calls_per_session = np.bincount(call_session, minlength=num_sessions)
    session_first = _segment_starts(calls_per_session)
    is_root = np.zeros(num_calls, dtype=bool)
    is_root[session_first] = True

    lrng = rng_for(seed, Stream.LENGTHS)
    new = np.empty(num_calls, dtype=np.int64)
    new[is_user] = draw_tokens(cfg.user_tokens, int(is_user.sum()), lrng, base_dir)
    if not is_user.all():
        assert cfg.tool_tokens is not None
        new[~is_user] = draw_tokens(cfg.tool_tokens, int((~is_user).sum()), lrng, base_dir)
    output = draw_tokens(cfg.output_tokens, num_calls, lrng, base_dir)

    trng = rng_for(seed, Stream.THINK)
    gap = np.zeros(num_calls)
    follows_user = is_user & ~is_root
    gap[follows_user] = draw_seconds(cfg.think_s, int(follows_user.sum()), trng)
    gap[~is_user] = draw_seconds(cfg.tool_s, int((~is_user).sum()), trng)

    # Context before call c (after the system prompt): a segmented cumulative sum.
    grown = new + output
    total = np.cumsum(grown)
    before = total - grown - (total[session_first] - grown[session_first])[call_session]
    prompt = cfg.system_prompt_tokens + before + new

    position = np.arange(num_calls) - session_first[call_session]
    keep = np.ones(num_calls, dtype=bool)
    if cfg.max_context_tokens is not None:
        over = prompt + output > cfg.max_context_tokens
        first_over = np.full(num_sessions, np.iinfo(np.int64).max)
        np.minimum.at(first_over, call_session[over], position[over])
        keep = position < first_over[call_session]
    kept_sessions = np.unique(call_session[keep])
    session_code = np.full(num_sessions, -1, dtype=np.int64)
    session_code[kept_sessions] = np.arange(len(kept_sessions))

    rows = np.flatnonzero(keep)
    sess = call_session[rows]
    root = is_root[rows]
    parent = np.where(root, -1, np.arange(len(rows)) - 1)  # the previous call of the session is the row before
    hash_values, hash_offsets = session_hashes(
        prompt[rows], cfg.system_prompt_tokens, system[sess], sess, cfg.hash_block_tokens, seed
    )
    columns: dict[str, Any] = {}
    if cfg.classes is not None:
        columns = assign_classes(cfg.classes, session_code[sess], rng_for(seed, Stream.CLASSES))
    return RequestStream(
        arrival_s=np.where(root, starts[sess], np.nan),
        num_prompt_tokens=prompt[rows],
        num_output_tokens=output[rows],
        session_id=session_code[sess],
        parent=parent,
        think_s=np.where(root, 0.0, gap[rows]),
        hash_values=hash_values,
        hash_offsets=hash_offsets,
        hash_block_tokens=cfg.hash_block_tokens,
        meta={
            "kind": "sessions",
            "num_sessions": len(kept_sessions),
            "num_sessions_ended_by_max_context": int(
                (keep[session_first] & ~keep[session_first + calls_per_session - 1]).sum()
            ),
            "num_sessions_dropped_by_max_context": int(num_sessions - len(kept_sessions)),
        },
        **columns,
    )


def _check_drawn(num: int, what: str) -> None:
    """ValueError when the drawn sessions hold more requests than a run can (only a draw far above the
    mean that the config check allows gets here)."""
    if num > MAX_NUM_REQUESTS:
        raise ValueError(
            f"workload: the sessions drawn hold {num:,} {what}, more than the {MAX_NUM_REQUESTS:,} requests a run "
            f"can hold ({REQUEST_LIMIT}); give fewer sessions, turns or tool calls"
        )


def _session_starts(cfg: SessionWorkload, seed: int) -> np.ndarray:
    return arrival_times(cfg.arrival, rng_for(seed, Stream.ARRIVALS), cfg.resolved_num_sessions, cfg.duration_s)


def session_hashes(
    prompt: np.ndarray,
    system_tokens: int,
    system: np.ndarray,
    session: np.ndarray,
    block_tokens: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Prefix-block hashes (CSR) of session prompts that are prefixes of one sequence per session.

    Block j of a prompt of L tokens ends at token e = min((j + 1) B, L). Its content and
    everything before it are fixed by the *owner* of that stretch: the system prompt when
    the block lies inside it (e <= system_tokens, then the block is full), else the
    session. So hash = combine(owner, j, fill) identifies the whole prefix through block
    j, which is what ``RequestStream`` requires; no sequential chaining is needed.
    """
    counts = hashing.num_blocks(prompt, block_tokens)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if offsets[-1] > MAX_HASH_BLOCKS:
        raise ValueError(
            f"workload: the sessions' prompts hold {int(offsets[-1]):,} prefix blocks of {block_tokens} tokens in all, "
            f"more than the {MAX_HASH_BLOCKS:,} servesim hashes (8 bytes each); set max_context_tokens, give fewer "
            "or shorter turns, or a larger hash_block_tokens"
        )
    # Owners per request (two candidates each), pre-mixed; one mix per block after that.
    salt = hashing.mix64(np.array([seed], dtype=np.uint64))
    system_owner = hashing.mix64(
        hashing.combine(np.full(len(prompt), _SYSTEM_NAMESPACE).view(np.uint64) ^ salt, system)
    )
    session_owner = hashing.mix64(
        hashing.combine(np.full(len(prompt), _SESSION_NAMESPACE).view(np.uint64) ^ salt, session)
    )
    values = np.empty(int(offsets[-1]), dtype=np.uint64)
    # Chunks of requests keep the per-block temporaries small (a long session workload has
    # tens of millions of blocks).
    bounds = np.searchsorted(offsets, np.arange(0, int(offsets[-1]), _HASH_CHUNK_BLOCKS), side="right") - 1
    for lo, hi in itertools.pairwise([*np.unique(bounds).tolist(), len(prompt)]):
        row = np.repeat(np.arange(lo, hi), counts[lo:hi])
        j = np.arange(offsets[lo], offsets[hi], dtype=np.int64) - offsets[row]
        end = np.minimum((j + 1) * block_tokens, prompt[row])
        fill = end - j * block_tokens
        owner = np.where(end <= system_tokens, system_owner[row], session_owner[row])
        position_and_fill = (j * (block_tokens + 1) + fill).astype(np.uint64)  # one-to-one: 1 <= fill <= B
        values[offsets[lo] : offsets[hi]] = hashing.mix64(owner ^ position_and_fill)
    return values.view(np.int64), offsets
