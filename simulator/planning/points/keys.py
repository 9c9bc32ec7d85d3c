"""The content key of a point: a hash of its resolved configuration.

A sweep skips a point whose key is already in its output folder, so the key must change
whenever anything that affects the point's result changes, and only then. It hashes the
validated config with every default spelled out and the model and hardware references
replaced by the specs they resolve to (so editing a spec file or a preset changes the
key), the contents of any calibration profile and of the workload's data files (a trace
replayed, an empirical length file; shipped traces are fixed and go by name), plus the
caller's extra inputs (replicate count, row format version).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from policies.batching import resolve_for_hardware
from simulator.build import profile_path, resolve_specs
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.config.schema import ScenarioConfig
from simulator.planning.points.overrides import apply_overrides
from workloads.traces import TRACE_CATALOG

KEY_HEX_CHARS = 20


def _data_sources(node: Any) -> list[str]:
    """Every ``source`` a workload mapping names (a trace's, an empirical length distribution's), in order."""
    if isinstance(node, dict):
        own = [node["source"]] if isinstance(node.get("source"), str) else []
        return own + [s for key, value in node.items() if key != "source" for s in _data_sources(value)]
    if isinstance(node, list):
        return [s for value in node for s in _data_sources(value)]
    return []


def data_files_sha256(
    workload: dict[str, Any], base_dir: Path | None, cache: dict[Path, str] | None = None
) -> dict[str, str]:
    """source -> SHA-256 of the file, for each data file of ``workload`` that exists (catalogue names left out).

    A missing file is left for the run to report. ``cache`` (path -> digest) saves hashing
    one file again for every point of a sweep.
    """
    out = {}
    for source in _data_sources(workload):
        if source in TRACE_CATALOG:
            continue
        path = Path(source).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            continue
        if cache is None or path not in cache:
            digest = _file_sha256(path, "data file")
            if cache is None:
                out[source] = digest
                continue
            cache[path] = digest
        out[source] = cache[path]
    return out


def resolved_config(
    cfg: ScenarioConfig, base_dir: Path | None = None, file_hashes: dict[Path, str] | None = None
) -> dict[str, Any]:
    """``cfg`` as plain JSON data with the model and hardware specs spelled out.

    A workload that reads data files gets ``workload_data_sha256`` (their contents' digests).
    Raises ValueError for an unknown preset or an unreadable spec file.
    """
    model, hardware = resolve_specs(cfg, base_dir)
    deployment = []
    for g in cfg.replica_groups():
        ref = g.hardware if g.hardware is not None else cfg.hardware
        spec = resolve_hardware(ref, base_dir)
        group_model = resolve_model(g.model, base_dir) if g.model is not None else model
        par = g.parallelism or cfg.parallelism
        profile = profile_path(g.cost_model or cfg.cost_model, base_dir)
        deployment.append(
            {
                "count": g.count,
                "role": g.role,
                "tp": par.tp,
                "pp": par.pp,
                "ep": par.ep,
                # hardware-dependent defaults (vllm's budget and max_num_seqs) as this GPU runs them
                "policy": resolve_for_hardware(g.policy or cfg.policy, spec.memory_bytes, spec.name).model_dump(
                    mode="json"
                ),
                "hardware_ref": ref if isinstance(ref, str) else spec.name,
                "hardware": spec.model_dump(mode="json"),
                "model": group_model.model_dump(mode="json"),
                # a profile's content, not its name: re-calibrating must change the key
                "profile_sha256": _file_sha256(profile) if profile is not None else None,
            }
        )
    out = cfg.model_dump(mode="json") | {
        "model": model.model_dump(mode="json"),
        "hardware": hardware.model_dump(mode="json"),
        "deployment": deployment,
        "policy": resolve_for_hardware(cfg.policy, hardware.memory_bytes, hardware.name).model_dump(mode="json"),
    }
    data = data_files_sha256(out["workload"], base_dir, file_hashes)
    if data:  # only then, so the keys of workloads without files stay what they were
        out["workload_data_sha256"] = data
    return out


def _file_sha256(path: Path, what: str = "calibration profile") -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None


def resolve_variant(
    base: Mapping[str, Any],
    overrides: Mapping[str, Any],
    base_dir: Path | None,
    source: str,
    check: Callable[[dict[str, Any], ScenarioConfig], None] | None = None,
    file_hashes: dict[Path, str] | None = None,
) -> tuple[dict[str, Any], ScenarioConfig, dict[str, Any]]:
    """(raw mapping, validated config, resolved config) of ``base`` with ``overrides`` applied.

    ``check(raw, cfg)`` adds a caller's own rule; ``file_hashes`` is ``resolved_config``'s
    cache. Every ValueError names ``source`` once.
    """
    try:
        config = apply_overrides(base, overrides)
        cfg = validate_scenario(config, source)
        if check is not None:
            check(config, cfg)
        return config, cfg, resolved_config(cfg, base_dir, file_hashes)
    except ValueError as exc:
        text = str(exc)
        raise ValueError(text if text.startswith(source) else f"{source}: {text}") from None


def canonical_json(data: Any) -> str:
    """Deterministic JSON text (sorted keys, no spaces); floats round-trip exactly."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def point_key(resolved: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
    """A short hex digest of the resolved config and ``extra``."""
    payload = canonical_json({"config": resolved, "extra": extra or {}})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:KEY_HEX_CHARS]
