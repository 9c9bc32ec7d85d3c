"""A layout's operating points from the step times of the simulator's own cost model (no simulation).

Mean-field steady state with fixed mean lengths: ``prompt_tokens`` per request prefilled, then
``decode_tokens`` decode steps (its output less the first token, which the prefill makes), the
decoding requests half-way through their output on average (context ``prompt + output / 2``).

- **aggregated** (vLLM V1, chunked prefill under a token budget B): with n requests decoding, each
  step computes their n decode tokens and, for the flow to balance (Little's law: each request
  spends ``decode_tokens`` steps decoding), n / decode_tokens prompts' prefill on average, each in
  chunks of what B leaves beside the decodes (``aggregated_points``). The average step takes
  tau(n); TPOT = tau(n); a replica serves n / (decode_tokens x tau(n)) requests/s; a prompt's
  chunk steps back to back are its prefill, and its TTFT adds the p99 wait of an M/M/1 queue of
  prompts served that fast (``p99_wait_s``).
- **disaggregated**: a prefill replica runs k prompts a step (k x prompt <= B, or one prompt in
  chunks of B), serving k / t requests/s with TTFT t; a decode replica with n decodes steps in
  tau_d(n) (TPOT), serving n / (decode_tokens x tau_d(n)) requests/s: the deployment's rate, below
  the prefill pool's capacity; the TTFT adds the p99 wait of the prefill pool as one M/M/1 queue
  (the KV transfer is left to the simulation check).

tokens/s/GPU = the deployment's output tokens/s over its GPUs; tokens/s/user = 1 / TPOT (the
rate one user receives tokens, aiconfigurator's figure). The concurrency n runs over a
geometric grid up to the KV cache's room (each request holding its mid-output context's blocks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.cost import BatchShape
from simulator.cost.shape import CostModel
from simulator.planning.layouts.space import Layout
from simulator.planning.search.estimate import P99_TAIL
from simulator.planning.search.maxima import geometric_grid

# The concurrency grid's ratio: an eighth of an octave between points (the Pareto front's resolution; about
# 8 cost-model calls per doubling of n).
CONCURRENCY_GRID_RATIO = 2.0 ** (1 / 8)


@dataclass(frozen=True, slots=True)
class Replica:
    """One TP degree's cost model and KV room for the workload's mean request."""

    tp: int
    cost: CostModel
    num_blocks: int
    block_size: int
    window_blocks: int = 0  # a sequence's sliding-window layers' blocks (vLLM V1, simulator/kv/window.py)

    def kv_cap(self, context_tokens: float) -> int:
        """The most requests of ``context_tokens`` whose KV fits at once."""
        return self.num_blocks // max(1, math.ceil(context_tokens / self.block_size) + self.window_blocks)


@dataclass(frozen=True, slots=True)
class Lengths:
    """The workload's mean prompt and output (tokens per request)."""

    prompt_tokens: float
    output_tokens: float

    @property
    def decode_tokens(self) -> float:
        return max(self.output_tokens - 1.0, 1e-9)

    @property
    def context_tokens(self) -> int:
        return max(1, round(self.prompt_tokens + self.output_tokens / 2))


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """A layout at one concurrency: its latencies, rate and tokens per GPU and per user."""

    layout: Layout
    concurrency: int  # decoding requests per (decode) replica
    ttft_ms: float
    tpot_ms: float
    rate_per_s: float  # requests/s of the whole deployment
    tokens_per_s_per_gpu: float  # output tokens
    tokens_per_s_per_user: float

    def meets(self, ttft_ms: float | None, tpot_ms: float | None) -> bool:
        return (ttft_ms is None or self.ttft_ms <= ttft_ms) and (tpot_ms is None or self.tpot_ms <= tpot_ms)


def p99_wait_s(rate_per_s: float, capacity_per_s: float) -> float:
    """The p99 wait of an M/M/1 queue at ``rate_per_s`` served at ``capacity_per_s`` (inf at or past capacity).

    P(wait > w) = rho exp(-mu (1 - rho) w), the queue model the plan's search estimate uses
    (``search.estimate``): the prompts' queue for the prefill, where a TTFT bound binds first.
    """
    rho = rate_per_s / capacity_per_s
    if rho >= 1:
        return math.inf
    if rho <= P99_TAIL:
        return 0.0
    return math.log(rho / P99_TAIL) / (capacity_per_s * (1 - rho))


