"""servesim: a discrete-event simulator of LLM inference serving.

The CLI lives in ``servesim.cli``; the Python API is re-exported here.
"""

from servesim.api import RunResult, ScenarioConfig, load_scenario, run, scenario

__version__ = "0.1.0"
__all__ = ["RunResult", "ScenarioConfig", "__version__", "load_scenario", "run", "scenario"]
