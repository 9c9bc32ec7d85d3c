"""Steady-state statistics of one run: warm-up and cool-down excluded, queue growth checked.

A run at a fixed offered rate starts empty (optimistic early latencies) and ends draining
(late requests share the batch with fewer others). The measurement window is the
requests ordered by arrival, without the first ``warmup_fraction`` and the last
``cooldown_fraction`` of them. Latency statistics and SLO attainment use the requests in
the window only.

Queue growth: the number of requests in the system, N(t) = arrived by t - left by t, is
sampled at evenly spaced times across the window and fitted with a straight line; its
slope divided by the window's arrival rate is the fraction of the offered load that is not
being served. A stable queue has a slope near zero; an overloaded one grows at
(rate - capacity). ``is_stable`` is growth_fraction <= ``max_growth_fraction``.

Rejected requests count as infinitely slow: they fail every SLO and sit at the top of
every latency percentile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.metrics.summary import SLO_SLACK, meets_slo

GROWTH_SAMPLES = 101


@dataclass(frozen=True, slots=True)
class SloTargets:
    """The plan's SLOs: p99 bounds (None: not constrained) and the attainment target."""

    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    attainment: float
    e2el_p99_ms: float | None = None


def percentile_inf(values: np.ndarray, q: float) -> float:
    """numpy's linear-interpolation percentile where +inf entries are allowed (any inf neighbour gives inf)."""
    if len(values) == 0:
        return math.nan
    v = np.sort(values)
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    if math.isinf(v[hi]):
        return math.inf
    return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))


def in_system_slope(arrival_s: np.ndarray, leave_s: np.ndarray, t0: float, t1: float) -> float:
    """Least-squares slope (requests/s) of N(t) = #arrived by t - #left by t over [t0, t1]."""
    if not t1 > t0:
        return 0.0
    t = np.linspace(t0, t1, GROWTH_SAMPLES)
    arrived = np.searchsorted(np.sort(arrival_s), t, side="right")
    left = np.searchsorted(np.sort(leave_s), t, side="right")
    n = (arrived - left).astype(np.float64)
    return float(np.polyfit(t, n, 1)[0])


def worst_ratio(ttft_ms: np.ndarray, tpot_ms: np.ndarray, e2el_ms: np.ndarray, slo: SloTargets) -> np.ndarray:
    """Per request, its latency over its bound on the bound it misses most (a NaN TPOT counts 0; +inf unfinished)."""
    ratio = np.zeros(len(ttft_ms))
    for values, bound in ((ttft_ms, slo.ttft_p99_ms), (tpot_ms, slo.tpot_p99_ms), (e2el_ms, slo.e2el_p99_ms)):
        if bound is not None:
            ratio = np.maximum(ratio, np.nan_to_num(values, nan=0.0) / bound)
    return ratio


def attainment_ratio(ratio: np.ndarray, attainment: float) -> float:
    """The worst-bound ratio of the request at the attainment quantile: the ceil(attainment x n)-th smallest.

    At most 1 (+ ``SLO_SLACK``) exactly when at least ``attainment`` of the requests meet every
    bound; it moves with load as a latency does, which makes it the guided search's measure
    of how far a point is from the attainment target.
    """
    if len(ratio) == 0:
        return math.nan
    k = min(max(math.ceil(attainment * len(ratio) - 1e-9), 1), len(ratio))
    return float(np.partition(ratio, k - 1)[k - 1])


def steady_stats(
    requests: pd.DataFrame,
    slo: SloTargets,
    warmup_fraction: float,
    cooldown_fraction: float,
    max_growth_fraction: float,
) -> dict[str, float | int | bool]:
    """The window's latency percentiles (ms), SLO attainment, queue growth, and the SLO verdicts.

    ``requests`` is a run's request table with client-side ``ttft_s``/``tpot_s``/``e2el_s``
    (NaN for rejected requests; ``tpot_s`` NaN for one-token outputs). ``attainment_ratio``:
    see ``attainment_ratio``. ``meets_slo``: stable
    and every given p99 bound holds; ``meets_attainment``: stable and the fraction of window
    requests meeting every bound is at least ``slo.attainment``.
    """
    req = requests.sort_values(["arrival_s", "request_id"], kind="stable")
    n = len(req)
    start, stop = int(n * warmup_fraction), n - int(n * cooldown_fraction)
    win = req.iloc[start:stop]
    if len(win) < 2:
        raise ValueError(f"the measurement window holds {len(win)} requests; simulate more requests per point")
    finished = (win["status"] == "finished").to_numpy()
    ttft = np.where(finished, win["ttft_s"].to_numpy(), np.inf) * 1000
    e2el = np.where(finished, win["e2el_s"].to_numpy(), np.inf) * 1000
    tpot_raw = win["tpot_s"].to_numpy() * 1000
    tpot = np.where(finished, tpot_raw, np.inf)
    tpot_defined = tpot[~np.isnan(tpot)]  # one-token outputs have no TPOT

    good = finished & meets_slo(ttft, tpot, e2el, slo.ttft_p99_ms, slo.tpot_p99_ms, slo.e2el_p99_ms)
    attainment = float(good.mean())
    lateness = worst_ratio(ttft, tpot, e2el, slo)

    arrival = req["arrival_s"].to_numpy()
    leave = np.where((req["status"] == "finished").to_numpy(), req["finished_s"].to_numpy(), arrival)
    t0, t1 = float(win["arrival_s"].iloc[0]), float(win["arrival_s"].iloc[-1])
    window_rate = (len(win) - 1) / (t1 - t0) if t1 > t0 else math.inf
    growth = in_system_slope(arrival, leave, t0, t1) / window_rate if math.isfinite(window_rate) else 0.0
    stable = growth <= max_growth_fraction

    out: dict[str, float | int | bool] = {"num_measured": len(win), "window_rate_per_s": window_rate}
    for name, values in (("ttft", ttft), ("tpot", tpot_defined), ("e2el", e2el)):
        finite = values[np.isfinite(values)]
        if len(values) == 0:
            out[f"mean_{name}_ms"] = math.nan  # no request defines it (TPOT of one-token outputs)
        else:
            out[f"mean_{name}_ms"] = float(finite.mean()) if len(finite) == len(values) else math.inf
        for p in (50, 90, 99):
            out[f"p{p}_{name}_ms"] = percentile_inf(values, p)
    p99_ok = True
    if slo.ttft_p99_ms is not None:
        p99_ok &= out["p99_ttft_ms"] <= slo.ttft_p99_ms * (1 + SLO_SLACK)
    if slo.tpot_p99_ms is not None:
        p99_tpot = out["p99_tpot_ms"]
        p99_ok &= math.isnan(p99_tpot) or p99_tpot <= slo.tpot_p99_ms * (1 + SLO_SLACK)
    if slo.e2el_p99_ms is not None:
        p99_ok &= out["p99_e2el_ms"] <= slo.e2el_p99_ms * (1 + SLO_SLACK)
    out |= {
        "slo_attainment": attainment,
        "attainment_ratio": attainment_ratio(lateness, slo.attainment),
        "growth_fraction": growth,
        "stable": bool(stable),
        "meets_slo": bool(stable and p99_ok),
        "meets_attainment": bool(stable and attainment >= slo.attainment),
    }
    return out
