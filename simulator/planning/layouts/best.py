"""The best deployment on N GPUs: every layout's operating points, their Pareto front, the best checked by
simulation.

``best_on_gpus`` answers: of every layout of N GPUs (``space``), at every concurrency its KV cache
allows, the operating points whose analytic p99-free latencies (``analytic``) meet the SLOs; the
Pareto front of tokens/s/GPU against tokens/s/user among them (in plan.json one point of each pair
of figures: budgets that do not change a layout's figures give several); and the chosen deployment: the
point of most tokens/s/GPU whose simulation (the scenario's workload at the point's rate, one run
of ``requests_per_point`` requests, judged as the plan's search judges a point: p99s over the
steady window and a stable queue) meets the SLOs. The points are checked in that order, in
rounds of distinct layouts (``_check_in_rounds``), up to ``MAX_CHECKS``; an analytic point is
optimistic (no queueing, no KV transfer), so a miss moves on to the next (often the same layout
at a lower rate).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.build import make_cost_model, setup_group
from simulator.config.scenario import validate_scenario
from simulator.kv.window import sliding_window_blocks
from simulator.metrics.results import json_safe
from simulator.planning.layouts.analytic import (
    Lengths,
    OperatingPoint,
    Replica,
    aggregated_points,
    disaggregated_points,
)
from simulator.planning.layouts.space import TP_DEGREES, Layout, layouts, seqs_limit
from simulator.planning.points.executors import Executor
from simulator.planning.points.overrides import apply_overrides
from simulator.planning.points.pareto import pareto_front
from simulator.planning.points.store import write_json_atomic, write_table_atomic
from simulator.planning.search.evaluate import CandidateRun, simulate_rate
from simulator.planning.search.load import load_kind
from simulator.planning.search.settings import PlanRequest
from simulator.planning.search.steady import SloTargets
from workloads import generate

GPUS_SCHEMA = "servesim.plan-gpus/1"
# The most operating points simulated to confirm the choice (rounds of ``workers`` in analytic order): each
# costs one run; the analytic order puts the likely answer in the first round or two.
MAX_CHECKS = 8
# The largest N: one plan's layouts stay a few thousand (8 GPUs: a few hundred).
MAX_GPUS = 64


@dataclass(frozen=True, slots=True)
class GpusQuestion:
    """What the N-GPU question is asked besides the scenario: N, the SLOs and how a check is simulated."""

    num_gpus: int
    request: PlanRequest
    disaggregated: bool = True


@dataclass(slots=True)
class GpusResult:
    """The answer: plan.json's content (schema ``GPUS_SCHEMA``) and the operating points' table."""

    plan: dict[str, Any]
    points: pd.DataFrame
    checks: list[dict[str, Any]] = field(default_factory=list)

    def write(self, out_dir: Path) -> Path:
        """Write ``plan.json`` and ``points.parquet`` into ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        write_table_atomic(out_dir / "points.parquet", self.points.to_dict("records"))
        write_json_atomic(out_dir / "plan.json", self.plan)
        return out_dir


def _replicas(base: dict[str, Any], base_dir: Path | None, num_gpus: int, label: str) -> dict[int, Replica]:
    """Per TP degree up to N the model runs at: its cost model and KV room; ValueError if none."""
    out, why = {}, {}
    for tp in (t for t in TP_DEGREES if t <= num_gpus):
        try:
            cfg = validate_scenario(apply_overrides(base, {"parallelism.tp": tp, "replicas": 1, "groups": None}), label)
            s = setup_group(cfg, cfg.replica_groups()[0], 0, base_dir)
        except ValueError as exc:
            why[tp] = str(exc).removeprefix(f"{label}: ")
            continue
        cost = make_cost_model(s.cost_model, s.model, s.hardware, s.tp, s.pp, s.profile, s.ep)
        window = 0
        if s.windowed:  # vLLM V1 holds the sliding layers' window per sequence beside the full layers' blocks
            window = sliding_window_blocks(
                s.model, s.tp, s.pp, s.dp_attention, cfg.kv_cache.block_size, s.proposer
            ).per_seq
        out[tp] = Replica(tp, cost, s.num_blocks, cfg.kv_cache.block_size, window)
    if not out:
        cfg = validate_scenario(base, label)
        first = next(iter(why.values()), "")
        if len(set(why.values())) == 1 and "memory" not in first and "fit" not in first:
            raise ValueError(f"{label}: {first}")  # the same problem at every TP (an unknown model): that one
        raise ValueError(
            f"{label}: {cfg.model if isinstance(cfg.model, str) else 'the model'} fits no layout on {num_gpus} x "
            f"{cfg.hardware if isinstance(cfg.hardware, str) else 'the GPU'} (TP {', '.join(map(str, why))}): {first}"
        )
    return out


