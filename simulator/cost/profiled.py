"""``profiled``: the roofline's op decomposition, each op's time read from a calibration profile.

For a step of shape S on ``num_layers`` layers::

    embed, lm_head                      f_op(tokens)                     once per step
    qkv_proj, o_proj, mlp_*, norm       f_op(tokens)            x layers
    attn_prefill                        sum_i f(new_i, cached_i) x layers  (one kernel per chunk)
    attn_decode                         f(seqs, context / seqs)  x layers  (mean context per sequence)
      or, with attention="packed":      f(tokens, all keys)      x layers  (one masked call per step)
    cpu_overhead                        step_s + per_seq_s x seqs         (measured decode-loop overhead)
                                        + per_token_s x new tokens
                                        + per_kv_s x keys attended
    all_reduce                          roofline                          (not measured on one device)

every op but ``cpu_overhead`` multiplied by ``time_scale``. Where the profile has an engine
section (``calibrate --engine``: a real engine's whole steps fitted against the op times),
the scale, the four overheads and the attention layout come from it; without one, scale 1,
the harness's decode-loop overhead (``profile.overhead``), no per-token or per-key cost and
per-sequence attention. Any of them set in the parameters wins (``engine_fit: false``
ignores the section altogether).

Each ``f`` interpolates the profile's grid (``simulator.cost.interpolate``). Outside the
grid, or for an op the profile lacks, the op falls back to the roofline and the model
counts it (``fallbacks``): with ``extrapolation="anchored"`` (default) the roofline only
scales the nearest measured point (time = f(edge) x roofline(x) / roofline(edge)), which
keeps the curve continuous; with ``"roofline"`` the roofline's own time is used.

Needs numpy and the profile, never torch. The composition root loads the profile and
passes it in; built without one (``profile=None``), every op falls back.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from simulator.cost.interpolate import GridInterpolator, Space
from simulator.cost.profile import (
    COUNT_OPS,
    ENGINE_HELD_OUT_LIMIT,
    HELD_OUT_LIMIT,
    MATERIAL_SHARE,
    MODEL_SCOPE_OPS,
    NOISE_REL_SPREAD,
    NOISY_OP_SPREAD,
    CalibrationProfile,
    OpTable,
    noisy_ops,
    thread_note,
)
from simulator.cost.roofline import RooflineCostModel, RooflineParams
from simulator.cost.shape import COST_MODELS, BatchShape, OpCost, StepTime
from simulator.specs import HardwareSpec, ModelSpec

T = TypeVar("T")


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
        None, ge=0, description="Fixed seconds per step; None: the profile's engine fit, else its decode-loop overhead."
    )
    per_seq_overhead_s: float | None = Field(
        None,
        ge=0,
        description="Seconds per scheduled sequence; None: the profile's engine fit, else its decode loop's.",
    )
    per_token_overhead_s: float | None = Field(
        None, ge=0, description="Seconds per new token of a step; None: the profile's engine fit, else 0."
    )
    per_kv_token_overhead_s: float | None = Field(
        None,
        ge=0,
        description="Seconds per key attended in a step, beyond the profile's attention kernels (an engine's "
        "own work that grows with the keys it reads: gathering paged K/V, masks); None: the profile's engine "
        "fit, else 0.",
    )
    attention: Literal["per_sequence", "packed"] | None = Field(
        None,
        description="Attention kernels per sequence (vLLM, flash-attention varlen), or one masked call over "
        "all of a step's tokens and keys (transformers' paged|sdpa): then the profile's attn_packed table is used. "
        "None: the layout of the profile's engine fit, else per_sequence.",
    )
    time_scale: float | None = Field(
        None,
        gt=0,
        description="Multiplies every op's time (not the overhead): an engine's kernels relative to the "
        "calibration harness's; None: the profile's engine fit, else 1.",
    )
    engine_fit: bool = Field(
        True, description="Take what is not set here from the profile's engine section (calibrate --engine)."
    )
    roofline: RooflineParams = Field(default_factory=RooflineParams, description="The fallback roofline's parameters.")


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def interpolator(table: OpTable, space: Space | None = None) -> GridInterpolator:
    """The table's interpolating function, in its own space or in ``space``."""
    return GridInterpolator(table.axis_values(), {p.at: p.median_s for p in table.points}, space or table.space)


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
        self.params = params
        self.model = model
        self.tp = tp  # pp: the engine splits a step evenly over the stages (StepTime.stage_s is left unset)
        self.roofline = RooflineCostModel(params.roofline, model, hardware, tp)
        self.profile = profile
        self._f: dict[str, GridInterpolator] = {}
        step_s, per_seq_s = params.roofline.step_overhead_s, params.roofline.per_seq_overhead_s
        scale, per_token_s, per_kv_s, attention = 1.0, 0.0, 0.0, "per_sequence"
        if profile is not None:
            profile.check_model(model, params.profile or "profile")
            if tp != 1:
                raise ValueError(
                    f"{params.profile or 'profile'}: measured on one device; it cannot predict tp={tp} "
                    "(use the roofline cost model for tensor parallelism)"
                )
            self._f = {name: interpolator(table) for name, table in profile.ops.items()}
            step_s, per_seq_s = profile.overhead.step_s, profile.overhead.per_seq_s
            engine = profile.engine if params.engine_fit else None
            if engine is not None:
                scale, step_s, per_seq_s = engine.time_scale, engine.step_overhead_s, engine.per_seq_overhead_s
                per_token_s, per_kv_s, attention = (
                    engine.per_token_overhead_s,
                    engine.per_kv_token_overhead_s,
                    engine.attention,
                )
        self.step_overhead_s = _or(params.step_overhead_s, step_s)
        self.per_seq_overhead_s = _or(params.per_seq_overhead_s, per_seq_s)
        self.per_token_overhead_s = _or(params.per_token_overhead_s, per_token_s)
        self.per_kv_token_overhead_s = _or(params.per_kv_token_overhead_s, per_kv_s)
        self.time_scale = _or(params.time_scale, scale)
        self.attention = _or(params.attention, attention)
        self.fallbacks: Counter[str] = Counter()
        self.num_lookups = 0
        self._decode_fixed: dict[int, list[tuple[str, float]]] = {}
        self._count_ops: dict[tuple[str, int], float] = {}
        self._roofline_memo: dict[tuple[str, tuple[float, ...]], float] = {}

    # -- public -------------------------------------------------------------------------

    def step_time(self, shape: BatchShape) -> StepTime:
        return StepTime(sum(op.seconds for op in self._ops(shape).values()))

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
        packed = self.attention == "packed"
        op = "attn_packed" if packed else "attn_decode"
        f = self._f.get(op)
        layers = self.model.num_layers
        seq_overhead = self.step_overhead_s + self.per_seq_overhead_s * n + self.per_token_overhead_s * n
        per_kv = self.per_kv_token_overhead_s
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
        packed = self.attention == "packed"
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
                    + self.per_token_overhead_s * T
                    + self.per_kv_token_overhead_s * shape.num_kv_tokens
                )
            else:  # all_reduce: not measured on one device
                seconds = r.seconds
            if name != "cpu_overhead":
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


