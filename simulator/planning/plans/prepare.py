"""A plan's inputs, validated before anything runs: the target, the search flags, and every candidate
resolved, priced and bounded (``prepare_plan``); ValueError naming the culprit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulator.config.scenario import validate_scenario
from simulator.config.schema import ScenarioConfig
from simulator.planning.plans.candidates import CandidateSet
from simulator.planning.plans.outcome import (
    Candidate,
    PlanInputs,
    slo_targets,
)
from simulator.planning.plans.pd_ratio import pd_pools
from simulator.planning.plans.prices import price_per_gpu_hour
from simulator.planning.points.capacity import (
    deployment_cost_per_hour,
    gpus_per_replica,
)
from simulator.planning.points.keys import resolve_variant
from simulator.planning.points.overrides import apply_overrides
from simulator.planning.points.stats import replicate_seed
from simulator.planning.search.bound import CapacityBound, capacity_bound
from simulator.planning.search.costs import CostModels
from simulator.planning.search.load import Load, check_load, load_kind, own_load, plan_load, search_range
from simulator.planning.search.settings import PlanRequest
from workloads import RequestStream, generate


def target_rate(base: dict[str, Any], base_dir: Path | None, source: str, request: PlanRequest) -> float:
    """The load to provision for: the request's, else the scenario's own (``load.own_load``)."""
    if request.target_rate_per_s is not None:
        return request.target_rate_per_s
    cfg = validate_scenario(base, source)
    try:
        return own_load(cfg, base_dir)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}; give --target-rate") from None


def _check_overrides(load: Load, overrides: dict[str, Any]) -> None:
    """ValueError for a candidate override the plan would silently replace."""
    if load.path in overrides:
        raise ValueError(f"{load.path} is the load the plan searches; remove it from the candidate's overrides")
    if any(path == "slo" or path.startswith("slo.") for path in overrides):
        raise ValueError("the SLOs are the plan's, not a candidate's: set them in the scenario or with --slo-* flags")


def check_search_flags(load: Load, request: PlanRequest, target: float, target_source: str) -> None:
    """ValueError naming the flag when the target or the start is not a load the search can use.

    Both must be loads a point can be simulated at (``Load.bounds``), and the start must lie
    in the search range around the target (``search_range``), where every claim of the
    search holds: doubling from a start far below the target would stop short of it, halving
    from one far above would call a feasible candidate infeasible.
    """
    check_load(load, target, target_source)
    s = request.search
    if s.start_rate_per_s is None:
        return
    check_load(load, s.start_rate_per_s, "--start-rate")
    floor, ceiling = search_range(load, target, s.max_doublings, s.max_halvings)
    if not floor <= s.start_rate_per_s <= ceiling:
        raise ValueError(
            f"--start-rate {s.start_rate_per_s:g}: outside the search range [{floor:.3g}, {ceiling:.3g}] {load.unit} "
            f"(the target {target:g} / 2^{s.max_halvings} to x 2^{s.max_doublings}): the search only tries loads "
            "inside it, so start there"
        )


def _generate_at(
    config: dict[str, Any], overrides: dict[str, Any], base_dir: Path | None, source: str
) -> tuple[ScenarioConfig, RequestStream]:
    """The config and workload of ``config`` with ``overrides``; ValueError prefixed by ``source`` if it cannot be."""
    cfg = validate_scenario(apply_overrides(config, overrides), source)
    try:
        return cfg, generate(cfg.workload, cfg.seed, base_dir)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def prepare_candidates(
    base: dict[str, Any],
    base_dir: Path | None,
    cset: CandidateSet,
    prices: dict[str, float],
    request: PlanRequest,
    target_rate_per_s: float,
    scenario_label: str = "scenario",
) -> list[Candidate]:
    """Validate, resolve and price every candidate before anything runs; ValueError naming the candidate.

    Each candidate's workload is generated once as the search will run it (a trace read,
    sessions drawn), so a trace that cannot be replayed stops the plan here. An error in a
    flag names the flag (and the candidate, with a candidates file). The analytic bounds,
    which never raise, are ``bound_candidates``'.
    """
    out = []
    unit: tuple[str, str] | None = None
    own = cset.source == "scenario"  # the scenario's own configuration only
    target_source = "--target-rate" if request.target_rate_per_s is not None else f"{scenario_label}: its own load"
    for i, spec in enumerate(cset.candidates):
        source = scenario_label if own else f"{cset.source}: candidate {spec.name!r}"
        if own and spec.family is not None:
            source = f"{scenario_label}: variant {spec.name!r}"
        loads: list[Load] = []

        def searchable(config: dict[str, Any], cfg: ScenarioConfig, loads: list[Load] = loads, spec=spec) -> None:
            load = plan_load(cfg, cfg.seed, base_dir, request.search.requests_per_point)
            _check_overrides(load, spec.overrides)
            loads.append(load)

        config, cfg, resolved = resolve_variant(base, spec.overrides, base_dir, source, searchable)
        (load,) = loads
        try:
            check_search_flags(load, request, target_rate_per_s, target_source)
        except ValueError as exc:
            raise ValueError(str(exc) if own else f"{exc} (candidate {spec.name!r})") from None
        # the config as the search will run it (load, request count), generated once here
        _generate_at(config, _at_start(load, request, target_rate_per_s), base_dir, source)
        if unit is not None and unit != (load_kind(cfg), load.unit):
            raise ValueError(
                f"{source}: its workload's load is {load_kind(cfg)} in {load.unit}, the first candidate's "
                f"{unit[0]} in {unit[1]}: one plan provisions one kind of load"
            )
        unit = (load_kind(cfg), load.unit)
        missing: list[str] = []

        def price_of(hw_ref: str, spec: dict, missing: list[str] = missing) -> float | None:
            p = price_per_gpu_hour(hw_ref, spec, prices)
            if p is None:
                missing.append(hw_ref)
            return p

        cost = deployment_cost_per_hour(resolved, price_of)
        ref = cfg.hardware if isinstance(cfg.hardware, str) else resolved["hardware"]["name"]
        if cost is None:
            raise ValueError(
                f"{source}: no price for hardware {missing[0]}; give --price {missing[0]}=USD_PER_GPU_HOUR"
            )
        price = cost / gpus_per_replica(resolved)  # per GPU-hour, averaged over the scenario's GPUs
        gpus = gpus_per_replica(resolved)
        group_gpus = tuple(int(g["tp"]) * int(g["pp"]) for g in resolved["deployment"])
        group_costs = tuple(
            n * (price_of(g["hardware_ref"], g["hardware"]) or 0.0)
            for n, g in zip(group_gpus, resolved["deployment"], strict=True)
        )
        pools = pd_pools(config) if request.search.pd_ratio else None
        out.append(
            Candidate(
                i,
                spec.name,
                spec.overrides,
                config,
                resolved,
                cfg.seed,
                ref,
                price,
                gpus,
                load,
                None,  # the analytic bound: ``bound_candidates``
                spec.family,
                spec.tuned,
                pools,
                group_gpus,
                group_costs,
            )
        )
    return out


def check_prices_apply(names: Iterable[str], candidates: list[Candidate], flag: str = "--price") -> None:
    """ValueError naming a price (of ``flag``) that no candidate's hardware reads, by its reference or spec name: the
    candidates would be priced as if it were not given (``h100`` for candidates on ``h100-sxm``). A price list file
    may name more GPUs than the candidates use; a price given on its own must apply."""
    read = {
        name
        for c in candidates
        for g in c.resolved["deployment"]
        for name in (g["hardware_ref"], g["hardware"].get("name"))
        if isinstance(name, str)
    }
    for name in names:
        if name not in read:
            raise ValueError(f"{flag} {name}=...: no candidate runs on {name} (they run on {', '.join(sorted(read))})")


def _at_start(load: Load, request: PlanRequest, target_rate_per_s: float) -> dict[str, Any]:
    """The overrides of the load the searches start from (where the bounds' workload is generated)."""
    return load.overrides(request.search.start_rate_per_s or target_rate_per_s)


def bound_candidates(inputs: PlanInputs, request: PlanRequest) -> PlanInputs:
    """``inputs`` with every candidate's analytic bound (``search.bound``; the guided search's), once.

    Left out of ``prepare_plan`` (a bound never raises: nothing to validate) for ``execute_plan`` to compute, about
    0.06 s a candidate: a plan's caller starts its executor in between, whose workers start (import the
    simulator) meanwhile.
    """
    if inputs.bounded:
        return inputs
    cost_models = CostModels()  # the bounds' cost models, one per distinct deployment
    candidates = []
    for c in inputs.candidates:
        at_start = _at_start(c.load, request, inputs.target_rate_per_s)
        source = f"{inputs.candidate_source}: candidate {c.name!r}"
        cfg, stream = _generate_at(c.config, at_start, inputs.base_dir, source)
        bound = _replicates_bound(c.config, at_start, cfg, stream, inputs.base_dir, source, request, cost_models)
        candidates.append(replace(c, bound=bound))
    return replace(inputs, candidates=candidates, bounded=True)


def _replicates_bound(
    config: dict[str, Any],
    at_start: dict[str, Any],
    cfg: ScenarioConfig,
    stream: RequestStream,
    base_dir: Path | None,
    source: str,
    request: PlanRequest,
    cost_models: CostModels | None = None,
) -> CapacityBound:
    """The analytic bound of every replicate's requests (each seed draws its own lengths), the largest.

    The estimate stays the first replicate's (it starts that replicate's search); no bound if
    any replicate has none.
    """
    slo, growth = slo_targets(request), request.search.max_growth_fraction
    first = capacity_bound(cfg, base_dir, stream, slo, growth, cost_models)
    upper = first.upper_rate_per_s
    for r in range(1, request.replicates):
        if upper is None:
            break
        seeded = apply_overrides(config, at_start | {"seed": replicate_seed(cfg.seed, r)})
        cfg_r, stream_r = _generate_at(seeded, {}, base_dir, source)
        other = capacity_bound(cfg_r, base_dir, stream_r, slo, growth, cost_models).upper_rate_per_s
        upper = None if other is None else max(upper, other)
    if upper is None:
        return CapacityBound(None, first.estimate_rate_per_s, first.reason)
    if upper != first.upper_rate_per_s:
        return CapacityBound(upper, first.estimate_rate_per_s, f"{first.reason}; the largest of the replicates' bounds")
    return first


def prepare_plan(
    base: dict[str, Any],
    base_dir: Path | None,
    scenario_label: str,
    cset: CandidateSet,
    request: PlanRequest,
    prices: dict[str, float] | None = None,
) -> PlanInputs:
    """Validate everything a plan needs before any simulation (or Ray start); ValueError naming the culprit.
    The candidates' analytic bounds are left to ``bound_candidates`` (``execute_plan`` calls it).

    ``prices`` (USD per GPU-hour by hardware reference or spec name) override the
    candidate file's, which override the specs'.
    """
    target = target_rate(base, base_dir, scenario_label, request)
    start = request.search.start_rate_per_s or target
    candidates = prepare_candidates(base, base_dir, cset, cset.prices | (prices or {}), request, target, scenario_label)
    if request.search.pd_ratio and all(c.pools is None for c in candidates):
        raise ValueError(
            "--pd-ratio: no candidate is a disaggregated cluster of one prefill and one decode group "
            "(groups: [{role: prefill, ...}, {role: decode, ...}])"
        )
    bounded = request.search.exhaustive  # the exhaustive search reads no bounds
    return PlanInputs(scenario_label, cset.source, base_dir, target, start, candidates, bounded=bounded)
