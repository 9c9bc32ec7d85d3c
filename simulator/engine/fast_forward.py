"""The fast-forward seam: many decode steps of one engine in one SimPy event, with the plain loop's records.

When the batch policy declares ``steady_decode`` and says it would only decode every
running request, the engine plans a *window*: the next k decode steps, their durations
computed at once (the cost model's ``decode_step_times``), stopping at the step in which
the first request finishes and before any step whose KV growth the free blocks could not
cover. The engine waits through the window in one event, cut short when a request
arrives or KV lands (the step under way completes, as it would), then applies all its
steps together: the same token counts, ITLs, KV blocks, step rows and levels the plain
loop would write step by step.

While the running requests only decode they are kept as one ``DecodeBatch``, so a window
costs nothing per request. ``FastForward`` is the executor's ``LazyRunning``: reading the
running requests brings their counters current (the batch stays), and a plan that
touches a member gives the batch up.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Generator
from dataclasses import dataclass
from itertools import accumulate, pairwise
from operator import itemgetter
from typing import TYPE_CHECKING

import simpy

from policies.interface import StepPlan
from simulator.cost.shape import CostModel
from simulator.engine.decode_batch import DecodeBatch, is_decoding
from simulator.engine.executor import StepExecutor
from simulator.metrics.monitor import LevelMonitor
from simulator.metrics.recorder import MetricsRecorder
from simulator.request import Request, State

if TYPE_CHECKING:
    from simulator.engine.loop import EngineHooks

_WINDOW_END = object()  # the value of a window's wake-up event when no arrival cut it short
OFFERED = object()  # its value when a prefilled request offered for its KV cut it (``EngineHooks.offering``)
MAX_WINDOW_STEPS = 4096


def timeout_at(env: simpy.Environment, at_s: float) -> simpy.Event:
    """A timeout that fires at ``at_s`` exactly, a window's step boundary (the sum the plain path's clock forms step
    by step). SimPy's ``Timeout`` fires at ``now + delay``, and no delay need give ``at_s``: ``at_s - now`` rounds
    where ``at_s`` is more than twice ``now`` (a window planned early in a run), and where ``now`` lies half an ulp
    off the sums' grid, round-half-even skips every other sum. A clock an ulp off the plain path's changes which of
    two events at one instant comes first. Scheduled as ``Environment.schedule`` schedules, at the given time."""
    event = simpy.Event(env)
    event._ok, event._value = True, None
    heapq.heappush(env._queue, (at_s, simpy.core.NORMAL, next(env._eid), event))
    return event


@dataclass(slots=True)
class Window:
    """A fast-forward window: its decode step durations and the KV blocks in use after each step."""

    durations: list[float]
    used: list[int] | None  # None: no step takes a new block
    used0: int  # blocks in use when it was planned
    cached0: int  # cached blocks when it was planned
    queued: tuple[int, int]  # waiting requests and transfers when it was planned
    clock: list[float]  # step boundaries: start, then each step's end (the sums SimPy would form)
    batch_size: int = 0  # requests decoding in its steps (set by advance, which trims it to the steps that ran)
    split: int = 0  # steps before the one ``wait_next`` ran (0: none ran so): the window is two, rows and levels alike


class FastForward:
    """Windows of decode steps for one executor (its ``lazy`` running requests)."""

    def __init__(
        self,
        env: simpy.Environment,
        executor: StepExecutor,
        cost_model: CostModel,
        recorder: MetricsRecorder,
        kv_monitor: LevelMonitor,
        cached_monitor: LevelMonitor,
    ) -> None:
        self.env = env
        self.executor = executor
        self.cost_model = cost_model
        self.recorder = recorder
        self.kv_monitor = kv_monitor
        self.cached_monitor = cached_monitor
        self.batch: DecodeBatch | None = None  # the running requests while they only decode
        self.window: Window | None = None  # the window in progress
        self._synced = -1  # the batch's step at which every member was last brought up to date (-1: not since built)
        self._stepping = False  # the plain step under way decodes every member (``release`` kept the batch)
        # the plan of the plain step under way that steps the members as the batch (they open its ``scheduled``)
        self._members: list[tuple[Request, int]] | None = None
        self._num_members = 0  # how many open it
        self._members_blocks = 0  # the KV blocks their decode tokens take in that step
        # the batch and its step when ``steady_decodes`` last found its members leading a plan's list
        self._vouched: tuple[DecodeBatch, int] | None = None
        self.num_extended = 0  # steps ``wait_next`` ran (each a one-step window's plan saved)
        # the durations of a window's steps that did not run (an arrival cut it), with the batch size and computed
        # tokens they were priced at: step times are a pure function of those, so the next window may take them
        self._tail: tuple[int, int, list[float]] | None = None
        self.hooks: EngineHooks | None = None  # the simulation's (its ``offering`` phase), given when the engine starts
        executor.lazy = self

    # -- LazyRunning ---------------------------------------------------------------------

    def bring_up_to_date(self) -> None:
        batch = self.batch
        if batch is None or batch.step == self._synced:  # a member that joined since was current when it did
            return
        kv = self.executor.kv
        if kv.counted_growth:  # the windows took any new blocks from the pool already
            assert kv.block_size == batch.block_size
            batch.catch_up(self.executor._running, kv.held)
        else:
            for r, c in batch.materialize_all(self.executor._running):
                if c > kv.num_kv_tokens(r):
                    kv.allocate(r, c)
        self._synced = batch.step

    def steady_decodes(self, order: list[Request]) -> tuple[int, int] | None:
        """When the first requests of ``order`` are the decode batch's members: how many they are and the KV blocks
        their next decode tokens take (the batch's totals: their counters need not be current); else None.
        """
        batch = self.batch
        if batch is None or not self.executor.kv.counted_growth:
            return None
        if not batch.leads(order):
            return None
        self._vouched = (batch, batch.step)
        return len(batch.base), batch.num_crossing_next()

    def blocks_to_completion(self) -> int | None:
        """The KV blocks the decode batch's members lack to hold their whole sequences, summed (their counters need
        not be current); None without a batch, or over a pool that counts them otherwise (not plain blocks)."""
        batch = self.batch
        kv = self.executor.kv
        if batch is None or not kv.counted_growth or kv.windows:
            return None
        return batch.blocks_to_completion()

    def release(self, plan: StepPlan) -> tuple[int, int, int] | None:
        """Keep the batch through a plan that touches no member, or one that gives every member its decode token
        (a plain step that also runs prompt chunks: ``join`` then counts the step in the batch); else give it up.

        Returns (members, their new KV blocks, their computed tokens) when the plan's first requests are every
        member, each given its decode token: the executor then steps them as the batch (``step_members``) and walks
        only the rest of the plan (the members' counters may lag: a plan may be made from the batch's totals)."""
        batch = self.batch
        self._stepping = False
        self._members = None
        if batch is None:
            return None
        if self._steps_members(plan, batch):
            self._members_blocks = blocks = batch.num_crossing_next()
            return len(batch.base), blocks, batch.context_tokens()
        self.bring_up_to_date()  # the plan may be made from the batch's totals (``steady_decodes``): walks read members
        for r in plan.preempt:
            if r in batch:
                self._drop()
                return
        members = 0
        for r, n in plan.scheduled:
            if r in batch:
                if n != 1:
                    self._drop()
                    return
                members += 1
        if not members:
            return
        if members != len(batch.base) or plan.discard_kv:
            self._drop()
            return
        self._stepping = True

    def _steps_members(self, plan: StepPlan, batch: DecodeBatch) -> bool:
        """Whether ``plan`` opens with every member, each given one token, as ``step_members`` can take it: counted
        growth, no preemption, reservation, discarded KV, speculation or hand-off, and the members' latest tokens at
        most one time other than the last step's end (the gaps' order is then the plan's)."""
        ex = self.executor
        if (
            plan.preempt
            or plan.kv_tokens
            or plan.discard_kv
            or not ex.kv.counted_growth
            or ex.speculation is not None
            or ex.role == "prefill"
        ):
            return False
        m = len(batch.base)
        vouched = self._vouched
        if plan.num_lead_decodes != m or vouched is None or vouched[0] is not batch or vouched[1] != batch.step:
            # not the members ``steady_decodes`` found leading the plan's list this step, one token each: check
            head = plan.scheduled[:m]
            if len(head) < m or not all(map((1).__eq__, map(itemgetter(1), head))):
                return False
            if not batch.leads(list(map(itemgetter(0), head))):
                return False
        prev_end = ex.last_step_end_s
        if sum(t != prev_end for t in batch.emitted) > 1:
            return False
        self._members, self._num_members = plan.scheduled, m
        return True

    def step_members(self, now_s: float) -> tuple[int, float | None, int, list[Request]]:
        """The members' decode tokens of the plain step ending at ``now_s`` (``release`` offered them): counted in the
        batch, their counters left to catch up (as after a window). Returns the tokens that came one step after the
        last (regular ITLs), the other ITL and its count (or None, 0), and the members that finished, in the plan's
        order, brought up to date and out of the batch (the executor ends them)."""
        batch = self.batch
        members = self._members
        assert batch is not None and members is not None
        prev_end = self.executor.last_step_end_s
        regular, gap, irregular = 0, None, 0
        for t, count in batch.emitted.items():
            if t == prev_end:
                regular += count
            else:
                gap, irregular = now_s - t, count
        _, finished = batch.advance(1, now_s, now_s, self._members_blocks)
        if len(finished) > 1:
            order = [r for r, _ in members[: self._num_members]]
            finished.sort(key=order.index)
        for r in finished:
            self._materialize(r)
            batch.remove(r)
        return regular, gap, irregular, finished

    def join(self, scheduled: list[tuple[Request, int]]) -> None:
        batch = self.batch
        if batch is None:
            return
        if self._members is not None:  # stepped as the batch (``step_members``): the rest may join
            scheduled = scheduled[self._num_members :]
            self._members = None
        elif self._stepping:  # the plain step just run decoded every member once
            self._stepping = False
            end_s = self.executor.last_step_end_s
            assert end_s is not None
            batch.count_plain_step(end_s)
            self._synced = batch.step
        for req, _ in scheduled:
            joins = req.state is State.RUNNING and req not in batch
            if joins and not (is_decoding(req) and batch.add(req, self.executor.kv.num_blocks(req))):
                self._drop()
                return

    def _drop(self) -> None:
        """Materialize every member and give up the batch (a plan changes running requests)."""
        self.bring_up_to_date()
        self.batch = None
        self._vouched = None
        self._stepping = False

    def _materialize(self, req: Request) -> None:
        """Bring a member's counters and KV blocks up to date."""
        assert self.batch is not None
        c = self.batch.materialize(req)
        kv = self.executor.kv
        if c > kv.num_kv_tokens(req):
            if kv.counted_growth:  # the windows took any new blocks from the pool already
                kv.settle_growth(req, c)
            else:
                kv.allocate(req, c)

    def build_batch(self) -> None:
        """Keep the running requests as the decode batch, where every one decodes next, for plain steps (an engine
        that plans no window: its plans schedule the members at once, ``steady_decodes``, and its steps count them
        as the batch, ``step_members``)."""
        if self.batch is None:
            ex = self.executor
            self.batch = DecodeBatch.of(ex._running, ex.kv.block_size, ex.kv.num_blocks)
            if self.batch is not None:
                self._synced = -1

    # -- windows -------------------------------------------------------------------------

    def plan(self, max_steps: int | None = None) -> Window | None:
        """The decode steps that can run unattended (at most ``max_steps``), with their durations; None if not even
        one qualifies.

        The running requests are the decode batch (built here when there is none), so
        planning costs nothing per request.
        """
        ex = self.executor
        kv = ex.kv
        batch = self.batch
        if batch is None:
            self.build_batch()
            batch = self.batch
            if batch is None:
                return None
        assert len(batch.base) == len(ex._running), "a running request is missing from the decode batch"
        k = min(batch.steps_to_finish(), MAX_WINDOW_STEPS if max_steps is None else max_steps)
        new = batch.new_blocks(k)
        # Only blocks free without evicting cached prefixes: a router may look at the cache mid-window.
        free = kv.num_unused_blocks
        if new is not None and new[-1] > free:
            k = bisect_right(new, free)  # the steps whose growth fits
            if k == 0:
                return None
            del new[k:]
        n = len(batch.base)
        context = batch.context_tokens()
        tail, self._tail = self._tail, None
        if tail is not None and tail[0] == n and tail[1] == context:  # priced by the window an arrival cut
            durations = tail[2][:k]
            priced = len(durations)
            if priced < k:
                start_ctx = context + n * (priced + 1)
                durations += self.cost_model.decode_step_times(n, range(start_ctx, context + n + n * k, n))
        else:
            durations = self.cost_model.decode_step_times(n, range(context + n, context + n + n * k, n))
        # blocks in use after each step's allocation, or None while no request crosses a block boundary
        used0 = kv.num_used_blocks
        used = [used0 + b for b in new] if new is not None and new[-1] else None
        start = self.env.now
        clock = list(accumulate(durations, initial=start))  # the sums SimPy would form
        queued = (len(ex.waiting), ex.num_transfers)
        return Window(durations, used, used0, kv.num_cached_blocks, queued, clock)

    def num_used_blocks_now(self) -> int:
        """Blocks in use at this moment, mid-window included (allocation happens as each step starts)."""
        kv = self.executor.kv
        window = self.window
        if window is None or window.used is None:  # no step of the window takes a block
            return kv.num_used_blocks
        reserved_since = kv.num_used_blocks - window.used0
        # the step under way: at a step's end the arrival comes first (the tie rule), so that step still is; while
        # prefilled requests are offered (last at an instant) the step that begins now has begun
        step = self._boundary(window.clock, 0, len(window.used)) - 1
        return window.used[max(step, window.split)] + reserved_since  # ``wait_next``'s step has begun at its start

    def _boundary(self, clock: list[float], lo: int, hi: int) -> int:
        """Where the clock stands among a window's step boundaries (``bisect_left``), or, while prefilled requests
        are offered, past a boundary it stands on (``bisect_right``): the plain path has ended that step and planned
        the next by then (the tie rule of ``EngineHooks.offering``)."""
        hooks = self.hooks
        if hooks is not None and hooks.offering:
            return bisect_right(clock, self.env.now, lo, hi)
        return bisect_left(clock, self.env.now, lo, hi)

    def wait(self, window: Window, wake: simpy.Event) -> Generator[simpy.Event, None, int]:
        """Wait through the window's steps, cut short by ``wake`` (an arrival); returns the steps that ran."""
        env = self.env
        clock = window.clock
        k = len(window.durations)
        self.window = window
        timeout_at(env, clock[-1]).callbacks.append(lambda _: wake.triggered or wake.succeed(_WINDOW_END))
        yield wake
        if wake.value is not _WINDOW_END and env.now < clock[-1]:
            # Something arrived mid-step: that step still completes, then the policy plans again. One that
            # arrived exactly as a step ended is seen by the plan made then (the tie rule: simulation.Arrival); a
            # request offered for its KV as a step ended, after the next step was planned (EngineHooks.offering)
            k = bisect_left(clock, env.now, 1) if wake.value is not OFFERED else bisect_right(clock, env.now, 1)
            if clock[k] > env.now:
                yield timeout_at(env, clock[k])
        self.window = None  # from here on the executor's own counts are current again
        return k

    def extends(self, window: Window, k: int) -> bool:
        """Whether the window, cut short after its ``k``-th step, may run its next step too (``wait_next``) as the
        one-step window planned at the cut step's end would: a step left (so none of its requests finishes before),
        the clock at the step's end exactly, and the pool and queues as the window found them (so that window's
        step is this one's, its blocks fit, and the rows agree)."""
        ex = self.executor
        kv = ex.kv
        return (
            k < len(window.durations)
            and self.env.now == window.clock[k]
            and kv.num_used_blocks == window.used0
            and kv.num_cached_blocks == window.cached0
            and len(ex.waiting) == window.queued[0]
            and ex.num_transfers == window.queued[1]
        )

    def wait_next(self, window: Window, k: int, wake: simpy.Event) -> Generator[simpy.Event, None, int]:
        """Wait through the window's step after its ``k``-th (``extends`` said it may run), as ``wait`` waits through
        a window of that one step: an arrival (``wake``) lets it complete. Returns ``k + 1``."""
        env = self.env
        end = window.clock[k + 1]  # the sum a window planned now would form: its start is the clock (``extends``)
        window.split = k
        self.window = window
        self.num_extended += 1
        timeout_at(env, end).callbacks.append(lambda _: wake.triggered or wake.succeed(_WINDOW_END))
        yield wake
        if wake.value is not _WINDOW_END and env.now < end:
            yield timeout_at(env, end)
        self.window = None
        return k + 1

    def advance(self, window: Window, k: int) -> list[Request]:
        """Counters, emissions and completions of the window's first ``k`` steps; returns the requests that finished.

        Gives what ``k`` plain steps would: the same token counts, ITLs and KV blocks, up to
        the rounding of clock sums.
        """
        ex = self.executor
        clock = window.clock[: k + 1]
        used = window.used[:k] if window.used is not None else None
        now = clock[-1]
        running = ex._running
        n = len(running)
        kv = ex.kv
        recorder = self.recorder
        reserved_since = kv.num_used_blocks - window.used0  # KV leases since the window started
        batch = self.batch
        assert batch is not None
        gaps, finished = batch.advance(k, clock[1], now, used[-1] - window.used0 if used else 0)
        # the steps left unrun (no request finishes before a window's last step: the batch is the same)
        self._tail = (n, batch.context_tokens(), window.durations[k:]) if k < len(window.durations) else None
        for gap, count in gaps.items():  # each request's first gap runs from its latest token
            recorder.itl(gap, count)
        durations = [b - a for a, b in pairwise(clock)]  # the steps as SimPy's clock would time them
        if k > 1:
            recorder.itl_bulk(durations[1:], n)
        if len(finished) > 1:
            finished.sort(key=running.index)  # the order the plain path finishes them in
        used_end = window.used0 if used is None else used[-1]
        if kv.counted_growth:
            kv.take_growth(used_end - window.used0)
            for r in finished:
                self._materialize(r)
                batch.remove(r)
        else:
            self._drop()  # allocates block ids, in the order the plain path would
        assert kv.num_used_blocks == used_end + reserved_since, "window block growth disagrees with allocation"
        for r in finished:
            running.remove(r)
            kv.free(r)
            ex.end(r, State.FINISHED, now)
        window.clock, window.used, window.durations, window.batch_size = clock, used, durations, n
        return finished

    def record(self, window: Window) -> None:
        """The step rows and KV levels of an advanced window (after the leases its frees made room for)."""
        ex = self.executor
        kv = ex.kv
        clock, used, durations = window.clock, window.used, window.durations
        # cached prefixes stay until the last step: a window grows only into blocks that are purely free
        levels = window.used0 if used is None else used
        queued = window.queued  # queues as the steps left them: unchanged until the last step (arrivals cut it)
        self.recorder.decode_window(
            ex.replica_id,
            ex.engine_id,
            clock,
            durations,
            window.batch_size,
            (window.batch_size, len(ex._running)),
            (queued[0], len(ex.waiting)),
            (levels, kv.num_used_blocks),
            (window.cached0, kv.num_cached_blocks),
            (queued[1], ex.num_transfers),
        )
        j = window.split
        if j:  # two windows' levels, summed as two (the time-weighted sums round as they would)
            first = levels if isinstance(levels, int) else levels[:j]
            last = levels if isinstance(levels, int) else levels[j:]
            self.kv_monitor.segments(clock[: j + 1], durations[:j], first)
            self.kv_monitor.segments(clock[j:], durations[j:], last)
            if kv.caches:
                self.cached_monitor.segments(clock[: j + 1], durations[:j], window.cached0)
                self.cached_monitor.segments(clock[j:], durations[j:], window.cached0)
        else:
            self.kv_monitor.segments(clock, durations, levels)
            if kv.caches:  # a pool that caches nothing leaves its level at 0: nothing to add
                self.cached_monitor.segments(clock, durations, window.cached0)
        ex.last_step_end_s = clock[-1]
        ex.num_steps += len(durations)

    # -- invariants ----------------------------------------------------------------------

    def check(self) -> None:
        """Assert the batch's totals against its members (all materialized)."""
        if self.batch is not None:
            self.bring_up_to_date()
            self.batch.check(self.executor._running, self.executor.kv.num_blocks)
