"""Prediction intervals that include the model's own measured error (split conformal).

servesim's mean TTFT and mean TPOT are scored against measured serving points
(``benchmarks/inferencex.py``, InferenceX's runs in aiconfigurator-core's ``silicon_sample.csv``). The
scores of one seeded half of those points (the calibration half) give, per metric and per serving engine,
the log ratios measured / predicted; split conformal prediction (Vovk et al., *Algorithmic Learning in a
Random World*, 2005; Lei et al., "Distribution-Free Predictive Inference for Regression", JASA 2018) turns
them into bounds on that ratio, ``[e^lo, e^hi]``, with the finite-sample rank correction, so that a new
measurement drawn like the calibration points falls inside ``prediction x [e^lo, e^hi]`` with probability
at least the level. Each side takes half the miss rate. The other half of the points measures the
coverage actually reached (kept in the file beside the bounds).

The ratios hold everything that separates a prediction from a measurement: the cost model's error, the
mechanisms servesim does not model, and the run-to-run variation of the simulation and of the real engine
(each point is one run of each). An engine with fewer than ``MIN_STRATUM`` calibration points uses the
pooled bounds. The bounds are those of the ``silicon`` cost model on the dependency's tables (what the
benchmark runs); runs on other cost models get none. ``prediction_error.json`` (written by
``python -m benchmarks.inferencex_intervals``) names the servesim commit and the dependency version it was
computed at: bounds from an older model describe that model's error.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

LEVEL = 0.8  # the intervals' nominal coverage
METRICS = ("mean_ttft_ms", "mean_tpot_ms")
MIN_STRATUM = 20  # calibration points an engine needs for bounds of its own
ERROR_FILE = "prediction_error.json"


def conformal_bounds(log_ratios: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """The split-conformal bounds ``(lo, hi)`` on ``log(measured / predicted)`` at ``level``.

    With n calibration scores sorted, ``hi`` is the ceil((n + 1)(1 - a/2))-th smallest and ``lo`` the
    floor((n + 1) a/2)-th, a = 1 - level: each side misses with probability at most a/2 for an exchangeable
    new point. ValueError when n is too small for that rank to exist.
    """
    scores = np.sort(np.asarray(log_ratios, dtype=np.float64))
    n = len(scores)
    tail = (1.0 - level) / 2.0
    # rounded first: (1 - 0.8) / 2 is 0.0999...98 in binary, which would move the ranks by one
    upper = math.ceil(round((n + 1) * (1.0 - tail), 9))
    lower = math.floor(round((n + 1) * tail, 9))
    if n == 0 or upper > n or lower < 1:
        raise ValueError(f"{n} calibration points cannot bound a {level:.0%} interval (need at least {needed(level)})")
    return float(scores[lower - 1]), float(scores[upper - 1])


def needed(level: float = LEVEL) -> int:
    """The fewest calibration points that give both bounds at ``level``."""
    tail = (1.0 - level) / 2.0
    return math.ceil(round(1.0 / tail, 9)) - 1


@dataclass(frozen=True)
class Interval:
    """A prediction's interval: ``low`` and ``high`` in the metric's unit, the level, and what it rests on."""

    metric: str
    value: float
    low: float
    high: float
    level: float
    basis: str  # e.g. "vllm, 43 InferenceX points"


@dataclass(frozen=True)
class PredictionError:
    """The bounds ``prediction_error.json`` holds: per metric, pooled and per engine (``{lo, hi, n}``)."""

    level: float
    bounds: dict[str, dict[str, dict[str, float]]]  # metric -> stratum ("pooled" or an engine) -> {lo, hi, n}
    meta: dict[str, Any]

    def interval(self, metric: str, value: float, engine: str) -> Interval | None:
        """``value``'s interval for ``engine`` (its own bounds, else the pooled ones); None for a metric without
        bounds or a value that is not a positive number."""
        strata = self.bounds.get(metric)
        if strata is None or not (value > 0 and math.isfinite(value)):
            return None
        stratum = engine if engine in strata else "pooled"
        b = strata[stratum]
        basis = f"{stratum}, {int(b['n'])} {self.meta.get('points', 'measured')} points"
        return Interval(metric, value, value * math.exp(b["lo"]), value * math.exp(b["hi"]), self.level, basis)


def fit_prediction_error(
    metric_ratios: dict[str, Sequence[tuple[str, float]]], level: float = LEVEL, meta: dict[str, Any] | None = None
) -> PredictionError:
    """Bounds from calibration points: per metric, ``(engine, measured / predicted)`` pairs."""
    bounds: dict[str, dict[str, dict[str, float]]] = {}
    for metric, pairs in metric_ratios.items():
        logs = [math.log(r) for _, r in pairs]
        lo, hi = conformal_bounds(logs, level)
        strata = {"pooled": {"lo": lo, "hi": hi, "n": len(logs)}}
        for engine in sorted({e for e, _ in pairs}):
            own = [math.log(r) for e, r in pairs if e == engine]
            if len(own) >= max(MIN_STRATUM, needed(level)):
                lo, hi = conformal_bounds(own, level)
                strata[engine] = {"lo": lo, "hi": hi, "n": len(own)}
        bounds[metric] = strata
    return PredictionError(level, bounds, dict(meta or {}))


def coverage(error: PredictionError, metric: str, pairs: Sequence[tuple[str, float, float]]) -> float:
    """The share of ``(engine, predicted, measured)`` points whose measurement lies in its prediction's interval."""
    inside = 0
    for engine, predicted, measured in pairs:
        iv = error.interval(metric, predicted, engine)
        inside += iv is not None and iv.low <= measured <= iv.high
    return inside / len(pairs) if pairs else float("nan")


def to_json(error: PredictionError) -> str:
    return json.dumps({"level": error.level, "bounds": error.bounds, "meta": error.meta}, indent=2, sort_keys=True)


@cache
def shipped_prediction_error() -> PredictionError | None:
    """The bounds shipped with servesim (``simulator/metrics/prediction_error.json``), or None without the file."""
    path = importlib.resources.files("simulator.metrics") / ERROR_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return PredictionError(float(data["level"]), data["bounds"], data.get("meta", {}))


def deployment_intervals(values: dict[str, Any], policy: Any, cost_model: Any) -> list[Interval]:
    """The intervals of ``values`` (summary metrics) for a deployment as a scenario writes it: ``policy`` and
    ``cost_model`` each a ``{kind: ...}`` mapping, a bare name, or None for the default. The engine the policy models
    picks the bounds; a calibrated folder of tables counts as another cost model."""
    from policies.batching import BATCH_POLICIES, traits_of

    kind = (policy.get("kind") if isinstance(policy, dict) else policy) or "vllm"
    engine = traits_of(kind).engine if kind in BATCH_POLICIES else "vllm"
    cost = {"kind": cost_model} if isinstance(cost_model, str) else (cost_model or {})
    cost_kind = cost.get("kind", "silicon") if cost.get("tables") is None else "silicon-folder"
    return summary_intervals(values, engine, cost_kind)


def summary_intervals(summary: dict[str, Any], engine: str, cost_model: str = "silicon") -> list[Interval]:
    """The intervals of a run's summary metrics that have bounds: none without the shipped file, or for a cost model
    other than the one the bounds measured (``silicon`` on the dependency's tables; another model's error is not
    known)."""
    error = shipped_prediction_error()
    if error is None or cost_model != error.meta.get("cost_model", "silicon"):
        return []
    out = []
    for metric in METRICS:
        value = summary.get(metric)
        iv = error.interval(metric, float(value), engine) if isinstance(value, int | float) else None
        if iv is not None:
            out.append(iv)
    return out
