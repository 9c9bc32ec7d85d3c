"""Model and hardware specifications: what the cost model and the KV accounting read.

Both are frozen pydantic models; their derived figures (parameter count, KV bytes per
token, weight bytes) are computed from the fields, never stored.

Every figure is finite, and bounded on the side where an absurd value breaks the
arithmetic: shapes at most 2**24 (their products stay exact in int64 and float64), a
context at most ``MAX_TOKENS``; device memory at most 1 PiB (block counts stay countable);
compute and bandwidths at least a floor below any real device (step and transfer times
stay finite and within the simulated year); latencies at most a second.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from workloads.validators import FINITE, MAX_TOKENS, TOKEN_LIMIT, at_least, at_most

# The widest shape accepted: 64 times the largest vocabulary of a served model today (Gemma's 262,144).
MAX_DIM = 2**24
MAX_MEMORY_BYTES = float(2**50)
MIN_FLOPS_PER_S = 1e9
MIN_MEMORY_BANDWIDTH_BYTES_PER_S = 1e9
MIN_LINK_BANDWIDTH_BYTES_PER_S = 1e6
MAX_LATENCY_S = 1.0

PositiveInt = Annotated[
    int, Field(ge=1), at_most(MAX_DIM, f"must be at most {MAX_DIM:,} (2**24, 64 times today's widest shapes)")
]
ContextTokens = Annotated[
    int, Field(ge=1), at_most(MAX_TOKENS, f"must be at most {MAX_TOKENS:,} tokens ({TOKEN_LIMIT})")
]
MemoryBytes = Annotated[
    float,
    at_most(MAX_MEMORY_BYTES, "must be at most 2**50 bytes (1 PiB, thousands of times any device's memory)"),
]
FlopsPerS = Annotated[
    float,
    Field(gt=0),
    at_least(MIN_FLOPS_PER_S, "must be at least 1e9 FLOP/s (1 GFLOP/s, below any CPU core)"),
]
MemoryBandwidth = Annotated[
    float,
    Field(gt=0),
    at_least(MIN_MEMORY_BANDWIDTH_BYTES_PER_S, "must be at least 1e9 bytes/s (1 GB/s, below any DRAM)"),
]
LinkBandwidth = Annotated[
    float,
    Field(gt=0),
    at_least(MIN_LINK_BANDWIDTH_BYTES_PER_S, "must be at least 1e6 bytes/s (1 MB/s, below any network link)"),
]
LatencyS = Annotated[
    float, Field(ge=0), at_most(MAX_LATENCY_S, "must be at most 1 s (a link's latency is microseconds)")
]

# Bytes per weight of the layers FP8 quantization leaves in the 16-bit model dtype: the
# embedding and the LM head (vLLM quantizes the decoder's linear layers only).
UNQUANTIZED_WEIGHT_BYTES = 2.0


class ModelSpec(BaseModel):
    """A decoder-only transformer's shapes, enough to count FLOPs, bytes and KV memory."""

    model_config = FINITE

    name: str = Field(description="Label used in reports and tables.")
    num_layers: PositiveInt = Field(description="Decoder layers.")
    hidden_size: PositiveInt = Field(description="Model width d_model.")
    num_attention_heads: PositiveInt = Field(description="Query heads.")
    num_kv_heads: PositiveInt = Field(description="Key/value heads (GQA/MQA when fewer than query heads).")
    head_dim: PositiveInt = Field(description="Width of one attention head.")
    intermediate_size: PositiveInt = Field(description="MLP inner width (per expert for MoE).")
    gated_mlp: bool = Field(True, description="SwiGLU-style gate+up projections (3 matrices) or a plain 2-matrix MLP.")
    num_experts: PositiveInt = Field(1, description="MoE experts per layer; 1 for a dense model.")
    num_experts_per_token: PositiveInt = Field(1, description="MoE top-k experts each token is routed to.")
    vocab_size: PositiveInt = Field(description="Vocabulary size (embedding and LM head rows).")
    tie_word_embeddings: bool = Field(False, description="LM head shares the embedding matrix.")
    qkv_bias: bool = Field(False, description="Q/K/V projections carry a bias (Qwen2).")
    weight_bytes: float = Field(2.0, gt=0, le=8, description="Bytes per weight (2 for bf16/fp16, 1 for fp8).")
    quantization: Literal["fp8"] | None = Field(
        None,
        description="fp8: the linear layers' weights and activations in FP8 (vLLM's --quantization fp8), "
        "GEMMs at the FP8 rate where the GPU has FP8 tensor cores; needs weight_bytes 1. None: unquantized.",
    )
    kv_cache_bytes: float = Field(2.0, gt=0, le=8, description="Bytes per cached K or V element.")
    max_context_tokens: ContextTokens = Field(description="Maximum sequence length (prompt plus output).")

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelSpec:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.quantization == "fp8" and self.weight_bytes != 1:
            raise ValueError(
                f"quantization 'fp8' stores weights in 1 byte: weight_bytes must be 1 (got {self.weight_bytes:g})"
            )
        if self.num_experts_per_token > self.num_experts:
            raise ValueError(
                f"num_experts_per_token ({self.num_experts_per_token}) exceeds num_experts ({self.num_experts})"
            )
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def q_size(self) -> int:
        """Width of the query projection output."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of the key (or value) projection output."""
        return self.num_kv_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def attention_params_per_layer(self) -> int:
        h = self.hidden_size
        params = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        if self.qkv_bias:
            params += self.q_size + 2 * self.kv_size
        return params

    def expert_params(self) -> int:
        """Weights of one expert's MLP (of the only MLP for a dense model)."""
        return self.mlp_matrices * self.hidden_size * self.intermediate_size

    def mlp_params_per_layer(self) -> int:
        params = self.num_experts * self.expert_params()
        if self.is_moe:
            params += self.hidden_size * self.num_experts  # router
        return params

    def num_params(self) -> int:
        """Total parameters: embeddings, decoder layers (with 2 norms each), final norm, LM head."""
        h, v = self.hidden_size, self.vocab_size
        per_layer = self.attention_params_per_layer() + self.mlp_params_per_layer() + 2 * h
        lm_head = 0 if self.tie_word_embeddings else v * h
        return v * h + self.num_layers * per_layer + h + lm_head

    def num_active_params(self) -> int:
        """Parameters touched per token (MoE counts top-k experts only)."""
        inactive = (self.num_experts - self.num_experts_per_token) * self.expert_params()
        return self.num_params() - self.num_layers * inactive

    @property
    def embedding_weight_bytes(self) -> float:
        """Bytes per weight of the embedding and LM head: 16-bit under fp8 quantization, else ``weight_bytes``."""
        return UNQUANTIZED_WEIGHT_BYTES if self.quantization is not None else self.weight_bytes

    def weight_bytes_total(self) -> float:
        """Bytes of all weights; quantized, the embedding and LM head count at ``embedding_weight_bytes``."""
        if self.quantization is None:
            return self.num_params() * self.weight_bytes
        embedding = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return (self.num_params() - embedding) * self.weight_bytes + embedding * self.embedding_weight_bytes

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads each of ``tp`` GPUs holds: split when tp divides them, else replicated."""
        return max(1, -(-self.num_kv_heads // tp))

    def check_tensor_parallel(self, tp: int) -> None:
        """Raise ValueError when ``tp`` cannot split the heads evenly."""
        if self.num_attention_heads % tp:
            raise ValueError(f"tp={tp} does not divide the {self.num_attention_heads} attention heads of {self.name}")
        if self.num_kv_heads % tp and tp % self.num_kv_heads:
            raise ValueError(
                f"tp={tp} neither divides nor is a multiple of the {self.num_kv_heads} KV heads of {self.name}"
            )

    def layers_per_stage(self, pp: int) -> list[int]:
        """Decoder layers of each of ``pp`` pipeline stages (the first stages take the remainder)."""
        if pp > self.num_layers:
            raise ValueError(f"pp={pp} exceeds the {self.num_layers} layers of {self.name}")
        base, extra = divmod(self.num_layers, pp)
        return [base + (1 if s < extra else 0) for s in range(pp)]

    def kv_bytes_per_token_per_gpu(self, tp: int, pp: int = 1) -> float:
        """KV bytes of one token on each GPU of a tp x pp replica (the fullest pipeline stage)."""
        layers = self.layers_per_stage(pp)[0]
        return 2 * layers * self.kv_heads_per_gpu(tp) * self.head_dim * self.kv_cache_bytes

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token occupies across all layers: 2 x layers x kv_heads x head_dim x bytes."""
        return 2 * self.num_layers * self.kv_size * self.kv_cache_bytes


