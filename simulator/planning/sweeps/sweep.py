"""Running a sweep: every point of a grid, in parallel, resumable, into one table.

Contract of ``run_sweep``:

- every point's raw mapping (base + overrides) is validated as a whole before anything
  runs; a bad field or an unknown preset raises ValueError naming the grid file, the point
  and the field;
- a point whose resolved config cannot run (a model that does not fit, a tp that does not
  divide the heads) is not an error of the sweep: its row has ``status = "error"`` and the
  message in ``error``;
- points whose key is already in ``<out>/points/`` are skipped; points with the same
  resolved config run once; a stored point that fails its check on read
  (``PointStore.load_point``: tampered, truncated, another config's) is run again, and
  ``warn`` gets one line naming its file;
- any workload kind runs (synthetic, trace, sessions, closed loop); every row says what
  load it offered: ``workload_kind``, ``rate_per_s`` (the arrival process's rate: requests,
  or session starts for sessions; None for a timed trace and a closed loop),
  ``time_scale`` (trace) and ``concurrency`` (closed loop);
- the table has one row per point, in grid order, and depends only on the grid and its
  seeds: not on the executor, the worker count, the order tasks finish or on resuming.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.build import build
from simulator.config.schema import ScenarioConfig
from simulator.metrics.results import json_safe
from simulator.planning.points.capacity import cost_per_million_tokens_usd, deployment_cost_per_hour, gpus_per_replica
from simulator.planning.points.executors import Executor
from simulator.planning.points.keys import canonical_json, point_key, resolve_variant
from simulator.planning.points.overrides import describe, lookup, scalar
from simulator.planning.points.stats import interval, replicate_seed
from simulator.planning.points.store import PointStore, write_json_atomic, write_table_atomic
from simulator.planning.sweeps.grid import SweepSpec

ROW_VERSION = 1
SWEEP_SCHEMA = "servesim.sweep/1"
TABLE_NAME = "sweep.parquet"
META_NAME = "sweep.json"
# the headline metrics of a sweep point as the CLI table and the report show them: (column, header, digits)
SHOWN_METRICS = (
    ("request_throughput", "req/s", 2),
    ("output_throughput", "out tok/s", 0),
    ("p99_ttft_ms", "p99 TTFT ms", 1),
    ("p99_tpot_ms", "p99 TPOT ms", 2),
    ("request_goodput", "goodput req/s", 2),
    ("cost_per_million_output_tokens_usd", "USD per M out tok", 2),
)
ProgressFn = Callable[[int, int], None]
WarnFn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class PointTask:
    """One point to simulate (plain data, so it can travel to a worker process or a Ray node)."""

    key: str
    config: dict[str, Any]
    base_dir: str | None
    replicates: int


@dataclass(frozen=True, slots=True)
class Point:
    """A point of the grid, validated and keyed."""

    index: int
    label: str
    overrides: dict[str, Any]
    config: dict[str, Any]
    validated: dict[str, Any]
    resolved: dict[str, Any]
    key: str


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    table: pd.DataFrame
    out_dir: Path
    num_points: int
    num_unique: int
    num_skipped: int
    num_run: int
    num_errors: int
    wall_s: float
    bad_points: tuple[str, ...] = ()  # one line per stored point that failed its check and ran again


def run_point(task: PointTask) -> dict[str, Any]:
    """Simulate one point (``replicates`` seeds); its status and summary metrics.

    With one replicate the metrics are the run's summary; with more, each numeric metric is
    the mean over replicates with ``_low``/``_high`` 95% t-interval columns.
    """
    base_dir = Path(task.base_dir) if task.base_dir is not None else None
    seed = ScenarioConfig.model_validate(task.config).seed
    summaries = []
    for r in range(task.replicates):
        cfg = ScenarioConfig.model_validate(task.config | {"seed": replicate_seed(seed, r)})
        try:
            result = build(cfg, base_dir=base_dir, record_steps=False).run()
        except ValueError as exc:
            return {"status": "error", "error": str(exc) or type(exc).__name__}
        summaries.append(result.summary)
    if task.replicates == 1:
        metrics: dict[str, Any] = dict(summaries[0])
    else:
        metrics = {}
        for name in summaries[0]:
            metrics.update(interval([s.get(name) for s in summaries], floor=0.0).columns(name))
    return {"status": "ok", "error": None, **json_safe(metrics)}


def load_columns(workload: dict[str, Any]) -> dict[str, Any]:
    """The load a point's (resolved) workload offers, whatever its kind; None where a kind has no such knob."""
    kind = workload.get("kind", "synthetic")
    arrival = workload.get("arrival")
    return {
        "workload_kind": kind,
        "rate_per_s": arrival.get("rate_per_s") if isinstance(arrival, dict) else None,
        "time_scale": workload.get("time_scale") if kind == "trace" else None,
        "concurrency": workload.get("concurrency") if kind == "closed_loop" else None,
    }