def _step_s(cost: CostModel, chunks: tuple[int, ...], cached: tuple[int, ...], n: int, context: int) -> float:
    return cost.step_time(BatchShape(chunks, cached, n, n * context, n + len(chunks))).total_s


def prompt_chunks(prompt_tokens: float, room_tokens: int) -> list[tuple[int, int]]:
    """A prompt's (chunk, cached) pieces when each step leaves it ``room_tokens`` of the budget."""
    prompt = max(1, round(prompt_tokens))
    room = max(1, room_tokens)
    return [(min(room, prompt - done), done) for done in range(0, prompt, room)]


def aggregated_points(layout: Layout, r: Replica, w: Lengths) -> list[OperatingPoint]:
    """The aggregated layout's operating points over its concurrency grid (see the module docstring).

    A prompt is prefilled in chunks of what the budget leaves beside the n decodes, each chunk
    attending to the chunks before it; its prefill costs each of its steps the difference to the
    decode-only step. Per decode step, n / decode_tokens prompts start (the flow's balance), so
    the average step is the decode-only step plus that share of one prompt's prefill cost: TPOT.
    The prompt's own steps, back to back, are its TTFT.
    """
    budget, context = layout.budget_tokens, w.context_tokens
    out = []
    for n in geometric_grid(max(1, r.kv_cap(context)), CONCURRENCY_GRID_RATIO):
        if n >= budget:
            break  # no room for a prompt chunk beside the decodes
        decode_s = _step_s(r.cost, (), (), n, context)
        steps_s = [_step_s(r.cost, (c,), (k,), n, context) for c, k in prompt_chunks(w.prompt_tokens, budget - n)]
        tau = decode_s + n / w.decode_tokens * sum(s - decode_s for s in steps_s)
        per_replica = n / (w.decode_tokens * tau)
        alone_s = sum(steps_s)  # the prompts are prefilled one after another at most this fast
        ttft_s = alone_s + p99_wait_s(per_replica, 1 / alone_s)
        rate = layout.count * per_replica
        tokens = rate * w.output_tokens
        out.append(OperatingPoint(layout, n, ttft_s * 1e3, tau * 1e3, rate, tokens / layout.num_gpus, 1 / tau))
    return out


def prefill_rate(layout: Layout, r: Replica, w: Lengths, ttft_ms: float | None) -> tuple[float, float] | None:
    """One prefill replica's best (requests/s, TTFT ms) with the TTFT within ``ttft_ms`` (None: none is)."""
    prompt = max(1, round(w.prompt_tokens))
    budget = layout.budget_tokens
    best = None
    if prompt > budget:  # one prompt in chunks of the budget, each on top of the chunks before it
        chunks = [min(budget, prompt - i) for i in range(0, prompt, budget)]
        t = sum(_step_s(r.cost, (c,), (i * budget,), 0, 0) for i, c in enumerate(chunks))
        options = [(1, t)]
    else:
        options = [(k, _step_s(r.cost, (prompt,) * k, (0,) * k, 0, 0)) for k in range(1, budget // prompt + 1)]
    for k, t in options:
        if (ttft_ms is None or t * 1e3 <= ttft_ms) and (best is None or k / t > best[0]):
            best = (k / t, t * 1e3)
    return best


def disaggregated_points(
    layout: Layout, prefill: Replica, decode: Replica, w: Lengths, ttft_ms: float | None
) -> list[OperatingPoint]:
    """The disaggregated layout's operating points over its decode pool's concurrency grid."""
    assert layout.decode_tp is not None and layout.decode_count is not None
    p = prefill_rate(layout, prefill, w, ttft_ms)
    if p is None:
        return []
    p_rate, ttft_ms = p
    capacity = layout.count * p_rate  # the prefill pool's, as one queue
    context = w.context_tokens
    out = []
    for n in geometric_grid(max(1, decode.kv_cap(context)), CONCURRENCY_GRID_RATIO):
        tau = _step_s(decode.cost, (), (), n, context)
        rate = layout.decode_count * n / (w.decode_tokens * tau)
        if rate >= capacity:
            break  # the prefill pool cannot keep up: more decodes only slow each user
        ttft = ttft_ms + p99_wait_s(rate, capacity) * 1e3
        tokens = rate * w.output_tokens
        out.append(OperatingPoint(layout, n, ttft, tau * 1e3, rate, tokens / layout.num_gpus, 1 / tau))
    return out
