"""The request entity and its lifecycle state machine.

Progress is counters, not phase flags (see ``policies.interface``); the KV blocks a request
holds are its engine's pool's to know (``simulator.kv``), keyed by request id. State changes go
through ``transition()`` only, which checks the move against ``ALLOWED`` and stamps the
matching timestamp.

    QUEUED (at the router) -> WAITING (replica queue) -> RUNNING -> FINISHED
                                                          RUNNING <-> PREEMPTED
    RUNNING -> TRANSFERRING -> WAITING   (disaggregated: prompt done, KV moves to a decode replica)
    QUEUED | WAITING -> REJECTED (with a reason)
    PREEMPTED -> FINISHED (with a reason: ended short, see below)

A request preempted for recompute that can no longer run (its prompt plus the tokens it
generated outgrew what one step may prefill) is ended FINISHED with the tokens it already
emitted and a ``finish_reason``, not REJECTED: its client has received those tokens. This is
vLLM V0's path (``vllm/core/scheduler.py`` ``_schedule_prefills``: a waiting sequence, a
recomputed one included, whose ``get_len()`` exceeds the prompt limit is set
``FINISHED_IGNORED``, which ``vllm/sequence.py`` reports as finish reason "length").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class State(enum.Enum):
    QUEUED = enum.auto()
    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    TRANSFERRING = enum.auto()
    FINISHED = enum.auto()
    REJECTED = enum.auto()

    # identity hashing, in C: ``transition`` hashes two states per move (Enum's own ``__hash__`` is Python code);
    # no set of states is iterated, so the order their hashes give one never shows
    __hash__ = object.__hash__


ALLOWED: dict[State, frozenset[State]] = {
    State.QUEUED: frozenset({State.WAITING, State.REJECTED}),
    State.WAITING: frozenset({State.RUNNING, State.REJECTED}),
    State.RUNNING: frozenset({State.PREEMPTED, State.FINISHED, State.TRANSFERRING}),
    State.PREEMPTED: frozenset({State.RUNNING, State.FINISHED}),
    State.TRANSFERRING: frozenset({State.WAITING}),
    State.FINISHED: frozenset(),
    State.REJECTED: frozenset(),
}

TERMINAL = frozenset({State.FINISHED, State.REJECTED})


@dataclass(slots=True, eq=False)
class Request:
    """One inference request. Identity equality, so requests work as dict keys and set members."""

    request_id: int
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    priority: int = 0
    session_id: int = -1
    prefix_hashes: np.ndarray | None = None
    hash_block_tokens: int = 0
    state: State = State.QUEUED
    num_computed_tokens: int = 0
    num_generated_tokens: int = 0
    # the workload hashes of its full prompt blocks, as prefix-cache keys (derived once, from prefix_hashes)
    block_keys: tuple[tuple[int, int], ...] | None = None
    num_cached_tokens: int = 0  # prompt tokens reused from the prefix cache at first admission
    prefill_replica_id: int | None = None  # disaggregated: where the prompt was computed
    transfer_start_s: float | None = None
    transfer_end_s: float | None = None
    transfer_step_s: float = 0.0  # duration of the step that completed the prompt (layer-wise overlap)
    num_preemptions: int = 0
    replica_id: int | None = None
    enqueued_s: float | None = None
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    last_token_s: float | None = None
    finished_s: float | None = None
    reject_reason: str | None = None
    finish_reason: str | None = None  # why a FINISHED request ended short of its output (None: it did not)

    @property
    def num_tokens(self) -> int:
        """Tokens of the sequence so far: prompt plus generated."""
        return self.num_prompt_tokens + self.num_generated_tokens

    @property
    def is_prefill(self) -> bool:
        return self.num_computed_tokens < self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.num_generated_tokens >= self.num_output_tokens


def transition(req: Request, new: State, now_s: float, reason: str | None = None) -> None:
    """Move ``req`` to ``new`` at ``now_s``, stamping the matching timestamp.

    ``reason`` is required for REJECTED and for PREEMPTED -> FINISHED (a request ended short
    of its output), and refused otherwise. Raises AssertionError on a move the state machine
    does not allow: that is a bug in the engine, never a user error.
    """
    assert new in ALLOWED[req.state], f"request {req.request_id}: {req.state.name} -> {new.name}"
    short = new is State.FINISHED and req.state is State.PREEMPTED
    assert (reason is not None) == (new is State.REJECTED or short), (
        f"request {req.request_id}: {req.state.name} -> {new.name} {'needs' if reason is None else 'takes no'} reason"
    )
    if new is State.WAITING:
        req.enqueued_s = now_s
    elif new is State.RUNNING:
        if req.first_scheduled_s is None:
            req.first_scheduled_s = now_s
    elif new is State.PREEMPTED:
        req.num_preemptions += 1
    elif new is State.FINISHED:
        req.finished_s = now_s
        req.finish_reason = reason
    elif new is State.REJECTED:
        assert reason, "a rejection needs a reason"
        req.reject_reason = reason
        req.finished_s = now_s
    req.state = new
