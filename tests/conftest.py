"""Shared fixtures and factories: small configs, hand-made request streams, checked runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.metrics.results import RunResult
from workloads import RequestStream

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent  # the repository
DATA_DIR = TESTS_DIR / "data"
# The named traces, byte-identical to their sources, kept beside the repository for tests (never in git).
SHARED_TRACES = ROOT.parent / "shared" / "data" / "traces"


def pytest_configure(config: pytest.Config) -> None:
    """Tests read named traces from SERVESIM_DATA_DIR (default ../shared/data/traces) and never download one."""
    if not os.environ.get("SERVESIM_DATA_DIR", "").strip() and SHARED_TRACES.is_dir():
        os.environ["SERVESIM_DATA_DIR"] = str(SHARED_TRACES)
    os.environ["SERVESIM_OFFLINE"] = "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test that stops because a named trace is absent is skipped, the skip reason saying what to fetch where
    (it fails instead where SERVESIM_REQUIRE_TRACES is set, as in CI, which must run every test)."""
    from workloads.traces.fetch import TraceUnavailable

    report = yield
    absent = call.excinfo is not None and call.excinfo.errisinstance(TraceUnavailable)
    if absent and report.failed and not _traces_required():
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")
    return report


def require_trace(name: str) -> None:
    """Skip the calling test unless the named trace is on this machine (SERVESIM_DATA_DIR or the cache);
    fail it instead where SERVESIM_REQUIRE_TRACES is set."""
    from workloads.traces import TRACE_CATALOG
    from workloads.traces.fetch import local_path

    if local_path(TRACE_CATALOG[name]) is None:
        missing_trace(name)


def missing_trace(name: str) -> NoReturn:
    """Skip the calling test, the reason naming what to fetch and where (fail where SERVESIM_REQUIRE_TRACES is set)."""
    from workloads.traces import TRACE_CATALOG
    from workloads.traces.fetch import unavailable

    message = str(unavailable(name, TRACE_CATALOG[name].url, "tests never download"))
    if _traces_required():
        pytest.fail(f"SERVESIM_REQUIRE_TRACES is set: {message}")
    pytest.skip(message)


def _traces_required() -> bool:
    return bool(os.environ.get("SERVESIM_REQUIRE_TRACES", "").strip())


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
