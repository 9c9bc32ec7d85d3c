"""One scheduler loop over one KV block pool, as a SimPy process: plan, cost, wait, apply.

An engine implements ``policies.ReplicaView`` (read-only state for its batch policy) and
carries out the policy's plan: rejections, preemptions (recompute or swap), admissions
with prefix reuse, and KV allocation before the step; token counters, emissions,
completions, frees and prefix-cache registration after it. A replica holds one engine,
or ``pp`` of them (vLLM's virtual engines) sharing the pipeline stages.

In a disaggregated cluster a ``prefill`` engine hands a request off once its prompt is
computed (the KV stays until the transfer completes) and a ``decode`` engine reserves
blocks for incoming KV before the transfer starts, queueing transfers when short.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import Literal

import simpy

from policies.interface import BatchPolicy, StepPlan
from simulator.cost.shape import BatchShape, CostModel
from simulator.decode_batch import DecodeBatch, is_decoding
from simulator.kv import BlockManager, HostPool
from simulator.metrics import MetricsRecorder
from simulator.monitor import LevelMonitor
from simulator.prefix_cache import PrefixCache
from simulator.request import Request, State, transition
from simulator.transfer import Link

Role = Literal["mixed", "prefill", "decode"]
_WINDOW_END = object()  # the value of a window's wake-up event when no arrival cut it short
KvPool = BlockManager | PrefixCache


@dataclass(slots=True)
class _Window:
    """A fast-forward window: its decode step durations and the KV blocks in use after each step."""

    durations: list[float]
    used: list[int] | None  # None: no step takes a new block
    used0: int  # blocks in use when it was planned
    clock: list[float] | None = None  # step boundaries (start, then each step's end), once it runs


class Engine:
    """A batch policy driving one KV pool; its steps run on the replica's pipeline stages."""

    def __init__(
        self,
        env: simpy.Environment,
        replica_id: int,
        policy: BatchPolicy,
        cost_model: CostModel,
        kv: KvPool,
        recorder: MetricsRecorder,
        max_model_len: int,
        *,
        engine_id: int = 0,
        role: Role = "mixed",
        host: HostPool | None = None,
        host_link: Link | None = None,
        block_bytes: float = 0.0,
        stages: list[simpy.Resource] | None = None,
        handoff_s: Callable[[BatchShape], float] | None = None,
        check_invariants: bool = False,
        fast_forward: bool = True,
    ) -> None:
        self.env = env
        self.replica_id = replica_id
        self.engine_id = engine_id
        self.role = role
        self.policy = policy
        self.cost_model = cost_model
        self.kv = kv
        self.recorder = recorder
        self.max_model_len = max_model_len
        self.host = host
        self.host_link = host_link
        self.block_bytes = block_bytes  # per GPU: the tp GPUs move their shards in parallel
        self.stages = stages
        self.handoff_s = handoff_s
        self.check_invariants = check_invariants
        # Fast-forward needs a policy that can say it would only decode, and no pipeline stages.
        self._steady = getattr(policy, "steady_decode", None) if fast_forward and stages is None else None
        # set by the simulation
        self.on_done: Callable[[Request], None] | None = None
        self.on_prefilled: Callable[[Request, Engine, float], None] | None = None
        self.on_reserved: Callable[[Request, Engine], None] | None = None
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self._sending: list[Request] = []  # prompt done, KV on its way to a decode engine
        self._incoming: deque[Request] = deque()  # KV to receive once blocks are free
        # blocks reserved, KV on its way here: request -> a stand-in holding the blocks until the KV
        # lands (the request itself still holds its blocks on the sending engine meanwhile)
        self._receiving: dict[Request, Request] = {}
        self._wake: simpy.Event | None = None
        self._last_step_end_s: float | None = None
        self._window: _Window | None = None  # the fast-forward window in progress
        # the running requests as one decode batch while they only decode (fast-forward only)
        self._batch: DecodeBatch | None = None
        self._counted = type(kv) is BlockManager  # KV blocks are counts: a batch's growth is one subtraction
        self._decode_times = getattr(cost_model, "decode_step_times", None)  # many decode steps' times at once
        # carried out since the last recorded step (a plan that only preempts or rejects schedules
        # nothing and is followed at once by another): its preemptions and swap-outs go with the next step
        self._swap_bytes = 0.0
        self._num_swaps = 0
        self._num_preempted = 0
        self.num_swaps_out = 0
        self.num_steps = 0
        self.kv_monitor = LevelMonitor()
        self.cached_monitor = LevelMonitor()
        self.process = env.process(self._loop())

    # -- ReplicaView ---------------------------------------------------------------------

    @property
    def waiting(self) -> deque[Request]:
        return self._waiting

    @property
    def running(self) -> list[Request]:
        """The running requests, their counters current (a policy may change them next)."""
        self._sync()
        return self._running

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_free_blocks(self) -> int:
        return self.kv.num_free_blocks

    @property
    def num_total_blocks(self) -> int:
        return self.kv.num_total_blocks

    @property
    def block_size(self) -> int:
        return self.kv.block_size

    def num_new_blocks(self, request: Request, num_kv_tokens: int) -> int:
        return self.kv.num_new_blocks(request, num_kv_tokens)

    def num_freeable_blocks(self, request: Request) -> int:
        return self.kv.num_freeable_blocks(request)

    def prefix_hit_tokens(self, request: Request) -> int:
        return self.kv.prefix_hit_tokens(request)

    @property
    def kv_capacity_tokens(self) -> int:
        """The most KV tokens one request can ever hold here (every block of the pool)."""
        return self.kv.num_total_blocks * self.kv.block_size

    @property
    def num_outstanding(self) -> int:
        """Requests here: waiting, running, or reserved/queued to receive their KV."""
        return len(self._waiting) + len(self._running) + len(self._incoming) + len(self._receiving)

    # -- arrivals ------------------------------------------------------------------------

    def enqueue(self, req: Request) -> None:
        """Accept a new request into the queue, or reject it if it can never run here."""
        req.replica_id = self.replica_id
        total = req.num_prompt_tokens + req.num_output_tokens
        if total > self.max_model_len:
            self._end(
                req,
                State.REJECTED,
                f"prompt + output of {total} tokens exceeds the max model length ({self.max_model_len})",
            )
            return
        need = self.kv.blocks_for(total)
        if need > self.kv.num_total_blocks:
            self._end(
                req,
                State.REJECTED,
                f"needs {need} KV blocks for prompt + output but the cache holds {self.kv.num_total_blocks}",
            )
            return
        transition(req, State.WAITING, self.env.now)
        self._waiting.append(req)
        self._wakeup()

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    # -- disaggregation: receiving side --------------------------------------------------

    def offer_transfer(self, req: Request) -> None:
        """A prefilled request wants to send its KV here: reserve blocks now, or queue until there are."""
        req.replica_id = self.replica_id
        self._incoming.append(req)
        self._reserve_incoming()
        self._wakeup()  # a reservation takes free blocks: a fast-forward window must replan

    def _reserve_incoming(self) -> None:
        while self._incoming:
            req = self._incoming[0]
            # The prompt's KV plus room for what admission will ask (the first decode token, or the
            # whole output under a reserving policy), so a received request can always be admitted:
            # requests holding half of what they need must not wait on each other.
            if getattr(self.policy, "reserves_kv", False):
                kv_tokens = req.num_prompt_tokens + req.num_output_tokens
            else:
                kv_tokens = req.num_computed_tokens + 1
            stand_in = Request(req.request_id, req.arrival_s, req.num_prompt_tokens, req.num_output_tokens)
            # mid-window, the steps begun so far have taken blocks not yet handed out
            pending = self.num_used_blocks_now - self.kv.num_used_blocks
            if self.kv.num_new_blocks(stand_in, kv_tokens) > self.kv.num_free_blocks - pending:
                return
            self._incoming.popleft()
            self.kv.allocate(stand_in, kv_tokens)
            self._receiving[req] = stand_in
            assert self.on_reserved is not None
            self.on_reserved(req, self)

    def accept_transferred(self, req: Request) -> None:
        """The KV has arrived: the request queues for decoding, its first token reaches the client now."""
        stand_in = self._receiving.pop(req)
        assert req.num_blocks == 0 and not req.block_ids, "the sender must release its blocks first"
        req.num_blocks, req.num_kv_tokens, req.block_ids = (
            stand_in.num_blocks,
            stand_in.num_kv_tokens,
            stand_in.block_ids,
        )
        transition(req, State.WAITING, self.env.now)
        req.first_token_s = req.last_token_s = self.env.now
        # Front of the queue: it holds its blocks and needs none to start, so nothing that waits
        # for free blocks may stand before it (that would be a deadlock).
        self._waiting.appendleft(req)
        self._wakeup()

    # -- disaggregation: sending side ----------------------------------------------------

    def release_sent(self, req: Request) -> None:
        """The KV has left: free the blocks it occupied here."""
        self._sending.remove(req)
        self.kv.free(req)
        self.kv_monitor.set(self.env.now, self.kv.num_used_blocks)
        self._wakeup()  # the freed blocks may let a waiting request in

    # -- the engine loop -----------------------------------------------------------------

    def _loop(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        while True:
            self.kv.new_plan()
            # a window records no preemptions or swap time: one carried from a preempt-only plan goes by the plain path
            if (
                self._steady is not None
                and self._running
                and not self._num_preempted
                and not self._num_swaps
                and self._steady(self)
            ):
                window = self._plan_window()
                if window is not None:
                    yield from self._run_window(window)
                    continue
            plan = self.policy.plan_step(self, env.now)
            self._carry_out(plan)
            self._sample_levels()
            if not plan.scheduled and (plan.preempt or plan.reject):
                # The plan only made room or removed requests: blocks were freed, so let incoming KV
                # transfers claim them and plan again at once rather than sleep.
                self._reserve_incoming()
                continue
            if not plan.scheduled:
                assert self._running == [] or plan.wake_at_s is not None, (
                    f"replica {self.replica_id}: policy scheduled nothing with requests running"
                )
                self._wake = env.event()
                if plan.wake_at_s is not None and plan.wake_at_s > env.now:
                    yield self._wake | env.timeout(plan.wake_at_s - env.now)
                else:
                    assert not self._waiting or plan.wake_at_s is not None or self._blocked_by_transfers(), (
                        f"replica {self.replica_id}: policy left {len(self._waiting)} requests waiting "
                        "on an idle replica"
                    )
                    yield self._wake
                self._wake = None
                continue
            shape = self._shape(plan)
            start = env.now
            step = self.cost_model.step_time(shape)
            transfer_s = self.host_link.time_s(self._swap_bytes, self._num_swaps) if self._num_swaps else 0.0
            if self.stages is None:
                yield env.timeout(step.total_s + transfer_s)
            else:
                yield from self._run_pipeline(shape, step.stage_s or (step.total_s,), transfer_s)
            duration = env.now - start
            prefill_tokens = shape.num_new_tokens - shape.num_decode_seqs
            self._apply(plan, duration)
            self._reserve_incoming()
            self._sample_levels()
            self.recorder.step(
                self.replica_id,
                self.engine_id,
                start,
                duration,
                len(self._running),
                len(self._waiting),
                prefill_tokens,
                shape.num_decode_seqs,
                self.kv.num_used_blocks,
                self.kv.num_cached_blocks,
                self._num_preempted,
                self._num_swaps,
                len(self._sending) + len(self._incoming) + len(self._receiving),
            )
            self._swap_bytes, self._num_swaps, self._num_preempted = 0.0, 0, 0
            self.num_steps += 1
            if self.check_invariants:
                self.check()

    # -- fast-forward: many decode steps in one event ---------------------------------------

    MAX_WINDOW_STEPS = 4096

    def _plan_window(self) -> _Window | None:
        """The decode steps that can run unattended, with their durations.

        The window stops at the step in which the first running request finishes, and
        before any step whose block growth the free blocks could not cover (the policy must
        then choose a victim). Returns None when not even one step qualifies. The running
        requests are the decode batch (built here when there is none), so planning costs
        nothing per request.
        """
        batch = self._batch
        if batch is None:
            batch = self._batch = DecodeBatch.of(self._running, self.kv.block_size)
            if batch is None:
                return None
        assert len(batch) == len(self._running), "a running request is missing from the decode batch"
        k = min(batch.steps_to_finish(), self.MAX_WINDOW_STEPS)
        new = batch.new_blocks(k)
        # Only blocks free without evicting cached prefixes: a router may look at the cache mid-window.
        free = self.kv.num_unused_blocks
        if new is not None and new[-1] > free:
            k = bisect_right(new, free)  # the steps whose growth fits
            if k == 0:
                return None
            del new[k:]
        n = len(batch)
        context = batch.context_tokens()
        contexts = range(context + n, context + n + n * k, n)
        if self._decode_times is not None:
            durations = self._decode_times(n, contexts)
        else:
            durations = [self.cost_model.step_time(BatchShape((), (), n, c, n)).total_s for c in contexts]
        # blocks in use after each step's allocation, or None while no request crosses a block boundary
        used0 = self.kv.num_used_blocks
        used = [used0 + b for b in new] if new is not None and new[-1] else None
        return _Window(durations, used, used0)

    @property
    def num_used_blocks_now(self) -> int:
        """Blocks in use at this moment, mid-window included (allocation happens as each step starts)."""
        window = self._window
        if window is None or window.used is None:  # no step of the window takes a block
            return self.kv.num_used_blocks
        reserved_since = self.kv.num_used_blocks - window.used0
        # the step under way: at a step's end the arrival comes first (the tie rule), so that step still is
        step = bisect_left(window.clock, self.env.now, 0, len(window.used)) - 1
        return window.used[max(step, 0)] + reserved_since

    def _run_window(self, window: _Window) -> Generator[simpy.Event, None, None]:
        """Wait through the window's steps (cut short by an arrival) and apply them as one."""
        env = self.env
        start = env.now
        queued = (len(self._waiting), len(self._sending) + len(self._incoming) + len(self._receiving))
        cached0 = self.kv.num_cached_blocks
        k = len(window.durations)
        clock = window.clock = list(accumulate(window.durations, initial=start))  # the sums SimPy would form
        self._window = window
        wake = self._wake = env.event()
        env.timeout(clock[-1] - start).callbacks.append(
            lambda _, wake=wake: wake.triggered or wake.succeed(_WINDOW_END)
        )
        yield wake
        if wake.value is not _WINDOW_END and env.now < clock[-1]:
            # Something arrived mid-step: that step still completes, then the policy plans again. One that
            # arrived exactly as a step ended is seen by the plan made then (the tie rule: simulation.Arrival).
            done = bisect_left(clock, env.now, 1)  # the first step ending at or after now
            self._wake = None
            if clock[done] > env.now:
                yield env.timeout(clock[done] - env.now)
            k = done
        self._wake = None
        self._window = None  # from here on the engine's own counts are current again
        used = window.used
        self._apply_window(clock[: k + 1], used[:k] if used is not None else None, window.used0, cached0, queued)

    def _apply_window(
        self, clock: list[float], used: list[int] | None, used0: int, cached0: int, queued: tuple[int, int]
    ) -> None:
        """Counters, emissions, completions, step rows and levels of the decode steps between ``clock``'s times.

        Gives what ``len(clock) - 1`` plain steps would: the same token counts, ITLs, KV blocks
        and step rows, up to the rounding of clock sums. ``used`` holds the blocks in use
        after each step (None: ``used0`` throughout), ``cached0`` and ``queued`` (waiting
        requests, transfers) the levels at the window's start.
        """
        k = len(clock) - 1
        now = clock[-1]
        running = self._running
        n = len(running)
        kv = self.kv
        recorder = self.recorder
        reserved_since = kv.num_used_blocks - used0  # KV reservations since the window started
        batch = self._batch
        assert batch is not None
        gaps, finished = batch.advance(k, clock[1], now)
        for gap, count in gaps.items():  # each request's first gap runs from its latest token
            recorder.itl(gap, count)
        durations = [b - a for a, b in pairwise(clock)]  # the steps as SimPy's clock would time them
        if k > 1:
            recorder.itl_bulk(durations[1:], n)
        if len(finished) > 1:
            finished.sort(key=running.index)  # the order the plain path finishes them in
        used_end = used0 if used is None else used[-1]
        if self._counted:
            grown = used_end - used0
            assert grown <= kv.num_free_blocks, f"window grows {grown} blocks with {kv.num_free_blocks} free"
            kv.num_free_blocks -= grown
            for r in finished:
                self._materialize(r)
                batch.remove(r)
        else:
            self._sync()  # allocates block ids, in the order the plain path would
        assert kv.num_used_blocks == used_end + reserved_since, "window block growth disagrees with allocation"
        for r in finished:
            running.remove(r)
            kv.free(r)
            self._end(r, State.FINISHED)
        self._reserve_incoming()  # freed blocks may let queued KV in, before the step is recorded (as plain)
        # cached prefixes stay until the last step: a window grows only into blocks that are purely free
        levels = used0 if used is None else used
        recorder.steps_bulk(
            self.replica_id,
            self.engine_id,
            clock,
            durations,
            {
                "num_running": (n, len(running)),
                # queues as the steps left them: unchanged until the last step, when arrivals cut the window
                "num_waiting": (queued[0], len(self._waiting)),
                "num_prefill_tokens": 0,
                "num_decode_tokens": n,
                "num_kv_blocks_used": (levels, kv.num_used_blocks),
                "num_kv_blocks_cached": (cached0, kv.num_cached_blocks),
                "num_preempted": 0,
                "num_swapped": 0,
                "num_transfer_queue": (queued[1], len(self._sending) + len(self._incoming) + len(self._receiving)),
            },
        )
        self.kv_monitor.segments(clock, durations, levels)
        self.cached_monitor.segments(clock, durations, cached0)
        self._last_step_end_s = now
        self.num_steps += k
        self._sample_levels()
        if self.check_invariants:
            self.check()

    def _materialize(self, req: Request) -> None:
        """Bring a decode batch member's counters and KV blocks up to date."""
        assert self._batch is not None
        c = self._batch.materialize(req)
        if c > req.num_kv_tokens:
            bs = self.kv.block_size
            if c <= req.num_blocks * bs:
                req.num_kv_tokens = c
            elif self._counted:  # the windows took these blocks from the pool already
                req.num_blocks = self.kv.blocks_for(c)
                req.num_kv_tokens = c
            else:
                self.kv.allocate(req, c)

    def _sync(self) -> None:
        """Materialize every running request and drop the decode batch (something else will read or change them)."""
        if self._batch is None:
            return
        for r in self._running:
            if r in self._batch:
                self._materialize(r)
        self._batch = None

    def _blocked_by_transfers(self) -> bool:
        """Waiting requests may sit on an idle engine only while KV transfers (in or out) are pending."""
        return bool(self._receiving or self._incoming or self._sending)

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

    def _sample_levels(self) -> None:
        now = self.env.now
        self.kv_monitor.set(now, self.kv.num_used_blocks)
        self.cached_monitor.set(now, self.kv.num_cached_blocks)

    def _carry_out(self, plan: StepPlan) -> int:
        """Apply the plan's decisions before the step; returns the number preempted."""
        # a policy that preempts (or schedules running requests) read them first, which dropped the batch
        assert self._batch is None or not plan.preempt, "a policy preempted without reading the running requests"
        now = self.env.now
        for req, reason in plan.reject:
            self._waiting.remove(req)
            if req.num_blocks:  # a transferred request that cannot run here after all
                self.kv.free(req)
            self._end(req, State.REJECTED, reason)
        for req in plan.preempt:
            self._running.remove(req)
            blocks = self.kv.free(req)
            host = self.host
            if plan.preemption_mode == "swap" and host is not None and 0 < blocks <= host.num_free_blocks:
                host.store(req, blocks)  # KV kept in host memory; counters unchanged
                self._swap_bytes += blocks * self.block_bytes
                self._num_swaps += 1
                self.num_swaps_out += 1
            else:
                req.num_computed_tokens = 0  # recompute (or swap space exhausted): the KV is gone
            transition(req, State.PREEMPTED, now)
            # Preempted newest first, so the oldest ends in front; but behind requests that already
            # hold their KV (received by transfer), which need no free blocks to start.
            holding = 0
            while holding < len(self._waiting) and self._waiting[holding].num_blocks:
                holding += 1
            self._waiting.insert(holding, req)
        admitted = [req for req, _ in plan.scheduled if req.state is not State.RUNNING]
        for req in admitted:
            if self._waiting and self._waiting[0] is req:
                self._waiting.popleft()
            else:
                self._waiting.remove(req)
            first = req.first_scheduled_s is None
            transition(req, State.RUNNING, now)
            self._running.append(req)
            if req.num_host_blocks:
                assert self.host is not None
                self._swap_bytes += self.host.load(req) * self.block_bytes
                self._num_swaps += 1
            elif req.num_computed_tokens == 0:
                # Reuse a cached prefix before any allocation below can evict it.
                tokens, reload_blocks = self.kv.acquire_prefix(req)
                req.num_computed_tokens = tokens
                if first:
                    req.num_cached_tokens = tokens
                if reload_blocks:
                    self._swap_bytes += reload_blocks * self.block_bytes
                    self._num_swaps += 1
        for req, n in plan.scheduled:
            assert req.num_computed_tokens + n <= req.num_tokens, "plan computes beyond the sequence"
            kv_tokens = plan.kv_tokens.get(req, req.num_computed_tokens + n)
            self.kv.allocate(req, kv_tokens)
        self._num_preempted += len(plan.preempt)
        return len(plan.preempt)

    @staticmethod
    def _shape(plan: StepPlan) -> BatchShape:
        prefill_new: list[int] = []
        prefill_cached: list[int] = []
        num_decode = 0
        decode_ctx = 0
        sampled = 0
        for req, n in plan.scheduled:
            computed = req.num_computed_tokens
            # A decode computes the one token sampled last step; a 1-token chunk of a prompt
            # (or of a recompute) is prefill work, even though it costs the same.
            if n == 1 and computed >= req.num_prompt_tokens:
                num_decode += 1
                decode_ctx += computed + 1
            else:
                prefill_new.append(n)
                prefill_cached.append(computed)
            if computed + n == req.num_tokens:
                sampled += 1
        return BatchShape(tuple(prefill_new), tuple(prefill_cached), num_decode, decode_ctx, sampled)

    def _apply(self, plan: StepPlan, duration_s: float) -> None:
        """Advance counters after the step ending now: emit tokens, finish, hand off, free."""
        now = self.env.now
        prev_end = self._last_step_end_s
        num_regular_gaps = 0  # emissions whose previous token came at the end of the previous step
        recorder = self.recorder
        kv = self.kv
        hand_off = self.role == "prefill"
        irregular: dict[float, int] = {}  # gaps not starting at the previous step's end, pooled by value
        for req, n in plan.scheduled:
            req.num_computed_tokens += n
            kv.commit(req)
            if req.num_computed_tokens == req.num_tokens:
                req.num_generated_tokens += 1
                if req.first_token_s is None:
                    if hand_off and req.num_output_tokens > 1:
                        # The first token travels with the KV; the client sees it when decoding starts.
                        self._running.remove(req)
                        transition(req, State.TRANSFERRING, now)
                        self._sending.append(req)
                        assert self.on_prefilled is not None
                        self.on_prefilled(req, self, duration_s)
                        continue
                    req.first_token_s = now
                elif req.last_token_s == prev_end:
                    num_regular_gaps += 1
                else:
                    gap = now - req.last_token_s
                    irregular[gap] = irregular.get(gap, 0) + 1
                req.last_token_s = now
                if req.num_generated_tokens == req.num_output_tokens:
                    self._running.remove(req)
                    kv.free(req)
                    self._end(req, State.FINISHED)
                    continue
            if plan.discard_kv:
                kv.free(req)
                req.num_computed_tokens = 0
        for gap, count in irregular.items():
            recorder.itl(gap, count)
        if num_regular_gaps:
            recorder.itl(now - prev_end, num_regular_gaps)
        self._last_step_end_s = now
        batch = self._batch
        if batch is not None:  # requests that start decoding join the batch
            for req, _ in plan.scheduled:
                joins = req.state is State.RUNNING and req not in batch
                if joins and not (is_decoding(req) and batch.add(req)):
                    self._sync()
                    break

    def _end(self, req: Request, state: State, reason: str | None = None) -> None:
        transition(req, state, self.env.now, reason)
        self.recorder.request_done(req, self.env.now)
        assert self.on_done is not None
        self.on_done(req)

    # -- invariants ----------------------------------------------------------------------

    def check(self) -> None:
        """Assert the engine's invariants (tests call this after every step)."""
        if self._batch is not None:  # members' counters current, the batch's totals theirs
            for r in self._running:
                self._materialize(r)
            self._batch.check(self._running)
        running, waiting = self._running, self._waiting
        ids = [id(r) for r in (*running, *waiting, *self._sending, *self._incoming, *self._receiving)]
        assert len(ids) == len(set(ids)), "a request is in two queues"
        holders = [*running, *self._sending, *self._receiving.values(), *(r for r in waiting if r.num_blocks)]
        self.kv.check(holders)
        bs = self.kv.block_size
        reserves = getattr(self.policy, "reserves_kv", False)
        for r in running:
            assert r.state is State.RUNNING
            assert r.num_blocks == -(-r.num_kv_tokens // bs), "blocks do not match the KV tokens held"
            assert r.num_kv_tokens >= r.num_computed_tokens, "running request lacks KV for its tokens"
            if not reserves:
                assert r.num_kv_tokens == r.num_computed_tokens, "running request holds KV it does not use"
            assert r.num_generated_tokens < r.num_output_tokens
        for r in waiting:
            assert r.state in (State.WAITING, State.PREEMPTED)
            if r.num_blocks:  # arrived by KV transfer, with room for its first decode step
                assert r.num_blocks == -(-r.num_kv_tokens // bs) and r.num_kv_tokens > r.num_computed_tokens
                assert r.first_token_s is not None
            elif r.num_host_blocks:
                assert r.num_host_blocks == -(-r.num_computed_tokens // bs), "swapped KV does not match tokens"
            else:
                assert r.num_computed_tokens == 0, "a queued request kept computed tokens without KV"
        for r in self._sending:
            assert r.state is State.TRANSFERRING and r.num_computed_tokens == r.num_prompt_tokens
        if self.host is not None:
            held = sum(r.num_host_blocks for r in waiting)
            assert held == self.host.num_total_blocks - self.host.num_free_blocks, "host blocks leaked"
