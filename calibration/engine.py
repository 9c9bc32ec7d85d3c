"""servesim's builtin engine: the simulator's ``StepExecutor`` driving real forward passes.

It runs any registered batch policy (``policies.BATCH_POLICIES``) on real requests, and it
makes every decision with the very code the simulated engine uses: the executor (queues,
rejection, preemption, admission, paged KV blocks, the step's shape, emissions and
completions) is ``simulator.engine.executor.StepExecutor``. Only the step's wait is
different: instead of a cost model's time, the step's tokens run through ``TorchModel`` in
one forward pass and are sampled greedily, and the wall clock stamps the step's end. So a
validation against it isolates the cost model, and ``DecisionLog`` lets a test compare the
two engines' decisions one for one.

Requests are sent on a wall-clock schedule (``arrival_s`` from the run's start); the
engine admits them at step boundaries, arrivals at a step's end before the next plan (the
simulator's tie rule), and sleeps while idle. Every emitted token is time-stamped.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from calibration.model import TorchModel
from policies.batching.registry import BATCH_POLICIES, BatchTraits
from policies.interface import BatchPolicy
from simulator.cost.shape import BatchShape
from simulator.engine.executor import Carried, DecisionLog, StepExecutor
from simulator.kv.prefix_cache import PrefixCache
from simulator.request import Request, State


@dataclass(slots=True, eq=False)
class EngineRequest:
    """A request as its client sees it: its tokens, when each arrived, and how it ended.

    The builtin engine and transformers' engine fill it in; inside the builtin engine the
    executor works on a ``simulator.request.Request`` of the same id.
    """

    request_id: int
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    token_ids: list[int]
    priority: int = 0
    session_id: int = -1
    num_generated_tokens: int = 0
    status: str = "sent"  # sent, waiting, running, finished, rejected
    admitted_s: float | None = None
    first_scheduled_s: float | None = None
    token_times_s: list[float] = field(default_factory=list)
    finished_s: float | None = None
    num_preemptions: int = 0
    reject_reason: str | None = None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One engine step as it ran: wall times and the shape of the work."""

    start_s: float
    end_s: float
    prefill_new_tokens: tuple[int, ...]
    prefill_cached_tokens: tuple[int, ...]
    num_decode_seqs: int
    decode_context_tokens: int
    num_sampled_tokens: int
    num_preempted: int

    def shape(self) -> BatchShape:
        """The step's work as the cost models see it."""
        return BatchShape(
            self.prefill_new_tokens,
            self.prefill_cached_tokens,
            self.num_decode_seqs,
            self.decode_context_tokens,
            self.num_sampled_tokens,
        )


class _Client:
    """The executor's sink: a request that ends is written back to its client record."""

    def __init__(self) -> None:
        self.records: dict[int, EngineRequest] = {}
        self.num_ended = 0  # requests finished or rejected (a running count: the loop reads it every step)

    def request_done(self, req: Request, now_s: float) -> None:
        self.num_ended += 1
        rec = self.records[req.request_id]
        rec.status = "finished" if req.state is State.FINISHED else "rejected"
        rec.finished_s = now_s
        rec.reject_reason = req.reject_reason
        rec.num_preemptions = req.num_preemptions
        rec.num_generated_tokens = req.num_generated_tokens

    def itl(self, gap_s: float, count: int) -> None:
        pass  # the client stamps every token itself

    def extra_tokens(self, count: int) -> None:
        pass  # the builtin engine does not speculate

    def step(self, *row: float) -> None:
        pass  # the engine keeps StepRecords


