"""One engine as a SimPy process: plan, carry out, cost, wait, apply, record.

The ``Engine`` only orchestrates: its ``StepExecutor`` owns the queues and the KV pool and
does each step's mechanics, the cost model prices the step, and the fast-forward seam
(``FastForward``) runs many decode steps in one event when the policy declares
``steady_decode``. A replica holds one engine, or ``pp`` of them (vLLM's virtual engines)
sharing the pipeline stages.

What leaves an engine goes to its ``EngineHooks`` (the simulation), given by ``start``
before the process runs: requests that ended, prompts handed off for decoding elsewhere,
and KV transfers a decode engine has leased blocks for.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Protocol, cast

import simpy

from policies.batching.registry import BatchTraits
from policies.interface import BatchPolicy, SteadyDecode, StepPlan, TransferSeats
from simulator.cost.link import Link
from simulator.cost.shape import BatchShape, CostModel
from simulator.engine.executor import Carried, Role, StepExecutor
from simulator.engine.fast_forward import OFFERED, FastForward
from simulator.engine.speculation import Speculation
from simulator.kv.pool import KvPool
from simulator.metrics.monitor import LevelMonitor
from simulator.metrics.recorder import MetricsRecorder
from simulator.request import Request, State

__all__ = ["Engine", "EngineHooks", "Role"]

# SGLang's scheduler_recv_skipper.py weights: a decode step adds 1 to the counter, any other step 1000 (_DEFAULT_WEIGHT)
RECV_WEIGHT_DECODE = 1
RECV_WEIGHT_PREFILL = 1000


class EngineHooks(Protocol):
    """What an engine tells the rest of the simulation."""

    def request_done(self, req: Request) -> None:
        """``req`` finished or was rejected (already recorded)."""
        ...

    def prefilled(self, req: Request, engine: Engine, step_s: float) -> None:
        """A prefill engine computed ``req``'s prompt in a step of ``step_s``: its KV waits to be sent."""
        ...

    def reserved(self, req: Request, engine: Engine) -> None:
        """A decode engine leased blocks for ``req``'s KV: the transfer may start."""
        ...

    @property
    def offering(self) -> bool:
        """Whether requests prefilled at this instant are being offered to decode engines: the last thing done at an
        instant, after every engine step that ends at it has been recorded and the engine's next step planned (so a
        fast-forward window counts the step that begins now as begun)."""
        ...


