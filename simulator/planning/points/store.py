"""The on-disk store of a sweep: one JSON file per finished point, and the Parquet table.

Layout of a sweep folder::

    points/<key>.json   one finished point (its metrics and resolved config), keyed by
                        the hash of its resolved config; the source of truth for resuming
    sweep.parquet       the table, one row per point of the current grid, rebuilt from
                        points/ periodically and at the end
    sweep.json          what was run: grid file, parameters, counts, executor, wall time

Every file is written to a temporary name in the same folder and renamed over the final
name (``os.replace`` is atomic on POSIX and Windows), so a sweep killed at any moment
leaves each file either complete or absent, never torn.

A point file read back is checked (``PointStore.load_point``) before a resumed sweep
trusts it: a JSON object whose ``key`` is its file name's and whose ``config_json`` is the
point's resolved config, a ``status`` of ``ok`` (with every ``REQUIRED_METRICS`` present
and every number finite) or ``error`` (with its message). A file that fails is not a
finished point: the sweep says so in one line naming the file and runs the point again,
overwriting it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.metrics.results import json_safe

POINTS_DIR = "points"
# summary fields every finished run has, each a finite number (``simulator.metrics.summary.summarize``)
REQUIRED_METRICS = (
    "num_requests",
    "completed",
    "rejected",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
)
# the text fields of a stored row; every other field is null, a bool or a finite number
TEXT_FIELDS = frozenset(
    {"key", "status", "error", "config_json", "model_name", "hardware_name", "policy_kind", "workload_kind"}
)


@contextlib.contextmanager
def _atomic_path(path: Path):
    """A temporary path next to ``path``; renamed over ``path`` on success, removed on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (with an fsync, so a finished point survives a crash)."""
    with _atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")


def write_table_atomic(path: Path, rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Write ``rows`` as a Parquet table at ``path`` atomically; returns the frame written."""
    frame = pd.DataFrame.from_records(list(rows))
    with _atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return frame


class PointStore:
    """Finished points of a sweep, one JSON file each under ``<out>/points/``."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = Path(out_dir) / POINTS_DIR

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def keys(self) -> set[str]:
        """Keys of the finished points (temporary files of an interrupted write are ignored)."""
        if not self.dir.is_dir():
            return set()
        return {p.stem for p in self.dir.glob("*.json") if not p.name.startswith(".")}

    def save(self, key: str, row: dict[str, Any]) -> None:
        write_json_atomic(self.path(key), row)

    def load(self, key: str) -> dict[str, Any]:
        """The stored row of ``key``; ValueError naming the file when it is not a JSON object."""
        p = self.path(key)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p}: unreadable sweep point ({exc}); delete it to run the point again") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: not a sweep point (a JSON object)")
        return data

    def load_point(self, key: str, config_json: str) -> dict[str, Any]:
        """The stored row of ``key`` if it is a finished point of the config ``config_json``.

        ValueError naming the file and the first problem otherwise (see the module docstring).
        """
        row = self.load(key)
        problem = point_problem(row, key, config_json)
        if problem is not None:
            raise ValueError(f"{self.path(key)}: not a finished sweep point ({problem})")
        return row


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def point_problem(row: dict[str, Any], key: str, config_json: str) -> str | None:
    """What is wrong with a stored row of point ``key`` (resolved config ``config_json``), or None."""
    if row.get("key") != key:
        return f"its key {row.get('key')!r} is not its file name's {key!r}"
    if row.get("config_json") != config_json:
        return "its config_json is not the configuration of the point with this key"
    status = row.get("status")
    if status == "error":
        if not isinstance(row.get("error"), str) or not row["error"]:
            return "status error without an error message"
    elif status != "ok":
        return f"status {status!r} (expected ok or error)"
    for name, value in row.items():
        if name in TEXT_FIELDS:
            if value is not None and not isinstance(value, str):
                return f"{name} is {value!r}, not text"
        elif not (value is None or isinstance(value, bool) or (_is_number(value) and math.isfinite(value))):
            return f"{name} is {value!r}, not a finite number"
    if status == "ok":
        missing = [m for m in REQUIRED_METRICS if not _is_number(row.get(m))]
        if missing:
            return f"status ok without {', '.join(missing)}"
    return None
