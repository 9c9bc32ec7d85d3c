"""A plan's result: the feasible candidates ranked, plan.json's content, and the candidates and points tables.

Ranking: by cost per hour (ties: cost per million output tokens, then p99 latency), the cheapest
chosen, and the Pareto frontier of cost per hour against the operating point's p99 latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.metrics.intervals import deployment_intervals
from simulator.metrics.results import json_safe
from simulator.planning.plans.figures import OPERATING_LATENCIES, OPERATING_OTHER
from simulator.planning.plans.outcome import (
    Candidate,
    CandidateOutcome,
    PlanInputs,
)
from simulator.planning.points.overrides import scalar
from simulator.planning.points.pareto import pareto_front
from simulator.planning.points.stats import Interval
from simulator.planning.points.store import write_json_atomic, write_table_atomic
from simulator.planning.search.settings import PlanRequest

PLAN_SCHEMA = "servesim.plan/1"


@dataclass(slots=True)
class PlanResult:
    """The plan: plan.json's content and the two tables."""

    plan: dict[str, Any]
    candidates: pd.DataFrame
    points: pd.DataFrame
    # requests simulated in all, pruned candidates' included: how much work the plan took, which
    # (unlike plan.json) depends on the executor's batches
    simulated_requests: int = 0

    def write(self, out_dir: Path) -> Path:
        """Write ``plan.json``, ``candidates.parquet`` and ``points.parquet`` into ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        write_table_atomic(out_dir / "candidates.parquet", self.candidates.to_dict("records"))
        write_table_atomic(out_dir / "points.parquet", self.points.to_dict("records"))
        write_json_atomic(out_dir / "plan.json", self.plan)
        return out_dir


def _value(iv: Interval | None) -> float:
    return math.inf if iv is None or iv.value is None else iv.value


def rank_outcomes(outcomes: list[CandidateOutcome], request: PlanRequest) -> None:
    feasible = [o for o in outcomes if o.status == "feasible"]
    latency = f"p99_{request.pareto_latency}_ms"

    def key(o: CandidateOutcome) -> tuple[float, float, float]:
        f = o.figures
        assert f is not None
        return (
            _value(f.cost_per_hour_usd),
            _value(f.operating.get("cost_per_million_output_tokens_usd")),
            _value(f.operating.get(latency)),
        )

    for rank, o in enumerate(sorted(feasible, key=key), start=1):
        o.rank = rank
    front = pareto_front([(key(o)[0], key(o)[2]) for o in feasible])
    for o, on_front in zip(feasible, front, strict=True):
        o.pareto = on_front


def _notes(o: CandidateOutcome, request: PlanRequest) -> list[str]:
    name, f = o.candidate.name, o.figures
    notes = [f"{name}: {o.reason}"] if o.reason and o.status != "feasible" else []
    notes += [f"{name}: {n}" for n in o.notes]
    if f is None:
        return notes
    pools = o.pool_figures
    if pools is not None and "prefill_replicas" in pools:
        notes.append(
            f"{name}: sized pool by pool: {pools['prefill_replicas']} prefill + {pools['decode_replicas']} decode "
            f"replicas (one prefill replica serves {pools['prefill_max_rate_per_s']['value']:.4g}, one decode replica "
            f"{pools['decode_max_rate_per_s']['value']:.4g} {o.candidate.load.unit})"
        )
    if o.extra_replicas and pools is not None:
        notes.append(f"{name}: raised in {o.extra_replicas} round(s): the deployment missed an SLO without them")
    elif o.extra_replicas:
        notes.append(f"{name}: {o.extra_replicas} replica(s) added: the operating point missed an SLO without them")
    bounds = {f"p99_{name}_ms": bound for name, bound in request.slo_bounds.items()}
    for metric in f.straddles:
        if metric == "replicas":
            r = f.replicas
            assert r is not None
            notes.append(
                f"{name}: replicas needed {r.value:g} [{r.low:g}, {r.high:g}]: the max rate's interval "
                "straddles the per-replica load; more replicates narrow it"
            )
        else:
            iv = f.operating[metric]
            notes.append(
                f"{name}: {metric} at the operating point {iv.value:.4g} [{iv.low:.4g}, {iv.high:.4g}] "
                f"straddles the SLO {bounds[metric]:g} ms"
            )
    return notes


def _candidate_json(o: CandidateOutcome) -> dict[str, Any]:
    c, f = o.candidate, o.figures

    def iv(x: Interval | None) -> dict[str, Any] | None:
        return None if x is None else x.to_json()

    out: dict[str, Any] = {
        "name": c.name,
        "overrides": c.overrides,
        "status": o.status,
        "reason": o.reason,
        "rank": o.rank,
        "chosen": o.rank == 1,
        "pareto": o.pareto,
        "hardware": c.hardware_ref,
        "hardware_name": c.resolved["hardware"]["name"],
        "model_name": c.resolved["model"]["name"],
        "policy_kind": c.resolved["policy"]["kind"],
        "tp": c.resolved["parallelism"]["tp"],
        "gpus_per_replica": c.gpus_per_replica,
        "price_per_gpu_hour_usd": c.price_per_gpu_hour_usd,
        "seed": c.seed,
        "family": c.family,
        "tuned": c.tuned,
    }
    bound = c.bound
    out["search"] = {
        "bound": None
        if bound is None
        else {
            "upper_rate_per_s": bound.upper_rate_per_s,
            "estimate_rate_per_s": bound.estimate_rate_per_s,
            "reason": bound.reason,
        },
        "rates_tried": o.rates_tried,
        "simulated_requests": o.simulated_requests,
    }
    if o.status == "pruned":
        out["least_cost_per_hour_usd"] = o.least_cost_per_hour_usd
    if o.pool_figures is not None:
        out["pools"] = o.pool_figures
    if f is None:
        return out
    out |= {
        "max_rate_per_s": iv(f.max_rate_per_s),
        "max_goodput_rate_per_s": iv(f.max_goodput_rate_per_s),
        "goodput_per_gpu_per_s": iv(f.goodput_per_gpu_per_s),
        "max_rate_unbounded": f.unbounded,
        "replicas": iv(f.replicas),
        "num_gpus": iv(f.num_gpus),
        "cost_per_hour_usd": iv(f.cost_per_hour_usd),
        "extra_replicas": o.extra_replicas,
        "operating_point": None
        if not f.operating
        else {"rate_per_replica_s": f.rate_per_replica_s, "meets_slo": f.operating_meets_slo}
        | {k: v.to_json() for k, v in f.operating.items()}
        | {"prediction_intervals": _prediction_intervals(o.candidate, f.operating)},
        "straddles": f.straddles,
    }
    return out


def _prediction_intervals(candidate: Candidate, operating: dict[str, Interval]) -> dict[str, Any]:
    """The operating point's mean TTFT and TPOT with the intervals servesim's measured error gives them
    (``simulator.metrics.intervals``: the engine of the candidate's policy); empty without the shipped bounds."""
    values = {name: operating[name].value for name in ("mean_ttft_ms", "mean_tpot_ms") if name in operating}
    policy = candidate.resolved.get("policy") or candidate.config.get("policy")
    intervals = deployment_intervals(values, policy, candidate.config.get("cost_model"))
    out: dict[str, Any] = {iv.metric: [iv.low, iv.high] for iv in intervals}
    if intervals:
        out |= {"level": intervals[0].level, "basis": intervals[0].basis}
    return out


def _candidate_row(o: CandidateOutcome, request: PlanRequest, target: float) -> dict[str, Any]:
    j = _candidate_json(o)
    row: dict[str, Any] = {
        k: j[k]
        for k in (
            "name",
            "status",
            "reason",
            "rank",
            "chosen",
            "pareto",
            "hardware",
            "hardware_name",
            "model_name",
            "policy_kind",
            "tp",
            "gpus_per_replica",
            "price_per_gpu_hour_usd",
            "seed",
        )
    }
    row["overrides_json"] = scalar(o.candidate.overrides)
    f = o.figures
    empty = Interval(None)
    for name in ("max_rate_per_s", "max_goodput_rate_per_s", "goodput_per_gpu_per_s"):
        row |= (getattr(f, name) if f is not None else empty).columns(name)
    for name in ("replicas", "num_gpus", "cost_per_hour_usd"):
        x = getattr(f, name) if f is not None else None
        row |= (x or empty).columns(name)
    row["extra_replicas"] = o.extra_replicas
    row["rate_per_replica_s"] = f.rate_per_replica_s if f is not None else None
    row["op_meets_slo"] = f.operating_meets_slo if f is not None else None
    ops = f.operating if f is not None else {}
    for name in (
        *OPERATING_LATENCIES,
        *OPERATING_OTHER,
        "vllm_goodput_per_s",
        "output_tokens_per_s",
        "cost_per_million_output_tokens_usd",
    ):
        row |= ops.get(name, empty).columns(f"op_{name}")
    row["straddles"] = ",".join(f.straddles) if f is not None else ""
    row |= {
        "target_rate_per_s": target,
        "slo_ttft_p99_ms": request.slo_ttft_p99_ms,
        "slo_tpot_p99_ms": request.slo_tpot_p99_ms,
        "slo_e2el_p99_ms": request.slo_e2el_p99_ms,
        "attainment_target": request.attainment,
        "replicates": request.replicates,
    }
    return row


def _tuning(outcomes: list[CandidateOutcome]) -> dict[str, Any]:
    """Per tuned family: its variants, each one's max rate, and the best (the cheapest feasible; of equal costs
    the highest max rate), with the values it was tuned to."""
    families: dict[str, list[CandidateOutcome]] = {}
    for o in outcomes:
        if o.candidate.family is not None:
            families.setdefault(o.candidate.family, []).append(o)
    out = {}
    for family, variants in families.items():
        # the cheapest; of equal costs the one with the most headroom (highest max rate), then the ranking's order
        ranked = sorted(
            (o for o in variants if o.rank is not None),
            key=lambda o: (_value(o.figures.cost_per_hour_usd), -_value(o.figures.max_rate_per_s), o.rank),  # type: ignore[union-attr]
        )
        best = ranked[0] if ranked else None
        out[family] = {
            "variants": [o.candidate.name for o in variants],
            "best": None if best is None else best.candidate.name,
            "tuned": None if best is None else best.candidate.tuned,
            "max_rate_per_s": {o.candidate.name: _value_or_none(o, "max_rate_per_s") for o in variants},
        }
    return out


def _value_or_none(o: CandidateOutcome, name: str) -> float | None:
    return None if o.figures is None else getattr(o.figures, name).value


def plan_result(
    outcomes: list[CandidateOutcome], points: list[dict[str, Any]], request: PlanRequest, inputs: PlanInputs
) -> PlanResult:
    target = inputs.target_rate_per_s
    ranked = sorted((o for o in outcomes if o.rank is not None), key=lambda o: o.rank or 0)
    names = {o.candidate.index: o.candidate.name for o in outcomes}
    point_rows = [
        {"candidate": names[p["candidate"]], **{k: v for k, v in p.items() if k != "candidate"}}
        | {
            "slo_ttft_p99_ms": request.slo_ttft_p99_ms,
            "slo_tpot_p99_ms": request.slo_tpot_p99_ms,
            "slo_e2el_p99_ms": request.slo_e2el_p99_ms,
            "attainment_target": request.attainment,
        }
        for p in points
    ]
    plan = {
        "schema": PLAN_SCHEMA,
        "scenario": inputs.scenario_label,
        "candidates_file": None if inputs.candidate_source == "scenario" else inputs.candidate_source,
        "slo": {
            "ttft_p99_ms": request.slo_ttft_p99_ms,
            "tpot_p99_ms": request.slo_tpot_p99_ms,
            "e2el_p99_ms": request.slo_e2el_p99_ms,
            "attainment": request.attainment,
        },
        "load": {"kind": inputs.load.kind, "unit": inputs.load.unit, "field": inputs.load.path},
        "target_rate_per_s": target,
        "replicates": request.replicates,
        "confidence": request.confidence,
        "ci_method": request.ci_method,
        "pareto_latency": f"p99_{request.pareto_latency}_ms",
        "search": request.search.model_dump(),
        "simulated_requests": sum(o.simulated_requests for o in outcomes),
        "candidates": [_candidate_json(o) for o in outcomes],
        "ranking": [o.candidate.name for o in ranked],
        "chosen": ranked[0].candidate.name if ranked else None,
        "pareto_frontier": [o.candidate.name for o in ranked if o.pareto],
        "tuning": _tuning(outcomes),
        "notes": [n for o in outcomes for n in _notes(o, request)],
        "tables": {"candidates": "candidates.parquet", "points": "points.parquet"},
    }
    if not ranked:
        plan["notes"].append("no candidate meets the SLOs at the target rate")
    candidates = pd.DataFrame.from_records([_candidate_row(o, request, target) for o in outcomes])
    work = sum(o.simulated_requests for o in outcomes) + sum(o.unrecorded_work for o in outcomes)
    return PlanResult(json_safe(plan), candidates, pd.DataFrame.from_records(point_rows), work)
