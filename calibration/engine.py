"""servesim's builtin engine: continuous batching over a paged KV cache with real forward passes.

It runs any registered batch policy (``policies.BATCH_POLICIES``) on real requests: the
engine implements ``policies.ReplicaView``, asks the policy for each step's plan, carries
it out exactly as the simulator's replica does (rejections, recompute preemptions with
the victim back at the head of the queue, admissions, block allocation), then runs the
step's tokens through ``TorchModel`` in one forward pass and samples greedily. So a
validation against it isolates the cost model: the policy's decisions are the same code.

Requests are sent on a wall-clock schedule (``arrival_s`` from the run's start); the
engine admits them at step boundaries and sleeps while idle. Every emitted token is
time-stamped.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from calibration.model import TorchModel
from policies.interface import BatchPolicy, StepPlan
from simulator.cost.shape import BatchShape
from simulator.kv.pool import ceil_div


@dataclass(slots=True, eq=False)
class EngineRequest:
    """A request inside the builtin engine (satisfies ``policies.RequestView``)."""

    request_id: int
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    token_ids: list[int]
    priority: int = 0
    session_id: int = -1
    num_computed_tokens: int = 0
    num_generated_tokens: int = 0
    block_table: list[int] = field(default_factory=list)
    is_swapped: bool = False
    status: str = "sent"  # sent, waiting, running, finished, rejected
    admitted_s: float | None = None
    first_scheduled_s: float | None = None
    token_times_s: list[float] = field(default_factory=list)
    finished_s: float | None = None
    num_preemptions: int = 0
    reject_reason: str | None = None

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_generated_tokens

    @property
    def num_blocks(self) -> int:
        return len(self.block_table)

    @property
    def enqueued_s(self) -> float | None:
        """When the engine queued the request (``RequestView``)."""
        return self.admitted_s


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


class BuiltinEngine:
    """One model replica: a policy, a paged KV block pool and ``TorchModel``'s forward pass."""

    def __init__(self, model: TorchModel, policy: BatchPolicy, max_model_len: int) -> None:
        self.model = model
        self.policy = policy
        self.max_model_len = max_model_len
        self._free: deque[int] = deque(range(model.num_kv_blocks))
        self._waiting: deque[EngineRequest] = deque()
        self._running: list[EngineRequest] = []
        self.steps: list[StepRecord] = []

    # -- ReplicaView ---------------------------------------------------------------------

    @property
    def waiting(self) -> deque[EngineRequest]:
        return self._waiting

    @property
    def running(self) -> list[EngineRequest]:
        return self._running

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def num_total_blocks(self) -> int:
        return self.model.num_kv_blocks

    @property
    def block_size(self) -> int:
        return self.model.block_size

    def num_new_blocks(self, request: EngineRequest, num_kv_tokens: int) -> int:
        return max(0, ceil_div(num_kv_tokens, self.block_size) - request.num_blocks)

    def num_freeable_blocks(self, request: EngineRequest) -> int:
        return request.num_blocks  # no sharing: a preempted request frees all it holds

    def prefix_hit_tokens(self, request: EngineRequest) -> int:
        return 0  # the builtin engine has no prefix cache

    @property
    def is_idle(self) -> bool:
        return not self._waiting and not self._running

    # -- requests ------------------------------------------------------------------------

    def submit(self, req: EngineRequest, now_s: float) -> None:
        """Queue ``req``, or reject it when it can never run (as the simulator's replica does)."""
        req.admitted_s = now_s
        total = req.num_prompt_tokens + req.num_output_tokens
        if total > self.max_model_len:
            self._reject(req, now_s, f"prompt + output of {total} tokens exceeds the max model length")
        elif ceil_div(total, self.block_size) > self.num_total_blocks:
            self._reject(req, now_s, "needs more KV blocks than the cache holds")
        else:
            req.status = "waiting"
            self._waiting.append(req)

    def _reject(self, req: EngineRequest, now_s: float, reason: str) -> None:
        req.status, req.reject_reason, req.finished_s = "rejected", reason, now_s

    def _free_blocks(self, req: EngineRequest) -> None:
        self._free.extend(req.block_table)
        req.block_table = []

    # -- one step ------------------------------------------------------------------------

    def step(self, clock: Callable[[], float]) -> StepRecord | None:
        """Plan, carry out and run one step; None when the policy scheduled nothing."""
        start = clock()
        plan = self.policy.plan_step(self, start)
        self._carry_out(plan, start)
        if not plan.scheduled:
            return None
        scheduled = cast(list[tuple[EngineRequest, int]], plan.scheduled)
        sampled = self.forward(scheduled)
        end = clock()
        record = self._apply(scheduled, sampled, plan.discard_kv, start, end, len(plan.preempt))
        self.steps.append(record)
        return record

    def _carry_out(self, plan: StepPlan, now_s: float) -> None:
        for req, reason in plan.reject:
            self._waiting.remove(req)
            self._reject(req, now_s, reason)
        for req in plan.preempt:
            self._running.remove(req)
            self._free_blocks(req)
            req.num_computed_tokens = 0
            req.num_preemptions += 1
            req.status = "waiting"
            self._waiting.appendleft(req)
        for req, n in plan.scheduled:
            if req.status != "running":
                self._waiting.remove(req)
                req.status = "running"
                if req.first_scheduled_s is None:
                    req.first_scheduled_s = now_s
                self._running.append(req)
            kv_tokens = plan.kv_tokens.get(req, req.num_computed_tokens + n)
            need = self.num_new_blocks(req, kv_tokens)
            assert need <= len(self._free), "the policy scheduled more blocks than are free"
            req.block_table.extend(self._free.popleft() for _ in range(need))

    def forward(self, scheduled: Sequence[tuple[EngineRequest, int]]) -> dict[int, int]:
        """Run the scheduled tokens through the model: request id -> greedy token, for sequences that complete."""
        m = self.model
        decodes = [(r, n) for r, n in scheduled if n == 1 and r.num_computed_tokens > 0]
        chunks = [(r, n) for r, n in scheduled if not (n == 1 and r.num_computed_tokens > 0)]
        ordered = decodes + chunks
        ids: list[int] = []
        positions: list[int] = []
        for r, n in ordered:
            c = r.num_computed_tokens
            ids += r.token_ids[c : c + n]
            positions += range(c, c + n)
        b = len(decodes)
        decode_in = (
            m.decode_inputs([r.block_table for r, _ in decodes], [r.num_computed_tokens + 1 for r, _ in decodes])
            if b
            else None
        )
        chunk_in = [(m.chunk_slots(r.block_table, r.num_computed_tokens + n), r.num_computed_tokens) for r, n in chunks]
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

    def _apply(
        self,
        scheduled: list[tuple[EngineRequest, int]],
        sampled: dict[int, int],
        discard_kv: bool,
        start_s: float,
        end_s: float,
        num_preempted: int,
    ) -> StepRecord:
        prefill_new, prefill_cached = [], []
        num_decode = decode_ctx = 0
        for req, n in scheduled:
            c = req.num_computed_tokens
            if n == 1 and c > 0:
                num_decode += 1
                decode_ctx += c + 1
            else:
                prefill_new.append(n)
                prefill_cached.append(c)
            req.num_computed_tokens += n
            token = sampled.get(req.request_id)
            if token is not None:
                req.num_generated_tokens += 1
                req.token_ids.append(token)
                req.token_times_s.append(end_s)
                if req.num_generated_tokens == req.num_output_tokens:
                    self._running.remove(req)
                    self._free_blocks(req)
                    req.status, req.finished_s = "finished", end_s
                    continue
            if discard_kv:
                self._free_blocks(req)
                req.num_computed_tokens = 0
        return StepRecord(
            start_s,
            end_s,
            tuple(prefill_new),
            tuple(prefill_cached),
            num_decode,
            decode_ctx,
            len(sampled),
            num_preempted,
        )

    # -- a whole run ---------------------------------------------------------------------

    def run(
        self,
        requests: Sequence[EngineRequest],
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Send ``requests`` at their ``arrival_s`` (sorted) and run until all end.

        Times stamped on the requests and steps are seconds since the run's start.
        """
        clock = time.perf_counter
        t0 = clock()

        def now() -> float:
            return clock() - t0

        pending = deque(sorted(requests, key=lambda r: r.arrival_s))
        num_done = 0
        total = len(requests)
        while num_done < total:
            t = now()
            while pending and pending[0].arrival_s <= t:
                self.submit(pending.popleft(), t)
            if self.is_idle:
                if not pending:
                    break
                time.sleep(max(0.0, pending[0].arrival_s - now()))
                continue
            self.step(now)
            done = sum(1 for r in requests if r.status in ("finished", "rejected"))
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
