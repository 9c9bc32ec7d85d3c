"""Policy comparison: the same requests through several policies (and parameter variants).

Every variant of one rate sees the identical request stream (same arrivals, same
lengths, same seed); only the batch policy differs. Variants run in parallel processes.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.metrics.results import TableFormat
from simulator.planning.points.executors import make_executor
from simulator.planning.points.overrides import apply_overrides
from workloads import RequestStream, generate
from workloads.validators import first_repeat


@dataclass(frozen=True, slots=True)
class Variant:
    """One policy configuration under comparison; ``label`` names its run folder and report series."""

    label: str
    policy: dict[str, Any]


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_sets(sets: Sequence[str]) -> dict[str, dict[str, list[Any]]]:
    """``["sarathi.token_budget=512,2048"]`` -> ``{"sarathi": {"token_budget": [512, 2048]}}``."""
    out: dict[str, dict[str, list[Any]]] = {}
    for item in sets:
        key, sep, values = item.partition("=")
        policy, dot, param = key.partition(".")
        if not sep or not dot or not policy or not param or not values:
            raise ValueError(f"--set {item!r}: expected POLICY.PARAM=VALUE[,VALUE...]")
        if param in out.get(policy, {}):
            raise ValueError(f"--set {item!r}: {key} is set twice; give its values in one --set")
        out.setdefault(policy, {})[param] = [_parse_value(v) for v in values.split(",")]
        repeated, value = first_repeat(out[policy][param])
        if repeated:
            raise ValueError(f"--set {item!r}: {value!r} is given twice (each variant runs once)")
    return out


def expand_variants(
    policy_names: Sequence[str], sets: Sequence[str], base_policy: dict[str, Any] | None = None
) -> list[Variant]:
    """One variant per policy, times the cartesian product of its ``--set`` values.

    A policy named like the scenario's own policy starts from the scenario's parameters.
    """
    grid = parse_sets(sets)
    unknown = set(grid) - set(policy_names)
    if unknown:
        raise ValueError(f"--set names {', '.join(sorted(unknown))}, which is not among --policies")
    variants: list[Variant] = []
    for name in policy_names:
        base = dict(base_policy) if base_policy and base_policy.get("kind") == name else {"kind": name}
        params = grid.get(name, {})
        keys = list(params)
        for combo in itertools.product(*(params[k] for k in keys)):
            policy = base | dict(zip(keys, combo, strict=True))
            suffix = "".join(f"-{k}={v}" for k, v in zip(keys, combo, strict=True))
            variants.append(Variant(f"{name}{suffix}", policy))
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise ValueError(f"duplicate variants: {', '.join(labels)}")
    return variants


@dataclass(frozen=True, slots=True)
class Job:
    variant: Variant
    rate_per_s: float | None
    config: dict[str, Any]
    run_dir: Path


def _run_job(task: tuple[Job, Path | None, RequestStream, TableFormat]) -> dict[str, Any]:
    job, base_dir, stream, table_format = task
    cfg = validate_scenario(job.config, source=f"variant {job.variant.label}")
    result = build(cfg, base_dir=base_dir, stream=stream).run()
    result.write(job.run_dir, table_format)
    return result.summary


def plan_jobs(
    base: dict[str, Any], variants: Sequence[Variant], rates: Sequence[float] | None, out_dir: Path
) -> list[Job]:
    """The (variant, rate) runs, each with its full config dict, validated up front."""
    jobs = []
    for rate in rates or [None]:
        for variant in variants:
            overrides: dict[str, Any] = {"policy": dict(variant.policy)}
            if rate is not None:
                overrides["workload.arrival.rate_per_s"] = rate
            cfg = apply_overrides(base, overrides)
            run_dir = (
                out_dir / variant.label if not rates or len(rates) == 1 else out_dir / variant.label / f"rate-{rate:g}"
            )
            validate_scenario(cfg, source=f"variant {variant.label}")
            jobs.append(Job(variant, rate, cfg, run_dir))
    return jobs


def run_comparison(
    base: dict[str, Any],
    variants: Sequence[Variant],
    out_dir: Path,
    rates: Sequence[float] | None = None,
    base_dir: Path | None = None,
    workers: int | None = None,
    table_format: TableFormat = "parquet",
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every variant at every rate on identical request streams; one row per run, in job order."""
    jobs = plan_jobs(base, variants, rates, out_dir)
    # the executor first: it refuses workers < 1 before any request stream is generated
    executor = make_executor("local", min(len(jobs), workers if workers is not None else os.cpu_count() or 1))
    summaries: dict[int, dict[str, Any]] = {}
    try:
        streams: dict[float | None, RequestStream] = {}
        for job in jobs:
            if job.rate_per_s not in streams:
                cfg = validate_scenario(job.config)
                streams[job.rate_per_s] = generate(cfg.workload, cfg.seed, base_dir)
        tasks = [(job, base_dir, streams[job.rate_per_s], table_format) for job in jobs]
        for done, (i, summary) in enumerate(executor.map_unordered(_run_job, tasks), 1):
            summaries[i] = summary
            if progress:
                progress(done, len(jobs))
    finally:
        executor.close()
    return [
        {
            "variant": job.variant.label,
            "policy": job.variant.policy,
            "rate_per_s": job.rate_per_s,
            "run_dir": str(job.run_dir),
            "summary": summaries[i],
        }
        for i, job in enumerate(jobs)
    ]
