"""Step time by op, from the run's own cost model evaluated on step shapes rebuilt from the steps table.

The cost model is rebuilt from ``config.json`` (``model``, ``hardware``, ``parallelism``,
``cost_model``) through the simulator's public registry, then its ``breakdown`` is
evaluated on shapes reconstructed from the steps table. The table keeps per step only
token totals, the running count and KV blocks in use, so the shape is approximate:

- prefill tokens are split evenly over ``max(1, running - decode)`` sequences, with no
  cached prefix (later chunks of a chunked prefill had one);
- decode context = KV blocks in use x block size, less half a block per running
  sequence and the prefill tokens, at least one token per decode sequence;
- one sampled token per decode sequence and per prefill sequence.

The figure compares the rebuilt total with the recorded mean step time, so the reader
sees how close the reconstruction is. Steps are grouped by kind (prefill only, mixed,
decode only) and up to ``SAMPLES_PER_KIND`` steps of each kind, evenly spaced in time,
are evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from reports.data import RunData
from reports.sampling import evenly_spaced
from reports.style import PALETTE, add_note, base_layout, empty_figure, style_axes
from simulator.build import make_cost_model, resolve_profile
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.specs import HardwareSpec, ModelSpec
from simulator.cost import COST_MODELS, OP_NAMES, BatchShape, CostModel

SAMPLES_PER_KIND = 150
STEP_KINDS = ("prefill only", "mixed", "decode only")
# a hybrid model's Gated DeltaNet ops, coloured apart so that every other op keeps the colour it had before them
_LINEAR_OPS = ("linear_in_proj", "attn_linear", "linear_out_proj")
_OTHER_OPS = (*(op for op in OP_NAMES if op not in _LINEAR_OPS), "kv_swap")
OP_COLOURS = dict(zip(_OTHER_OPS, (*PALETTE, "#444444", "#AAAAAA", "#222222"), strict=True)) | dict(
    zip(_LINEAR_OPS, ("#8C6D31", "#E7BA52", "#AD494A"), strict=True)
)


def rebuild_cost_model(config: dict[str, Any]) -> CostModel:
    """The cost model a run used (its profile included), from its resolved config.

    ValueError when it cannot be rebuilt. A cluster's steps are all costed with the
    top-level model, hardware and parallelism (its first group's).
    """
    try:
        groups = config.get("resolved_groups") or [{}]
        spec = groups[0].get("cost_model") or config["cost_model"]  # as run: the engine's framework filled in
        entry = COST_MODELS.entry(spec["kind"])
        params = entry.params.model_validate(spec) if entry.params is not None else None
        model_ref, hw_ref = config["model"], config["hardware"]
        model = resolve_model(ModelSpec(**model_ref) if isinstance(model_ref, dict) else model_ref)
        hardware = resolve_hardware(HardwareSpec(**hw_ref) if isinstance(hw_ref, dict) else hw_ref)
        parallelism = config.get("parallelism") or {}
        tp, pp = int(parallelism.get("tp", 1)), int(parallelism.get("pp", 1))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"config.json lacks what the cost model needs ({exc})") from None
    return make_cost_model(params, model, hardware, tp, pp, resolve_profile(params))


def reconstruct_shape(
    num_prefill_tokens: int, num_decode_tokens: int, num_running: int, num_kv_blocks_used: int, block_size: int
) -> BatchShape:
    """An approximate ``BatchShape`` for one recorded step (see the module docstring for the rules)."""
    prefill_seqs = 0
    chunks: tuple[int, ...] = ()
    if num_prefill_tokens > 0:
        prefill_seqs = int(min(max(1, num_running - num_decode_tokens), num_prefill_tokens))
        base, extra = divmod(int(num_prefill_tokens), prefill_seqs)
        chunks = tuple(base + (1 if i < extra else 0) for i in range(prefill_seqs))
    decode_ctx = 0
    if num_decode_tokens > 0:
        in_kv = num_kv_blocks_used * block_size - (num_running * block_size) // 2 - num_prefill_tokens
        decode_ctx = int(max(num_decode_tokens, in_kv))
    return BatchShape(
        prefill_new_tokens=chunks,
        prefill_cached_tokens=(0,) * len(chunks),
        num_decode_seqs=int(num_decode_tokens),
        decode_context_tokens=decode_ctx,
        num_sampled_tokens=int(num_decode_tokens) + prefill_seqs,
    )


def step_kinds(steps: pd.DataFrame) -> np.ndarray:
    """Each step's kind: ``prefill only``, ``mixed`` or ``decode only`` (``idle`` when neither)."""
    p = steps["num_prefill_tokens"].to_numpy() > 0
    d = steps["num_decode_tokens"].to_numpy() > 0
    return np.select([p & ~d, p & d, ~p & d], list(STEP_KINDS), default="idle")


@dataclass(frozen=True, slots=True)
class KindBreakdown:
    """Mean ms per op over the sampled steps of one kind, with counts and the recorded mean."""

    kind: str
    num_steps: int
    num_sampled: int
    op_ms: dict[str, float]
    recorded_ms: float
    rebuilt_ms: float


def op_breakdown(run: RunData, samples_per_kind: int = SAMPLES_PER_KIND) -> tuple[list[KindBreakdown], float]:
    """Per step kind (and overall), mean op times; plus the median relative error of rebuilt vs recorded."""
    model = rebuild_cost_model(run.config)
    steps = run.steps.sort_values("start_s", kind="stable").reset_index(drop=True)
    kinds = step_kinds(steps)
    out: list[KindBreakdown] = []
    errors: list[float] = []
    columns = ("num_prefill_tokens", "num_decode_tokens", "num_running", "num_kv_blocks_used")
    block_size = run.block_size
    for kind in STEP_KINDS:
        idx = np.flatnonzero(kinds == kind)
        if len(idx) == 0:
            continue
        chosen = idx[evenly_spaced(len(idx), samples_per_kind)]
        rows = steps.loc[chosen, [*columns, "duration_s"]].to_numpy()
        sums: dict[str, float] = {}
        rebuilt_total = 0.0
        for prefill, decode, running, blocks, duration_s in rows:
            shape = reconstruct_shape(int(prefill), int(decode), int(running), int(blocks), block_size)
            st = model.breakdown(shape)
            for op, cost in (st.ops or {}).items():
                sums[op] = sums.get(op, 0.0) + cost.seconds
            rebuilt_total += st.total_s
            if duration_s > 0:
                errors.append(abs(st.total_s - duration_s) / duration_s)
        n = len(rows)
        out.append(
            KindBreakdown(
                kind,
                len(idx),
                n,
                {op: s / n * 1000.0 for op, s in sums.items()},
                float(steps.loc[idx, "duration_s"].mean() * 1000.0),
                rebuilt_total / n * 1000.0,
            )
        )
    if out:
        total = sum(k.num_steps for k in out)
        ops = {op for k in out for op in k.op_ms}
        overall = {op: sum(k.op_ms.get(op, 0.0) * k.num_steps for k in out) / total for op in ops}
        recorded = float(steps["duration_s"].mean() * 1000.0)
        rebuilt = sum(k.rebuilt_ms * k.num_steps for k in out) / total
        out.insert(0, KindBreakdown("all steps", total, sum(k.num_sampled for k in out), overall, recorded, rebuilt))
    return out, float(np.median(errors)) if errors else float("nan")


def breakdown_figure(run: RunData, samples_per_kind: int = SAMPLES_PER_KIND) -> go.Figure:
    """Stacked bars of mean ms per op for the average step and each step kind, with the recorded mean."""
    title = "Step time by op (cost model, on rebuilt step shapes)"
    if len(run.steps) == 0:
        return empty_figure(title, "No engine step was recorded: nothing to break down.")
    try:
        kinds, median_error = op_breakdown(run, samples_per_kind)
    except ValueError as exc:
        return empty_figure(title, f"The run's cost model could not be rebuilt: {exc}")
    if not kinds:
        return empty_figure(title, "No step computed any token.")
    categories = [f"{k.kind}<br>({k.num_steps:,} steps)" for k in kinds]
    present = [op for op in (*OP_NAMES, "kv_swap") if any(k.op_ms.get(op, 0.0) > 0 for k in kinds)]
    present += sorted({op for k in kinds for op in k.op_ms} - set(present) - {"kv_swap", *OP_NAMES})
    fig = go.Figure(layout=base_layout(title, height_px=460))
    for op in present:
        ms = np.array([k.op_ms.get(op, 0.0) for k in kinds])
        share = np.array([v / k.rebuilt_ms if k.rebuilt_ms > 0 else 0.0 for v, k in zip(ms, kinds, strict=True)])
        fig.add_trace(
            go.Bar(
                x=categories,
                y=ms,
                name=op,
                marker={"color": OP_COLOURS.get(op, "#888888")},
                customdata=share,
                hovertemplate=(
                    f"%{{x}}<br>{op}: %{{y:,.4f}} ms per step (%{{customdata:.1%}} of the step)<extra></extra>"
                ),
            )
        )
    fig.add_trace(
        go.Scatter(
            x=categories,
            y=[k.recorded_ms for k in kinds],
            mode="markers",
            marker={"symbol": "diamond", "size": 11, "color": "#111111", "line": {"color": "white", "width": 1}},
            name="recorded mean step time",
            customdata=np.array([[k.rebuilt_ms, k.num_sampled] for k in kinds]),
            hovertemplate=(
                "%{x}<br>recorded mean: %{y:,.4f} ms per step<br>rebuilt mean: %{customdata[0]:,.4f} ms "
                "(%{customdata[1]:,} steps evaluated)<extra></extra>"
            ),
        )
    )
    fig.update_layout(
        barmode="stack",
        yaxis_title="ms per step (mean)",
        xaxis_title="steps",
        legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top", "traceorder": "reversed"},
        margin={"r": 200},
    )
    style_axes(fig)
    cost_kind = (run.config.get("cost_model") or {}).get("kind", "?")
    add_note(
        fig,
        f"Cost model {cost_kind!r} from config.json, evaluated on up to {samples_per_kind} steps of each kind "
        f"(evenly spaced in time). Shapes rebuilt from step totals (even prefill split, decode context from KV "
        f"blocks);<br>median |rebuilt - recorded| / recorded step time: {median_error:.1%}. "
        "'all steps' weights each kind by its step count.",
    )
    return fig