def _lengths(base: dict[str, Any], base_dir: Path | None, label: str) -> Lengths:
    """The workload's mean prompt and output; ValueError unless its load is an arrival rate."""
    cfg = validate_scenario(base, label)
    kind = load_kind(cfg)
    if kind != "arrival_rate":
        raise ValueError(
            f"{label}: --gpus sizes layouts for an arrival rate; the scenario's workload is a {kind} load "
            "(use a synthetic workload or a trace with an arrival process)"
        )
    policy = cfg.policy.kind
    if policy != "vllm":
        raise ValueError(
            f"{label}: --gpus searches vLLM V1's max_num_seqs and max_num_batched_tokens; the scenario's policy is "
            f"{policy!r} (set policy: vllm)"
        )
    if cfg.groups is not None:  # each layout is a replica count or prefill and decode groups of its own
        raise ValueError(
            f"{label}: --gpus lays the N GPUs out itself, so the scenario's groups would not be read; give the model "
            "and hardware at the top level instead"
        )
    # each layout deploys vLLM with its own max_num_seqs and token budget: any other policy setting would be dropped
    dropped = sorted(cfg.policy.model_fields_set - {"kind", "max_num_seqs", "max_num_batched_tokens"})
    if dropped:
        raise ValueError(
            f"{label}: policy.{dropped[0]}: --gpus deploys each layout with vLLM's defaults besides the max_num_seqs "
            "and token budget it searches, so this setting would not be read; leave it out"
        )
    try:
        stream = generate(cfg.workload, cfg.seed, base_dir)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None
    prompt = sum(stream.num_prompt_tokens) / len(stream.num_prompt_tokens)
    output = sum(stream.num_output_tokens) / len(stream.num_output_tokens)
    return Lengths(float(prompt), float(output))


def operating_points(
    base: dict[str, Any], base_dir: Path | None, label: str, q: GpusQuestion
) -> tuple[list[OperatingPoint], Lengths, list[Layout]]:
    """Every layout's analytic operating points; ValueError (one line) for a question with no layout."""
    if not 1 <= q.num_gpus <= MAX_GPUS:
        raise ValueError(f"--gpus {q.num_gpus}: expected 1 to {MAX_GPUS} GPUs")
    w = _lengths(base, base_dir, label)
    reps = _replicas(base, base_dir, q.num_gpus, label)
    space = layouts(q.num_gpus, tuple(reps), q.disaggregated)
    if not space:
        raise ValueError(
            f"--gpus {q.num_gpus}: no layout uses all {q.num_gpus} GPUs with the TP degrees the model runs at "
            f"({', '.join(map(str, reps))})"
        )
    r = q.request
    points: list[OperatingPoint] = []
    for layout in space:
        if layout.disaggregated:
            assert layout.decode_tp is not None
            points += disaggregated_points(layout, reps[layout.tp], reps[layout.decode_tp], w, r.slo_ttft_p99_ms)
        else:
            points += aggregated_points(layout, reps[layout.tp], w)
    return points, w, space


