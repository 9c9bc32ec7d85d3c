"""``profiled``: the roofline's op decomposition, each op's time read from a calibration profile.

For a step of shape S on ``num_layers`` layers::

    embed, lm_head                      f_op(tokens)                     once per step
    qkv_proj, o_proj, mlp_*, norm       f_op(tokens)            x layers
    attn_prefill                        sum_i f(new_i, cached_i) x layers  (one kernel per chunk)
    attn_decode                         f(seqs, context / seqs)  x layers  (mean context per sequence)
      or, with attention="packed":      f(tokens, all keys)      x layers  (one masked call per step)
    cpu_overhead                        step_s + per_seq_s x seqs         (measured decode-loop overhead)
                                        + per_kv_s x keys attended        (an engine's, fitted by validate)

every op but ``cpu_overhead`` multiplied by ``time_scale`` (1 unless an engine's kernels
were fitted against the harness's by ``servesim validate``).
    all_reduce                          roofline                          (not measured on one device)

Each ``f`` interpolates the profile's grid (``simulator.cost.interpolate``). Outside the
grid, or for an op the profile lacks, the op falls back to the roofline and the model
counts it (``fallbacks``): with ``extrapolation="anchored"`` (default) the roofline only
scales the nearest measured point (time = f(edge) x roofline(x) / roofline(edge)), which
keeps the curve continuous; with ``"roofline"`` the roofline's own time is used.

Needs numpy and the profile, never torch. The composition root loads the profile and
passes it in; built without one (``profile=None``), every op falls back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost.eager import eager_step_s
from simulator.cost.interpolate import GridInterpolator, Space
from simulator.cost.profile import COUNT_OPS, MODEL_SCOPE_OPS, CalibrationProfile, OpTable
from simulator.cost.roofline import RooflineCostModel, RooflineParams
from simulator.cost.shape import COST_MODELS, BatchShape, OpCost, StepTime


class ProfiledParams(BaseModel):
    """Parameters of the ``profiled`` cost model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["profiled"] = "profiled"
    profile: str | None = Field(
        None, description="Path to a profile written by `servesim calibrate` (relative to the scenario file)."
    )
    extrapolation: Literal["anchored", "roofline"] = Field(
        "anchored", description="Outside the grid: scale the nearest measured point by the roofline, or use it as is."
    )
    step_overhead_s: float | None = Field(
        None, ge=0, description="Fixed seconds per step; None: the profile's measured decode-loop overhead."
    )
    per_seq_overhead_s: float | None = Field(
        None, ge=0, description="Seconds per scheduled sequence; None: the profile's measured figure."
    )
    per_kv_token_overhead_s: float = Field(
        0.0,
        ge=0,
        description="Seconds per key attended in a step, beyond the profile's attention kernels (an engine's "
        "own work that grows with the keys it reads: gathering paged K/V, masks); fitted by `servesim validate`.",
    )
    attention: Literal["per_sequence", "packed"] = Field(
        "per_sequence",
        description="Attention kernels per sequence (vLLM, flash-attention varlen), or one masked call over "
        "all of a step's tokens and keys (transformers' paged|sdpa): then the profile's attn_packed table is used.",
    )
    time_scale: float = Field(
        1.0,
        gt=0,
        description="Multiplies every op's time (not the overhead): an engine's kernels relative to the "
        "calibration harness's, as `servesim validate` fits it; 1 for the harness's own engine.",
    )
    engine: Literal["builtin", "hf"] | None = Field(
        None,
        description="Apply the profile's engine-level fit for this engine (servesim calibrate --engine): its time "
        "scale, overheads and attention layout replace the fields above.",
    )
    roofline: RooflineParams = Field(default_factory=RooflineParams, description="The fallback roofline's parameters.")

    @model_validator(mode="after")
    def _fit_or_fields(self) -> ProfiledParams:
        """An engine fit replaces the fields it holds: one set besides it would silently not apply."""
        if self.engine is None:
            return self
        for name in _ENGINE_FIT_FIELDS:
            if name in self.model_fields_set and getattr(self, name) != type(self).model_fields[name].default:
                raise ValueError(
                    f"{name}: the profile's {self.engine} engine fit (cost_model.engine, which --profile sets when the "
                    "profile holds one fit) replaces it; leave it out, or set cost_model.engine to null to use it"
                )
        return self


