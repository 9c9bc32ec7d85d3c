"""What a batch policy sees and what it returns.

The simulator's objects satisfy these Protocols structurally; policies never import the
simulator. A policy *decides* (which requests run this step and how many tokens each,
which to preempt, which to reject); the engine *acts* (allocates and frees KV blocks,
changes request states, stamps times).

Token counters of a request (vLLM's model, no phase flags)::

    |<------------- num_tokens = prompt + generated ------------->|
    |<---- num_computed_tokens (KV written) ---->|<-- to compute -->|

A request is "in prefill" while ``num_computed_tokens < num_prompt_tokens``; when a step
brings ``num_computed_tokens`` up to ``num_tokens``, it samples one new token. After a
recompute preemption ``num_computed_tokens`` is 0 again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import numpy as np

PreemptionMode = Literal["recompute", "swap"]


class RequestView(Protocol):
    """Read-only counters of one request."""

    @property
    def request_id(self) -> int: ...
    @property
    def arrival_s(self) -> float: ...
    @property
    def enqueued_s(self) -> float | None:
        """When the request joined this replica's queue."""
        ...

    @property
    def priority(self) -> int: ...
    @property
    def session_id(self) -> int:
        """Conversation or agent-loop id, -1 for none."""
        ...

    @property
    def num_prompt_tokens(self) -> int: ...
    @property
    def prefix_hashes(self) -> np.ndarray | None:
        """The workload's chained hash of each ``hash_block_tokens`` tokens of the prompt (a block's hash names its
        whole prefix; the last block may be partial), or None where the workload gives none."""
        ...

    @property
    def hash_block_tokens(self) -> int: ...
    @property
    def num_output_tokens(self) -> int: ...
    @property
    def num_computed_tokens(self) -> int: ...
    @property
    def num_generated_tokens(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...


class ReplicaView(Protocol):
    """Read-only state of one replica at a step boundary. Reading it changes nothing: the engine's KV blocks
    are the view's to count (``num_new_blocks``, ``num_freeable_blocks``), not the requests'."""

    @property
    def waiting(self) -> Sequence[RequestView]:
        """Queued requests in service order (preempted ones first)."""
        ...

    @property
    def running(self) -> Sequence[RequestView]:
        """Admitted requests, oldest admission first, their counters current."""
        ...

    @property
    def num_running(self) -> int:
        """``len(running)``."""
        ...

    @property
    def num_free_blocks(self) -> int: ...
    @property
    def num_total_blocks(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def role(self) -> str:
        """What the engine serves: ``mixed`` (prompts and decodes), ``prefill`` (a request leaves when its prompt is
        computed, its KV sent on) or ``decode`` (requests arrive with their prompt's KV, received by transfer)."""
        ...

    @property
    def num_steps(self) -> int:
        """Steps the engine has run, fast-forwarded decode steps included (a policy that keeps per-step state
        counts the steps it did not plan from it)."""
        ...

    def num_new_blocks(self, request: RequestView, num_kv_tokens: int) -> int:
        """Blocks ``request`` must take from the free pool to hold KV for ``num_kv_tokens`` tokens.

        For a request not yet admitted this accounts for a cached prefix it would reuse.
        """
        ...

    def num_freeable_blocks(self, request: RequestView) -> int:
        """Blocks that return to the free pool if ``request`` is preempted (shared ones do not)."""
        ...

    def prefix_hit_tokens(self, request: RequestView) -> int:
        """Prompt tokens of a request without KV that a prefix cache would let it skip if admitted now."""
        ...

    def is_swapped(self, request: RequestView) -> bool:
        """The request's KV sits in host swap space (it was preempted by swap)."""
        ...


@dataclass(slots=True)
class StepPlan:
    """A policy's decision for one engine step.

    ``scheduled`` lists (request, number of new tokens to compute) in execution order; a
    request not yet running is admitted. ``kv_tokens`` optionally raises the KV a
    scheduled request must hold after allocation above ``computed + new`` (reservation
    for the maximum output, as static and Orca-style batching do). ``preempt`` is applied
    before allocation, ``reject`` ends waiting requests that can never run under this
    policy (the engine ends one it preempted earlier FINISHED, short, with the reason, as
    vLLM V0 ignores a recomputed sequence over its prompt limit). ``discard_kv`` frees every
    scheduled request's KV after the step (no KV cache). When nothing is scheduled the
    replica sleeps until an arrival or ``wake_at_s``. ``num_lead_decodes``: the first that many of ``scheduled``
    are the requests the view's ``steady_decodes`` vouched for, one token each, in its order (set by
    ``schedule_running``; the engine then need not check them one by one again).
    """

    scheduled: list[tuple[RequestView, int]] = field(default_factory=list)
    kv_tokens: dict[RequestView, int] = field(default_factory=dict)
    preempt: list[RequestView] = field(default_factory=list)
    preemption_mode: PreemptionMode = "recompute"
    reject: list[tuple[RequestView, str]] = field(default_factory=list)
    discard_kv: bool = False
    wake_at_s: float | None = None
    num_lead_decodes: int = 0


class BatchPolicy(Protocol):
    """Plans one engine step from a replica's read-only view. Pure: no clock, no side effects."""

    def plan_step(self, view: ReplicaView, now_s: float) -> StepPlan: ...


class SteadyDecode(Protocol):
    """An optional capability of a batch policy that lets the engine fast-forward.

    ``steady_decode(view)`` returns True only when, from this view on, the policy's plan
    would be "every running request computes what it still needs, nothing else" for as
    long as no request arrives or finishes and no running request lacks a KV block. The
    engine checks that this is one decode token each (no prompt chunk or recompute in
    progress) and then advances many such steps in one event, with the same results as
    planning each.
    """

    def steady_decode(self, view: ReplicaView) -> bool: ...


class TransferSeats(Protocol):
    """An optional capability of a batch policy whose engine seats a received request before its KV is sent.

    ``decode_seats()`` is how many requests a decode engine holds at most: running, received and waiting for a
    step, or with their KV on the way. A prefilled request is leased blocks, and its KV sent, only while a seat
    is free; until then it waits on its prefill engine, and its first token has not reached the client.
    """

    def decode_seats(self) -> int: ...
