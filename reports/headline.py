"""The headline panels (HTML): what a run did in numbers and in words, and the comparison table.

Numbers come from ``summary.json`` (computed from all the data); the notes say plainly
what happened when a run is unusual (rejections, no finished request, one request).
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from typing import Any

from reports.data import LATENCY_NAMES, RunData
from reports.page import cards_html
from reports.style import ColourMap
from simulator.metrics.results import describe_deployment


def _num(value: Any, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}{suffix}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{suffix}"
    return html.escape(str(value)) + suffix


def _pct(value: Any) -> str:
    return "–" if value is None else f"{float(value):.1%}"


def what_happened(run: RunData) -> list[str]:
    """Plain sentences about the unusual things in a run (empty for an ordinary one)."""
    s = run.summary
    notes: list[str] = []
    n = run.num_requests
    completed = int(s.get("completed") or 0)
    rejected = run.rejected
    if n == 0:
        notes.append("The run had no request at all.")
        return notes
    if n == 1:
        notes.append(
            "The run has a single request: the CDFs have one point each and the percentiles are that request's values."
        )
    if completed == 0:
        notes.append(
            f"No request finished ({n:,} of {n:,} rejected): there are no latencies, so the latency CDFs are empty "
            "and throughput is zero."
            if len(rejected) == n
            else "No request finished: there are no latencies to plot."
        )
    if len(rejected):
        reasons = Counter(rejected["reject_reason"].astype(str))
        listed = "; ".join(f"{count:,} × {html.escape(reason)}" for reason, count in reasons.most_common(5))
        more = f" (and {len(reasons) - 5} other reasons)" if len(reasons) > 5 else ""
        notes.append(f"{len(rejected):,} of {n:,} requests were rejected: {listed}{more}.")
    preemptions = int(s.get("preemptions") or 0)
    if preemptions:
        victims = int((run.requests["num_preemptions"] > 0).sum())
        notes.append(
            f"{preemptions:,} preemptions hit {victims:,} requests (KV cache ran short; recomputed or swapped)."
        )
    if completed:
        tpot = run.latencies()["tpot_s"]
        single = int(tpot.isna().sum())
        if single == completed:
            notes.append("Every finished request produced one token: TPOT and ITL are undefined (no second token).")
    return notes


def _cards(run: RunData) -> str:
    s = run.summary
    cards = [
        ("Requests", _num(run.num_requests)),
        ("Completed", _num(s.get("completed"))),
        ("Rejected", _num(s.get("rejected", len(run.rejected)))),
        ("Preemptions", _num(s.get("preemptions"))),
        ("Duration", _num(s.get("duration"), 2, " s")),
        ("Request throughput", _num(s.get("request_throughput"), 2, " req/s")),
        ("Output throughput", _num(s.get("output_throughput"), 1, " tok/s")),
        ("Total token throughput", _num(s.get("total_token_throughput"), 1, " tok/s")),
    ]
    if run.slo_ms:
        cards += [
            ("Goodput", _num(s.get("request_goodput"), 2, " req/s")),
            ("SLO attainment", _pct(s.get("slo_attainment"))),
        ]
    else:
        cards.append(("Goodput", "no SLO set"))
    if s.get("mean_kv_usage") is not None:
        cards.append(("KV usage mean / peak", f"{_pct(s.get('mean_kv_usage'))} / {_pct(s.get('max_kv_usage'))}"))
    keys = [html.escape(title.lower().replace(" ", "-").replace("/", "")) for title, _ in cards]
    return cards_html(cards, keys)


def _latency_table(run: RunData) -> str:
    s = run.summary
    slo = run.slo_ms
    head = "<tr><th>latency (ms)</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>SLO</th></tr>"
    rows = []
    for metric, name in LATENCY_NAMES.items():
        cells = [_num(s.get(f"{stat}_{metric}_ms")) for stat in ("mean", "p50", "p90", "p95", "p99")]
        bound = f"≤ {slo[metric]:g}" if metric in slo else "–"
        rows.append(f"<tr><th>{name}</th>" + "".join(f"<td>{c}</td>" for c in cells) + f"<td>{bound}</td></tr>")
    return '<table class="lat">' + head + "".join(rows) + "</table>"


def scenario_line(run: RunData) -> str:
    """``1 x Llama-3.1-8B on H100-SXM5-80GB (tp=1), policy vllm · 1,000 requests at 5 req/s · seed 0``."""
    rate = run.configured_rate_per_s
    if "resolved_groups" in run.config:  # every group of a cluster, its router
        deployment = describe_deployment(run.config)
    else:  # run folders written before groups were recorded
        deployment = f"{run.model_name} on {run.hardware_name} ×{run.tp}, policy {run.policy}"
    parts = [
        deployment,
        f"{run.num_requests:,} requests" + (f" at {rate:g} req/s" if rate is not None else ""),
        f"cost model {(run.config.get('cost_model') or {}).get('kind', '?')}",
        f"seed {run.config.get('seed', '?')}",
    ]
    return html.escape(" · ".join(parts))


def run_headline_html(run: RunData) -> str:
    """The run report's headline panel: scenario, metric cards, the latency table and notes."""
    notes = what_happened(run)
    notes_html = ""
    if notes:
        notes_html = (
            '<div class="notes"><b>What happened</b><ul>' + "".join(f"<li>{n}</li>" for n in notes) + "</ul></div>"
        )
    return f'<p class="scenario">{scenario_line(run)}</p>{_cards(run)}{notes_html}{_latency_table(run)}'


def comparison_table_html(runs: Sequence[RunData], names: Sequence[str], colours: ColourMap) -> str:
    """One row per run: rate, counts, throughputs, goodput, attainment, p50/p99 TTFT and TPOT."""
    head = (
        "<tr><th>variant</th><th>rate (req/s)</th><th>completed</th><th>rejected</th><th>preemptions</th>"
        "<th>throughput (req/s)</th><th>goodput (req/s)</th><th>SLO attainment</th><th>output (tok/s)</th>"
        "<th>p50 TTFT (ms)</th><th>p99 TTFT (ms)</th><th>p50 TPOT (ms)</th><th>p99 TPOT (ms)</th></tr>"
    )
    rows = []
    for run, name in zip(runs, names, strict=True):
        s = run.summary
        swatch = f'<span class="swatch" style="background:{colours[run.label]}"></span>'
        cells = [
            _num(run.offered_rate_per_s, 2),
            _num(s.get("completed")),
            _num(s.get("rejected")),
            _num(s.get("preemptions")),
            _num(s.get("request_throughput")),
            _num(s.get("request_goodput")) if run.slo_ms else "no SLO",
            _pct(s.get("slo_attainment")) if run.slo_ms else "–",
            _num(s.get("output_throughput"), 1),
            _num(s.get("p50_ttft_ms")),
            _num(s.get("p99_ttft_ms")),
            _num(s.get("p50_tpot_ms")),
            _num(s.get("p99_tpot_ms")),
        ]
        rows.append(f"<tr><th>{swatch}{html.escape(name)}</th>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return '<table class="cmp">' + head + "".join(rows) + "</table>"
