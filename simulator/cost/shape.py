"""The cost-model interface: ``BatchShape`` in, ``StepTime`` out.

A cost model never sees Request objects, the clock or an RNG. It is built once per
replica for a given model, hardware and parallelism (so the shape carries only what
changes from step to step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from policies.registry import Registry

# The op decomposition shared by every cost model, the calibration harness and
# `servesim estimate`, in execution order.
OP_NAMES: tuple[str, ...] = (
    "embed",
    "qkv_proj",
    "linear_in_proj",  # a hybrid model's Gated DeltaNet layers: their input projections,
    "attn_prefill",
    "attn_decode",
    "attn_linear",  # their convolution and delta-rule kernels,
    "linear_out_proj",  # and their output projection
    "o_proj",
    "moe_router",  # an MoE model's router GEMM (hidden x experts), before the fused experts
    "mlp_gate_up",
    "mlp_act",
    "mlp_down",
    "norm",
    "all_reduce",
    "lm_head",
    "cpu_overhead",
    "all_to_all",  # expert parallelism's dispatch and combine (only with ep > 1)
)


class BatchShape(NamedTuple):
    """The work of one engine step, in plain numbers (a named tuple: built every step, a memo key).

    ``prefill_new_tokens[i]`` tokens of chunk i are computed on top of
    ``prefill_cached_tokens[i]`` tokens already in its KV cache. Decode sequences are
    summarised by their count and the sum of their context lengths (cached tokens plus
    the new one): decode attention reads every cached K/V once, so its cost depends on
    the total, not on how it is spread. ``num_sampled_tokens`` counts sequences that
    produce a token this step (rows of the LM head). KV moved over links (swaps,
    disaggregated transfers) is not compute: the engine times it with ``simulator.cost.link``.
    """

    prefill_new_tokens: tuple[int, ...] = ()
    prefill_cached_tokens: tuple[int, ...] = ()
    num_decode_seqs: int = 0
    decode_context_tokens: int = 0
    num_sampled_tokens: int = 0

    @property
    def num_new_tokens(self) -> int:
        """Tokens computed this step (the row count of every linear layer)."""
        return sum(self.prefill_new_tokens) + self.num_decode_seqs

    @property
    def num_seqs(self) -> int:
        return len(self.prefill_new_tokens) + self.num_decode_seqs

    @property
    def num_kv_tokens(self) -> int:
        """Keys attended this step: every chunk's cached and new tokens plus every decode context."""
        return sum(self.prefill_cached_tokens) + sum(self.prefill_new_tokens) + self.decode_context_tokens

    @property
    def is_empty(self) -> bool:
        return self.num_seqs == 0


MLP_OPS: tuple[str, ...] = ("mlp_gate_up", "mlp_act", "mlp_down")
"""The MLP's ops (a dense MLP's, or an MoE model's routed experts with its shared experts and dense layers)."""


class OpCost(NamedTuple):
    """One op's cost in a step, summed over layers: seconds, FLOPs and bytes moved per GPU (a named tuple:
    a dozen are built per step costed)."""

    seconds: float
    flops: float = 0.0
    bytes: float = 0.0


def sum_ops(x: OpCost, y: OpCost) -> OpCost:
    """Two costs of one op added field by field (seconds, FLOPs, bytes)."""
    return OpCost(x.seconds + y.seconds, x.flops + y.flops, x.bytes + y.bytes)


def merge_op(ops: dict[str, OpCost], name: str, op: OpCost) -> None:
    """Add ``op`` to ``ops[name]`` (set it where there is none)."""
    prev = ops.get(name)
    ops[name] = op if prev is None else sum_ops(prev, op)


@dataclass(frozen=True, slots=True)
class StepTime:
    """Seconds one step takes, with an optional per-op breakdown.

    With pipeline parallelism ``stage_s`` gives each stage's share (summing to ``total_s``, but where the
    engine's CPU time overlaps the first stage's GPU time); None means the stages split the time evenly.
    """

    total_s: float
    ops: Mapping[str, OpCost] | None = None
    stage_s: tuple[float, ...] | None = None


class CostModel(Protocol):
    """Predicts the duration of an engine step. Pure and deterministic."""

    def step_time(self, shape: BatchShape) -> StepTime: ...

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        """The times of decode-only steps of ``num_seqs`` sequences, one per total context given: the same
        floats ``step_time`` gives for each (the fast-forward windows' many steps at once)."""
        ...

    def breakdown(self, shape: BatchShape) -> StepTime:
        """Like ``step_time`` but always with the per-op breakdown (slower)."""
        ...


# Registered factories take (params, model: ModelSpec, hardware: HardwareSpec, tp: int, pp: int), and ep: int
# (expert parallelism) where it is not 1.
COST_MODELS: Registry = Registry("cost model")
