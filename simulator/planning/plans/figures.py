"""A candidate's planned figures, with intervals, from its replicates' search and operating points.

Definitions (per candidate; one replica = ``gpus_per_replica`` GPUs):

- ``max_rate_per_s``: the largest rate whose steady state meets every p99 SLO with a queue
  that does not grow (mean over replicates, with its interval);
- ``max_goodput_rate_per_s``: the largest rate at which at least ``attainment`` of the
  requests meet every SLO; ``goodput_per_gpu_per_s`` = that / GPUs per replica
  (DistServe's per-GPU goodput);
- ``replicas`` = ceil(target / max_rate), ``num_gpus`` = replicas x GPUs per replica,
  ``cost_per_hour_usd`` = num_gpus x price; their intervals follow from the max rate's
  (a lower bound of 0 on the max rate leaves the upper bound unbounded: +inf);
- the operating point: one replica at target / replicas (as ``ReplicaScaling`` says); its
  latency percentiles, SLO attainment, queue growth, ``vllm_goodput_per_s`` (vLLM's
  request goodput of a replica times replicas), ``output_tokens_per_s`` (likewise) and
  ``cost_per_million_output_tokens_usd`` (cost per hour over output tokens per hour).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from simulator.metrics.summary import SLO_SLACK
from simulator.planning.points.capacity import ReplicaScaling, cost_per_million_tokens_usd
from simulator.planning.points.stats import Interval, interval
from simulator.planning.search.settings import PlanRequest

OPERATING_LATENCIES = tuple(
    f"{stat}_{name}_ms" for name in ("ttft", "tpot", "e2el") for stat in ("mean", "p50", "p90", "p99")
)
OPERATING_OTHER = ("slo_attainment", "growth_fraction")


@dataclass(slots=True)
class CandidateFigures:
    """Everything planned for one candidate; None where a stage did not run."""

    max_rate_per_s: Interval
    max_goodput_rate_per_s: Interval
    goodput_per_gpu_per_s: Interval
    unbounded: bool
    replicas: Interval | None = None
    num_gpus: Interval | None = None
    cost_per_hour_usd: Interval | None = None
    rate_per_replica_s: float | None = None
    operating: dict[str, Interval] = field(default_factory=dict)
    operating_meets_slo: bool | None = None
    straddles: list[str] = field(default_factory=list)


def _replicas_interval(target: float, max_rate: Interval, scaling: ReplicaScaling) -> Interval | None:
    value = scaling.replicas_for(target, max_rate.value or 0.0)
    if value is None:
        return None
    if max_rate.low is None or max_rate.high is None:
        return Interval(float(value), None, None, max_rate.n)
    low = scaling.replicas_for(target, max_rate.high)
    high = scaling.replicas_for(target, max_rate.low) if max_rate.low > 0 else None
    return Interval(float(value), float(low or value), math.inf if high is None else float(high), max_rate.n)


def capacity_figures(
    searches: list[dict[str, Any]],
    request: PlanRequest,
    gpus_per_replica: int,
    price_per_gpu_hour_usd: float,
    target_rate_per_s: float,
    scaling: ReplicaScaling,
) -> CandidateFigures:
    """The search-stage figures from the replicates' ``search_task`` results (all without error)."""

    def agg(key: str) -> Interval:
        return interval([s[key] for s in searches], request.confidence, request.ci_method, floor=0.0)

    max_rate = agg("max_rate_per_s")
    goodput_rate = agg("max_goodput_rate_per_s")
    figures = CandidateFigures(
        max_rate_per_s=max_rate,
        max_goodput_rate_per_s=goodput_rate,
        goodput_per_gpu_per_s=goodput_rate.map(lambda r: r / gpus_per_replica),
        unbounded=any(s["upper_rate_per_s"] is None for s in searches),
    )
    replicas = _replicas_interval(target_rate_per_s, max_rate, scaling)
    if replicas is not None:
        set_replicas(figures, replicas, gpus_per_replica, price_per_gpu_hour_usd, target_rate_per_s, scaling)
    return figures


def set_replicas(
    figures: CandidateFigures,
    replicas: Interval,
    gpus_per_replica: int,
    price_per_gpu_hour_usd: float,
    target_rate_per_s: float,
    scaling: ReplicaScaling,
) -> None:
    """Fix the deployment size (and so the GPUs, the hourly cost and the per-replica load)."""
    figures.replicas = replicas
    figures.num_gpus = replicas.map(lambda n: n * gpus_per_replica)
    figures.cost_per_hour_usd = figures.num_gpus.map(lambda g: g * price_per_gpu_hour_usd)
    assert replicas.value is not None
    figures.rate_per_replica_s = scaling.replica_rate(target_rate_per_s, int(replicas.value))


