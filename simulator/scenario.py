"""Reading scenario files and applying command-line style overrides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from simulator.config import ScenarioConfig
from simulator.validation import format_validation_error


def read_scenario_dict(path: Path | str) -> dict[str, Any]:
    """The raw mapping in a YAML (or JSON) scenario file; ValueError naming the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{p}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{p}: cannot read file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"{p}:{where}: not valid YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: a scenario must be a mapping of fields, got {type(data).__name__}")
    return data


def validate_scenario(data: Mapping[str, Any], source: str | None = None) -> ScenarioConfig:
    """Validate a raw mapping; ValueError with one line per bad field, prefixed by ``source``."""
    try:
        return ScenarioConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=source)) from None


def load_scenario(path: Path | str) -> ScenarioConfig:
    """Read and validate a scenario file."""
    return validate_scenario(read_scenario_dict(path), source=str(path))


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data[a][b][c] = value`` for ``dotted = "a.b.c"``, creating mappings on the way."""
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {} if child is None or isinstance(child, (str, int, float)) else dict(child)
            node[key] = child
        node = child
    node[keys[-1]] = value
