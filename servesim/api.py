"""The public Python API: build a scenario, run it, read the summary and tables.

import servesim
cfg = servesim.scenario(model="llama-3.1-8b", hardware="h100-sxm",
                        workload={"num_requests": 500, "arrival": {"kind": "poisson", "rate_per_s": 4}})
result = servesim.run(cfg)
result.summary["p99_ttft_ms"]
result.requests          # a pandas DataFrame, one row per request
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulator.build import build
from simulator.config.scenario import load_scenario, validate_scenario
from simulator.config.schema import ScenarioConfig
from simulator.metrics.results import RunResult


def scenario(**fields: Any) -> ScenarioConfig:
    """A validated scenario from keyword fields (the same fields as a scenario YAML file)."""
    return validate_scenario(fields)


def run(
    cfg: ScenarioConfig | str | Path | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Simulate ``cfg`` (a ScenarioConfig, a scenario file path, or None for the default)."""
    base_dir = None
    if cfg is None:
        cfg = ScenarioConfig()
    elif isinstance(cfg, (str, Path)):
        base_dir = Path(cfg).parent
        cfg = load_scenario(cfg)
    return build(cfg, base_dir=base_dir).run(progress=progress)


__all__ = ["RunResult", "ScenarioConfig", "load_scenario", "run", "scenario"]
