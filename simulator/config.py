"""The scenario: everything one simulation run needs, validated at the edge.

Frozen pydantic models, ``extra="forbid"``; validators reject, never repair. The config
never touches disk: preset names and file paths are resolved by the composition root
(``simulator.build``), and scenario files are read by ``simulator.scenario``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator

import policies
from policies.batching.vllm import VllmParams
from policies.registry import Registry
from simulator.cost import COST_MODELS
from simulator.cost.roofline import RooflineParams
from simulator.specs import HardwareSpec, ModelSpec
from simulator.validation import format_validation_error
from workloads import WorkloadConfig


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParallelismConfig(_Frozen):
    """How one replica's model is split across GPUs."""

    tp: int = Field(1, ge=1, description="Tensor-parallel degree: GPUs sharing every layer.")


class KvCacheConfig(_Frozen):
    """Paged KV-cache settings of each replica."""

    block_size: int = Field(16, ge=1, description="Tokens per KV block.")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="Fraction of device memory the engine may use (vLLM's flag)."
    )
    reserve_bytes: float | None = Field(
        None,
        ge=0,
        description="Per-GPU memory for activations and runtime besides weights and KV; None "
        "estimates it from the model (calibration measures it).",
    )
    num_blocks: int | None = Field(
        None, ge=1, description="Set the KV capacity in blocks directly instead of computing it from memory."
    )
    swap_space_bytes: float = Field(
        4 * 2**30, ge=0, description="Host memory per GPU for KV swapped out by preemption (vLLM's swap_space)."
    )


class SloConfig(_Frozen):
    """Service-level objectives; a request meets them when every given bound holds (inclusive)."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token bound, ms.")
    tpot_ms: float | None = Field(None, gt=0, description="Time per output token bound, ms.")
    e2el_ms: float | None = Field(None, gt=0, description="End-to-end latency bound, ms.")

    @property
    def is_set(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))


class ClientConfig(_Frozen):
    """Delays between the benchmark client and the engine, so predictions match what a client measures."""

    ingest_delay_s: float = Field(0.0, ge=0, description="From the client sending a request to the engine queueing it.")
    stream_delay_s: float = Field(0.0, ge=0, description="From the engine emitting a token to the client receiving it.")


def validate_tagged(registry: Registry, value: Any) -> BaseModel:
    """Validate ``{kind: NAME, ...params}`` (or just ``NAME``) against the params model NAME registered."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict) or "kind" not in value:
        raise ValueError(f"expected a {registry.role} name or a mapping with 'kind' (one of {', '.join(registry)})")
    entry = registry.entry(value["kind"])
    try:
        return entry.params.model_validate(value)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc)) from None


class ScenarioConfig(_Frozen):
    """A deployment and a workload: the whole input of one simulation run."""

    seed: int = Field(0, ge=0, description="Seed of every random stream of the run.")
    model: str | ModelSpec = Field(
        "llama-3.1-8b", description="Model preset name, path to a config.json or spec .yaml, or a spec."
    )
    hardware: str | HardwareSpec = Field(
        "h100-sxm", description="Hardware preset name, path to a spec .yaml, or a spec."
    )
    parallelism: ParallelismConfig = Field(default_factory=ParallelismConfig, description="Model split.")
    max_model_len: int | None = Field(
        None, ge=1, description="Longest sequence (prompt + output) served; None: the model's max context."
    )
    policy: SerializeAsAny[BaseModel] = Field(
        default_factory=VllmParams, description="Batch policy: {kind: NAME, ...its parameters}."
    )
    cost_model: SerializeAsAny[BaseModel] = Field(
        default_factory=RooflineParams, description="Cost model: {kind: NAME, ...its parameters}."
    )
    kv_cache: KvCacheConfig = Field(default_factory=KvCacheConfig, description="Paged KV cache.")
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig, description="Requests to simulate.")
    slo: SloConfig = Field(default_factory=SloConfig, description="SLOs for goodput.")
    client: ClientConfig = Field(default_factory=ClientConfig, description="Client-side delays.")

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> BaseModel:
        return validate_tagged(policies.BATCH_POLICIES, value)

    @field_validator("cost_model", mode="before")
    @classmethod
    def _cost_model(cls, value: Any) -> BaseModel:
        return validate_tagged(COST_MODELS, value)
