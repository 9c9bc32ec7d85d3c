"""The scenario: everything one simulation run needs, validated at the edge.

Frozen pydantic models, ``extra="forbid"``; validators reject, never repair. The config
never touches disk: preset names and file paths are resolved by the composition root
(``simulator.build``), and scenario files are read by ``simulator.config.scenario``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SerializeAsAny, ValidationError, field_validator, model_validator

import policies
from policies.batching.vllm import VllmParams
from policies.registry import Registry
from simulator.config.client_defaults import INGEST_DELAY_S, TOKENIZE_S_PER_TOKEN
from simulator.config.errors import format_validation_error
from simulator.config.precision import QuantizationName
from simulator.config.specs import (
    MAX_MEMORY_BYTES,
    HardwareSpec,
    LatencyS,
    LinkBandwidth,
    ModelSpec,
)
from simulator.cost import COST_MODELS
from simulator.cost.silicon import SiliconParams
from workloads import WorkloadConfig
from workloads.booleans import NoBoolNumbers, validate_refusing_bools
from workloads.validators import (
    FINITE,
    HORIZON,
    MAX_SECONDS,
    MAX_TOKENS,
    Seconds,
    Tokens,
    at_most,
    non_finite_paths,
)

# KV blocks of one replica: far above any real device (an H200 holds about 10**6 blocks of a 1B model);
# the prefix cache keeps about 50 bytes of bookkeeping per block, 5 GB at the cap.
MAX_KV_BLOCKS = 100_000_000
# Replicas of one scenario (or of one group): each is a SimPy process with its own engines.
MAX_REPLICAS = 10_000
# The slowest tokenizer accepted, seconds per token: the longest prompt still tokenises within a year.
MAX_TOKENIZE_S_PER_TOKEN = MAX_SECONDS / MAX_TOKENS

Milliseconds = Annotated[
    float, Field(gt=0), at_most(MAX_SECONDS * 1e3, f"must be at most {MAX_SECONDS * 1e3:,.0f} ms ({HORIZON})")
]
HostBytes = Annotated[float, Field(ge=0), at_most(MAX_MEMORY_BYTES, "must be at most 2**50 bytes (1 PiB)")]
TokenizeSPerToken = Annotated[
    float,
    Field(ge=0),
    at_most(
        MAX_TOKENIZE_S_PER_TOKEN,
        f"must be at most {MAX_TOKENIZE_S_PER_TOKEN:.3g} s per token (the longest prompt, {MAX_TOKENS:,} tokens, "
        "tokenised within a year)",
    ),
]
Replicas = Annotated[
    int, Field(ge=1), at_most(MAX_REPLICAS, f"must be at most {MAX_REPLICAS:,} (each replica is a process)")
]


class _Frozen(BaseModel):
    model_config = FINITE


class ParallelismConfig(_Frozen):
    """How one replica's model is split across GPUs."""

    tp: int = Field(1, ge=1, description="Tensor-parallel degree: GPUs sharing every layer.")
    pp: int = Field(1, ge=1, description="Pipeline-parallel stages, each a share of the layers on its own tp GPUs.")
    ep: int = Field(
        1,
        ge=1,
        description="Expert-parallel degree (MoE): a stage's tp GPUs hold the routed experts as ep groups of "
        "tp/ep GPUs, each group E/ep whole experts split tp/ep ways (ep = tp: vLLM's --enable-expert-parallel "
        "without data parallelism); ep must divide tp and the routed experts. GPUs per replica stay tp x pp.",
    )
    dp_attention: int = Field(
        1,
        ge=1,
        description="Attention data parallelism: the replica's tp GPUs form dp_attention ranks of tp/dp_attention "
        "GPUs, each with its own scheduler, batch and KV cache, running attention for its own requests (attention "
        "weights and the embedding split tp/dp_attention ways, so MLA's unsplit latent KV is held once per "
        "request, not on every GPU), while the MLP/MoE layers process every rank's tokens together over all tp "
        "GPUs; the ranks step in lockstep, an idle one running an empty batch. SGLang's --enable-dp-attention "
        "--dp-size N, TensorRT-LLM's enable_attention_dp (N = tp), vLLM's --data-parallel-size N with "
        "--enable-expert-parallel (all priced in SGLang's layout: dense MLPs, shared experts and LM head over all "
        "tp). 1: off. Must divide tp; pp must be 1.",
    )

    @model_validator(mode="after")
    def _check_split(self) -> ParallelismConfig:
        if self.tp % self.ep:
            raise ValueError(
                f"ep ({self.ep}) must divide tp ({self.tp}): the experts are spread over a stage's tp GPUs"
            )
        if self.tp % self.dp_attention:
            raise ValueError(
                f"dp_attention ({self.dp_attention}) must divide tp ({self.tp}): each attention-DP rank runs on "
                "tp/dp_attention GPUs"
            )
        if self.dp_attention > 1 and self.pp > 1:
            raise ValueError(
                f"dp_attention ({self.dp_attention}) is modelled without pipeline parallelism: set pp to 1"
            )
        return self


