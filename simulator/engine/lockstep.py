"""Engines that step together: attention data parallelism's ranks.

With ``parallelism.dp_attention`` N a replica runs N engines (ranks), each with its own scheduler, queues and KV
pool (an ordinary ``Engine`` and its ``StepExecutor``), whose forward passes are synchronised because the MLP/MoE
layers process every rank's tokens together: SGLang's schedulers all-gather their batch sizes before every
forward (``prepare_mlp_sync_batch``) and a rank with nothing to run runs an idle batch (``ForwardMode.IDLE``) so the
collectives line up; TensorRT-LLM's attention-DP executor likewise pads an idle rank with a dummy request.

``LockstepGroup`` is the barrier. At a step boundary every rank plans; a rank with work hands its ``BatchShape``
in (``submit``), a rank without declares itself idle (in ``LockstepEngine._idle``). When no rank is still to
decide, the group prices the step from all the shapes at once (``DpAttentionCostModel.step_time_ranks``: the
slowest rank's attention plus the shared layers at the gathered rows; plus the longest swap traffic a rank
carried) and every submitting rank's step starts now and ends then, so their step rows share start and duration.
While a step runs every rank of the group counts as busy: a request reaching an idle rank then waits for the step
to end (an engine that plans ahead holds it in its inbox, as a busy engine does), and the rank plans with the
others at the next boundary.

With context balancing (TensorRT-LLM's ``attention_dp_config.enable_balance``: ``AttentionDpBalance`` in
``simulator/cluster/dp_attention.py``) the ranks also agree on their plans before carrying them out: each rank
plans, reports how many context and generation requests its plan schedules (``report``) and waits until every rank
has reported or is idle (an idle rank, or one whose plan schedules nothing, counts as none of either); the group
then decides once whether the contexts wait, and every rank runs its plan with or without them. A rank that plans
later at the same boundary (woken after the decision) follows the decision made.

Fast-forward windows (``simulator/engine/fast_forward.py``) are off for these engines: a window of many decode steps
in one event cannot meet the other ranks at each step boundary. Each rank keeps its decoding requests as a decode
batch all the same, so a plain step schedules and steps them at once instead of one by one (``windows=False``).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Protocol

import simpy

from policies.batching.trtllm import hold_back_contexts, num_generation
from policies.interface import StepPlan
from simulator.cost.dp_attention import EMPTY, DpAttentionCostModel
from simulator.cost.shape import BatchShape
from simulator.engine.loop import Engine


class ContextBalance(Protocol):
    """A cross-rank rule on whether the ranks' context requests wait this step (``AttentionDpBalance``)."""

    def hold_contexts(self, counts: Sequence[tuple[int, int]]) -> bool: ...


