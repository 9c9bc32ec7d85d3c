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

from typing import Annotated, Any

from pydantic import Field, field_validator, model_serializer, model_validator

from simulator.config.precision import QUANTIZATIONS, QuantizationName
from workloads.booleans import NoBoolNumbers
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


class ModelSpec(NoBoolNumbers):
    """A decoder-only transformer's shapes, enough to count FLOPs, bytes and KV memory."""

    model_config = FINITE

    name: str = Field(description="Label used in reports and tables.")
    source: str | None = Field(
        None,
        description="Where the shapes were read from when given by Hugging Face id (the HF cache revision, or "
        "aiconfigurator-core's model_configs and its version); None: a preset, a file or a spec written out. "
        "Left out of the spec's dump when None.",
    )
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
    quantization: QuantizationName | None = Field(
        None,
        description="The linear layers' weight format (simulator/config/precision.py): fp8 (per-tensor W8A8, vLLM's "
        "--quantization fp8), fp8_block (128 x 128 block scales, DeepSeek-V3), nvfp4 (FP4 tensor cores on Blackwell, "
        "weight-only elsewhere) or mxfp4 (weight-only, gpt-oss); weight_bytes must be the format's. None: unquantized.",
    )
    kv_cache_bytes: float = Field(2.0, gt=0, le=8, description="Bytes per cached K or V element.")
    max_context_tokens: ContextTokens = Field(description="Maximum sequence length (prompt plus output).")
    num_shared_experts: int = Field(
        0,
        ge=0,
        le=MAX_DIM,
        description="MoE: experts every token goes through besides its top-k (DeepSeek, Qwen2-MoE).",
    )
    shared_expert_intermediate_size: PositiveInt | None = Field(
        None, description="MoE: inner width of one shared expert; None: intermediate_size."
    )
    num_dense_layers: int = Field(
        0,
        ge=0,
        le=MAX_DIM,
        description="MoE: decoder layers whose MLP is dense, not routed (DeepSeek's first_k_dense_replace, "
        "Qwen-MoE's mlp_only_layers / decoder_sparse_step).",
    )
    dense_intermediate_size: PositiveInt | None = Field(
        None, description="MoE: inner width of the dense layers' MLP; None: intermediate_size."
    )
    kv_lora_rank: PositiveInt | None = Field(
        None,
        description="Multi-head latent attention (DeepSeek-V2/V3): width of the compressed KV latent; None: "
        "ordinary (GQA/MHA) attention. Needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim.",
    )
    q_lora_rank: PositiveInt | None = Field(
        None, description="MLA: width of the compressed query (None: the query is projected directly)."
    )
    qk_rope_head_dim: PositiveInt | None = Field(None, description="MLA: rotary part of each query/key head.")
    qk_nope_head_dim: PositiveInt | None = Field(None, description="MLA: non-rotary part of each query/key head.")
    v_head_dim: PositiveInt | None = Field(None, description="MLA: width of each value head.")
    index_n_heads: PositiveInt | None = Field(
        None,
        description="DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5), an MLA model's lightning indexer: its "
        "query heads. None: dense attention. Needs index_head_dim and index_topk.",
    )
    index_head_dim: PositiveInt | None = Field(None, description="DSA: width of the indexer's heads and cached key.")
    index_topk: PositiveInt | None = Field(
        None, description="DSA: keys each query attends, the indexer's top-k of its cached keys."
    )
    mla_scaled_fp8_cache: bool = Field(
        False,
        description="The MLA cache is DeepSeek's FP8 sparse-attention format (FlashMLA's): the latent in FP8 with "
        "one float32 scale per 128 elements and the rotary key in bf16, kv_lora_rank + kv_lora_rank / 128 x 4 + "
        "qk_rope_head_dim x 2 bytes a token and layer (656 for DeepSeek-V3.2 and GLM-5, against 576 stored plainly "
        "in FP8). vLLM (fp8_ds_mla) and SGLang (its DSA pool) store a DSA model's FP8 cache so; set at deployment "
        "from the engine. Needs MLA and kv_cache_bytes 1. Left out of the spec's dump when False.",
    )
    sliding_window: PositiveInt | None = Field(
        None,
        description="Keys a sliding-window attention layer attends: each query the newest sliding_window tokens "
        "(gpt-oss: 128 on every other layer). None: every layer attends its whole context.",
    )
    num_sliding_layers: int = Field(
        0,
        ge=0,
        le=MAX_DIM,
        description="Of num_layers, the layers with sliding-window attention (config.json's layer_types). Both "
        "left out of the spec's dump when unset.",
    )
    num_linear_layers: int = Field(
        0,
        ge=0,
        le=MAX_DIM,
        description="Of num_layers, the Gated DeltaNet linear-attention layers (config.json's layer_types "
        "'linear_attention': Qwen3.5, Qwen3-Next): a fixed recurrent state per sequence instead of a KV cache, "
        "the others full attention. 0: every layer full attention. Needs the linear_* fields below. The linear "
        "fields are left out of the spec's dump when 0.",
    )
    linear_num_key_heads: PositiveInt | None = Field(None, description="Gated DeltaNet: query/key heads.")
    linear_num_value_heads: PositiveInt | None = Field(None, description="Gated DeltaNet: value heads.")
    linear_key_head_dim: PositiveInt | None = Field(None, description="Gated DeltaNet: width of a query/key head.")
    linear_value_head_dim: PositiveInt | None = Field(None, description="Gated DeltaNet: width of a value head.")
    linear_conv_kernel_dim: PositiveInt | None = Field(
        None, description="Gated DeltaNet: width of the causal convolution over q, k and v."
    )
    linear_state_bytes: float = Field(
        4.0,
        gt=0,
        le=8,
        description="Gated DeltaNet: bytes per element of the recurrent state, heads x key x value a layer and "
        "sequence (config.json's mamba_ssm_dtype, float32 by default; SGLang's and vLLM's --mamba-ssm-dtype "
        "bfloat16 makes it 2).",
    )
    attn_output_gate: bool = Field(
        False,
        description="The full-attention layers gate their output by a sigmoid of a second query-wide projection "
        "(Qwen3.5, Qwen3-Next's attn_output_gate: q_proj twice as wide). Left out of the spec's dump when False.",
    )
    qk_norm_across_heads: bool = Field(
        False,
        description="Q and K are RMS-normalised over all heads at once, not per head (MiniMax-M2's qk_norm_type "
        "per_layer): with tp > 1 every layer all-reduces each token's q and k variance over the tp GPUs. Left out "
        "of the spec's dump when False.",
    )

    @model_serializer(mode="wrap")
    def _omit_unset_source(self, handler):
        """The dump without ``source`` when it is None, so that specs not given by id dump (and key) as before."""
        data = handler(self)
        if isinstance(data, dict):
            if self.source is None:
                data.pop("source", None)
            # as before these fields, so that stored points keep their keys
            if not self.qk_norm_across_heads:
                data.pop("qk_norm_across_heads", None)
            if not self.mla_scaled_fp8_cache:
                data.pop("mla_scaled_fp8_cache", None)
            if not self.num_linear_layers:
                for key in _LINEAR_FIELDS:
                    data.pop(key, None)
            if not self.attn_output_gate:
                data.pop("attn_output_gate", None)
            if self.sliding_window is None and not self.num_sliding_layers:
                data.pop("sliding_window", None)
                data.pop("num_sliding_layers", None)
        return data

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelSpec:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.quantization is not None and self.weight_bytes != QUANTIZATIONS[self.quantization].weight_bytes:
            expected = QUANTIZATIONS[self.quantization].weight_bytes
            raise ValueError(
                f"quantization {self.quantization!r} stores weights in {expected:g} bytes: weight_bytes must be "
                f"{expected:g} (got {self.weight_bytes:g})"
            )
        if self.num_experts_per_token > self.num_experts:
            raise ValueError(
                f"num_experts_per_token ({self.num_experts_per_token}) exceeds num_experts ({self.num_experts})"
            )
        if not self.is_moe and (self.num_shared_experts or self.num_dense_layers):
            raise ValueError("num_shared_experts and num_dense_layers describe an MoE model: num_experts must be > 1")
        if self.num_dense_layers >= self.num_layers and self.is_moe:
            raise ValueError(
                f"num_dense_layers ({self.num_dense_layers}) must be fewer than num_layers ({self.num_layers}): "
                "an MoE model has at least one MoE layer"
            )
        mla = {
            "qk_rope_head_dim": self.qk_rope_head_dim,
            "qk_nope_head_dim": self.qk_nope_head_dim,
            "v_head_dim": self.v_head_dim,
        }
        if self.kv_lora_rank is not None:
            missing = [k for k, v in mla.items() if v is None]
            if missing:
                raise ValueError(f"kv_lora_rank (MLA) needs {', '.join(missing)}")
        elif self.q_lora_rank is not None or any(v is not None for v in mla.values()):
            raise ValueError("q_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim need kv_lora_rank (MLA)")
        dsa = {
            "index_n_heads": self.index_n_heads,
            "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk,
        }
        given = [k for k, v in dsa.items() if v is not None]
        if given and len(given) < len(dsa):
            raise ValueError(
                f"{', '.join(given)} (sparse attention) needs {', '.join(k for k in dsa if k not in given)}"
            )
        if given and self.kv_lora_rank is None:
            raise ValueError("index_n_heads, index_head_dim and index_topk (DeepSeek sparse attention) need MLA")
        if self.mla_scaled_fp8_cache and (self.kv_lora_rank is None or self.kv_cache_bytes != 1):
            raise ValueError("mla_scaled_fp8_cache (DeepSeek's scaled FP8 MLA cache) needs MLA and kv_cache_bytes 1")
        if (self.sliding_window is None) != (self.num_sliding_layers == 0):
            raise ValueError("sliding_window and num_sliding_layers go together (a window and the layers using it)")
        if self.num_sliding_layers > self.num_layers:
            raise ValueError(f"num_sliding_layers ({self.num_sliding_layers}) exceeds num_layers ({self.num_layers})")
        if self.num_sliding_layers and self.kv_lora_rank is not None:
            raise ValueError("sliding-window layers with MLA are not modelled")
        linear = {k: getattr(self, k) for k in _LINEAR_FIELDS if k != "linear_state_bytes"}
        if self.num_linear_layers:
            missing = [k for k, v in linear.items() if v is None and k != "num_linear_layers"]
            if missing:
                raise ValueError(f"num_linear_layers (Gated DeltaNet) needs {', '.join(missing)}")
            if self.num_linear_layers >= self.num_layers:
                raise ValueError(
                    f"num_linear_layers ({self.num_linear_layers}) must be fewer than num_layers ({self.num_layers}): "
                    "a hybrid model keeps some full-attention layers"
                )
            if self.kv_lora_rank is not None or self.num_sliding_layers:
                raise ValueError("linear-attention layers beside MLA or sliding-window layers are not modelled")
            if self.linear_num_value_heads % self.linear_num_key_heads:  # type: ignore[operator]
                raise ValueError(
                    f"linear_num_value_heads ({self.linear_num_value_heads}) must be a multiple of "
                    f"linear_num_key_heads ({self.linear_num_key_heads})"
                )
        elif any(v is not None for k, v in linear.items() if k != "num_linear_layers"):
            raise ValueError("the linear_* head fields describe Gated DeltaNet layers: num_linear_layers must be > 0")
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): a compressed KV latent shared by all heads."""
        return self.kv_lora_rank is not None

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is the routed one (every layer for a dense model: its one MLP)."""
        return self.num_layers - self.num_dense_layers

    @property
    def windows_sliding_kv(self) -> bool:
        """It has sliding-window layers beside full-attention ones, so an engine that frees keys outside the window
        (vLLM V1's hybrid KV cache manager) holds their KV per sequence, not per token. A model of sliding layers
        only is left whole (every layer's keys counted per token, as before)."""
        return 0 < self.num_sliding_layers < self.num_layers

    @property
    def num_full_attention_layers(self) -> int:
        """Layers with (full or sliding-window) softmax attention and a KV cache: all but the linear-attention ones."""
        return self.num_layers - self.num_linear_layers

    @property
    def linear_key_size(self) -> int:
        """Gated DeltaNet: width of the query (or key) projection output."""
        assert self.linear_num_key_heads is not None and self.linear_key_head_dim is not None
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_size(self) -> int:
        """Gated DeltaNet: width of the value projection output (and of the gate z, and of o_proj's input)."""
        assert self.linear_num_value_heads is not None and self.linear_value_head_dim is not None
        return self.linear_num_value_heads * self.linear_value_head_dim

    def linear_in_proj_width(self) -> int:
        """Gated DeltaNet's input projections' output width: q, k, v and the output gate z (in_proj_qkvz), and the
        per-head beta and decay a (in_proj_ba), as Qwen3-Next's and Qwen3.5's modeling code builds them."""
        assert self.linear_num_value_heads is not None
        return 2 * self.linear_key_size + 2 * self.linear_value_size + 2 * self.linear_num_value_heads

    def linear_in_proj_widths(self) -> tuple[int, int, int, int]:
        """``linear_in_proj_width`` as the four projections an unfused layer runs: q, k and v (in_proj_qkv), the gate
        z (in_proj_z), beta (in_proj_b) and the decay a (in_proj_a)."""
        assert self.linear_num_value_heads is not None
        heads = self.linear_num_value_heads
        return 2 * self.linear_key_size + self.linear_value_size, self.linear_value_size, heads, heads

    def linear_attention_params_per_layer(self) -> int:
        """Weights of one Gated DeltaNet layer: the input projections, the depthwise causal convolution over q, k
        and v, the per-head decay (A_log, dt_bias), the gated RMSNorm over a value head, and out_proj."""
        assert self.linear_conv_kernel_dim is not None and self.linear_num_value_heads is not None
        assert self.linear_value_head_dim is not None
        conv_channels = 2 * self.linear_key_size + self.linear_value_size
        return (
            self.hidden_size * self.linear_in_proj_width()
            + conv_channels * self.linear_conv_kernel_dim
            + 2 * self.linear_num_value_heads
            + self.linear_value_head_dim
            + self.linear_value_size * self.hidden_size
        )

    def linear_state_bytes_per_seq_per_gpu(self, tp: int) -> float:
        """Bytes of one sequence's Gated DeltaNet state on each of ``tp`` GPUs, over all linear layers: the
        convolution's last ``conv_kernel - 1`` inputs over q, k and v in the model dtype, and the recurrent state,
        value heads x key dim x value dim at ``linear_state_bytes`` (SGLang's MambaPool and vLLM's MambaSpec hold
        both, split over tp by heads). 0 without linear layers."""
        if not self.num_linear_layers:
            return 0.0
        assert self.linear_conv_kernel_dim is not None and self.linear_num_value_heads is not None
        assert self.linear_key_head_dim is not None and self.linear_value_head_dim is not None
        conv = (self.linear_conv_kernel_dim - 1) * (2 * self.linear_key_size + self.linear_value_size) / tp
        heads = self.linear_num_value_heads / tp
        state = heads * self.linear_key_head_dim * self.linear_value_head_dim * self.linear_state_bytes
        return self.num_linear_layers * (conv * UNQUANTIZED_WEIGHT_BYTES + state)

    def as_full_attention(self) -> ModelSpec:
        """This spec with every layer full attention: the Gated DeltaNet fields at their defaults (a hybrid model's
        MTP layer, a full-attention decoder layer)."""
        defaults = {k: type(self).model_fields[k].default for k in _LINEAR_FIELDS}
        return self.model_copy(update=defaults)

    @property
    def q_size(self) -> int:
        """Width of the query projection output."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of the key (or value) projection output."""
        return self.num_kv_heads * self.head_dim

    @property
    def attn_out_size(self) -> int:
        """Width of the attention output (the O projection's input): heads x v_head_dim under MLA."""
        if self.v_head_dim is not None:
            return self.num_attention_heads * self.v_head_dim
        return self.q_size

    @property
    def mla_latent_size(self) -> int:
        """MLA: cached elements per token per layer, the latent and the shared rotary key (vLLM's MLA cache)."""
        assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def mla_entry_bytes(self) -> float:
        """MLA: bytes the cache holds per token and layer for the latent and the rotary key (``mla_latent_size`` x
        ``kv_cache_bytes``, or DeepSeek's block-scaled FP8 format: ``mla_scaled_fp8_cache``); the DSA indexer's
        key is ``indexer_key_bytes`` besides."""
        assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
        if self.mla_scaled_fp8_cache:
            return self.kv_lora_rank + 4 * -(-self.kv_lora_rank // 128) + 2 * self.qk_rope_head_dim
        return self.mla_latent_size * self.kv_cache_bytes

    @property
    def is_dsa(self) -> bool:
        """DeepSeek sparse attention: an MLA model whose indexer picks ``index_topk`` keys per query."""
        return self.index_topk is not None

    @property
    def indexer_key_bytes(self) -> float:
        """DSA: bytes the indexer caches per token and layer besides the MLA latent, its key in FP8 with one
        float32 scale per 128 elements whatever the KV dtype (DeepSeek-V3.2's inference/model.py Indexer; vLLM's
        DeepseekV32IndexerCache: head_dim + head_dim // 128 * 4 bytes); 0 without DSA."""
        if self.index_head_dim is None:
            return 0.0
        return self.index_head_dim + 4 * -(-self.index_head_dim // 128)

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def mla_params_per_layer(self) -> dict[str, int]:
        """MLA's weights by projection (DeepSeek-V2/V3's DeepseekV2Attention): q_a (h x q_lora, with its
        norm) and q_b (q_lora x heads (nope + rope)), or q (h x heads (nope + rope)); kv_a (h x (kv_lora +
        rope), with its norm); kv_b (kv_lora x heads (nope + v)); o (heads v x h)."""
        assert self.kv_lora_rank is not None and self.qk_nope_head_dim is not None
        assert self.qk_rope_head_dim is not None and self.v_head_dim is not None
        h, heads, r = self.hidden_size, self.num_attention_heads, self.kv_lora_rank
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        out = {}
        if self.q_lora_rank is not None:
            out["q_a"] = h * self.q_lora_rank + self.q_lora_rank
            out["q_b"] = self.q_lora_rank * heads * qk
        else:
            out["q"] = h * heads * qk
        out["kv_a"] = h * self.mla_latent_size + r
        out["kv_b"] = r * heads * (self.qk_nope_head_dim + self.v_head_dim)
        out["o"] = self.attn_out_size * h
        return out

    def attention_params_per_layer(self) -> int:
        """Weights of one full-attention layer's attention (a hybrid model's linear layers: see
        ``linear_attention_params_per_layer``)."""
        if self.is_mla:
            return sum(self.mla_params_per_layer().values())
        h = self.hidden_size
        q_out = self.q_size * (2 if self.attn_output_gate else 1)
        params = h * (q_out + 2 * self.kv_size) + self.q_size * h
        if self.qkv_bias:
            params += q_out + 2 * self.kv_size
        return params

    def attention_params_all_layers(self) -> int:
        """Weights of every layer's attention: the full-attention layers' and the linear-attention layers'."""
        params = self.num_full_attention_layers * self.attention_params_per_layer()
        if self.num_linear_layers:
            params += self.num_linear_layers * self.linear_attention_params_per_layer()
        return params

    def expert_params(self) -> int:
        """Weights of one expert's MLP (of the only MLP for a dense model)."""
        return self.mlp_matrices * self.hidden_size * self.intermediate_size

    @property
    def shared_intermediate_size(self) -> int:
        """MoE: inner width of all shared experts together (0 without shared experts)."""
        width = self.shared_expert_intermediate_size or self.intermediate_size
        return self.num_shared_experts * width

    def shared_expert_params(self) -> int:
        """Weights of the shared experts of one MoE layer (0 without)."""
        return self.mlp_matrices * self.hidden_size * self.shared_intermediate_size

    def dense_mlp_params(self) -> int:
        """Weights of one dense layer's MLP in an MoE model (0 without dense layers)."""
        if not self.num_dense_layers:
            return 0
        return self.mlp_matrices * self.hidden_size * (self.dense_intermediate_size or self.intermediate_size)

    def routed_expert_params(self) -> int:
        """Weights of every routed expert over all MoE layers (0 for a dense model), what EP splits."""
        return self.num_moe_layers * self.num_experts * self.expert_params() if self.is_moe else 0

    def mlp_params_per_layer(self) -> int:
        """Weights of one MoE layer's MLP: routed experts, shared experts and the router (a dense model's MLP)."""
        params = self.num_experts * self.expert_params() + self.shared_expert_params()
        if self.is_moe:
            params += self.hidden_size * self.num_experts  # router
        return params

    def num_params(self) -> int:
        """Total parameters: embeddings, decoder layers (with 2 norms each), final norm, LM head."""
        h, v = self.hidden_size, self.vocab_size
        per_layer = self.mlp_params_per_layer() + 2 * h
        lm_head = 0 if self.tie_word_embeddings else v * h
        total = v * h + self.num_layers * per_layer + self.attention_params_all_layers() + h + lm_head
        if self.num_dense_layers:  # those layers hold a dense MLP instead of the MoE one
            total += self.num_dense_layers * (self.dense_mlp_params() - self.mlp_params_per_layer())
        return total

    def num_active_params(self) -> int:
        """Parameters touched per token (MoE counts top-k experts only)."""
        inactive = (self.num_experts - self.num_experts_per_token) * self.expert_params()
        return self.num_params() - self.num_moe_layers * inactive

    @property
    def embedding_weight_bytes(self) -> float:
        """Bytes per weight of the embedding and LM head: 16-bit under fp8 quantization, else ``weight_bytes``."""
        return UNQUANTIZED_WEIGHT_BYTES if self.quantization is not None else self.weight_bytes

    @property
    def dense_weight_bytes(self) -> float:
        """Bytes per weight of the linears besides the routed experts (attention, dense and shared-expert MLPs):
        ``weight_bytes``, or 16-bit where the quantization covers the routed experts only (gpt-oss's MXFP4)."""
        if self.quantization is not None and QUANTIZATIONS[self.quantization].experts_only:
            return UNQUANTIZED_WEIGHT_BYTES
        return self.weight_bytes

    def weight_bytes_total(self) -> float:
        """Bytes of all weights; quantized, the embedding and LM head count at ``embedding_weight_bytes`` and
        the linears besides the routed experts at ``dense_weight_bytes``."""
        if self.quantization is None:
            return self.num_params() * self.weight_bytes
        embedding = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        experts = self.routed_expert_params() if self.is_moe else 0
        rest = self.num_params() - embedding - experts
        return experts * self.weight_bytes + rest * self.dense_weight_bytes + embedding * self.embedding_weight_bytes

    def expert_weight_bytes_per_gpu(self, tp: int, pp: int = 1, ep: int = 1) -> float:
        """Bytes of routed-expert weights on each GPU: ``E / ep`` experts, each split over ``tp / ep`` GPUs,
        of the fullest stage's MoE layers (so every GPU of a stage holds 1/tp of them, whatever ep)."""
        if not self.is_moe:
            return 0.0
        return self.routed_expert_params() * self.weight_bytes / (ep * (tp // ep) * pp)

    def attention_group_weight_bytes(self, per_rank: frozenset[str] = frozenset()) -> float:
        """Bytes of the weights attention data parallelism keeps on every attention group of tp/dp GPUs instead
        of splitting them over all tp: every layer's attention projections and the input embedding (SGLang builds
        both on the attention-TP group under ``--enable-dp-attention``: ``get_attention_tp_size`` in its attention
        layers, ``VocabParallelEmbedding(use_attn_tp_group=is_dp_attention_enabled())``), and the parts the layout
        runs on each rank's own tokens (``per_rank``, simulator/cost/dp_attention.py): "moe", every MoE layer's
        router and shared experts (SGLang builds them at TP 1 under DeepEP; TensorRT-LLM's
        ``_compute_shared_expert_tp_size`` gives 1 with attention DP); "dense", the dense layers' MLP (a dense
        model's whole MLP); "lm_head", the LM head. The rest (routed experts, and by SGLang's defaults
        ``moe_dense_tp_size`` None and ``enable_dp_lm_head`` False the dense layers and LM head) stays split over
        the tp GPUs."""
        params = self.attention_params_all_layers()
        if "moe" in per_rank and self.is_moe:
            params += self.num_moe_layers * (self.shared_expert_params() + self.hidden_size * self.num_experts)
        if "dense" in per_rank:
            params += (
                self.num_dense_layers * self.dense_mlp_params()
                if self.is_moe
                else self.num_layers * self.expert_params()
            )
        embeddings = 2 if "lm_head" in per_rank and not self.tie_word_embeddings else 1
        return (
            params * self.dense_weight_bytes
            + embeddings * self.vocab_size * self.hidden_size * self.embedding_weight_bytes
        )

    def weight_bytes_per_gpu(
        self, tp: int, pp: int = 1, dp_attention: int = 1, per_rank: frozenset[str] = frozenset()
    ) -> float:
        """Weight bytes on each GPU of a tp x pp replica: 1/(tp pp) of them, but with attention data parallelism
        (``dp_attention`` ranks of tp/dp_attention GPUs each) the attention group's weights
        (``attention_group_weight_bytes``, with the parts ``per_rank`` the layout runs on each rank's tokens) are
        split over tp/dp_attention GPUs only."""
        total = self.weight_bytes_total()
        if dp_attention == 1:
            return total / (tp * pp)
        replicated = self.attention_group_weight_bytes(per_rank)
        return (total - replicated) / (tp * pp) + replicated * dp_attention / (tp * pp)

    def check_expert_parallel(self, ep: int, tp: int) -> None:
        """Raise ValueError when ``ep`` cannot split the routed experts over a stage's ``tp`` GPUs."""
        if ep == 1:
            return
        if not self.is_moe:
            raise ValueError(f"ep={ep}: {self.name} is not an MoE model (expert parallelism splits routed experts)")
        if self.num_experts % ep:
            raise ValueError(f"ep={ep} does not divide the {self.num_experts} routed experts of {self.name}")
        if tp % ep:
            raise ValueError(
                f"ep={ep} must divide tp={tp}: the experts are spread over a stage's tp GPUs (ep groups of tp/ep)"
            )

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
        if self.num_linear_layers:
            heads = (self.linear_num_key_heads, self.linear_num_value_heads)
            if any(h % tp for h in heads if h is not None):
                raise ValueError(
                    f"tp={tp} does not divide the {heads[0]} key and {heads[1]} value heads of {self.name}'s Gated "
                    "DeltaNet layers"
                )

    def layers_per_stage(self, pp: int) -> list[int]:
        """Decoder layers of each of ``pp`` pipeline stages (the first stages take the remainder)."""
        if pp > self.num_layers:
            raise ValueError(f"pp={pp} exceeds the {self.num_layers} layers of {self.name}")
        if pp > 1 and self.num_linear_layers:
            raise ValueError(
                f"pp={pp}: pipeline stages of {self.name}, a hybrid linear-attention model, are not modelled (each "
                "stage's share of its Gated DeltaNet layers); use pp 1"
            )
        base, extra = divmod(self.num_layers, pp)
        return [base + (1 if s < extra else 0) for s in range(pp)]

    def kv_bytes_per_token_per_gpu(self, tp: int, pp: int = 1, dp_attention: int = 1, windowed: bool = False) -> float:
        """KV bytes of one token on each GPU of a tp x pp replica (the fullest pipeline stage) that holds it.

        MLA caches one latent of ``kv_lora_rank + qk_rope_head_dim`` elements per token and layer, which
        tensor parallelism does not split: every rank holds it whole (vLLM's ``ModelConfig.get_num_kv_heads``
        returns 1 for MLA, "When using MLA during decode it becomes MQA", vllm/config/model.py). With attention
        data parallelism a token lives on one rank's tp/dp_attention GPUs, its heads split that many ways.
        ``windowed``: the engine keeps a sliding-window layer's keys for the window only (``windows_sliding_kv``),
        so a token of the sequence costs the full-attention layers' bytes; the window is a per-sequence cost
        (simulator/kv/window.py).
        """
        layers = self.layers_per_stage(pp)[0]
        if self.num_linear_layers:  # the full-attention layers cache keys (a stage's share, rounded up)
            layers = -(-self.num_full_attention_layers // pp)
        if windowed and self.windows_sliding_kv:  # the full-attention layers only (a stage's share, rounded up)
            layers = -(-(self.num_layers - self.num_sliding_layers) // pp)
        if self.is_mla:
            return layers * (self.mla_entry_bytes + self.indexer_key_bytes)
        return 2 * layers * self.kv_heads_per_gpu(tp // dp_attention) * self.head_dim * self.kv_cache_bytes

    def sliding_kv_bytes_per_token_per_gpu(self, tp: int, pp: int = 1, dp_attention: int = 1) -> float:
        """KV bytes of one token in the sliding-window layers on each GPU that holds them (a stage's share of those
        layers, rounded up, as ``kv_bytes_per_token_per_gpu`` rounds the full ones): what an engine that keeps them
        per window holds for each token of the window."""
        if not self.windows_sliding_kv:
            return 0.0
        layers = -(-self.num_sliding_layers // pp)
        return 2 * layers * self.kv_heads_per_gpu(tp // dp_attention) * self.head_dim * self.kv_cache_bytes

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token occupies across all layers: 2 x layers x kv_heads x head_dim x bytes
        (MLA: layers x (kv_lora_rank + qk_rope_head_dim) x bytes, plus DSA's indexer key)."""
        if self.is_mla:
            return self.num_layers * (self.mla_entry_bytes + self.indexer_key_bytes)
        return 2 * self.num_full_attention_layers * self.kv_size * self.kv_cache_bytes


# The Gated DeltaNet fields, left out of a spec's dump without linear layers (so that stored points keep their keys)
_LINEAR_FIELDS = (
    "num_linear_layers",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "linear_state_bytes",
)


class HardwareSpec(NoBoolNumbers):
    """One accelerator's datasheet figures (dense, no sparsity), in SI units."""

    model_config = FINITE

    name: str = Field(description="Label used in reports and tables.")
    flops_per_s: FlopsPerS = Field(description="Dense bf16/fp16 tensor FLOP/s at peak.")
    fp8_flops_per_s: FlopsPerS | None = Field(
        None,
        description="Dense FP8 tensor FLOP/s at peak; None: no FP8 tensor cores (FP8 weights run "
        "as weight-only kernels at the bf16 rate).",
    )
    fp4_flops_per_s: FlopsPerS | None = Field(
        None,
        description="Dense FP4 (NVFP4) tensor FLOP/s at peak; None: no FP4 tensor cores. Left out of the spec's "
        "dump when None.",
    )
    memory_bytes: MemoryBytes = Field(gt=0, description="Device memory in bytes.")
    memory_bandwidth_bytes_per_s: MemoryBandwidth = Field(description="Peak device-memory bandwidth.")
    interconnect_bandwidth_bytes_per_s: LinkBandwidth = Field(
        description="Intra-node GPU-to-GPU bandwidth per direction (NVLink, Infinity Fabric or PCIe)."
    )
    interconnect_latency_s: LatencyS = Field(description="Latency of one interconnect hop.")
    gpus_per_node: int = Field(
        8,
        ge=1,
        le=4096,
        description="GPUs one interconnect domain joins (NVLink, Infinity Fabric or PCIe): 8 on an HGX/DGX board, 72 "
        "on a GB200/GB300 NVL72 rack. A tensor-parallel group larger than this spans nodes, and its all-reduce "
        "crosses the scale-out network.",
    )
    scale_out_bandwidth_bytes_per_s: LinkBandwidth = Field(
        50.0e9,
        description="Network bandwidth between nodes per GPU and direction: one ConnectX-7 400 Gb/s NIC per GPU "
        "(DGX H100, H200 and B200 datasheets: 8 x 400 Gb/s for the compute fabric), 50 GB/s.",
    )
    scale_out_latency_s: LatencyS = Field(
        10.0e-6,
        description="Latency of one message between nodes: 10 us, aiconfigurator-core's p2p_latency of its systems "
        "(systems/*.yaml); nccl-tests measured 19-20 us for an 8-byte all-reduce of two nodes, one message each "
        "way (NVIDIA/nccl-tests#150: A100, HDR InfiniBand).",
    )
    host_link_bandwidth_bytes_per_s: LinkBandwidth = Field(
        description="Device-to-host bandwidth per direction (PCIe), used for swapping."
    )
    host_link_latency_s: LatencyS = Field(description="Latency of one host-link transfer.")
    price_per_hour_usd: float | None = Field(
        None, ge=0, description="Rental price of one device per hour, for cost figures."
    )
    silicon_tables: str | None = Field(
        None,
        description="The GPU's name in the measured kernel tables of aiconfigurator-core (`h200_sxm`; "
        "`servesim presets` lists them); the default `silicon` cost model reads them. None: not measured, the "
        "roofline is the default.",
    )
    compute_capability: str | None = Field(
        None,
        pattern=r"^[0-9]{1,2}\.[0-9]$",
        description="What `torch.cuda.get_device_capability()` reports, as MAJOR.MINOR: NVIDIA's CUDA compute "
        "capability (9.0 Hopper, 10.0 B200, 12.0 RTX PRO 6000 Blackwell), or ROCm's for an AMD GPU (9.4 MI300X). "
        "Engines choose some defaults by it (SGLang's KV dtype for DeepSeek sparse attention). None: not known, or "
        "neither CUDA nor ROCm; those defaults are then left at the scenario's. Left out of the spec's dump when "
        "None.",
    )

    @field_validator("compute_capability", mode="before")
    @classmethod
    def _capability_as_text(cls, value: Any) -> Any:
        """A YAML number (``10.0``, ``9``) reads as the capability it writes: ``"10.0"``, ``"9.0"`` (a float of more
        digits, ``10.25``, stays as written and is refused by the pattern)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return f"{value}.0"
        return str(value) if isinstance(value, float) else value

    @property
    def compute_major(self) -> int | None:
        """The compute capability's major version (10 for B200), or None when it is not known."""
        return None if self.compute_capability is None else int(self.compute_capability.split(".")[0])

    @model_serializer(mode="wrap")
    def _omit_unset_fields(self, handler):
        """The dump without ``fp4_flops_per_s`` and ``compute_capability`` when they are None, so that specs
        without them dump (and key) as before the fields existed."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("fp4_flops_per_s", "compute_capability"):
                if getattr(self, name) is None:
                    data.pop(name, None)
        return data
