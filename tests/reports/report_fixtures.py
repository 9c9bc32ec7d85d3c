"""Run folders for the report tests: small real simulations and a large synthetic table set.

The real runs go through the simulator (so their tables are what ``servesim run`` writes);
the synthetic one mimics the shape of a 100,000-request run (about 1.4 million steps and
4 million pooled ITL pairs) without simulating it, for size and down-sampling checks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.metrics.results import RunResult
from simulator.metrics.summary import request_latencies, summarize
from workloads import RequestStream


def simulate(out_dir: Path, stream: RequestStream | None = None, **fields) -> Path:
    """Simulate a scenario (fields as in a scenario file) and write its run folder."""
    cfg = validate_scenario(fields)
    result = build(cfg, stream=stream).run()
    return result.write(out_dir)


def stream_of(arrivals, prompts, outputs) -> RequestStream:
    return RequestStream(
        np.asarray(arrivals, dtype=np.float64),
        np.asarray(prompts, dtype=np.int64),
        np.asarray(outputs, dtype=np.int64),
    )


def small_workload(num_requests: int, rate_per_s: float) -> dict:
    return {
        "num_requests": num_requests,
        "arrival": {"kind": "poisson", "rate_per_s": rate_per_s},
        "lengths": {
            "kind": "independent",
            "prompt": {"kind": "uniform", "min_tokens": 100, "max_tokens": 1500},
            "output": {"kind": "uniform", "min_tokens": 10, "max_tokens": 300},
        },
    }


def synthetic_result(num_requests: int = 100_000, rate_per_s: float = 5.0, seed: int = 0) -> RunResult:
    """A RunResult shaped like a large vllm run on the default deployment (not simulated).

    Requests arrive as a Poisson stream, wait a little, prefill and decode at about 12 ms
    per token; the steps table holds one row per 14 ms of busy time with plausible counts;
    the ITL table holds about 40 pairs per request.
    """
    rng = np.random.default_rng(seed)
    n = num_requests
    arrival = np.cumsum(rng.exponential(1 / rate_per_s, n))
    prompt = rng.integers(50, 3000, n)
    output = rng.integers(1, 600, n)
    queue = rng.exponential(0.02, n)
    prefill = 0.015 + prompt * 2e-5
    first_token = arrival + queue + prefill
    finished = first_token + (output - 1) * 0.012
    requests = pd.DataFrame(
        {
            "request_id": np.arange(n),
            "replica_id": np.zeros(n, dtype=np.int64),
            "num_prompt_tokens": prompt,
            "num_output_tokens": output,
            "num_generated_tokens": output,
            "num_preemptions": np.zeros(n, dtype=np.int64),
            "arrival_s": arrival,
            "enqueued_s": arrival,
            "first_scheduled_s": arrival + queue,
            "first_token_s": first_token,
            "finished_s": finished,
            "status": np.full(n, "finished", dtype=object),
            "reject_reason": np.full(n, "", dtype=object),
        }
    )
    lat = request_latencies(requests)
    requests = requests.merge(lat[["request_id", "ttft_s", "tpot_s", "e2el_s"]], on="request_id", how="left")
    end = float(finished.max())
    num_steps = int(end / 0.014)
    start = np.arange(num_steps) * 0.014
    running = rng.integers(10, 60, num_steps)
    prefill_tokens = np.where(rng.random(num_steps) < 0.07, rng.integers(50, 8000, num_steps), 0)
    decode_tokens = np.where(prefill_tokens > 0, 0, running)
    steps = pd.DataFrame(
        {
            "replica_id": np.zeros(num_steps, dtype=np.int64),
            "engine_id": np.zeros(num_steps, dtype=np.int64),
            "start_s": start,
            "duration_s": np.full(num_steps, 0.0138),
            "num_running": running,
            "num_waiting": rng.poisson(0.3, num_steps),
            "num_prefill_tokens": prefill_tokens,
            "num_decode_tokens": decode_tokens,
            "num_kv_blocks_used": running * 90,
            "num_kv_blocks_cached": np.zeros(num_steps, dtype=np.int64),
            "num_preempted": (rng.random(num_steps) < 0.001).astype(np.int64),
            "num_swapped": np.zeros(num_steps, dtype=np.int64),
            "num_transfer_queue": np.zeros(num_steps, dtype=np.int64),
        }
    )
    num_itl = 10 * n  # real runs pool about 40 per request; fewer keeps the fixture quick
    itl_values = 0.012 + rng.exponential(0.004, num_itl)
    itl_counts = rng.integers(1, 30, num_itl)
    config = validate_scenario({"slo": {"ttft_ms": 300, "tpot_ms": 40}}).model_dump(mode="json")
    built = build(validate_scenario({}))  # the resolved specs, as a real run records them
    config.update({k: built.resolved_config[k] for k in ("model", "hardware", "kv_cache", "max_model_len")})
    config["workload"]["num_requests"] = n
    config["workload"]["arrival"]["rate_per_s"] = rate_per_s
    summary = summarize(requests, itl_values, itl_counts, config["slo"], extra={"num_steps": num_steps})
    return RunResult(config, summary, requests, steps, itl_values, itl_counts)