class Engine:
    """A batch policy driving one executor; its steps run on the replica's pipeline stages."""

    def __init__(
        self,
        env: simpy.Environment,
        policy: BatchPolicy,
        traits: BatchTraits,
        cost_model: CostModel,
        kv: KvPool,
        recorder: MetricsRecorder,
        max_model_len: int,
        *,
        replica_id: int = 0,
        engine_id: int = 0,
        role: Role = "mixed",
        host_link: Link | None = None,
        block_bytes: float = 0.0,
        stages: list[simpy.Resource] | None = None,
        handoff_s: Callable[[BatchShape], float] | None = None,
        check_invariants: bool = False,
        fast_forward: bool = True,
        speculation: Speculation | None = None,
        plans_ahead: bool = False,
        recv_interval: int = 1,
        windows: bool = True,
    ) -> None:
        self.env = env
        self.policy = policy
        self.cost_model = cost_model
        self.host_link = host_link
        self.stages = stages
        self.handoff_s = handoff_s
        self.check_invariants = check_invariants
        self.recorder = recorder
        recorder.num_engines += 1
        self.executor = StepExecutor(
            kv,
            traits,
            recorder,
            max_model_len,
            replica_id=replica_id,
            engine_id=engine_id,
            role=role,
            block_bytes=block_bytes,
            speculation=speculation,
        )
        self.kv_monitor = LevelMonitor()
        self.cached_monitor = LevelMonitor()  # stays at 0 (never set) over a pool that caches nothing
        self._caches = kv.caches
        # Fast-forward needs a policy that can say it would only decode, no pipeline stages, and one
        # token per decode and step (speculative decoding emits a drawn number).
        steady = fast_forward and stages is None and traits.steady_decode and speculation is None
        self.fast_forward = (
            FastForward(env, self.executor, cost_model, recorder, self.kv_monitor, self.cached_monitor)
            if steady
            else None
        )
        self._steady = cast(SteadyDecode, policy).steady_decode if steady else None  # declared by its traits
        # a decode engine whose policy seats a request before its KV is sent leases only while a seat is free
        self._seats = cast(TransferSeats, policy).decode_seats() if traits.seats_before_transfer else None
        # ``windows`` False: no window of many steps (an engine that steps with others), but the decode batch is kept
        # for its plain steps, which then schedule and step the decoding requests at once
        self._windows = windows
        # a window cut by an arrival may run one more step (``FastForward.extends``): an engine that plans ahead, on
        # one GPU group of its own (no transfers in or out), over a pool of counted blocks, alone in its simulation
        # (its window's rows and ITLs are recorded a step late: no other engine's may come in between)
        self._may_extend = steady and role == "mixed" and kv.counted_growth
        # blocks in use at this moment, mid fast-forward window included (routers read it on every arrival)
        self.used_blocks_now: Callable[[], int] = (
            self.fast_forward.num_used_blocks_now if self.fast_forward is not None else lambda: kv.num_used_blocks
        )
        self._wake: simpy.Event | None = None
        # Scheduling one step ahead (vLLM V1's async scheduling: vllm/v1/engine/core.py step_with_batch_queue
        # schedules step N+1 and queues it behind step N before blocking on N's result; SGLang's
        # event_loop_overlap and TensorRT-LLM's _executor_loop_overlap likewise), the engine plans step N+1 when
        # step N is launched, so a request that arrives while a step runs is first planned into the step after
        # the next: it waits here (the engine's input queue) until the next plan is made, and joins the queue
        # the plan after it reads. The same setting that hides the engine's CPU time behind the GPU's (the cost
        # model's ``cpu_overlap``, from ``BatchTraits.overlaps_cpu``).
        self._plans_ahead = plans_ahead
        # SGLang's --scheduler-recv-interval (scheduler_recv_skipper.py): the scheduler polls for new requests only
        # once its counter reaches the interval; each decode step adds 1, any other step (a prefill) the default
        # weight of 1000, so requests are taken in after every prefill and every ``recv_interval`` decode steps.
        self._recv_interval = recv_interval
        self._recv_counter = recv_interval  # the skipper starts full: the first poll takes requests in
        self._busy = False  # a step (or a fast-forward window) is running on the GPU
        self._inbox: list[Request] = []
        # requests whose KV landed while a step ran on an engine that plans ahead, with when it landed
        self._landed: list[tuple[Request, float]] = []
        self._agrees = False  # plans are agreed with other engines before they run (``_agree``)
        self.hooks: EngineHooks | None = None
        self.process: simpy.Process | None = None

    def start(self, hooks: EngineHooks) -> None:
        """Start the engine's process, telling ``hooks`` what leaves it."""
        assert self.process is None, "an engine starts once"
        self.hooks = hooks
        if self.fast_forward is not None:
            self.fast_forward.hooks = hooks
        self.process = self.env.process(self._loop())

    # -- what routers, replicas and the simulation read ---------------------------------

    @property
    def replica_id(self) -> int:
        return self.executor.replica_id

    @property
    def kv(self) -> KvPool:
        return self.executor.kv

    @property
    def block_bytes(self) -> float:
        return self.executor.block_bytes

    @property
    def waiting(self):
        return self.executor.waiting

    @property
    def running(self) -> list[Request]:
        return self.executor.running

    @property
    def num_running(self) -> int:
        return self.executor.num_running

    @property
    def num_waiting(self) -> int:
        """Requests waiting to be scheduled: the executor's queue, the engine's input queue (those that arrived
        while a step ran, which an engine that plans one step ahead takes in at its next plan) and, on a decode
        engine, those whose KV is queued for a lease or on its way (vLLM keeps them in its waiting queue as
        ``WAITING_FOR_REMOTE_KVS``: vllm/v1/core/sched/scheduler.py)."""
        ex = self.executor
        return len(ex.waiting) + len(self._inbox) + len(ex.incoming) + len(ex.receiving)

    @property
    def num_outstanding(self) -> int:
        """Requests routed here and not yet ended, the input queue's included."""
        return self.executor.num_outstanding + len(self._inbox)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.executor.kv_capacity_tokens

    @property
    def num_steps(self) -> int:
        return self.executor.num_steps

    @property
    def num_swaps_out(self) -> int:
        return self.executor.num_swaps_out

    @property
    def num_used_blocks_now(self) -> int:
        """Blocks in use at this moment, mid fast-forward window included."""
        return self.used_blocks_now()

    # -- requests reaching the engine ----------------------------------------------------

    def enqueue(self, req: Request) -> None:
        """Accept a new request into the queue, or reject it if it can never run here. An engine that plans one
        step ahead holds a request arriving mid-step until its next plan is made (``_plans_ahead``)."""
        if (self._plans_ahead or self._recv_interval > 1) and self._busy:
            self._inbox.append(req)
            self._wakeup()  # a fast-forward window ends at the step in progress
            return
        self._accept(req)

    def _accept(self, req: Request) -> None:
        if self.executor.enqueue(req, self.env.now):
            self._wakeup()
        else:
            self._hooks.request_done(req)

    def _polls(self) -> bool:
        """Whether the engine polls its input queue at this plan: every plan, or with ``recv_interval`` > 1 once the
        skipper's counter (the steps run since the last poll, weighted) reaches it, or when it has nothing to run."""
        if self._recv_interval <= 1:
            return True
        if self._recv_counter < self._recv_interval and (self.executor.num_running or self.executor.waiting):
            return False
        self._recv_counter = 0
        return True

    def _count_steps(self, prefill: bool, steps: int = 1) -> None:
        """Add steps run to the skipper's counter; ``steps`` decode steps of a fast-forward window poll (an empty
        input queue) at each crossing of the interval, so only the remainder carries on."""
        if self._recv_interval <= 1:
            return
        if prefill:
            self._recv_counter += RECV_WEIGHT_PREFILL
            return
        total = self._recv_counter + steps * RECV_WEIGHT_DECODE
        if steps > 1 and total > self._recv_interval:
            total %= self._recv_interval
            total = total or self._recv_interval  # a crossing at the window's last step polls at the next plan
        self._recv_counter = total

    def _flush_inbox(self) -> None:
        """The requests that arrived while the last step ran join the queue the next plan reads."""
        inbox, self._inbox = self._inbox, []
        for req in inbox:
            self._accept(req)

    def offer_transfer(self, req: Request) -> None:
        """A prefilled request wants to send its KV here: lease blocks now, or queue until there are."""
        self.executor.offer_transfer(req)
        self._reserve_incoming()
        self._wakeup(OFFERED)  # a lease takes free blocks: a fast-forward window must replan

    def accept_transferred(self, req: Request) -> None:
        """The KV has arrived: the request queues for decoding. An engine that plans one step ahead learns of it
        from the outputs of the step in progress, after it has planned the next one, so the request joins the queue
        the plan after that reads (as a request arriving mid-step does): vLLM's scheduler marks a received request
        ready from the ``finished_recving`` ids of a step's output (``update_from_output``, read by
        ``_update_waiting_for_remote_kv`` at the next ``schedule``), which async scheduling calls once the next step
        is already scheduled; SGLang's and TensorRT-LLM's overlap loops poll their transfers once an iteration,
        while the step before runs."""
        if self._plans_ahead and self._busy:
            self._landed.append((req, self.env.now))
            self._wakeup()  # a fast-forward window ends at the step in progress
            return
        self.executor.accept_transferred(req, self.env.now)
        self._wakeup()

    def _take_landed(self) -> None:
        """The requests whose KV landed while the last step ran join the queue the next plan reads."""
        landed, self._landed = self._landed, []
        now = self.env.now
        for req, at in landed:
            self.executor.accept_transferred(req, now, landed_s=at)

    def release_sent(self, req: Request) -> None:
        """The KV has left: free the blocks it occupied here."""
        self.executor.release_sent(req)
        self.kv_monitor.set(self.env.now, self.executor.kv.num_used_blocks)
        self._wakeup()  # the freed blocks may let a waiting request in

    # -- the loop ------------------------------------------------------------------------

    def _loop(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        ex = self.executor
        ff = self.fast_forward if self._windows else None
        keeper = None if self._windows else self.fast_forward  # keeps the decode batch for plain steps only
        steady = self._steady
        carried = Carried()  # preemptions and swaps of plans that scheduled nothing, for the next step's row
        while True:
            ex.kv.new_plan()
            if keeper is not None and keeper.batch is None and ex._running:
                assert steady is not None
                if steady(ex):
                    keeper.build_batch()
            # a window records no preemptions or swap time: one carried from a preempt-only plan goes by the plain path
            if (
                ff is not None
                and ex._running
                and not carried.num_preempted
                and not carried.num_swaps
                and (not self._inbox or self._plans_ahead)
            ):
                assert self._steady is not None
                if self._steady(ex):
                    # Requests in the input queue of an engine that plans ahead join the queue after this step's
                    # plan (as the plain path flushes them after planning): the plan only decodes, so it is a window
                    # of one step, the next plan sees them.
                    window = ff.plan(1 if self._inbox or self._landed else None)
                    if window is not None:
                        # the window's first step stands for a plan made now, which polls the input queue when the
                        # skipper's counter is due, as the plain path's plan would: it restarts it
                        if (self._recv_interval <= 1 or self._polls()) and self._inbox:
                            self._flush_inbox()
                        if self._landed:  # transfers are polled every iteration, whatever the skipper's counter
                            self._take_landed()
                        self._wake = wake = env.event()
                        self._busy = True
                        k = yield from ff.wait(window, wake)
                        if (
                            self._inbox
                            and self._may_extend
                            and self.recorder.num_engines == 1
                            and self._plans_ahead
                            and self._recv_interval <= 1
                            and ff.extends(window, k)
                            and self._steady(ex)
                        ):
                            # An arrival cut the window: the plan made at the cut step's end only decodes (a window
                            # of one step, its counts known already) and takes the input queue in. Run that step as
                            # the window's last instead: the same rows, ITLs, levels and events, one plan less.
                            ff.window = window  # mid-window, as the loop sees it at the cut step's end
                            self._flush_inbox()
                            self._wake = wake = env.event()
                            k = yield from ff.wait_next(window, k, wake)
                        self._busy = False
                        self._wake = None
                        if self._recv_interval > 1:
                            self._count_steps(prefill=False, steps=k)
                        finished = ff.advance(window, k)
                        if finished:
                            self._dispatch(finished, 0.0)
                        if ex.incoming:  # freed blocks may let queued KV in, before the rows (as plain)
                            self._reserve_incoming()
                        ff.record(window)
                        self._sample_levels()
                        if self.check_invariants:
                            self.check()
                        continue
            # a synchronous engine polls, then plans (``_polls`` is True at once with an interval of 1)
            if not self._plans_ahead and (self._recv_interval <= 1 or self._polls()) and self._inbox:
                self._flush_inbox()
            plan = self.policy.plan_step(ex, env.now)
            if self._agrees:  # attention-DP ranks that agree on their plans first (simulator/engine/lockstep.py)
                yield from self._agree(plan)
            ex.carry_out(plan, env.now, carried)
            for req, _ in plan.reject:
                self._hooks.request_done(req)
            flushed = self._plans_ahead and (self._recv_interval <= 1 or self._polls()) and bool(self._inbox)
            if flushed:  # after the plan: they arrived while the step before it ran
                self._flush_inbox()
            landed = bool(self._landed)
            if landed:  # likewise the requests whose KV landed then
                self._take_landed()
            self._sample_levels()
            if not plan.scheduled and (plan.preempt or plan.reject or flushed or landed):
                # The plan only made room or removed requests: blocks were freed, so let incoming KV
                # transfers claim them and plan again at once rather than sleep (likewise for requests that
                # reached an engine with nothing to run).
                self._reserve_incoming()
                continue
            if not plan.scheduled:
                yield from self._idle(plan.wake_at_s)
                continue
            shape = ex.shape(plan)
            if self._recv_interval > 1:
                self._count_steps(prefill=bool(shape.prefill_new_tokens))
            start = env.now
            link = self.host_link
            transfer_s = link.time_s(carried.swap_bytes, carried.num_swaps) if carried.num_swaps and link else 0.0
            self._busy = True
            yield from self._run_step(shape, transfer_s)
            self._busy = False
            duration = env.now - start
            left = ex.apply(plan, env.now)
            if left:
                self._dispatch(left, duration)
            if ex.incoming:
                self._reserve_incoming()
            self._sample_levels()
            ex.record(start, duration, shape, carried)
            carried.clear()
            if self.check_invariants:
                self.check()

    def _run_step(self, shape: BatchShape, transfer_s: float) -> Generator[simpy.Event, None, None]:
        """Run the planned step: its cost model's time after ``transfer_s`` of swaps, on the pipeline stages when
        there are (an attention-DP rank runs it with the other ranks instead: ``simulator/engine/lockstep.py``)."""
        step = self.cost_model.step_time(shape)
        if self.stages is None:
            yield self.env.timeout(step.total_s + transfer_s)
        else:
            yield from self._run_pipeline(shape, step.stage_s or (step.total_s,), transfer_s)

    def _agree(self, plan: StepPlan) -> Generator[simpy.Event, None, None]:
        """Settle ``plan`` with the engines this one steps with before it is carried out (an attention-DP rank under
        context balancing: ``simulator/engine/lockstep.py``); an engine alone has nothing to agree."""
        yield from ()

    def _idle(self, wake_at_s: float | None) -> Generator[simpy.Event, None, None]:
        """Sleep until a request arrives (or KV lands, or blocks are freed), or until ``wake_at_s``."""
        env = self.env
        ex = self.executor
        assert ex.num_running == 0 or wake_at_s is not None, (
            f"replica {ex.replica_id}: policy scheduled nothing with requests running"
        )
        self._wake = env.event()
        if wake_at_s is not None and wake_at_s > env.now:
            yield self._wake | env.timeout(wake_at_s - env.now)
        else:
            assert not ex.waiting or wake_at_s is not None or ex.blocked_by_transfers(), (
                f"replica {ex.replica_id}: policy left {len(ex.waiting)} requests waiting on an idle replica"
            )
            yield self._wake
        self._wake = None

    def _run_pipeline(
        self, shape: BatchShape, stage_s: tuple[float, ...], transfer_s: float
    ) -> Generator[simpy.Event, None, None]:
        """Pass the step through the pipeline stages in order, queueing behind other virtual engines."""
        assert self.stages is not None
        if len(stage_s) != len(self.stages):
            per_stage = sum(stage_s) / len(self.stages)
            stage_s = (per_stage,) * len(self.stages)
        handoff = self.handoff_s(shape) if self.handoff_s is not None else 0.0
        last = len(self.stages) - 1
        for s, resource in enumerate(self.stages):
            with resource.request() as claim:
                yield claim
                yield self.env.timeout(stage_s[s] + (transfer_s if s == 0 else 0.0))
            if s < last and handoff:
                yield self.env.timeout(handoff)  # activations to the next stage's GPUs

    # -- helpers -------------------------------------------------------------------------

    @property
    def _hooks(self) -> EngineHooks:
        assert self.hooks is not None, "the engine was not started"
        return self.hooks

    def _wakeup(self, value: object = None) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed(value)

    def _dispatch(self, left: list[Request], step_s: float) -> None:
        hooks = self._hooks
        for req in left:
            if req.state is State.TRANSFERRING:
                hooks.prefilled(req, self, step_s)
            else:
                hooks.request_done(req)

    def _reserve_incoming(self) -> None:
        ex = self.executor
        if not ex.incoming:
            return
        # mid-window, the steps begun so far have taken blocks not yet handed out
        pending = self.num_used_blocks_now - ex.kv.num_used_blocks
        for req in ex.reserve_incoming(pending, self._seats):
            self._hooks.reserved(req, self)

    def _sample_levels(self) -> None:
        now = self.env.now
        kv = self.executor.kv
        self.kv_monitor.set(now, kv.num_used_blocks)
        if self._caches:
            self.cached_monitor.set(now, kv.num_cached_blocks)

    def check(self) -> None:
        """Assert the engine's invariants (tests call this after every step)."""
        if self.fast_forward is not None:
            self.fast_forward.check()
        self.executor.check()
