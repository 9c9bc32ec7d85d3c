"""The outputs of a run and the run folder they are written to."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from simulator.config.files import read_json_object

TableFormat = Literal["parquet", "csv"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("parquet", "csv")
TABLE_NAMES = ("requests", "steps", "itl", "replicas")

# The columns every run folder servesim wrote has held (later columns are optional to readers).
REQUIRED_COLUMNS = {
    "requests": (
        "request_id",
        "replica_id",
        "num_prompt_tokens",
        "num_output_tokens",
        "num_generated_tokens",
        "num_preemptions",
        "arrival_s",
        "first_token_s",
        "finished_s",
        "status",
    ),
    "steps": (
        "replica_id",
        "start_s",
        "duration_s",
        "num_running",
        "num_waiting",
        "num_prefill_tokens",
        "num_decode_tokens",
        "num_kv_blocks_used",
    ),
    "itl": ("itl_s", "count"),
}


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats turned into None and numpy scalars into Python ones, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    return value


@dataclass(slots=True)
class RunResult:
    """What one run produced: the resolved config, the summary and the tables."""

    config: dict[str, Any]
    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame
    itl_values_s: np.ndarray
    itl_counts: np.ndarray
    replicas: pd.DataFrame | None = None  # one row per replica: group, role, KV usage, cached share, swaps

    def write(self, out_dir: Path | str, table_format: TableFormat = "parquet") -> Path:
        """Write summary.json, config.json and the tables into ``out_dir`` (created if needed).

        A table an earlier run left in the folder in the other format (or a replicas table this
        run does not have) is removed, so the folder never holds two runs' tables.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name in TABLE_NAMES:
            for fmt in TABLE_FORMATS:
                if fmt != table_format or (name == "replicas" and self.replicas is None):
                    (out / f"{name}.{fmt}").unlink(missing_ok=True)
        summary = json_safe(self.summary)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out / "config.json").write_text(json.dumps(self.config, indent=2, default=str) + "\n")
        itl = pd.DataFrame({"itl_s": self.itl_values_s, "count": self.itl_counts})
        tables = [("requests", self.requests), ("steps", self.steps), ("itl", itl)]
        if self.replicas is not None:
            tables.append(("replicas", self.replicas))
        for name, frame in tables:
            if table_format == "csv":
                frame.to_csv(out / f"{name}.csv", index=False)
            else:
                frame.to_parquet(out / f"{name}.parquet", index=False)
        return out

    @classmethod
    def load(cls, run_dir: Path | str) -> RunResult:
        """Read a run folder written by ``write`` (Parquet or CSV tables)."""
        d = Path(run_dir)
        if not (d / "summary.json").is_file():
            raise ValueError(f"{d}: not a run folder (no summary.json)")

        for name in TABLE_NAMES:
            if all((d / f"{name}.{fmt}").is_file() for fmt in TABLE_FORMATS):
                raise ValueError(
                    f"{d}: holds both {name}.parquet and {name}.csv (tables of two runs?); remove the stale one"
                )

        def table(name: str) -> pd.DataFrame:
            for fmt in TABLE_FORMATS:
                path = d / f"{name}.{fmt}"
                if path.is_file():
                    break
            else:
                raise ValueError(f"{d}: missing {name}.parquet or {name}.csv")
            try:
                if fmt == "parquet":
                    frame = pd.read_parquet(path)
                else:
                    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
            except Exception as exc:  # pyarrow's and pandas' many error types for a damaged file
                detail = " ".join(str(exc).split())[:200] or type(exc).__name__
                raise ValueError(f"{path}: corrupted {name} table ({detail})") from None
            missing = [c for c in REQUIRED_COLUMNS.get(name, ()) if c not in frame.columns]
            if missing:
                raise ValueError(f"{path}: corrupted {name} table, no column {missing[0]!r}")
            return frame

        itl = table("itl")
        has_replicas = (d / "replicas.parquet").is_file() or (d / "replicas.csv").is_file()
        config = read_json_object(d / "config.json", "run config")
        try:
            describe_deployment(config)  # what reports read of it
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(
                f"{d / 'config.json'}: corrupted run config, no deployment to read ({type(exc).__name__}: {exc})"
            ) from None
        return cls(
            config,
            read_json_object(d / "summary.json", "run summary"),
            table("requests"),
            table("steps"),
            itl["itl_s"].to_numpy(dtype=np.float64),
            itl["count"].to_numpy(dtype=np.int64),
            table("replicas") if has_replicas else None,
        )


def describe_deployment(config: dict) -> str:
    """One line naming the model, GPUs, parallelism, policy and router of a run's resolved config."""
    parts = []
    for g in config["resolved_groups"]:
        role = "" if g["role"] == "mixed" else f"{g['role']} "
        par = f"tp={g['tp']}" + (f" pp={g['pp']}" if g["pp"] > 1 else "")
        parts.append(f"{role}{g['count']} x {g['model']['name']} on {g['hardware']['name']} ({par})")
    router = (
        f", router {config['router']['kind']}" if len(parts) > 1 or config["resolved_groups"][0]["count"] > 1 else ""
    )
    return f"{' + '.join(parts)}, policy {config['policy']['kind']}{router}"
