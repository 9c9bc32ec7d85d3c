"""What a ``StepExecutor`` talks to and keeps between plans.

- ``StepSink``: where it writes what happened (the metrics recorder);
- ``LazyRunning``: running requests whose counters are kept elsewhere between steps (the fast-forward seam);
- ``Carried``: what plans that scheduled nothing did, for the next step's row;
- ``DecisionLog``: every decision carried out, step by step (tests compare two engines' logs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from policies.interface import StepPlan
from simulator.request import Request


class StepSink(Protocol):
    """Where an executor writes what happened (``simulator.metrics.MetricsRecorder``)."""

    def request_done(self, req: Request, now_s: float) -> None: ...
    def itl(self, gap_s: float, count: int) -> None: ...
    def extra_tokens(self, count: int) -> None:
        """Tokens a step emitted beyond one per request (accepted speculative proposals; they report no ITL)."""
        ...

    def step(self, *row: float) -> None: ...


class LazyRunning(Protocol):
    """Running requests whose counters are kept elsewhere between steps (the fast-forward decode batch)."""

    def bring_up_to_date(self) -> None:
        """Bring every member's counters and KV current (repeatable: the members stay members)."""
        ...

    def release(self, plan: StepPlan) -> tuple[int, int, int] | None:
        """The plan is about to change running requests: give up the members it touches. Returns (members, new
        blocks, computed tokens) when it opens with every member, each decoding: they step as a batch."""
        ...

    def step_members(self, now_s: float) -> tuple[int, float | None, int, list[Request]]:
        """Count the step for the members ``release`` offered: (regular ITLs, other ITL or None, its count, the
        members that finished, ended by the caller)."""
        ...

    def join(self, scheduled: list[tuple[Request, int]]) -> None:
        """Requests the step just made decode may join."""
        ...

    def steady_decodes(self, order: list[Request]) -> tuple[int, int] | None:
        """``StepExecutor.steady_decodes``."""
        ...


@dataclass(slots=True)
class Carried:
    """What carrying out plans did since the last recorded step: preemptions and host traffic.

    A plan that only preempts or rejects schedules nothing and is followed at once by
    another; what it did goes with the next step (the loop keeps one ``Carried``).
    """

    num_preempted: int = 0
    num_swaps: int = 0
    swap_bytes: float = 0.0

    def clear(self) -> None:
        self.num_preempted, self.num_swaps, self.swap_bytes = 0, 0, 0.0


@dataclass(slots=True)
class DecisionLog:
    """Every decision an executor carried out, step by step (tests compare two engines' logs)."""

    rows: list[tuple] = field(default_factory=list)

    def plan(self, plan: StepPlan) -> None:
        """A plan that decided something (an engine also plans when it wakes idle; such plans are not rows)."""
        if not (plan.scheduled or plan.preempt or plan.reject):
            return
        self.rows.append(
            (
                "plan",
                tuple((r.request_id, n) for r, n in plan.scheduled),
                tuple(r.request_id for r in plan.preempt),
                tuple(r.request_id for r, _ in plan.reject),
            )
        )

    def end(self, req: Request) -> None:
        self.rows.append(("end", req.request_id, req.state.name, req.reject_reason or req.finish_reason))

    def hand_off(self, req: Request) -> None:
        self.rows.append(("hand_off", req.request_id))