def operating_figures(
    figures: CandidateFigures, rows: list[dict[str, Any]], request: PlanRequest, scaling: ReplicaScaling
) -> None:
    """Fill the operating-point figures from one ``operating`` row per replicate, and the verdicts."""
    assert figures.replicas is not None and figures.replicas.value is not None
    assert figures.cost_per_hour_usd is not None
    factor = scaling.deployment_factor(int(figures.replicas.value))
    cost = figures.cost_per_hour_usd.value

    def agg(values: list[Any], floor: float | None = 0.0) -> Interval:
        return interval(values, request.confidence, request.ci_method, floor)

    op: dict[str, Interval] = {name: agg([r[name] for r in rows]) for name in OPERATING_LATENCIES}
    op["slo_attainment"] = agg([r["slo_attainment"] for r in rows])
    op["growth_fraction"] = agg([r["growth_fraction"] for r in rows], floor=None)
    op["vllm_goodput_per_s"] = agg([_times(r["request_goodput"], factor) for r in rows])
    op["output_tokens_per_s"] = agg([_times(r["output_throughput"], factor) for r in rows])
    op["cost_per_million_output_tokens_usd"] = agg(
        [cost_per_million_tokens_usd(cost, _times(r["output_throughput"], factor)) for r in rows]
    )
    figures.operating = op
    checks = [(op["growth_fraction"], request.search.max_growth_fraction)]
    checks += [(op[f"p99_{name}_ms"], bound) for name, bound in request.slo_bounds.items()]
    # a value of None is a figure no request defines (TPOT when every output is one token)
    figures.operating_meets_slo = all(
        bound is None or iv.value is None or iv.value <= bound * (1 + SLO_SLACK) for iv, bound in checks
    )
    figures.straddles = straddled(figures, request)


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def straddled(figures: CandidateFigures, request: PlanRequest) -> list[str]:
    """Figures whose interval contains the bound they are judged against."""
    out = []
    for latency, bound in request.slo_bounds.items():
        name = f"p99_{latency}_ms"
        if bound is not None and name in figures.operating and figures.operating[name].contains(bound):
            out.append(name)
    r = figures.replicas
    if r is not None and r.low is not None and r.high is not None and r.low != r.high:
        out.append("replicas")
    return out


# -- plan.json figures as text (the CLI's table and the report's) ------------------------------

# (header, field, digits): a candidate's planned figures, then its operating point's
CANDIDATE_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("max req/s per replica", "max_rate_per_s", 3),
    ("goodput/GPU req/s", "goodput_per_gpu_per_s", 3),
    ("replicas", "replicas", 0),
    ("GPUs", "num_gpus", 0),
    ("USD/hour", "cost_per_hour_usd", 2),
)
OPERATING_POINT_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("USD per M out tok", "cost_per_million_output_tokens_usd", 2),
    ("p99 TTFT ms", "p99_ttft_ms", 1),
    ("p99 TPOT ms", "p99_tpot_ms", 2),
)


def figure_text(figure: dict[str, Any] | None, digits: int = 2) -> str:
    """``value [low, high]`` of a plan.json figure ("-" when undefined; a null high with a low is unbounded)."""
    if not figure or figure.get("value") is None:
        return "-"
    text = f"{figure['value']:,.{digits}f}"
    if figure.get("n", 1) > 1 and figure.get("low") is not None:
        high = "inf" if figure.get("high") is None else f"{figure['high']:,.{digits}f}"
        text += f" [{figure['low']:,.{digits}f}, {high}]"
    return text


def candidate_columns(unit: str = "req/s") -> tuple[tuple[str, str, int], ...]:
    """``CANDIDATE_COLUMNS`` with the load figures' headers in ``unit`` (a plan.json's ``load.unit``)."""
    if unit == "req/s":
        return CANDIDATE_COLUMNS
    (_, max_key, max_digits), (_, goodput_key, goodput_digits), *rest = CANDIDATE_COLUMNS
    return (
        (f"max {unit} per replica", max_key, max_digits),
        (f"goodput/GPU {unit}", goodput_key, goodput_digits),
        *rest,
    )


def candidate_figure_cells(candidate: dict[str, Any]) -> list[tuple[str, str]]:
    """(header, text) of a plan.json candidate's figures, in ``CANDIDATE_COLUMNS`` then operating-point order."""
    point = candidate.get("operating_point") or {}
    cells = [(h, figure_text(candidate.get(key), d)) for h, key, d in CANDIDATE_COLUMNS]
    return cells + [(h, figure_text(point.get(key), d)) for h, key, d in OPERATING_POINT_COLUMNS]
