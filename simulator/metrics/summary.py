"""Summary metrics, defined as `vllm bench serve` defines them, from the result tables.

TTFT = first token - arrival; E2EL = finish - arrival; TPOT = (E2EL - TTFT) / (n - 1)
for n > 1 output tokens; ITL = gaps between consecutive token emissions pooled over
requests. Duration = last finish - start of the arrival schedule (0). Percentiles use
numpy's default (linear) interpolation. Client-side delays shift arrivals and token
receipts as a benchmark client would see them. Field names follow vLLM's result JSON.

Three more of `vllm bench serve`'s fields (``calculate_metrics`` in vllm/benchmarks/serve.py;
the peak fields came with vLLM PR #23867, Aug 2025, and are in every release since):

- ``failed``: requests that did not complete. vLLM counts the requests whose response
  failed; here, the requests that did not finish (rejected, plus any left unfinished).
- ``max_output_tokens_per_s``: output tokens (of every request that emitted them, one
  finished short included, e.g. a recompute over V0's budget) bucketed by the
  whole second, counted from the earliest send time of a completed request, in which the
  client received them (bucket = floor(token time - earliest send)); the most in any one
  bucket. A token's time is its emission plus ``stream_delay_s``.
- ``max_concurrent_requests``: the most completed requests in flight at any one instant,
  each over its half-open [send, finish as received) interval (at equal times one leaving
  goes before one arriving). This is vLLM main's definition (commit 009e6d4a, after issue
  #56653); vLLM releases up to at least 0.28 report instead the most requests touching any
  one-second bucket (every bucket from floor(send) to floor(end) inclusive), which counts
  short requests that follow each other within a second as concurrent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

PERCENTILES = (50, 90, 95, 99)
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
EMISSIONS_CHUNK = 1 << 20  # token emissions bucketed per second this many at a time


def weighted_percentiles(values: np.ndarray, counts: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(np.repeat(values, counts), q)`` for each q, without materialising the repeat (one sort)."""
    order = np.argsort(values, kind="stable")
    ends = counts[order]
    np.cumsum(ends, out=ends)  # ends[i] - 1 is the last expanded index of values[order[i]] (no sorted copy kept)
    total = int(ends[-1])
    out = []
    for q in qs:
        pos = (total - 1) * q / 100.0
        lo, hi = math.floor(pos), math.ceil(pos)
        v_lo = values[order[np.searchsorted(ends, lo, side="right")]]
        v_hi = values[order[np.searchsorted(ends, hi, side="right")]]
        out.append(float(v_lo + (v_hi - v_lo) * (pos - lo)))
    return out


def weighted_percentile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """``np.percentile(np.repeat(values, counts), q)`` without materialising the repeat."""
    return weighted_percentiles(values, counts, (q,))[0]


