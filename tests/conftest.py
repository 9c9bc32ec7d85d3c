"""Shared fixtures and factories: small configs, hand-made request streams, checked runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.metrics.results import RunResult
from workloads import RequestStream

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent  # the repository
DATA_DIR = TESTS_DIR / "data"


def make_stream(arrivals: list[float], prompts: list[int], outputs: list[int]) -> RequestStream:
    """A request stream from plain lists (sorted by arrival)."""
    return RequestStream(
        np.asarray(arrivals, dtype=np.float64),
        np.asarray(prompts, dtype=np.int64),
        np.asarray(outputs, dtype=np.int64),
    )


def make_config(**fields: Any):
    """A scenario: constant 1 s steps and 64 blocks of 16 tokens unless overridden."""
    base: dict[str, Any] = {
        "cost_model": {"kind": "constant", "step_time_s": 1.0},
        # the timelines were worked out for vLLM V0's prefill-first steps (the default `vllm` is V1)
        "policy": {"kind": "vllm_v0"},
        "kv_cache": {"num_blocks": 64, "block_size": 16},
        # hand-timed tests count from the engine's queue: no API-server or tokenizer time in front of it
        "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0},
    }
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and key != "cost_model":
            base[key] = base[key] | value
        else:
            base[key] = value
    return validate_scenario(base)


def run_checked(cfg, stream: RequestStream | None = None) -> RunResult:
    """Run with the invariants asserted after every step."""
    return build(cfg, stream=stream, check_invariants=True).run()


@pytest.fixture
def by_id():
    """Index a run's request table by request id."""

    def index(result: RunResult):
        return result.requests.set_index("request_id")

    return index
