"""The scenario: everything one simulation run needs, validated at the edge.

Frozen pydantic models, ``extra="forbid"``; validators reject, never repair. The config
never touches disk: preset names and file paths are resolved by the composition root
(``simulator.build``), and scenario files are read by ``simulator.scenario``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator, model_validator

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
    pp: int = Field(1, ge=1, description="Pipeline-parallel stages, each a share of the layers on its own tp GPUs.")


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
    prefix_caching: bool = Field(
        False, description="Reuse the KV of cached prompt prefixes (blocks identified by the workload's hashes)."
    )
    host_cache_bytes: float = Field(
        0.0,
        ge=0,
        description="With prefix caching: host memory per GPU for a second tier that keeps evicted "
        "prefix blocks and reloads them over the host link.",
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


class KvTransferConfig(_Frozen):
    """The link that carries a prompt's KV from a prefill replica to a decode replica."""

    bandwidth_bytes_per_s: float | None = Field(
        None, gt=0, description="Per GPU, per direction; None: the prefill hardware's interconnect."
    )
    latency_s: float | None = Field(None, ge=0, description="Per transfer; None: the interconnect's latency.")
    layerwise_overlap: bool = Field(
        False, description="Send each layer's KV while later layers compute, hiding most of the transfer."
    )


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


def _optional_tagged(registry: Registry, value: Any) -> BaseModel | None:
    return None if value is None else validate_tagged(registry, value)


class ReplicaGroupConfig(_Frozen):
    """Identical replicas; fields left out take the scenario's top-level values."""

    name: str | None = Field(None, description="Label of the group in tables and reports.")
    count: int = Field(1, ge=1, description="Replicas in the group.")
    role: Literal["mixed", "prefill", "decode"] = Field(
        "mixed", description="mixed: prefill and decode; prefill / decode: one side of a disaggregated cluster."
    )
    model: str | ModelSpec | None = Field(None, description="Model of these replicas.")
    hardware: str | HardwareSpec | None = Field(None, description="GPU of these replicas.")
    parallelism: ParallelismConfig | None = Field(None, description="tp and pp of each replica.")
    policy: SerializeAsAny[BaseModel] | None = Field(None, description="Batch policy of each replica.")
    cost_model: SerializeAsAny[BaseModel] | None = Field(None, description="Cost model of these replicas.")
    kv_cache: KvCacheConfig | None = Field(None, description="KV-cache settings of each replica.")

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> BaseModel | None:
        return _optional_tagged(policies.BATCH_POLICIES, value)

    @field_validator("cost_model", mode="before")
    @classmethod
    def _cost_model(cls, value: Any) -> BaseModel | None:
        return _optional_tagged(COST_MODELS, value)


# Scenario fields that hold ``{kind: NAME, ...params}`` and may be written as a bare NAME.
TAGGED_FIELDS = frozenset({"policy", "cost_model", "router"})


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
    replicas: int = Field(1, ge=1, description="Identical replicas behind the router (or give groups).")
    groups: list[ReplicaGroupConfig] | None = Field(
        None, min_length=1, description="Replica groups (heterogeneous, or prefill and decode pools)."
    )
    router: SerializeAsAny[BaseModel] = Field(
        default_factory=lambda: policies.ROUTERS.entry("round_robin").params(),
        description="Router: {kind: NAME, ...its parameters}.",
    )
    kv_transfer: KvTransferConfig = Field(
        default_factory=KvTransferConfig, description="Prefill-to-decode KV transfer (disaggregated groups)."
    )
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

    @field_validator("router", mode="before")
    @classmethod
    def _router(cls, value: Any) -> BaseModel:
        return validate_tagged(policies.ROUTERS, value)

    @model_validator(mode="after")
    def _check_cluster(self) -> ScenarioConfig:
        if self.groups is None:
            return self
        if self.replicas != 1:
            raise ValueError("give replicas or groups, not both (each group has its own count)")
        roles = {g.role for g in self.groups}
        if roles & {"prefill", "decode"}:
            if roles != {"prefill", "decode"}:
                raise ValueError(
                    "a disaggregated cluster needs prefill and decode groups and no mixed ones "
                    f"(got roles: {', '.join(sorted(roles))})"
                )
            for g in self.groups:
                kind = (g.policy or self.policy).kind
                if not getattr(policies.BATCH_POLICIES.get(kind), "supports_kv_transfer", True):
                    raise ValueError(f"policy {kind} cannot serve a {g.role} group of a disaggregated cluster")
        return self

    @model_validator(mode="after")
    def _check_prefix_caching(self) -> ScenarioConfig:
        for g in self.replica_groups():
            kind = (g.policy or self.policy).kind
            if (g.kv_cache or self.kv_cache).prefix_caching and not getattr(
                policies.BATCH_POLICIES.get(kind), "supports_prefix_caching", True
            ):
                raise ValueError(f"policy {kind} does not reuse cached prefixes; turn kv_cache.prefix_caching off")
        return self

    def replica_groups(self) -> list[ReplicaGroupConfig]:
        """The groups, or one mixed group of ``replicas`` replicas."""
        return self.groups if self.groups is not None else [ReplicaGroupConfig(count=self.replicas)]
