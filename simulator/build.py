"""The composition root: a validated ScenarioConfig becomes runnable objects.

The one place that resolves presets and files and looks names up in the registries.
"""

from __future__ import annotations

from pathlib import Path

import simpy

import policies
from simulator.config import ScenarioConfig
from simulator.cost import COST_MODELS
from simulator.cost.profile import CalibrationProfile, load_profile
from simulator.kv import BlockManager, MemoryPlan, plan_memory
from simulator.metrics import MetricsRecorder
from simulator.presets import resolve_hardware, resolve_model
from simulator.replica import Replica
from simulator.simulation import Simulation
from simulator.specs import HardwareSpec, ModelSpec
from workloads import RequestStream, generate


def resolve_specs(cfg: ScenarioConfig, base_dir: Path | None = None) -> tuple[ModelSpec, HardwareSpec]:
    return resolve_model(cfg.model, base_dir), resolve_hardware(cfg.hardware, base_dir)


def resolve_profile(cfg: ScenarioConfig, base_dir: Path | None = None) -> CalibrationProfile | None:
    """The calibration profile the cost model reads, or None when it reads none.

    Raises ValueError when the ``profiled`` cost model names no profile file.
    """
    if cfg.cost_model.kind != "profiled":
        return None
    ref = getattr(cfg.cost_model, "profile", None)
    if ref is None:
        raise ValueError("cost_model.profile: the profiled cost model needs a profile file (servesim calibrate)")
    return load_profile((base_dir or Path.cwd()) / ref)


def memory_plan(
    cfg: ScenarioConfig, model: ModelSpec, hardware: HardwareSpec, profile: CalibrationProfile | None = None
) -> MemoryPlan | None:
    """The per-GPU memory budget, or None when the config fixes the block count.

    With a profile, the device memory, the weights and (unless the config sets
    ``reserve_bytes``) the activation and runtime reserve are the measured figures.
    """
    if cfg.kv_cache.num_blocks is not None:
        return None
    kv = cfg.kv_cache
    tp = cfg.parallelism.tp
    if profile is None:
        return plan_memory(model, hardware, tp, kv.block_size, kv.gpu_memory_utilization, kv.reserve_bytes)
    mem = profile.memory
    reserve = mem.reserve_bytes if kv.reserve_bytes is None else kv.reserve_bytes
    utilization = kv.gpu_memory_utilization
    return plan_memory(
        model, hardware, tp, kv.block_size, utilization, reserve, mem.weight_bytes, mem.device_memory_bytes
    )


def build(
    cfg: ScenarioConfig,
    base_dir: Path | None = None,
    stream: RequestStream | None = None,
    check_invariants: bool = False,
    record_steps: bool = True,
) -> Simulation:
    """Wire a simulation of ``cfg``; ``stream`` replaces the generated workload when given.

    Raises ValueError for configurations that cannot run (unknown presets, a model that
    does not fit, a tp that does not divide the heads).
    """
    model, hardware = resolve_specs(cfg, base_dir)
    tp = cfg.parallelism.tp
    model.check_tensor_parallel(tp)
    max_model_len = cfg.max_model_len or model.max_context_tokens
    if max_model_len > model.max_context_tokens:
        raise ValueError(
            f"max_model_len ({max_model_len}) exceeds {model.name}'s max context ({model.max_context_tokens})"
        )
    profile = resolve_profile(cfg, base_dir)
    plan = memory_plan(cfg, model, hardware, profile)
    num_blocks = cfg.kv_cache.num_blocks if plan is None else plan.num_blocks
    if stream is None:
        stream = generate(cfg.workload, cfg.seed, base_dir)

    env = simpy.Environment()
    recorder = MetricsRecorder(record_steps=record_steps)
    policy_cls = policies.BATCH_POLICIES.get(cfg.policy.kind)
    cost_cls = COST_MODELS.get(cfg.cost_model.kind)
    cost_kwargs = {} if profile is None else {"profile": profile}
    replicas = [
        Replica(
            env,
            0,
            policy_cls(cfg.policy),
            cost_cls(cfg.cost_model, model, hardware, tp, **cost_kwargs),
            BlockManager(num_blocks, cfg.kv_cache.block_size),
            recorder,
            max_model_len,
            check_invariants=check_invariants,
        )
    ]
    resolved = cfg.model_dump(mode="json") | {
        "model": model.model_dump(mode="json"),
        "hardware": hardware.model_dump(mode="json"),
        "max_model_len": max_model_len,
        "kv_cache": cfg.kv_cache.model_dump(mode="json") | {"num_blocks": num_blocks},
    }
    return Simulation(
        env,
        replicas,
        stream,
        recorder,
        resolved,
        cfg.slo.model_dump(),
        cfg.client.ingest_delay_s,
        cfg.client.stream_delay_s,
    )