def _stats_ms(name: str, values_s: np.ndarray, counts: np.ndarray | None = None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms"] + [f"p{p}_{name}_ms" for p in PERCENTILES]
    if counts is None:
        counts = np.ones(len(values_s), dtype=np.int64)
    if int(counts.sum()) == 0:
        return dict.fromkeys(keys)
    ms = values_s * 1000.0
    total = counts.sum()
    mean = float((ms * counts).sum() / total)
    out[f"mean_{name}_ms"] = mean
    median, *tail = weighted_percentiles(ms, counts, (50, *PERCENTILES))
    out[f"median_{name}_ms"] = median
    out[f"std_{name}_ms"] = float(math.sqrt(max(((ms - mean) ** 2 * counts).sum() / total, 0.0)))
    for p, value in zip(PERCENTILES, tail, strict=True):
        out[f"p{p}_{name}_ms"] = value
    return out


def request_latencies(requests: pd.DataFrame, stream_delay_s: float = 0.0) -> pd.DataFrame:
    """Per finished request: ttft_s, tpot_s (NaN when one token), e2el_s, as a client sees them."""
    done = requests[requests["status"] == "finished"]
    ttft = done["first_token_s"].to_numpy() + stream_delay_s - done["arrival_s"].to_numpy()
    e2el = done["finished_s"].to_numpy() + stream_delay_s - done["arrival_s"].to_numpy()
    n = done["num_generated_tokens"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(n > 1, (e2el - ttft) / np.maximum(n - 1, 1), np.nan)
    return pd.DataFrame(
        {
            "request_id": done["request_id"].to_numpy(),
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2el_s": e2el,
            "num_generated_tokens": n,
            "num_prompt_tokens": done["num_prompt_tokens"].to_numpy(),
        }
    )


SLO_SLACK = 1e-9  # relative: float noise (0.3 s = 300.00000000000006 ms) never fails a request sitting on its SLO


def meets_slo(
    ttft_ms: np.ndarray,
    tpot_ms: np.ndarray,
    e2el_ms: np.ndarray,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    slo_e2el_ms: float | None = None,
) -> np.ndarray:
    """Per request, whether it met every bound set: inclusive, with ``SLO_SLACK``; a NaN TPOT
    (a one-token output has none) meets any TPOT bound."""
    good = np.ones(len(ttft_ms), dtype=bool)
    if slo_ttft_ms is not None:
        good &= ttft_ms <= slo_ttft_ms * (1 + SLO_SLACK)
    if slo_tpot_ms is not None:
        good &= np.nan_to_num(tpot_ms, nan=0.0) <= slo_tpot_ms * (1 + SLO_SLACK)
    if slo_e2el_ms is not None:
        good &= e2el_ms <= slo_e2el_ms * (1 + SLO_SLACK)
    return good


def latencies_meet_slo(
    lat: pd.DataFrame, ttft_ms: float | None, tpot_ms: float | None, e2el_ms: float | None
) -> np.ndarray:
    """``meets_slo`` on a ``request_latencies`` frame (seconds) against bounds in ms."""
    return meets_slo(
        lat["ttft_s"].to_numpy() * 1000,
        lat["tpot_s"].to_numpy() * 1000,
        lat["e2el_s"].to_numpy() * 1000,
        ttft_ms,
        tpot_ms,
        e2el_ms,
    )


def max_concurrent_requests(start_s: np.ndarray, end_s: np.ndarray) -> int:
    """The most half-open intervals [start, end) holding one instant (an end before a start at the same time)."""
    if len(start_s) == 0:
        return 0
    times = np.concatenate([start_s, end_s])
    deltas = np.concatenate([np.ones(len(start_s), dtype=np.int64), -np.ones(len(end_s), dtype=np.int64)])
    order = np.lexsort((deltas, times))  # by time, then -1 before +1
    return int(np.cumsum(deltas[order]).max())


def max_tokens_per_second(
    requests: pd.DataFrame, token_emissions: tuple[np.ndarray, np.ndarray], stream_delay_s: float = 0.0
) -> float:
    """The most output tokens received in one whole second (vLLM's ``max_output_tokens_per_s``).

    ``token_emissions`` are (time, count) of every emitted token but requests' first (the
    recorder's ``token_emissions``); first tokens come from the finished requests' rows.
    Seconds are counted from the earliest arrival of a finished request.
    """
    done = requests[requests["status"] == "finished"]
    if len(done) == 0:
        return 0.0
    origin = float(done["arrival_s"].min())
    times, counts = token_emissions
    first = done["first_token_s"].to_numpy()
    last_s = max(float(first.max()), float(times.max()) if len(times) else -math.inf)
    per_second = np.zeros(max(int(np.floor(last_s + stream_delay_s - origin)) + 1, 1))
    _add_tokens(per_second, first, np.ones(len(first), dtype=np.int64), origin, stream_delay_s)
    # the emissions a chunk at a time: a million requests' emissions are tens of millions of steps, whose
    # temporaries would each take hundreds of MB (the counts are whole numbers: the float sums are exact either way)
    for start in range(0, len(times), EMISSIONS_CHUNK):
        chunk = slice(start, start + EMISSIONS_CHUNK)
        _add_tokens(per_second, np.asarray(times[chunk], dtype=np.float64), counts[chunk], origin, stream_delay_s)
    return float(per_second.max())


def _add_tokens(
    per_second: np.ndarray, times_s: np.ndarray, counts: np.ndarray, origin_s: float, stream_delay_s: float
) -> None:
    """Add tokens received at ``times_s`` to ``per_second``, their count in each whole second from ``origin_s``."""
    buckets = np.floor(times_s + stream_delay_s - origin_s).astype(np.int64)
    keep = buckets >= 0  # a token before the origin (none in a run) is outside vLLM's buckets
    if not keep.all():
        buckets, counts = buckets[keep], counts[keep]
    per_second += np.bincount(buckets, weights=counts, minlength=len(per_second))


def summarize(
    requests: pd.DataFrame,
    itl_values_s: np.ndarray,
    itl_counts: np.ndarray,
    slo: Mapping[str, float | None] | None = None,
    stream_delay_s: float = 0.0,
    extra: Mapping[str, float | int | None] | None = None,
    token_emissions: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, float | int | None]:
    """The run's headline numbers (vLLM field names, plus servesim's own).

    ``max_output_tokens_per_s`` needs ``token_emissions`` (None without them).
    """
    lat = request_latencies(requests, stream_delay_s)
    completed = len(lat)
    finished_s = requests.loc[requests["status"] == "finished", "finished_s"].to_numpy()
    duration = float(finished_s.max()) + stream_delay_s if completed else 0.0
    total_in = int(lat["num_prompt_tokens"].sum())
    total_out = int(lat["num_generated_tokens"].sum())
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    out: dict[str, float | int | None] = {
        "num_requests": len(requests),
        "completed": completed,
        "failed": len(requests) - completed,
        "rejected": int((requests["status"] == "rejected").sum()),
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": per_s(completed),
        "output_throughput": per_s(total_out),
        "total_token_throughput": per_s(total_in + total_out),
        "max_output_tokens_per_s": None
        if token_emissions is None
        else max_tokens_per_second(requests, token_emissions, stream_delay_s),
        "max_concurrent_requests": max_concurrent_requests(
            requests.loc[requests["status"] == "finished", "arrival_s"].to_numpy(), finished_s + stream_delay_s
        ),
    }
    if slo is not None and any(v is not None for v in slo.values()):
        good = latencies_meet_slo(lat, slo.get("ttft_ms"), slo.get("tpot_ms"), slo.get("e2el_ms"))
        out["request_goodput"] = per_s(int(good.sum()))
        out["slo_attainment"] = float(good.mean()) if completed else None
    tpot = lat["tpot_s"].to_numpy()
    out.update(_stats_ms("ttft", lat["ttft_s"].to_numpy()))
    out.update(_stats_ms("tpot", tpot[~np.isnan(tpot)]))
    out.update(_stats_ms("itl", itl_values_s, itl_counts))
    out.update(_stats_ms("e2el", lat["e2el_s"].to_numpy()))
    out["preemptions"] = int(requests["num_preemptions"].sum())
    if extra:
        out.update(extra)
    return out