# The fields an engine-level fit replaces (``_with_engine_fit``).
_ENGINE_FIT_FIELDS = ("time_scale", "step_overhead_s", "per_seq_overhead_s", "per_kv_token_overhead_s", "attention")


def interpolator(table: OpTable, space: Space | None = None) -> GridInterpolator:
    """The table's interpolating function, in its own space or in ``space``."""
    return GridInterpolator(table.axis_values(), {p.at: p.median_s for p in table.points}, space or table.space)


def _with_engine_fit(params: ProfiledParams, profile: CalibrationProfile | None) -> ProfiledParams:
    """``params`` with the profile's engine-level fit for ``params.engine`` (ValueError naming what is missing)."""
    source = params.profile or "profile"
    fit = profile.engines.get(params.engine) if profile is not None and params.engine is not None else None
    if fit is None:
        have = ", ".join(profile.engines) if profile is not None and profile.engines else "none"
        raise ValueError(
            f"cost_model.engine: {source} holds no fit for engine {params.engine!r} (it has: {have}); "
            f"run `servesim calibrate --engine {params.engine}`"
        )
    return params.model_copy(update={name: getattr(fit, name) for name in _ENGINE_FIT_FIELDS})


@COST_MODELS.register("profiled", params=ProfiledParams)
class ProfiledCostModel:
    """Per-op times interpolated from a calibration profile, the roofline outside it."""

    def __init__(
        self,
        params: ProfiledParams,
        model: ModelSpec,
        hardware: HardwareSpec,
        tp: int = 1,
        pp: int = 1,
        profile: CalibrationProfile | None = None,
    ) -> None:
        if params.engine is not None:
            params = _with_engine_fit(params, profile)
        self.params = params
        self.model = model
        self.tp = tp  # pp: the engine splits a step evenly over the stages (StepTime.stage_s is left unset)
        self.roofline = RooflineCostModel(params.roofline, model, hardware, tp)
        self.profile = profile
        self._f: dict[str, GridInterpolator] = {}
        step_s, per_seq_s = params.roofline.step_overhead_s, params.roofline.per_seq_overhead_s
        if profile is not None:
            profile.check_model(model, params.profile or "profile")
            if tp != 1:
                raise ValueError(
                    f"{params.profile or 'profile'}: measured on one device; it cannot predict tp={tp} "
                    "(use the roofline cost model for tensor parallelism)"
                )
            self._f = {name: interpolator(table) for name, table in profile.ops.items()}
            step_s, per_seq_s = profile.overhead.step_s, profile.overhead.per_seq_s
        self.step_overhead_s = step_s if params.step_overhead_s is None else params.step_overhead_s
        self.per_seq_overhead_s = per_seq_s if params.per_seq_overhead_s is None else params.per_seq_overhead_s
        self.time_scale = params.time_scale
        self.fallbacks: Counter[str] = Counter()
        self.num_lookups = 0
        self._decode_fixed: dict[int, list[tuple[str, float]]] = {}
        self._count_ops: dict[tuple[str, int], float] = {}
        self._roofline_memo: dict[tuple[str, tuple[float, ...]], float] = {}

    # -- public -------------------------------------------------------------------------

    def step_time(self, shape: BatchShape) -> StepTime:
        ops = self._ops(shape)
        eager = ops.pop("eager_host", None)
        if eager is None:
            return StepTime(sum(op.seconds for op in ops.values()))
        # launched eagerly (simulator/cost/eager.py): the GPU's ops wait for the host's launches; the engine's CPU
        # time follows, as this model adds it
        cpu = ops.pop("cpu_overhead", None)
        gpu = eager_step_s(sum(op.seconds for op in ops.values()), eager.seconds)
        return StepTime(gpu + (cpu.seconds if cpu is not None else 0.0))

    def decode_step_times(self, num_seqs: int, context_tokens: Sequence[int]) -> list[float]:
        """Step times of decode-only steps of ``num_seqs`` sequences, one per total context given.

        Equal to ``step_time`` of each such step (the same floats, summed in the same
        order): the ops that do not depend on the context are looked up once per batch
        size, and only attention and the per-key overhead are evaluated per context. A
        context whose attention falls outside the grid takes the whole ``step_time`` path.
        """
        n = num_seqs
        fixed = self._decode_fixed.get(n)
        if fixed is None:
            counts = self.fallbacks.copy(), self.num_lookups  # this probe's lookups are not the run's
            ops = self._ops(BatchShape(num_decode_seqs=n, decode_context_tokens=n, num_sampled_tokens=n))
            self.fallbacks, self.num_lookups = counts
            fixed = [(name, op.seconds) for name, op in ops.items()]
            self._decode_fixed[n] = fixed
        packed = self.params.attention == "packed"
        op = "attn_packed" if packed else "attn_decode"
        f = self._f.get(op)
        layers = self.model.num_layers
        seq_overhead = self.step_overhead_s + self.per_seq_overhead_s * n
        per_kv = self.params.per_kv_token_overhead_s
        out = [0.0] * len(context_tokens)
        for i, c in enumerate(context_tokens):
            c = int(c)
            at = (n, c) if packed else (n, c / n)
            t = None if f is None else f(at)
            if t is None:  # outside the grid: the lookup's own fallback, as step_time takes it
                attn = self._lookup(op, at, None) * self.time_scale
            else:
                self.num_lookups += 1
                attn = t * layers * self.time_scale
            total = 0.0
            for name, seconds in fixed:  # step_time's order, so the floats match
                if name == "attn_decode":
                    seconds = attn
                elif name == "cpu_overhead":
                    seconds = seq_overhead + per_kv * c
                total += seconds
            out[i] = total
        return out

    def breakdown(self, shape: BatchShape) -> StepTime:
        ops = self._ops(shape)
        return StepTime(sum(op.seconds for op in ops.values()), ops)

    def mlp_by_part(self, shape: BatchShape) -> dict[str, dict[str, OpCost]]:
        """The MLP ops of ``shape`` by part (routed, shared, dense): each op's time split over the parts in the
        roofline's proportions (a profile times an op whole)."""
        counts = self.fallbacks.copy(), self.num_lookups  # priced with the step already: not the run's lookups
        ops = self._ops(shape)
        self.fallbacks, self.num_lookups = counts
        roof = self.roofline.mlp_by_part(shape)
        out: dict[str, dict[str, OpCost]] = {part: {} for part in roof}
        for name, op in ops.items():
            parts = [(part, found[name]) for part, found in roof.items() if name in found]
            whole = sum(r.seconds for _, r in parts)
            for part, r in parts:
                share = r.seconds / whole if whole > 0 else 1.0 / len(parts)
                out[part][name] = OpCost(op.seconds * share, r.flops, r.bytes)
        return out

    def moe_exchange(self, rows: float, gather_bytes_per_row: float, scatter_bytes_per_row: float) -> OpCost:
        """The roofline's (a profile is one device's: no collective in it)."""
        return self.roofline.moe_exchange(rows, gather_bytes_per_row, scatter_bytes_per_row)

    @property
    def fallback_fraction(self) -> float:
        """Share of op lookups that fell back to the roofline (0 before any; per-count ops are looked up once)."""
        return sum(self.fallbacks.values()) / self.num_lookups if self.num_lookups else 0.0

    # -- the decomposition --------------------------------------------------------------

    def _ops(self, shape: BatchShape) -> dict[str, OpCost]:
        roof = self.roofline.breakdown(shape).ops
        assert roof is not None
        T, S = shape.num_new_tokens, shape.num_sampled_tokens
        ops: dict[str, OpCost] = {}
        packed = self.params.attention == "packed"
        for name, r in roof.items():
            if packed and name in ("attn_prefill", "attn_decode"):
                if name == "attn_decode" and "attn_prefill" in roof:
                    continue  # one call for the whole step, reported under attn_prefill
                seconds = self._lookup("attn_packed", (T, shape.num_kv_tokens), None)
            elif name in COUNT_OPS:
                # a function of one count (tokens, or sampled rows for the LM head): looked up once per count
                key = (name, S if name == "lm_head" else T)
                seconds = self._count_ops.get(key)
                if seconds is None:
                    seconds = self._count_ops[key] = self._lookup(name, key[1:], r.seconds)
            elif name == "attn_prefill":
                seconds = sum(
                    self._lookup(name, (n, c), None)
                    for n, c in zip(shape.prefill_new_tokens, shape.prefill_cached_tokens, strict=True)
                )
            elif name == "attn_decode":
                b = shape.num_decode_seqs
                seconds = self._lookup(name, (b, shape.decode_context_tokens / b), r.seconds)
            elif name == "cpu_overhead":
                seconds = (
                    self.step_overhead_s
                    + self.per_seq_overhead_s * shape.num_seqs
                    + self.params.per_kv_token_overhead_s * shape.num_kv_tokens
                )
            else:  # all_reduce: not measured on one device
                seconds = r.seconds
            if name != "cpu_overhead" and name != "eager_host":  # the host's time is not the device's
                seconds *= self.time_scale
            ops[name] = OpCost(seconds, r.flops, r.bytes)
        return ops

    def _lookup(self, op: str, at: tuple[float, ...], roofline_s: float | None) -> float:
        """Seconds of ``op`` at ``at`` over all layers (or once, for model-scope ops)."""
        self.num_lookups += 1
        layers = 1 if op in MODEL_SCOPE_OPS else self.model.num_layers
        f = self._f.get(op)
        if f is not None:
            t = f(at)
            if t is not None:
                return t * layers
        self.fallbacks[op] += 1
        if roofline_s is None:
            roofline_s = self._roofline_op(op, at)
        if f is None or self.params.extrapolation == "roofline":
            return roofline_s
        edge = f.clamp(at)
        edge_t = f(edge)
        assert edge_t is not None
        return edge_t * layers * roofline_s / self._roofline_op(op, edge)

    def _roofline_op(self, op: str, at: tuple[float, ...]) -> float:
        """The roofline's seconds for ``op`` alone at coordinates ``at`` (over all layers), remembered."""
        key = (op, at)
        seconds = self._roofline_memo.get(key)
        if seconds is None:
            if len(self._roofline_memo) >= RooflineCostModel.MEMO_SIZE:
                self._roofline_memo.clear()
            seconds = self._roofline_memo[key] = self._roofline_op_uncached(op, at)
        return seconds

    def _roofline_op_uncached(self, op: str, at: tuple[float, ...]) -> float:
        if op == "attn_packed":  # dense attention of T queries over KV keys: 4 x q_size x T x KV FLOPs
            m, tp = self.model, self.tp
            flops = 4 * m.q_size / tp * at[0] * at[1] * m.num_layers
            return flops / (self.roofline.hardware.flops_per_s * self.params.roofline.attention_flops_efficiency)
        if op == "lm_head":
            shape = BatchShape((1,), (0,), num_sampled_tokens=max(1, round(at[0])))
        elif op == "attn_prefill":
            shape = BatchShape((max(1, round(at[0])),), (round(at[1]),))
        elif op == "attn_decode":
            b = max(1, round(at[0]))
            shape = BatchShape(num_decode_seqs=b, decode_context_tokens=max(b, round(b * at[1])))
        else:
            shape = BatchShape((max(1, round(at[0])),), (0,))
        ops = self.roofline.breakdown(shape).ops
        assert ops is not None
        return ops[op].seconds
