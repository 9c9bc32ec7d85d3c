"""One model replica as a SimPy process: plan a step, cost it, wait, apply it.

The replica implements ``policies.ReplicaView`` (read-only state for the policy) and
carries out the policy's plan: rejections, preemptions, admissions and KV allocation
before the step; token counters, emissions, completions and frees after it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator

import simpy

from policies.interface import BatchPolicy, StepPlan
from simulator.cost.shape import BatchShape, CostModel
from simulator.kv import BlockManager, HostPool
from simulator.metrics import MetricsRecorder
from simulator.monitor import LevelMonitor
from simulator.request import Request, State, transition
from simulator.transfer import Link


class Replica:
    """A replica of ``tp`` GPUs running one batch policy over one KV block pool."""

    def __init__(
        self,
        env: simpy.Environment,
        replica_id: int,
        policy: BatchPolicy,
        cost_model: CostModel,
        kv: BlockManager,
        recorder: MetricsRecorder,
        max_model_len: int,
        on_done: Callable[[Request], None] | None = None,
        check_invariants: bool = False,
        host: HostPool | None = None,
        host_link: Link | None = None,
        block_bytes: float = 0.0,
    ) -> None:
        self.env = env
        self.replica_id = replica_id
        self.policy = policy
        self.cost_model = cost_model
        self.kv = kv
        self.recorder = recorder
        self.max_model_len = max_model_len
        self.on_done = on_done
        self.check_invariants = check_invariants
        self.host = host
        self.host_link = host_link
        self.block_bytes = block_bytes  # per GPU: swaps on the tp GPUs run in parallel
        self._swap_bytes = 0.0
        self._num_swaps = 0
        self.num_swaps_out = 0
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self._wake: simpy.Event | None = None
        self._last_step_end_s: float | None = None
        self.num_steps = 0
        self.kv_monitor = LevelMonitor()
        self.process = env.process(self._loop())

    # -- ReplicaView ---------------------------------------------------------------------

    @property
    def waiting(self) -> deque[Request]:
        return self._waiting

    @property
    def running(self) -> list[Request]:
        return self._running

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

    @property
    def num_outstanding(self) -> int:
        """Requests waiting or running here."""
        return len(self._waiting) + len(self._running)

    # -- arrivals ------------------------------------------------------------------------

    def enqueue(self, req: Request) -> None:
        """Accept ``req`` into the queue, or reject it if it can never run here."""
        now = self.env.now
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
        transition(req, State.WAITING, now)
        self._waiting.append(req)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    # -- the engine loop -----------------------------------------------------------------

    def _loop(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        while True:
            plan = self.policy.plan_step(self, env.now)
            num_preempted = self._carry_out(plan)
            self.kv_monitor.set(env.now, self.kv.num_used_blocks)
            if not plan.scheduled:
                assert self._running == [] or plan.wake_at_s is not None, (
                    f"replica {self.replica_id}: policy scheduled nothing with requests running"
                )
                self._wake = env.event()
                if plan.wake_at_s is not None and plan.wake_at_s > env.now:
                    yield self._wake | env.timeout(plan.wake_at_s - env.now)
                else:
                    assert not self._waiting or plan.wake_at_s is not None, (
                        f"replica {self.replica_id}: policy left {len(self._waiting)} requests waiting "
                        "on an idle replica"
                    )
                    yield self._wake
                self._wake = None
                continue
            shape = self._shape(plan)
            start = env.now
            dt = self.cost_model.step_time(shape).total_s
            if self._num_swaps:
                assert self.host_link is not None
                dt += self.host_link.time_s(self._swap_bytes, self._num_swaps)
            yield env.timeout(dt)
            self._apply(plan, start)
            self.kv_monitor.set(env.now, self.kv.num_used_blocks)
            self.recorder.step(
                self.replica_id,
                start,
                dt,
                len(self._running),
                len(self._waiting),
                shape.num_new_tokens - shape.num_decode_seqs,
                shape.num_decode_seqs,
                self.kv.num_used_blocks,
                num_preempted,
            )
            self.num_steps += 1
            if self.check_invariants:
                self.check()

    def _carry_out(self, plan: StepPlan) -> int:
        """Apply the plan's decisions before the step; returns the number preempted."""
        now = self.env.now
        for req, reason in plan.reject:
            self._waiting.remove(req)
            self._end(req, State.REJECTED, reason)
        self._swap_bytes = 0.0
        self._num_swaps = 0
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
            self._waiting.appendleft(req)  # preempted newest first, so the oldest ends in front
        for req, n in plan.scheduled:
            if req.state is not State.RUNNING:
                if self._waiting and self._waiting[0] is req:
                    self._waiting.popleft()
                else:
                    self._waiting.remove(req)
                transition(req, State.RUNNING, now)
                self._running.append(req)
                if req.num_host_blocks:
                    assert self.host is not None
                    self._swap_bytes += self.host.load(req) * self.block_bytes
                    self._num_swaps += 1
            kv_tokens = plan.kv_tokens.get(req, req.num_computed_tokens + n)
            self.kv.allocate(req, kv_tokens)
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

    def _apply(self, plan: StepPlan, start_s: float) -> None:
        """Advance counters after the step ending now: emit tokens, finish, free."""
        now = self.env.now
        prev_end = self._last_step_end_s
        num_regular_gaps = 0  # emissions whose previous token came at the end of the previous step
        recorder = self.recorder
        for req, n in plan.scheduled:
            req.num_computed_tokens += n
            if req.num_computed_tokens == req.num_tokens:
                req.num_generated_tokens += 1
                if req.first_token_s is None:
                    req.first_token_s = now
                elif req.last_token_s == prev_end:
                    num_regular_gaps += 1
                else:
                    recorder.itl(now - req.last_token_s)
                req.last_token_s = now
                if req.num_generated_tokens == req.num_output_tokens:
                    self._running.remove(req)
                    self.kv.free(req)
                    self._end(req, State.FINISHED)
                    continue
            if plan.discard_kv:
                self.kv.free(req)
                req.num_computed_tokens = 0
        if num_regular_gaps:
            recorder.itl(now - prev_end, num_regular_gaps)
        self._last_step_end_s = now

    def _end(self, req: Request, state: State, reason: str | None = None) -> None:
        transition(req, state, self.env.now, reason)
        self.recorder.request_done(req, self.env.now)
        if self.on_done is not None:
            self.on_done(req)

    # -- invariants ----------------------------------------------------------------------

    def check(self) -> None:
        """Assert the replica's invariants (tests call this after every step)."""
        running, waiting = self._running, self._waiting
        assert len(set(map(id, running))) == len(running)
        assert not (set(map(id, running)) & set(map(id, waiting))), "a request is both running and waiting"
        self.kv.check(running)
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
            assert r.num_blocks == 0
            if r.num_host_blocks:
                assert r.num_host_blocks == -(-r.num_computed_tokens // bs), "swapped KV does not match tokens"
            else:
                assert r.num_computed_tokens == 0, "a queued request kept computed tokens without KV"
        if self.host is not None:
            held = sum(r.num_host_blocks for r in waiting)
            assert held == self.host.num_total_blocks - self.host.num_free_blocks, "host blocks leaked"
