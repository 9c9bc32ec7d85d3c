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
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.results import json_safe

POINTS_DIR = "points"


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
            raise ValueError(f"{p}: not a sweep point; delete it to run the point again")
        return data