def derived_columns(resolved: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """Columns every row carries besides the parameters: what ran, on how many GPUs, at what cost."""
    gpus = gpus_per_replica(resolved)
    cost = deployment_cost_per_hour(resolved, lambda ref, spec: spec.get("price_per_hour_usd"))
    price = cost / gpus if cost is not None else None
    return {
        "model_name": resolved["model"]["name"],
        "hardware_name": resolved["hardware"]["name"],
        "tp": resolved["parallelism"]["tp"],
        "num_gpus": gpus,
        "policy_kind": resolved["policy"]["kind"],
        **load_columns(resolved["workload"]),
        "seed": resolved["seed"],
        "price_per_gpu_hour_usd": price,
        "cost_per_hour_usd": cost,
        "cost_per_million_output_tokens_usd": cost_per_million_tokens_usd(cost, metrics.get("output_throughput")),
    }


def resolve_points(spec: SweepSpec) -> list[Point]:
    """Validate and key every point of ``spec``; ValueError naming the grid file, point and field."""
    points = []
    file_hashes: dict[Path, str] = {}  # each data file hashed once for the whole grid
    for i, overrides in enumerate(spec.points):
        label = describe(overrides)
        source = f"{spec.source}: point {i} ({label})"
        config, cfg, resolved = resolve_variant(spec.base, overrides, spec.base_dir, source, file_hashes=file_hashes)
        key = point_key(resolved, {"replicates": spec.replicates, "row_version": ROW_VERSION})
        points.append(Point(i, label, overrides, config, cfg.model_dump(mode="json"), resolved, key))
    return points


def parameter_paths(spec: SweepSpec) -> list[str]:
    """Every overridden path, in first-seen order: the parameter columns of the table."""
    seen: dict[str, None] = {}
    for overrides in spec.points:
        seen.update(dict.fromkeys(overrides))
    return list(seen)


def point_row(p: Point, metrics: dict[str, Any]) -> dict[str, Any]:
    """A point's stored row: its key, the derived columns, its status and metrics, its resolved config."""
    return {"key": p.key, **derived_columns(p.resolved, metrics), **metrics, "config_json": _config_json(p)}


def _config_json(p: Point) -> str:
    return canonical_json(json_safe(p.resolved))


def table_rows(points: list[Point], paths: list[str], stored: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the points whose key is in ``stored``, in grid order.

    The derived columns are computed again from the point's config (a row stored by an
    older servesim gets the columns added since), the status and metrics are the stored ones.
    """
    rows = []
    for p in points:
        if p.key not in stored:
            continue
        params = {path: scalar(_value(p, path)) for path in paths}
        derived = derived_columns(p.resolved, stored[p.key])
        metrics = {k: v for k, v in stored[p.key].items() if k not in derived and k not in ("key", "config_json")}
        rows.append({"point": p.index, "label": p.label, **params, **point_row(p, metrics)})
    return rows


def _value(p: Point, path: str) -> Any:
    """A grid parameter's value at ``p``: as validated, or as run where validation leaves a default to the
    hardware (vllm's max_num_seqs and token budget)."""
    value = lookup(p.validated, path)
    return lookup(p.resolved, path) if value is None else value


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    executor: Executor,
    progress: ProgressFn | None = None,
    flush_every_s: float = 10.0,
    points: list[Point] | None = None,
    warn: WarnFn | None = None,
) -> SweepOutcome:
    """Run the points of ``spec`` not yet in ``out_dir`` and write the table; see the module contract.

    ``points`` are ``resolve_points(spec)`` when the caller already has them; ``warn`` gets
    one line per stored point that fails its check (it is run again).
    """
    start = time.perf_counter()
    points = points if points is not None else resolve_points(spec)
    paths = parameter_paths(spec)
    store = PointStore(out_dir)
    done_keys = store.keys()
    by_key = {p.key: p for p in points}
    stored: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    for key, p in by_key.items():
        if key not in done_keys:
            continue
        try:
            stored[key] = store.load_point(key, _config_json(p))
        except ValueError as exc:
            bad.append(f"{exc}; running the point again")
            if warn is not None:
                warn(bad[-1])
    todo = [p for key, p in by_key.items() if key not in stored]
    # absolute, so a worker started in another folder (a Ray node) finds the base's relative files
    base_dir = None if spec.base_dir is None else str(Path(spec.base_dir).resolve())
    tasks = [PointTask(p.key, p.config, base_dir, spec.replicates) for p in todo]
    table_path, meta_path = out_dir / TABLE_NAME, out_dir / META_NAME

    def meta(complete: bool) -> dict[str, Any]:
        return {
            "schema": SWEEP_SCHEMA,
            "grid": spec.source,
            "parameters": paths,
            "replicates": spec.replicates,
            "num_points": len(points),
            "num_unique_configs": len(by_key),
            "num_skipped": len(by_key) - len(todo),
            "num_run": len(stored) - (len(by_key) - len(todo)),
            "num_rerun_bad": len(bad),
            "num_errors": sum(1 for row in stored.values() if row.get("status") == "error"),
            "complete": complete,
            "executor": executor.kind,
            "workers": executor.workers,
            "wall_s": time.perf_counter() - start,
            "table": TABLE_NAME,
        }

    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(meta_path, meta(False))
    last_flush = time.perf_counter()
    if progress is not None:
        progress(0, len(tasks))
    for n_done, (i, metrics) in enumerate(executor.map_unordered(run_point, tasks), start=1):
        p = todo[i]
        store.save(p.key, point_row(p, metrics))
        stored[p.key] = store.load_point(p.key, _config_json(p))  # exactly what a resumed sweep would read back
        if progress is not None:
            progress(n_done, len(tasks))
        if time.perf_counter() - last_flush >= flush_every_s:
            write_table_atomic(table_path, table_rows(points, paths, stored))
            write_json_atomic(meta_path, meta(False))
            last_flush = time.perf_counter()
    table = write_table_atomic(table_path, table_rows(points, paths, stored))
    info = meta(True)
    write_json_atomic(meta_path, info)
    return SweepOutcome(
        table,
        out_dir,
        len(points),
        len(by_key),
        info["num_skipped"],
        info["num_run"],
        info["num_errors"],
        info["wall_s"],
        tuple(bad),
    )
