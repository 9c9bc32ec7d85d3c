"""Reading scenario files and applying command-line style overrides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.config.errors import format_validation_error
from simulator.config.files import read_yaml_mapping
from simulator.config.schema import ScenarioConfig


def read_scenario_dict(path: Path | str) -> dict[str, Any]:
    """The raw mapping in a YAML (or JSON) scenario file; ValueError naming the file and line."""
    return read_yaml_mapping(path, "file", "scenario fields")


def validate_scenario(data: Mapping[str, Any], source: str | None = None) -> ScenarioConfig:
    """Validate a raw mapping; ValueError with one line per bad field, prefixed by ``source``."""
    try:
        return ScenarioConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=source)) from None


def load_scenario(path: Path | str) -> ScenarioConfig:
    """Read and validate a scenario file."""
    return validate_scenario(read_scenario_dict(path), source=str(path))