class LockstepGroup:
    """The barrier of ``dp_attention`` ranks: steps start together and last as the group's priced step."""

    def __init__(
        self, env: simpy.Environment, cost_model: DpAttentionCostModel, balance: ContextBalance | None = None
    ) -> None:
        self.env = env
        self.cost_model = cost_model
        self.balance = balance
        self._counts: list[tuple[int, int] | None] = []  # (contexts, generation) reported this boundary
        self._agreed: simpy.Event | None = None  # ends the wait for every rank's report
        self.hold = False  # the boundary's decision: the contexts wait
        self.members: list[LockstepEngine] = []
        self._shapes: list[BatchShape | None] = []  # submitted this boundary (None: not yet, or idle)
        self._transfer_s: list[float] = []
        self._idle: list[bool] = []  # declared idle and not woken since
        self._done: simpy.Event | None = None  # ends the step being gathered or run
        self.in_step = False
        self.num_steps = 0
        # ranks still to decide, kept as the lists change (the barrier asks at every rank's report and shape):
        self._unreported = 0  # neither reported this boundary nor idle
        self._undecided = 0  # neither submitted a shape this boundary nor idle
        self._submitted = 0  # shapes submitted this boundary

    def join(self, engine: LockstepEngine) -> int:
        """Add a rank; returns its index."""
        self.members.append(engine)
        self._shapes.append(None)
        self._counts.append(None)
        self._transfer_s.append(0.0)
        self._idle.append(False)
        self._unreported += 1
        self._undecided += 1
        return len(self.members) - 1

    # -- what ranks tell the group ----------------------------------------------------------------

    def submit(self, rank: int, shape: BatchShape, transfer_s: float) -> simpy.Event:
        """Rank ``rank`` has planned a step of ``shape`` (after ``transfer_s`` of swaps); the event ends it."""
        assert not self.in_step and self._shapes[rank] is None, "a rank submitted twice, or during a step"
        self._wake(rank)
        self._shapes[rank] = shape
        self._undecided -= 1
        self._submitted += 1
        self._transfer_s[rank] = transfer_s
        if self._done is None:
            self._done = self.env.event()
        done = self._done
        self._launch_when_decided()
        return done

    def report(self, rank: int, num_contexts: int, num_generation: int) -> simpy.Event:
        """Rank ``rank``'s plan schedules ``num_contexts`` context and ``num_generation`` generation requests; the
        event fires once the group has decided (``hold``) whether contexts wait this step (module docstring)."""
        if self._counts[rank] is None and not self._idle[rank]:
            self._unreported -= 1
        self._counts[rank] = (num_contexts, num_generation)
        if self._agreed is None:
            self._agreed = self.env.event()
        agreed = self._agreed
        self._agree_when_reported()
        return agreed

    def declare_idle(self, rank: int) -> None:
        """Rank ``rank`` has nothing to run: the step may start without it."""
        if not self._idle[rank]:
            self._idle[rank] = True
            self._unreported -= self._counts[rank] is None
            self._undecided -= self._shapes[rank] is None
        self._agree_when_reported()
        self._launch_when_decided()
        if all(self._idle):  # no step this boundary: the next report starts a new agreement
            self._new_boundary()

    def wake(self, rank: int) -> None:
        """Rank ``rank`` was woken (a request, KV or freed blocks reached it): the next step waits for its plan."""
        self._wake(rank)

    def _wake(self, rank: int) -> None:
        if self._idle[rank]:
            self._idle[rank] = False
            self._unreported += self._counts[rank] is None
            self._undecided += self._shapes[rank] is None

    def step_end(self) -> simpy.Event | None:
        """The event that ends the step in progress, or None between steps."""
        return self._done if self.in_step else None

    def check(self) -> None:
        """Assert the counts the barrier keeps against the lists they count."""
        idle, shapes = self._idle, self._shapes
        assert self._unreported == sum(c is None and not i for c, i in zip(self._counts, idle, strict=True))
        assert self._undecided == sum(s is None and not i for s, i in zip(shapes, idle, strict=True))
        assert self._submitted == sum(s is not None for s in shapes)

    # -- the step -----------------------------------------------------------------------------------

    def _agree_when_reported(self) -> None:
        agreed = self._agreed
        if agreed is None or agreed.triggered:
            return  # nobody waits, or decided already at this boundary
        if self._unreported:
            return  # a rank still to plan
        assert self.balance is not None
        self.hold = self.balance.hold_contexts([(0, 0) if c is None else c for c in self._counts])
        agreed.succeed()

    def _new_boundary(self) -> None:
        self._counts = [None] * len(self._counts)
        self._unreported = self._idle.count(False)
        self._agreed = None
        self.hold = False

    def _launch_when_decided(self) -> None:
        if self.in_step:
            return
        if self._undecided:
            return  # a rank still to plan
        if not self._submitted:
            return  # every rank idle
        shapes = self._shapes
        step = self.cost_model.step_time_ranks([EMPTY if s is None else s for s in shapes])
        self.in_step = True
        self._new_boundary()
        self.num_steps += 1
        for engine in self.members:  # an idle rank runs the idle batch: requests reaching it wait for the step
            engine._busy = True
        end = self.env.timeout(step.total_s + max(self._transfer_s))
        end.callbacks.append(self._finish)

    def _finish(self, _event: simpy.Event) -> None:
        done, self._done = self._done, None
        assert done is not None
        self.in_step = False
        for rank, engine in enumerate(self.members):
            engine._busy = False
            self._shapes[rank] = None
            self._transfer_s[rank] = 0.0
        self._undecided = self._idle.count(False)
        self._submitted = 0
        done.succeed()


class LockstepEngine(Engine):
    """An ``Engine`` whose steps run through its ``LockstepGroup`` (one rank of attention data parallelism)."""

    def __init__(self, *args, group: LockstepGroup, **kwargs) -> None:
        kwargs["windows"] = False  # module docstring
        super().__init__(*args, **kwargs)
        self.group = group
        self.rank = group.join(self)
        self._agrees = group.balance is not None

    def _agree(self, plan: StepPlan) -> Generator[simpy.Event, None, None]:
        if not plan.scheduled:
            return  # it idles (or plans again at once): an idle rank counts as no context and no generation
        generation = num_generation(plan)
        contexts = len(plan.scheduled) - generation
        yield self.group.report(self.rank, contexts, generation)
        if self.group.hold and contexts:
            hold_back_contexts(plan)

    def _run_step(self, shape: BatchShape, transfer_s: float) -> Generator[simpy.Event, None, None]:
        yield self.group.submit(self.rank, shape, transfer_s)

    def check(self) -> None:
        super().check()
        self.group.check()

    def _idle(self, wake_at_s: float | None) -> Generator[simpy.Event, None, None]:
        group = self.group
        group.declare_idle(self.rank)  # may start the step the other ranks wait on
        yield from super()._idle(wake_at_s)
        group.wake(self.rank)  # woken by a timer too
        end = group.step_end()
        if end is not None:  # the others are mid-step: plan with them at its end
            yield end

    def _wakeup(self, value: object = None) -> None:
        if self._wake is not None and not self._wake.triggered:
            self.group.wake(self.rank)  # before another rank's plan at this instant can start a step without it
        super()._wakeup(value)
