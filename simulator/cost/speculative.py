"""The step time of speculative decoding: the proposer's passes and the target's verification.

Each step a decoding request verifies its K proposed tokens and the token of its own in one
target pass over K + 1 positions (vLLM's spec-decode worker: the proposals join the batch as
extra query positions). That pass is priced as the step the target model would run with
(K + 1) x b one-token decodes reading the same KV once in total: its linear layers and LM head
at (K + 1) x b rows, its attention reading every cached key once (decode attention is
memory-bound at a few queries per sequence), and the engine's CPU overhead of the b
sequences it really schedules. The proposer runs K decode passes of its own over the same
sequences (a draft model, or an MTP module: one decoder layer of the target's shapes, as
DeepSeek-V3's, its tech report section 2.2), and its share of every prompt chunk, each
without a CPU overhead of its own (the passes run inside the engine's step).

Where the engine's CPU time overlaps the GPU's (``cpu_overlap``: vLLM V1's async scheduling), the step takes
the longer of the GPU work (target and proposer) and that CPU time.

Left out: the rejection sampler's own time, and KV slots held for the proposals during the
step (the engine keeps only the accepted ones).
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.cost.eager import eager_step_s
from simulator.cost.overhead import overlap_total
from simulator.cost.shape import BatchShape, CostModel, StepTime


def _compute_s(time: StepTime) -> float:
    """A step's time less its CPU overhead (of a step whose CPU time adds to its GPU time)."""
    cpu = time.ops.get("cpu_overhead") if time.ops else None
    return time.total_s - (cpu.seconds if cpu is not None else 0.0)


def _gpu_s(time: StepTime) -> float:
    """A step's GPU time: its ops but the engine's CPU time (whether or not that overlaps); a step launched
    eagerly, the longer of that and the host's launches (simulator/cost/eager.py)."""
    ops = time.ops or {}
    gpu = sum(op.seconds for name, op in ops.items() if name != "cpu_overhead" and name != "eager_host")
    eager = ops.get("eager_host")
    return gpu if eager is None else eager_step_s(gpu, eager.seconds)


def _cpu_s(time: StepTime) -> float:
    cpu = time.ops.get("cpu_overhead") if time.ops else None
    return cpu.seconds if cpu is not None else 0.0


class SpeculativeCostModel:
    """``target``'s steps with verification of ``num_tokens`` proposals per decode, plus ``proposer``'s passes.

    Under the ``constant`` cost model, whose breakdown books a whole step as CPU overhead, verification
    and proposals add nothing: speculation is then free, which only a model with op times can price.
    """

    MEMO_SIZE = 1 << 16  # as the roofline's: decode contexts grow every step, so the memo is bounded

    def __init__(self, target: CostModel, proposer: CostModel, num_tokens: int, cpu_overlap: bool = False) -> None:
        self.target = target
        self.proposer = proposer
        self.num_tokens = num_tokens
        self.cpu_overlap = cpu_overlap  # the target's engine runs its CPU work beside the GPU's
        self._memo: dict[BatchShape, StepTime] = {}

    def _parts(self, shape: BatchShape) -> tuple[StepTime, StepTime | None, list[StepTime]]:
        """The target's step as planned, its verification pass over the proposals (None without decodes), and the
        proposer's passes: K decodes with one more token of context each, and its share of the prompt chunks."""
        k = self.num_tokens
        b = shape.num_decode_seqs
        base = self.target.breakdown(shape)
        verified = None
        proposer: list[StepTime] = []
        if b:
            verify = BatchShape(
                shape.prefill_new_tokens,
                shape.prefill_cached_tokens,
                (k + 1) * b,
                shape.decode_context_tokens,
                shape.num_sampled_tokens + k * b,
            )
            verified = self.target.breakdown(verify)
            proposer += [
                self.proposer.breakdown(BatchShape((), (), b, shape.decode_context_tokens + j * b, b)) for j in range(k)
            ]
        if shape.prefill_new_tokens:  # the proposer reads every prompt chunk too
            chunks = BatchShape(
                shape.prefill_new_tokens, shape.prefill_cached_tokens, 0, 0, len(shape.prefill_new_tokens)
            )
            proposer.append(self.proposer.breakdown(chunks))
        return base, verified, proposer

    def _time(self, shape: BatchShape) -> StepTime:
        base, verified, proposer = self._parts(shape)
        ops = dict(base.ops or {})
        if verified is not None:
            ops.update({name: op for name, op in (verified.ops or {}).items() if name != "cpu_overhead"})
        if self.cpu_overlap:  # the GPU work summed, then overlapped with the engine's CPU time
            gpu = _gpu_s(verified if verified is not None else base)
            for step in proposer:
                gpu += _gpu_s(step)
            return StepTime(overlap_total(gpu, _cpu_s(base)), ops)
        total = base.total_s
        if verified is not None:
            total += _compute_s(verified) - _compute_s(base)
        for step in proposer:
            total += _compute_s(step)
        return StepTime(total, ops)

    def step_time(self, shape: BatchShape) -> StepTime:
        time = self._memo.get(shape)
        if time is None:
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            time = self._memo[shape] = self._time(shape)
        return time

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        return [self.step_time(BatchShape((), (), num_seqs, c, num_seqs)).total_s for c in context_tokens]

    def breakdown(self, shape: BatchShape) -> StepTime:
        """The step time with the target's ops of the verification pass (the proposer's time is in the
        total, not in the ops)."""
        return self.step_time(shape)