class HardwareSpec(BaseModel):
    """One accelerator's datasheet figures (dense, no sparsity), in SI units."""

    model_config = FINITE

    name: str = Field(description="Label used in reports and tables.")
    flops_per_s: FlopsPerS = Field(description="Dense bf16/fp16 tensor FLOP/s at peak.")
    fp8_flops_per_s: FlopsPerS | None = Field(
        None,
        description="Dense FP8 tensor FLOP/s at peak; None: no FP8 tensor cores (FP8 weights run "
        "as weight-only kernels at the bf16 rate).",
    )
    memory_bytes: MemoryBytes = Field(gt=0, description="Device memory in bytes.")
    memory_bandwidth_bytes_per_s: MemoryBandwidth = Field(description="Peak device-memory bandwidth.")
    interconnect_bandwidth_bytes_per_s: LinkBandwidth = Field(
        description="Intra-node GPU-to-GPU bandwidth per direction (NVLink, Infinity Fabric or PCIe)."
    )
    interconnect_latency_s: LatencyS = Field(description="Latency of one interconnect hop.")
    host_link_bandwidth_bytes_per_s: LinkBandwidth = Field(
        description="Device-to-host bandwidth per direction (PCIe), used for swapping."
    )
    host_link_latency_s: LatencyS = Field(description="Latency of one host-link transfer.")
    price_per_hour_usd: float | None = Field(
        None, ge=0, description="Rental price of one device per hour, for cost figures."
    )
    silicon_tables: str | None = Field(
        None,
        description="Name of the measured kernel tables shipped for this GPU (simulator/cost/silicon/data); "
        "the default `silicon` cost model reads them. None: none shipped, the roofline is the default.",
    )
