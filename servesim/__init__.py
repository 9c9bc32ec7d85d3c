"""servesim: a discrete-event simulator of LLM inference serving.

The CLI lives in ``servesim.cli``; the Python API (``servesim.api``) is re-exported here,
loaded on first use so that the command line answers a bad flag or ``--help`` without
importing the simulator.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servesim.api import RunResult, ScenarioConfig, load_scenario, run, scenario

__version__ = "0.1.0"
__all__ = ["RunResult", "ScenarioConfig", "__version__", "load_scenario", "run", "scenario"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("servesim.api"), name)
    raise AttributeError(f"module 'servesim' has no attribute {name!r}")