class KvCacheConfig(_Frozen):
    """Paged KV-cache settings of each replica."""

    block_size: Tokens = Field(16, description="Tokens per KV block (at most max_model_len).")
    dtype: Literal["auto", "bfloat16", "float16", "fp8"] = Field(
        "auto",
        description="Cached K/V dtype (vLLM's --kv-cache-dtype): auto keeps the model's kv_cache_bytes (its "
        "weights' dtype, or FP8 where a ModelOpt checkpoint declares an FP8 cache, as the engines' auto does; "
        "under the sglang policy a DeepSeek-sparse-attention model's is FP8 on GPUs of compute capability 10 and "
        "above and bf16 below, as SGLang resolves auto); bfloat16/float16 store 2 bytes, fp8 1 byte (twice the "
        "tokens in the same memory).",
    )
    mamba_ssm_dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="A hybrid linear-attention model's recurrent-state dtype (SGLang's and vLLM's "
        "--mamba-ssm-dtype): auto keeps the model's linear_state_bytes (its config's mamba_ssm_dtype, float32 by "
        "default). Read only for a model with linear-attention layers.",
    )
    gpu_memory_utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Fraction of device memory the engine may use for weights, activations and KV (vLLM's "
        "--gpu-memory-utilization; read by the vLLM-like policies, not by sglang or trtllm).",
    )
    mem_fraction_static: float | None = Field(
        None,
        gt=0,
        le=1,
        description="SGLang's --mem-fraction-static: fraction of device memory for weights plus KV (the rest "
        "holds activations and CUDA graphs); None: SGLang's default from the GPU's memory, chunked_prefill_size, "
        "tp x pp and the CUDA graphs (0.83 on H100, 0.90 on H200, 0.85 on B200 at its defaults). Read by the "
        "sglang policy only.",
    )
    free_gpu_memory_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="TensorRT-LLM's kv_cache_config free_gpu_memory_fraction (trtllm-serve "
        "--kv_cache_free_gpu_memory_fraction): fraction of the memory left free after the weights and a "
        "profiling step that the KV cache takes; None: TensorRT-LLM's 0.9. Read by the trtllm policy only.",
    )
    reserve_bytes: HostBytes | None = Field(
        None,
        description="Per-GPU memory for activations and runtime besides weights and KV (vLLM and TensorRT-LLM "
        "subtract it; SGLang's mem_fraction_static leaves it out instead); None estimates it from the model "
        "(calibration measures it).",
    )
    num_blocks: int | None = Field(
        None,
        ge=1,
        le=MAX_KV_BLOCKS,
        description="Set the KV capacity in blocks directly instead of computing it from memory.",
    )
    swap_space_bytes: HostBytes = Field(
        4 * 2**30, description="Host memory per GPU for KV swapped out by preemption (vLLM's swap_space)."
    )
    prefix_caching: bool = Field(
        False, description="Reuse the KV of cached prompt prefixes (blocks identified by the workload's hashes)."
    )
    host_cache_bytes: HostBytes = Field(
        0.0,
        description="With prefix caching: host memory per GPU for a second tier that keeps evicted "
        "prefix blocks and reloads them over the host link.",
    )

    @model_validator(mode="after")
    def _settings_that_apply(self) -> KvCacheConfig:
        """Refuse a setting the rest make unread: memory settings beside ``num_blocks`` (which sets the capacity
        itself), a host tier without prefix caching (it keeps evicted prefixes)."""
        if self.num_blocks is not None:
            default = type(self).model_fields["gpu_memory_utilization"].default
            for name in ("mem_fraction_static", "free_gpu_memory_fraction", "reserve_bytes"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name}: kv_cache.num_blocks sets the KV capacity itself, so the memory settings are not "
                        "read; give one or the other"
                    )
            if self.gpu_memory_utilization != default:
                raise ValueError(
                    "gpu_memory_utilization: kv_cache.num_blocks sets the KV capacity itself, so the memory settings "
                    "are not read; give one or the other"
                )
        if self.host_cache_bytes > 0 and not self.prefix_caching:
            raise ValueError(
                "host_cache_bytes: the host tier keeps the prefix blocks the GPU evicts, which needs prefix caching; "
                "set kv_cache.prefix_caching, or leave host_cache_bytes at 0"
            )
        return self