def _meets(p: OperatingPoint, r: PlanRequest, w: Lengths) -> bool:
    e2el_ms = p.ttft_ms + w.decode_tokens * p.tpot_ms
    return p.meets(r.slo_ttft_p99_ms, r.slo_tpot_p99_ms) and (r.slo_e2el_p99_ms is None or e2el_ms <= r.slo_e2el_p99_ms)


def _check_run(base: dict[str, Any], base_dir: Path | None, p: OperatingPoint, r: PlanRequest, i: int) -> CandidateRun:
    config = apply_overrides(base, p.layout.overrides(seqs_limit(p.concurrency)))
    slo = SloTargets(r.slo_ttft_p99_ms, r.slo_tpot_p99_ms, r.attainment, r.slo_e2el_p99_ms)
    seed = validate_scenario(config).seed
    return CandidateRun(i, 0, config, None if base_dir is None else str(base_dir), seed, slo, r.search)


def _check(task: tuple[CandidateRun, float]) -> dict[str, Any]:
    """One check: the layout simulated at the point's rate (a worker task; ``error`` when it cannot run)."""
    run, rate = task
    try:
        return simulate_rate(run, rate)
    except ValueError as exc:
        return {"error": str(exc)}


def best_on_gpus(
    base: dict[str, Any], base_dir: Path | None, label: str, q: GpusQuestion, executor: Executor
) -> GpusResult:
    """Answer the N-GPU question (see the module docstring); ValueError (one line) for bad input."""
    points, w, space = operating_points(base, base_dir, label, q)
    r = q.request
    meeting = [p for p in points if _meets(p, r, w)]
    front = pareto_front([(-p.tokens_per_s_per_gpu, -p.tokens_per_s_per_user) for p in meeting])
    on_front = {id(p) for p, f in zip(meeting, front, strict=True) if f}
    order = sorted(meeting, key=lambda p: (-p.tokens_per_s_per_gpu, -p.tokens_per_s_per_user, p.layout.name))
    checks = _check_in_rounds(base, base_dir, order, r, executor)
    passed = [p for p in order if checks.get(id(p), {}).get("meets_slo")]
    chosen = passed[0] if passed else None

    def row(p: OperatingPoint) -> dict[str, Any]:
        return _row(p, _meets(p, r, w), id(p) in on_front, checks.get(id(p)), p is chosen)

    table = [row(p) for p in points]
    plan = {
        "schema": GPUS_SCHEMA,
        "scenario": label,
        "question": "best deployment on N GPUs",
        "num_gpus": q.num_gpus,
        "model_name": validate_scenario(base, label).model if isinstance(base.get("model"), str) else None,
        "hardware": validate_scenario(base, label).hardware if isinstance(base.get("hardware"), str) else None,
        "mean_prompt_tokens": w.prompt_tokens,
        "mean_output_tokens": w.output_tokens,
        "slo": {
            "ttft_p99_ms": r.slo_ttft_p99_ms,
            "tpot_p99_ms": r.slo_tpot_p99_ms,
            "e2el_p99_ms": r.slo_e2el_p99_ms,
            "attainment": r.attainment,
        },
        "layouts": len(space),
        "operating_points": len(points),
        "meeting_slo": len(meeting),
        "pareto_front": [row(p) for p in _distinct(p for p in order if id(p) in on_front)],
        "checked": [row(p) for p in order if id(p) in checks],
        "chosen": None if chosen is None else row(chosen),
        "best_analytic": row(order[0]) if order else None,
        "notes": _notes(order, chosen, checks),
        "tables": {"points": "points.parquet"},
    }
    return GpusResult(json_safe(plan), pd.DataFrame.from_records(table), list(checks.values()))


