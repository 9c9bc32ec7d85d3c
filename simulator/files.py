"""Reading a user's files: every way a read can fail becomes one ValueError naming the file.

Missing, unreadable, not UTF-8, not valid YAML or JSON (with the line), or not the
mapping expected: the CLI prints the message as is and exits with status 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


def read_text(path: Path | str, what: str = "file") -> str:
    """The text of ``path`` (UTF-8)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a folder, not a {what}") from None
    except OSError as exc:
        raise ValueError(f"{p}: cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not a text file (byte {exc.start} is not UTF-8)") from None


def read_yaml_mapping(path: Path | str, what: str = "file", fields: str = "fields") -> dict[str, Any]:
    """The mapping in a YAML (or JSON) file; an empty file is an empty mapping."""
    p = Path(path)
    text = read_text(p, what)
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
        raise ValueError(f"{p}: expected a mapping of {fields}, got {type(data).__name__}")
    return data


def read_json_object(path: Path | str, what: str = "file") -> dict[str, Any]:
    """The JSON object in ``path``."""
    p = Path(path)
    text = read_text(p, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: corrupted {what}, not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: corrupted {what}, expected a JSON object, got {type(data).__name__}")
    return data