# The memory flag each engine's KV capacity reads (simulator/kv/memory.py); the other policies are vLLM-like.
_ENGINE_MEMORY_FLAG = {"sglang": "mem_fraction_static", "trtllm": "free_gpu_memory_fraction"}
_FLAG_OWNER = {"mem_fraction_static": ("sglang", "SGLang"), "free_gpu_memory_fraction": ("trtllm", "TensorRT-LLM")}


def kv_memory_flag_problem(kv: KvCacheConfig, policy_kind: str) -> str | None:
    """One line when ``kv`` sets a memory setting the policy's engine does not read, else None.

    ``gpu_memory_utilization`` counts as set for SGLang or TensorRT-LLM when it differs from its default (a
    config written back in full carries the default); ``reserve_bytes`` is refused for SGLang, whose
    ``mem_fraction_static`` leaves the activations out of its pool instead.
    """
    engine = policies.batching.traits_of(policy_kind).engine
    reads = _ENGINE_MEMORY_FLAG.get(engine, "gpu_memory_utilization")
    for flag, (owner, name) in _FLAG_OWNER.items():
        if getattr(kv, flag) is not None and engine != owner:
            return f"kv_cache.{flag} is {name}'s flag; policy {policy_kind} reads {reads}"
    default = KvCacheConfig.model_fields["gpu_memory_utilization"].default
    if reads != "gpu_memory_utilization" and kv.gpu_memory_utilization != default:
        return f"kv_cache.gpu_memory_utilization is vLLM's flag; policy {policy_kind} reads {reads}"
    if engine == "sglang" and kv.reserve_bytes is not None:
        return (
            f"kv_cache.reserve_bytes is not read by policy {policy_kind}: SGLang's KV cache is memory x "
            "mem_fraction_static less the weights; set kv_cache.mem_fraction_static"
        )
    return None


class SloConfig(_Frozen):
    """Service-level objectives; a request meets them when every given bound holds (inclusive)."""

    ttft_ms: Milliseconds | None = Field(None, description="Time to first token bound, ms.")
    tpot_ms: Milliseconds | None = Field(None, description="Time per output token bound, ms.")
    e2el_ms: Milliseconds | None = Field(None, description="End-to-end latency bound, ms.")

    @property
    def is_set(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))


