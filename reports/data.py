"""A run as reports see it: the result tables of a run folder plus a label and derived views.

Reports read only what ``RunResult`` holds (``summary.json``, ``config.json`` and the
requests / steps / ITL tables); they never touch a live simulation. Columns that later
work may add (``num_kv_blocks_cached`` in steps; ``transfer_start_s`` / ``transfer_end_s``
in requests) are used when present and ignored when absent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics.results import RunResult
from simulator.metrics.summary import latencies_meet_slo, request_latencies

RunLike = RunResult | str | Path

# metric key -> (display name, unit used in reports)
LATENCY_NAMES: dict[str, str] = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2el": "E2E latency",
}
LATENCY_LONG_NAMES: dict[str, str] = {
    "ttft": "time to first token",
    "tpot": "time per output token (excl. 1st)",
    "itl": "inter-token latency",
    "e2el": "end-to-end latency",
}


@dataclass(slots=True)
class RunData:
    """One run's tables with the label it carries in a report.

    ``source`` is the run folder it was read from (None for an in-memory result).
    """

    result: RunResult
    label: str
    source: Path | None = None
    _latencies: pd.DataFrame | None = field(default=None, repr=False)

    # -- identity ------------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        return self.result.config

    @property
    def summary(self) -> dict[str, Any]:
        return self.result.summary

    @property
    def policy(self) -> str:
        """The batch policy's registry name (``vllm``, ``sarathi``...) or ``?`` when the config lacks it."""
        policy = self.config.get("policy")
        if isinstance(policy, dict):
            return str(policy.get("kind", "?"))
        return str(policy or "?")

    @property
    def model_name(self) -> str:
        model = self.config.get("model")
        return str(model.get("name", "?")) if isinstance(model, dict) else str(model or "?")

    @property
    def hardware_name(self) -> str:
        hw = self.config.get("hardware")
        return str(hw.get("name", "?")) if isinstance(hw, dict) else str(hw or "?")

    @property
    def tp(self) -> int:
        return int((self.config.get("parallelism") or {}).get("tp", 1))

    # -- requests ------------------------------------------------------------------------

    @property
    def requests(self) -> pd.DataFrame:
        return self.result.requests

    @property
    def num_requests(self) -> int:
        return len(self.result.requests)

    @property
    def finished(self) -> pd.DataFrame:
        r = self.result.requests
        return r[r["status"] == "finished"]

    @property
    def rejected(self) -> pd.DataFrame:
        r = self.result.requests
        return r[r["status"] == "rejected"]

    def latencies(self) -> pd.DataFrame:
        """Per finished request: ``ttft_s``, ``tpot_s`` (NaN for one token), ``e2el_s`` as the client saw them."""
        if self._latencies is None:
            r = self.result.requests
            if {"ttft_s", "tpot_s", "e2el_s"} <= set(r.columns):
                done = r[r["status"] == "finished"]
                self._latencies = done[["request_id", "ttft_s", "tpot_s", "e2el_s"]].reset_index(drop=True)
            else:
                stream_delay_s = float((self.config.get("client") or {}).get("stream_delay_s", 0.0))
                self._latencies = request_latencies(r, stream_delay_s)
        return self._latencies

    def latency_values_s(self, metric: str) -> tuple[np.ndarray, np.ndarray | None]:
        """Values in seconds and optional counts of ``metric`` (ttft, tpot, itl, e2el), full data."""
        if metric == "itl":
            return self.result.itl_values_s, self.result.itl_counts
        values = self.latencies()[f"{metric}_s"].to_numpy(dtype=np.float64)
        return values[~np.isnan(values)], None

    def meets_slo(self) -> np.ndarray | None:
        """Per finished request (``latencies()`` order): whether it met every SLO set; None when none is set.

        The rule of the summary's goodput: inclusive bounds, TPOT counts as 0 for one token.
        """
        slo = self.slo_ms
        if not slo:
            return None
        lat = self.latencies()
        return latencies_meet_slo(lat, slo.get("ttft"), slo.get("tpot"), slo.get("e2el"))

    def percentile_ms(self, metric: str, q: int) -> float | None:
        """``p{q}_{metric}_ms`` from the summary (the full data), or None when there is none."""
        value = self.summary.get(f"p{q}_{metric}_ms")
        return None if value is None else float(value)

    # -- settings ------------------------------------------------------------------------

    @property
    def slo_ms(self) -> dict[str, float]:
        """The SLO bounds that were set, by metric (``ttft``, ``tpot``, ``e2el``), in ms."""
        slo = self.config.get("slo") or {}
        out = {}
        for metric in ("ttft", "tpot", "e2el"):
            value = slo.get(f"{metric}_ms")
            if value is not None:
                out[metric] = float(value)
        return out

    @property
    def configured_rate_per_s(self) -> float | None:
        arrival = ((self.config.get("workload") or {}).get("arrival")) or {}
        rate = arrival.get("rate_per_s") if isinstance(arrival, dict) else None
        return float(rate) if rate is not None else None

    @property
    def offered_rate_per_s(self) -> float | None:
        """The configured arrival rate, else the measured one (requests over the arrival span)."""
        rate = self.configured_rate_per_s
        if rate is not None:
            return rate
        arrivals = np.sort(self.result.requests["arrival_s"].to_numpy(dtype=np.float64))
        if len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
            return None
        return float((len(arrivals) - 1) / (arrivals[-1] - arrivals[0]))

    @property
    def block_size(self) -> int:
        return int((self.config.get("kv_cache") or {}).get("block_size", 16))

    def num_kv_blocks(self, replica_id: int) -> int | None:
        """The KV capacity of one replica in blocks: its row of the replicas table, else (older run
        folders) the config's ``kv_cache.num_blocks``, when recorded."""
        replicas = self.result.replicas
        if replicas is not None and len(replicas):
            row = replicas.loc[replicas["replica_id"] == replica_id, "num_kv_blocks"]
            if len(row):
                return int(row.iloc[0])
        value = (self.config.get("kv_cache") or {}).get("num_blocks")
        return int(value) if value else None

    # -- steps ---------------------------------------------------------------------------

    @property
    def steps(self) -> pd.DataFrame:
        return self.result.steps

    @property
    def end_s(self) -> float:
        """The last moment anything happened: last finish, last step end or last arrival."""
        candidates = [0.0]
        r = self.result.requests
        for column in ("arrival_s", "finished_s", "first_token_s"):
            if len(r) and column in r:
                value = r[column].max()
                if pd.notna(value):
                    candidates.append(float(value))
        s = self.result.steps
        if len(s):
            candidates.append(float((s["start_s"] + s["duration_s"]).max()))
        return max(candidates)


def load_run(run: RunLike | RunData, label: str | None = None) -> RunData:
    """A ``RunData`` from a run folder, a ``RunResult`` or an existing ``RunData`` (relabelled if asked)."""
    if isinstance(run, RunData):
        if label is not None:
            return RunData(run.result, label, run.source)
        return run
    data = RunData(run, "") if isinstance(run, RunResult) else RunData(RunResult.load(run), "", Path(run))
    data.label = label if label is not None else data.policy
    return data


def default_labels(runs: Sequence[RunData]) -> list[str]:
    """Labels for a comparison: the policy name, unless two runs would share a policy and rate.

    Runs of one policy at different rates keep the policy name (they form one
    latency-versus-load curve); otherwise the run folder's name (or ``run N``) is used.
    """
    keys = [(r.policy, r.offered_rate_per_s) for r in runs]
    if len(set(keys)) == len(keys):
        return [r.policy for r in runs]
    labels = []
    for i, r in enumerate(runs):
        labels.append(r.source.name if r.source is not None else f"run {i + 1}")
    if len(set(labels)) != len(labels):
        labels = [f"{label} ({i + 1})" for i, label in enumerate(labels)]
    return labels