class BuiltinEngine:
    """One model replica: a policy, the simulator's step executor over paged KV blocks, and ``TorchModel``."""

    def __init__(
        self,
        model: TorchModel,
        policy: BatchPolicy,
        max_model_len: int,
        traits: BatchTraits | None = None,
        log: DecisionLog | None = None,
    ) -> None:
        self.model = model
        self.policy = policy
        self.max_model_len = max_model_len
        self._client = _Client()
        if traits is None:
            traits = BATCH_POLICIES.entry_of(type(policy)).traits
        # A pool of block ids (the KV tensor's pages); with no workload hashes nothing is ever shared or cached.
        self._kv = PrefixCache(model.num_kv_blocks, model.block_size)
        self.executor = StepExecutor(self._kv, traits, self._client, max_model_len, log=log)
        self._carried = Carried()
        self.wake_at_s: float | None = None  # when an idle policy asked to plan again
        self.replan = False  # the last plan only preempted or rejected: plan again at once
        self.steps: list[StepRecord] = []
        # the end of the last step when the engine has run on since (no sleep): a step's record starts
        # there, so that its time holds the bookkeeping between steps (applying results, the loop) too
        self.busy_since_s: float | None = None

    @property
    def is_idle(self) -> bool:
        ex = self.executor
        return not ex.waiting and not ex.num_running

    # -- requests ------------------------------------------------------------------------

    def submit(self, rec: EngineRequest, now_s: float) -> None:
        """Queue a request, or reject it when it can never run (the executor decides, as in the simulator)."""
        req = Request(
            rec.request_id, rec.arrival_s, rec.num_prompt_tokens, rec.num_output_tokens, rec.priority, rec.session_id
        )
        self._client.records[rec.request_id] = rec
        rec.admitted_s = now_s
        if self.executor.enqueue(req, now_s):
            rec.status = "waiting"

    # -- one step ------------------------------------------------------------------------

    def step(self, clock: Callable[[], float], arrive: Callable[[float], None] | None = None) -> StepRecord | None:
        """Plan, carry out and run one step; None when the policy scheduled nothing.

        ``arrive(end_s)`` queues the requests that arrived while the step ran, up to and
        including its end, before the step's results apply (the simulator's tie rule:
        arrivals at an instant come before the step ending then).
        """
        ex = self.executor
        start = clock()
        since = start if self.busy_since_s is None else self.busy_since_s
        ex.kv.new_plan()
        plan = self.policy.plan_step(ex, start)
        ex.carry_out(plan, start, self._carried)
        self.wake_at_s = plan.wake_at_s
        self.replan = not plan.scheduled and bool(plan.preempt or plan.reject)
        if not plan.scheduled:
            return None
        records = self._client.records
        for req, _ in plan.scheduled:
            rec = records[req.request_id]
            rec.status = "running"
            rec.first_scheduled_s = req.first_scheduled_s
        shape = ex.shape(plan)
        sampled = self.forward(plan.scheduled)  # type: ignore[arg-type]
        end = clock()
        if arrive is not None:
            arrive(end)
        ex.apply(plan, end)
        for req, _ in plan.scheduled:
            token = sampled.get(req.request_id)
            if token is not None:
                rec = records[req.request_id]
                rec.token_ids.append(token)
                rec.token_times_s.append(end)
                rec.num_generated_tokens = req.num_generated_tokens
        record = StepRecord(
            since,
            end,
            shape.prefill_new_tokens,
            shape.prefill_cached_tokens,
            shape.num_decode_seqs,
            shape.decode_context_tokens,
            shape.num_sampled_tokens,
            self._carried.num_preempted,
        )
        self._carried.clear()
        self.steps.append(record)
        self.busy_since_s = end
        return record

    def forward(self, scheduled: Sequence[tuple[Request, int]]) -> dict[int, int]:
        """Run the scheduled tokens through the model: request id -> greedy token, for sequences that complete."""
        m = self.model
        records = self._client.records
        kv = self._kv
        # the kernels' split: one query against cached KV takes the paged decode path
        decodes = [(r, n) for r, n in scheduled if n == 1 and r.num_computed_tokens > 0]
        chunks = [(r, n) for r, n in scheduled if not (n == 1 and r.num_computed_tokens > 0)]
        ordered = decodes + chunks
        ids: list[int] = []
        positions: list[int] = []
        for r, n in ordered:
            c = r.num_computed_tokens
            ids += records[r.request_id].token_ids[c : c + n]
            positions += range(c, c + n)
        b = len(decodes)
        decode_in = (
            m.decode_inputs([kv.block_ids(r) for r, _ in decodes], [r.num_computed_tokens + 1 for r, _ in decodes])
            if b
            else None
        )
        chunk_in = [
            (m.chunk_slots(kv.block_ids(r), r.num_computed_tokens + n), r.num_computed_tokens) for r, n in chunks
        ]
        x = m.embed(m.tensor(ids))
        cos, sin = m.rotary(m.tensor(positions))
        torch = m.torch
        delta = None
        for layer in m.layers:
            x, h = m.add_norm(x, delta, layer.input_norm)
            q, k, v = m.qkv_proj(h, layer, cos, sin)
            parts = []
            if decode_in is not None:
                parts.append(m.attn_decode(q[:b], k[:b], v[:b], layer, *decode_in))
            offset = b
            for (slots, cached), (_, n) in zip(chunk_in, chunks, strict=True):
                end = offset + n
                parts.append(m.attn_prefill(q[offset:end], k[offset:end], v[offset:end], layer, slots, cached))
                offset = end
            attn = parts[0] if len(parts) == 1 else torch.cat(parts)
            x, h = m.add_norm(x, m.o_proj(attn, layer), layer.post_norm)
            delta = m.mlp_down(m.mlp_act(m.mlp_gate_up(h, layer)), layer)
        rows: list[int] = []
        sampled_ids: list[int] = []
        offset = 0
        for r, n in ordered:
            offset += n
            if r.num_computed_tokens + n == r.num_tokens:
                rows.append(offset - 1)
                sampled_ids.append(r.request_id)
        if not rows:
            return {}
        index = m.tensor(rows)
        last = x[index] if delta is None else x[index] + delta[index]
        return dict(zip(sampled_ids, m.lm_head(last).tolist(), strict=True))

    # -- a whole run ---------------------------------------------------------------------

    def run(
        self,
        requests: Sequence[EngineRequest],
        progress: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Send ``requests`` at their ``arrival_s`` (sorted) and run until all end.

        Times stamped on the requests and steps are seconds since the run's start
        (``clock`` and ``sleep`` replace the wall clock in tests).
        """
        t0 = clock()
        self.busy_since_s = None  # times are the run's own

        def now() -> float:
            return clock() - t0

        pending = deque(sorted(requests, key=lambda r: r.arrival_s))

        def arrive(t: float) -> None:
            while pending and pending[0].arrival_s <= t:
                rec = pending.popleft()
                self.submit(rec, rec.arrival_s)  # queued when sent: the server receives while a step runs

        num_done = 0
        total = len(requests)
        ended_before = self._client.num_ended
        while num_done < total:
            arrive(now())
            if self.is_idle or (self.step(now, arrive) is None and not self.replan):
                # nothing to run: sleep until the next arrival, or until the policy asked to plan again
                wake = [pending[0].arrival_s] if pending else []
                if not self.is_idle and self.wake_at_s is not None:
                    wake.append(self.wake_at_s)
                if not wake:
                    if self.is_idle:
                        break
                    raise RuntimeError(
                        f"policy {type(self.policy).__name__} left {len(self.executor.waiting)} requests waiting "
                        "on an idle engine with nothing to wake it"
                    )
                sleep(max(0.0, min(wake) - now()))
                self.busy_since_s = None
            done = self._client.num_ended - ended_before
            if progress is not None and done != num_done:
                progress(done, total)
            num_done = done


def make_requests(
    arrival_s: Sequence[float],
    prompt_tokens: Sequence[int],
    output_tokens: Sequence[int],
    vocab_size: int,
    seed: int = 0,
) -> list[EngineRequest]:
    """Engine requests with random prompt token ids (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [
        EngineRequest(i, float(a), int(p), int(o), rng.integers(0, vocab_size, size=int(p)).tolist())
        for i, (a, p, o) in enumerate(zip(arrival_s, prompt_tokens, output_tokens, strict=True))
    ]