class ClientConfig(_Frozen):
    """Delays between the benchmark client and the engine, so predictions match what a client measures.

    A request reaches the engine's queue ``ingest_delay_s + tokenize_s_per_token x prompt
    tokens`` after the client sends it (HTTP handling, validation, chat template, hand-over to
    the engine; then tokenising the prompt), and a token reaches the client ``stream_delay_s``
    after the engine emits it. Defaults, each measured on its own:

    - ``ingest_delay_s`` 4 ms: vLLM served online (its OpenAI-compatible server) over the same
      vLLM run offline, same model, prompts (128 tokens) and hardware: mean TTFT 235 vs 231 ms,
      "+4 ms, acceptable from HTTP server + ZMQ latency" (tenstorrent/tt-inference-server#190,
      Llama-3.3-70B, batch 32, 2025-05-08). It is the API server's request path and the first
      token's way back together (it sits here because TTFT and E2EL shift alike either way);
      whether it includes tokenising the 128 tokens (0.14 ms at the rate below) is not said.
    - ``tokenize_s_per_token`` 1.1 us: HuggingFace ``tokenizers`` (what vLLM's API server runs)
      takes 1.1 s for a 4 MB document of about 1M tokens encoded as one sequence (Charles Xu, "3.3x
      Faster HuggingFace Tokenizers for Single Sequence", charlesxu.io/parallel-tokenizer, 2025);
      the same library's Llama-3 tokenizer encodes a 6.5 MB text sequentially in 1.82 s
      (huggingface/tokenizers#1967), about the same per token. vLLM tokenises on one thread
      (vllm-project/vllm#25301), which this per-request delay does not queue: past about 0.9M
      prompt tokens/s the real server falls behind it.
    - ``stream_delay_s`` 0: no measurement of the return path (detokenising, SSE streaming) on
      its own was found; the 4 ms above already includes it once for the first token. Inter-token
      gaps at the client are the engine's.
    """

    ingest_delay_s: Seconds = Field(
        INGEST_DELAY_S,
        description="From the client sending a request to the engine queueing it, besides tokenising (vLLM's "
        "API server: tenstorrent/tt-inference-server#190).",
    )
    tokenize_s_per_token: TokenizeSPerToken = Field(
        TOKENIZE_S_PER_TOKEN,
        description="Tokenising the prompt, seconds per prompt token, added to the ingest delay (HuggingFace "
        "tokenizers, one sequence: charlesxu.io/parallel-tokenizer).",
    )
    stream_delay_s: Seconds = Field(
        0.0,
        description="From the engine emitting a token to the client receiving it (0: not measured on its own).",
    )


class KvTransferConfig(_Frozen):
    """The link that carries a prompt's KV from a prefill replica to a decode replica."""

    bandwidth_bytes_per_s: LinkBandwidth | None = Field(
        None, description="Per GPU, per direction; None: the prefill hardware's interconnect."
    )
    latency_s: LatencyS | None = Field(None, description="Per transfer; None: the interconnect's latency.")
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
    if entry.params.model_config.get("allow_inf_nan", True):  # params models that do not refuse inf/nan themselves
        for loc, number in non_finite_paths(value)[:1]:
            where = ".".join(str(part) for part in loc)
            raise ValueError(f"{where}: Input should be a finite number (got {number!r})")
    try:
        return validate_refusing_bools(entry.params.__name__, value, entry.params.model_validate)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc)) from None


def _optional_tagged(registry: Registry, value: Any) -> BaseModel | None:
    return None if value is None else validate_tagged(registry, value)


def _spec(model: type[BaseModel], value: Any) -> Any:
    """A spec written inline (a mapping) validated as ``model``, so that its errors name its fields
    (``hardware.memory_bytes``) and not also the other member of ``str | spec``."""
    return model.model_validate(value) if isinstance(value, dict) else value


def _ref(spec: str | BaseModel) -> str:
    """A model or hardware as its reference: the preset, path or id, or an inline spec's name."""
    return spec if isinstance(spec, str) else str(getattr(spec, "name", spec))


class SpeculativeConfig(_Frozen):
    """Speculative decoding (vLLM's ``--speculative-config``): each step a draft proposes ``num_tokens``
    tokens per decoding request, the model verifies them and the ``num_tokens + 1`` positions in one
    pass, and the request keeps the accepted prefix plus one token of its own."""

    method: Literal["draft", "mtp"] = Field(
        description="draft: a separate draft model (draft_model) proposes, one decode step per token; "
        "mtp: the model's multi-token-prediction module (one decoder layer of the model's shapes with its "
        "embedding and LM head, as DeepSeek-V3's) proposes."
    )
    num_tokens: int = Field(ge=1, le=16, description="Tokens proposed per step (K; vLLM's num_speculative_tokens).")
    acceptance_rate: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Chance each proposed token is accepted, given the ones before it were (independent tokens: "
        "accepting j of K has probability a^j (1 - a), all K a^K). Give this or acceptance_lengths.",
    )
    acceptance_lengths: tuple[Annotated[float, Field(ge=0)], ...] | None = Field(
        None,
        description="Measured distribution of accepted proposals per step: K + 1 probabilities, of accepting "
        "0, 1, ..., K (vLLM's spec-decode acceptance counts per position give it); they must sum to 1.",
    )
    draft_model: str | ModelSpec | None = Field(
        None, description="method draft: the draft model (a preset name, config.json or spec); none for mtp."
    )

    @field_validator("draft_model", mode="before")
    @classmethod
    def _draft(cls, value: Any) -> Any:
        return None if value is None else _spec(ModelSpec, value)

    @model_validator(mode="after")
    def _check(self) -> SpeculativeConfig:
        if (self.acceptance_rate is None) == (self.acceptance_lengths is None):
            raise ValueError("give one of acceptance_rate or acceptance_lengths")
        if self.acceptance_lengths is not None:
            if len(self.acceptance_lengths) != self.num_tokens + 1:
                raise ValueError(
                    f"acceptance_lengths has {len(self.acceptance_lengths)} probabilities; num_tokens "
                    f"{self.num_tokens} needs {self.num_tokens + 1} (accepting 0 to {self.num_tokens})"
                )
            if abs(sum(self.acceptance_lengths) - 1) > 1e-6:
                raise ValueError(f"acceptance_lengths sum to {sum(self.acceptance_lengths):g}, not 1")
        if self.method == "draft" and self.draft_model is None:
            raise ValueError("method draft needs draft_model (a preset name, config.json or spec)")
        if self.method == "mtp" and self.draft_model is not None:
            raise ValueError("method mtp uses the model's own MTP module: remove draft_model")
        return self