# -- whether to trust a profile ----------------------------------------------------------------


def _reference_shapes(profile: CalibrationProfile) -> list[BatchShape]:
    """A decode step and a prefill step inside the profile's grid, to weigh ops by."""
    g = profile.grid
    seqs = max([b for b in g.decode_seqs if b <= 8] or [min(g.decode_seqs)])
    ctx = max([c for c in g.decode_context_tokens if c <= 256] or [min(g.decode_context_tokens)])
    tokens = max([t for t in g.prefill_new_tokens if t <= 256] or [min(g.prefill_new_tokens)])
    return [
        BatchShape(num_decode_seqs=seqs, decode_context_tokens=seqs * ctx, num_sampled_tokens=seqs),
        BatchShape((tokens,), (0,), num_sampled_tokens=1),
    ]


def material_ops(profile: CalibrationProfile) -> set[str]:
    """Ops that take at least MATERIAL_SHARE of a reference decode or prefill step under either attention layout."""
    out: set[str] = set()
    for attention in ("per_sequence", "packed"):
        m = ProfiledCostModel(
            ProfiledParams(attention=attention, engine_fit=False), profile.model, profile.hardware, 1, profile=profile
        )
        for shape in _reference_shapes(profile):
            ops = m.breakdown(shape).ops
            assert ops is not None
            total = sum(op.seconds for op in ops.values())
            for name, op in ops.items():
                if total > 0 and op.seconds / total >= MATERIAL_SHARE:
                    out.add("attn_packed" if attention == "packed" and name == "attn_prefill" else name)
    return out