def _check_in_rounds(
    base: dict[str, Any], base_dir: Path | None, order: list[OperatingPoint], r: PlanRequest, executor: Executor
) -> dict[int, dict[str, Any]]:
    """Simulate the points of ``order`` (most tokens/s/GPU first) in rounds until the best that met the SLOs
    beats every point left, or ``MAX_CHECKS`` are spent; the checks by point (``id``).

    A round takes the best points left of distinct layout shapes (a round of ``workers``). A layout that missed at
    a rate is not checked again at that rate or above (a miss at a load stays a miss at more, as the plan's
    search assumes).
    """
    checks: dict[int, dict[str, Any]] = {}
    missed_at: dict[Layout, float] = {}
    size = max(2, executor.workers)

    def open_(p: OperatingPoint) -> bool:
        return id(p) not in checks and p.rate_per_s < missed_at.get(p.layout, math.inf)

    while len(checks) < MAX_CHECKS:
        batch: list[OperatingPoint] = []
        for p in order:
            if len(batch) == min(size, MAX_CHECKS - len(checks)):
                break
            if open_(p) and all(_shape(q.layout) != _shape(p.layout) for q in batch):
                batch.append(p)
        if not batch:
            break
        tasks = [(_check_run(base, base_dir, p, r, len(checks) + j), p.rate_per_s) for j, p in enumerate(batch)]
        for i, row in executor.map_unordered(_check, tasks):
            checks[id(batch[i])] = row
            if not row.get("meets_slo"):
                p = batch[i]
                missed_at[p.layout] = min(missed_at.get(p.layout, math.inf), p.rate_per_s)
        passed = [p.tokens_per_s_per_gpu for p in order if checks.get(id(p), {}).get("meets_slo")]
        best = max(passed, default=None)
        if best is not None and not any(open_(p) and p.tokens_per_s_per_gpu > best for p in order):
            break
    return checks


def _shape(layout: Layout) -> tuple[int, int, int | None, int | None]:
    """A layout's GPUs (TP and counts) without its token budget: a round checks distinct shapes."""
    return layout.tp, layout.count, layout.decode_tp, layout.decode_count


def _distinct(points: Iterable[OperatingPoint]) -> list[OperatingPoint]:
    """The first of each run of points with the same two figures (layouts the budget does not change)."""
    seen: set[tuple[float, float]] = set()
    out = []
    for p in points:
        key = (p.tokens_per_s_per_gpu, p.tokens_per_s_per_user)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _notes(order: list[OperatingPoint], chosen: OperatingPoint | None, checks: dict[int, dict[str, Any]]) -> list[str]:
    if not order:
        return ["no layout meets the SLOs at any concurrency (analytically, before queueing)"]
    if chosen is None:
        return [
            f"none of the {len(checks)} best operating points met the SLOs when simulated: the answer is unconfirmed"
        ]
    missed = sum(1 for row in checks.values() if not row.get("meets_slo"))
    if missed:
        return [f"{missed} operating point(s) with more tokens/s/GPU missed the SLOs when simulated (queueing)"]
    return []


def _row(p: OperatingPoint, meets: bool, pareto: bool, check: dict[str, Any] | None, chosen: bool) -> dict[str, Any]:
    lay = p.layout
    row: dict[str, Any] = {
        "layout": lay.name,
        "disaggregated": lay.disaggregated,
        "tp": lay.tp,
        "count": lay.count,
        "decode_tp": lay.decode_tp,
        "decode_count": lay.decode_count,
        "max_num_batched_tokens": lay.budget_tokens,
        "max_num_seqs": seqs_limit(p.concurrency),
        "concurrency": p.concurrency,
        "ttft_ms": p.ttft_ms,
        "tpot_ms": p.tpot_ms,
        "rate_per_s": p.rate_per_s,
        "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
        "tokens_per_s_per_user": p.tokens_per_s_per_user,
        "meets_slo": meets,
        "pareto": pareto,
        "chosen": chosen,
        "checked": check is not None,
    }
    for name in ("meets_slo", "p99_ttft_ms", "p99_tpot_ms", "output_throughput", "stable"):
        value = None if check is None else check.get(name)
        row[f"sim_{name}"] = None if isinstance(value, float) and math.isnan(value) else value
    row["sim_error"] = None if check is None else check.get("error")
    return row