class ReplicaGroupConfig(_Frozen):
    """Identical replicas; fields left out take the scenario's top-level values. A group's kv_cache, parallelism,
    policy or cost_model replaces the top-level one whole (a top-level field it would drop is refused)."""

    name: str | None = Field(None, description="Label of the group in tables and reports.")
    count: Replicas = Field(1, description="Replicas in the group.")
    role: Literal["mixed", "prefill", "decode"] = Field(
        "mixed", description="mixed: prefill and decode; prefill / decode: one side of a disaggregated cluster."
    )
    model: str | ModelSpec | None = Field(None, description="Model of these replicas.")
    hardware: str | HardwareSpec | None = Field(None, description="GPU of these replicas.")
    quantization: QuantizationName | None = Field(
        None, description="Quantization of these replicas; None: the scenario's."
    )
    parallelism: ParallelismConfig | None = Field(None, description="tp and pp of each replica.")
    policy: SerializeAsAny[BaseModel] | None = Field(None, description="Batch policy of each replica.")
    cost_model: SerializeAsAny[BaseModel] | None = Field(None, description="Cost model of these replicas.")
    kv_cache: KvCacheConfig | None = Field(None, description="KV-cache settings of each replica.")

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        return _spec(ModelSpec, value)

    @field_validator("hardware", mode="before")
    @classmethod
    def _hardware(cls, value: Any) -> Any:
        return _spec(HardwareSpec, value)

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