def _pct(x: float) -> str:
    return f"{x:,.0%}"


def quality_warnings(profile: CalibrationProfile, source: str = "profile") -> list[str]:
    """The lines of a loud warning when a profile is not to be trusted; empty when it is.

    Not to be trusted: an op that matters (``material_ops``) with too many noisy points or
    held-out points interpolated badly, an engine fit whose held-out steps it misses, or a
    machine that other processes kept busy during the measurement. The last line says what
    to do about it.
    """
    material = material_ops(profile)
    problems: list[str] = []
    q = profile.quality
    noisy = {op: v for op, v in noisy_ops(profile).items() if op in material}
    if noisy:
        passes = f" after {q.max_passes} passes" if q is not None else ""
        bound = q.noise_rel_spread if q is not None else NOISE_REL_SPREAD
        listed = ", ".join(f"{op} {_pct(typical)} ({n}/{total})" for op, (typical, n, total) in noisy.items())
        problems.append(
            f"noisy timings, typical spread (iqr/median) above {_pct(NOISY_OP_SPREAD)} (points above "
            f"{_pct(bound)}{passes}): {listed}"
        )
    bad = {
        op: fit.held_out_mean_rel_error
        for op, fit in profile.fit.items()
        if op in material and fit.held_out_mean_rel_error is not None and fit.held_out_mean_rel_error > HELD_OUT_LIMIT
    }
    if bad:
        listed = ", ".join(f"{op} {_pct(e)}" for op, e in sorted(bad.items(), key=lambda kv: -kv[1]))
        problems.append(f"held-out points off by more than {_pct(HELD_OUT_LIMIT)} (mean per op): {listed}")
    engine = profile.engine
    if engine is not None:
        missed = {
            kind: e.mean_rel_error
            for kind, e in engine.held_out_error.items()
            if e.mean_rel_error is not None and e.mean_rel_error > ENGINE_HELD_OUT_LIMIT
        }
        if missed:
            listed = ", ".join(f"{kind} {_pct(e)}" for kind, e in missed.items())
            problems.append(
                f"the {engine.engine} engine fit misses its held-out steps by more than "
                f"{_pct(ENGINE_HELD_OUT_LIMIT)} (mean): {listed}"
            )
    load = q.load if q is not None else None
    busy = load is not None and load.busy
    others = 0.0
    if busy:
        assert load is not None and load.other_cpus is not None
        others = load.other_cpus
        avg = " ".join(f"{x:.2f}" for x in load.load_average)
        before = "" if load.other_cpus_before is None else f", {load.other_cpus_before:.1f} just before it"
        problems.append(
            f"busy machine: other processes kept {others:.1f} of {load.num_cpus} CPUs busy (mean) while calibration "
            f"measured with {load.num_threads} thread{'s' * (load.num_threads != 1)}{before}"
            + (f"; load average {avg}" if avg else "")
        )
    if not problems:
        return []
    threads = profile.device.num_threads
    advice = "calibrate again on a quiet machine"
    if profile.device.kind == "cpu" and threads > 1:
        fewer = max(1, threads - 1)
        if busy and load is not None:  # leave the other processes' cores to them
            fewer = max(1, min(fewer, load.num_cpus - math.ceil(others)))
        advice += f", or with fewer threads than idle cores (--threads {fewer}; the engine must then run with {fewer})"
    lines = [f"{source}: this profile's timings are not to be trusted:"]
    lines += [f"  - {p}" for p in problems]
    lines.append(f"  what to do: {advice}; `servesim calibrate --strict` refuses to write such a profile")
    return lines


def profile_warnings(profile: CalibrationProfile, source: str = "profile") -> list[str]:
    """Lines to repeat wherever a profile is used: its quality warnings and a thread-count difference."""
    lines = quality_warnings(profile, source)
    note = thread_note(profile)
    if note is not None:
        lines.append(f"{source}: {note}")
    return lines


def simulation_profile_warnings(engines: Sequence[object]) -> list[str]:
    """``profile_warnings`` of every distinct profile the simulation's engines' cost models read."""
    lines: list[str] = []
    seen: set[int] = set()
    for engine in engines:
        cost = getattr(engine, "cost_model", None)
        profile = getattr(cost, "profile", None)
        if isinstance(cost, ProfiledCostModel) and profile is not None and id(profile) not in seen:
            seen.add(id(profile))
            lines += profile_warnings(profile, cost.params.profile or "profile")
    return lines