class ScenarioConfig(_Frozen, NoBoolNumbers):
    """A deployment and a workload: the whole input of one simulation run."""

    seed: int = Field(0, ge=0, description="Seed of every random stream of the run.")
    model: str | ModelSpec = Field(
        "llama-3.1-8b",
        description="Model preset name, path to a Hugging Face model folder, a config.json or spec .yaml, or a spec.",
    )
    hardware: str | HardwareSpec = Field(
        "h100-sxm", description="Hardware preset name, path to a spec .yaml, or a spec."
    )
    quantization: QuantizationName | None = Field(
        None,
        description="Serve the model's linear layers quantized (simulator/config/precision.py): fp8 (vLLM's "
        "--quantization fp8: 1-byte weights, per-tensor scales, GEMMs at the GPU's FP8 rate), fp8_block (128 x 128 "
        "block scales, DeepSeek-V3's checkpoints), nvfp4 (0.5625-byte weights, FP4 tensor cores on Blackwell, "
        "weight-only elsewhere) or mxfp4 (0.53125-byte weights, 16-bit activations). None: as the model spec says.",
    )
    parallelism: ParallelismConfig = Field(default_factory=ParallelismConfig, description="Model split.")
    max_model_len: Tokens | None = Field(
        None, description="Longest sequence (prompt + output) served; None: the model's max context."
    )
    policy: SerializeAsAny[BaseModel] = Field(
        default_factory=VllmParams, description="Batch policy: {kind: NAME, ...its parameters}."
    )
    cost_model: SerializeAsAny[BaseModel] = Field(
        default_factory=SiliconParams,
        description="Cost model: {kind: NAME, ...its parameters}. Default: silicon (measured kernel tables; "
        "the roofline for hardware without shipped tables).",
    )
    kv_cache: KvCacheConfig = Field(default_factory=KvCacheConfig, description="Paged KV cache.")
    replicas: Replicas = Field(1, description="Identical replicas behind the router (or give groups).")
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
    speculative: SpeculativeConfig | None = Field(
        None, description="Speculative decoding on every replica ({method, num_tokens, acceptance_*}); None: off."
    )

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        return _spec(ModelSpec, value)

    @field_validator("hardware", mode="before")
    @classmethod
    def _hardware(cls, value: Any) -> Any:
        return _spec(HardwareSpec, value)

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
        disaggregated = self.groups is not None and any(g.role != "mixed" for g in self.groups)
        if not disaggregated and self.kv_transfer != KvTransferConfig():  # (a full dump carries the defaults)
            raise ValueError(
                "kv_transfer: it is the link between prefill and decode groups, and this scenario has none (give "
                "groups with role prefill and decode, or leave kv_transfer out)"
            )
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
                if not policies.BATCH_POLICIES.entry(kind).traits.kv_transfer:
                    raise ValueError(f"policy {kind} cannot serve a {g.role} group of a disaggregated cluster")
            # a decode group continues the prompts its prefill groups computed: the same model, the same KV layout
            first = self.groups[0]
            for i, g in enumerate(self.groups[1:], start=1):
                if _ref(g.model or self.model) != _ref(first.model or self.model):
                    raise ValueError(
                        f"groups[{i}].model: a disaggregated cluster serves one model (groups[0] serves "
                        f"{_ref(first.model or self.model)}, groups[{i}] {_ref(g.model or self.model)})"
                    )
                dtype, first_dtype = (g.kv_cache or self.kv_cache).dtype, (first.kv_cache or self.kv_cache).dtype
                if dtype != first_dtype:
                    raise ValueError(
                        f"groups[{i}].kv_cache.dtype: the KV a prefill group sends is the KV its decode group stores "
                        f"(groups[0] caches {first_dtype}, groups[{i}] {dtype})"
                    )
        self._check_groups_keep_the_top_level()
        return self

    def _check_groups_keep_the_top_level(self) -> None:
        """A group's ``kv_cache``, ``parallelism``, ``policy`` or ``cost_model`` replaces the top-level one whole: a
        field set at the top level that the group's leaves out would silently not apply to it, so it is refused."""
        assert self.groups is not None
        for i, g in enumerate(self.groups):
            for name in ("kv_cache", "parallelism", "policy", "cost_model"):
                own: BaseModel | None = getattr(g, name)
                top: BaseModel = getattr(self, name)
                if own is None or getattr(own, "kind", None) != getattr(top, "kind", None):
                    continue  # the top level's applies, or the group runs another kind with its own parameters
                lost = sorted(
                    field
                    for field in top.model_fields_set - own.model_fields_set
                    if field != "kind" and getattr(top, field) != getattr(own, field)
                )
                if lost:
                    field = lost[0]
                    raise ValueError(
                        f"groups[{i}].{name} replaces the top-level {name} whole, so {name}.{field} "
                        f"({getattr(top, field)!r}) does not reach it: set {field} in groups[{i}].{name} too, or "
                        "leave it out of the top level"
                    )

    @model_validator(mode="after")
    def _check_prefix_caching(self) -> ScenarioConfig:
        for g in self.replica_groups():
            kind = (g.policy or self.policy).kind
            reuses = policies.BATCH_POLICIES.entry(kind).traits.prefix_caching
            if (g.kv_cache or self.kv_cache).prefix_caching and not reuses:
                raise ValueError(f"policy {kind} does not reuse cached prefixes; turn kv_cache.prefix_caching off")
        return self

    @model_validator(mode="after")
    def _check_kv_memory_flags(self) -> ScenarioConfig:
        for g in self.replica_groups():
            kind = (g.policy or self.policy).kind
            problem = kv_memory_flag_problem(g.kv_cache or self.kv_cache, kind)
            if problem is not None:
                raise ValueError(problem)
        return self

    def replica_groups(self) -> list[ReplicaGroupConfig]:
        """The groups, or one mixed group of ``replicas`` replicas."""
        return self.groups if self.groups is not None else [ReplicaGroupConfig(count=self.replicas)]
