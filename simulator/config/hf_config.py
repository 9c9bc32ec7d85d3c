"""Read a Hugging Face ``config.json`` into a ModelSpec (no download, no transformers)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.config.errors import format_validation_error
from simulator.config.files import read_json_object
from simulator.config.precision import QUANTIZATIONS
from simulator.config.specs import ModelSpec

_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float8_e4m3fn": 1.0}
# Architectures whose MLP is a plain up/down projection rather than gate+up (SwiGLU).
_UNGATED_MODEL_TYPES = {"gpt2", "gpt_neox", "opt", "falcon", "gpt_bigcode", "phi", "starcoder2"}
# quantization_config.quant_method values that are FP8 weights and activations (servesim's "fp8"):
# AutoFP8 / llm-compressor / DeepSeek-V3 block-wise checkpoints, and Meta's fbgemm FP8 (Llama 3.1 405B).
_FP8_METHODS = {"fp8", "fbgemm_fp8"}


def _ignores_attention(qc: dict) -> bool:
    """Whether a compressed-tensors config leaves attention unquantized (its ``ignore`` list names self_attn)."""
    ignore = qc.get("ignore")
    return isinstance(ignore, list) and any(isinstance(x, str) and "self_attn" in x for x in ignore)


def _quantization(cfg: dict, path: Path) -> str | None:
    """servesim's quantization of a checkpoint from its ``quantization_config`` (None when it has none).

    FP8 methods, and compressed-tensors whose every config group stores 8-bit float weights,
    are ``"fp8"``; any other method raises ValueError naming it and the file.
    """
    qc = cfg.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise ValueError(f"{path}: field 'quantization_config' must be a mapping, got {qc!r}")
    method = qc.get("quant_method")
    if method is None:
        raise ValueError(f"{path}: quantization_config has no quant_method")
    if method in _FP8_METHODS:
        # DeepSeek-V3's checkpoints scale 128 x 128 blocks (weight_block_size); others one scale per tensor
        return "fp8_block" if qc.get("weight_block_size") else "fp8"
    if method == "mxfp4":  # gpt-oss: MXFP4 experts (OCP microscaling), run weight-only
        return "mxfp4"
    if method == "modelopt":  # ModelOpt's export inside config.json (newer NVIDIA checkpoints): its quant_algo
        return _modelopt_algo(qc.get("quant_algo"), f"{path}: quantization_config.quant_algo")
    detail = ""
    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        members = groups.values() if isinstance(groups, dict) and groups else [None]
        weights = [g.get("weights") if isinstance(g, dict) else None for g in members]
        if all(isinstance(w, dict) and w.get("type") == "float" and w.get("num_bits") == 8 for w in weights):
            return "fp8_block" if all(w.get("strategy") == "block" for w in weights) else "fp8"
        # NVFP4 in compressed-tensors: 4-bit floats in groups of 16 (llm-compressor's NVFP4 scheme)
        if all(
            isinstance(w, dict) and w.get("type") == "float" and w.get("num_bits") == 4 and w.get("group_size") == 16
            for w in weights
        ):
            return "nvfp4"
        # INT4 routed experts in groups of 32, the rest left out (Kimi-K2.5's pack-quantized checkpoint)
        if all(
            isinstance(w, dict) and w.get("type") == "int" and w.get("num_bits") == 4 and w.get("group_size") == 32
            for w in weights
        ) and _ignores_attention(qc):
            return "int4_wo"
        detail = " with weights other than 8-bit or NVFP4 float, or INT4 experts"
    raise ValueError(
        f"{path}: quantization_config.quant_method {method!r}{detail} is not modelled by servesim (it models "
        "fp8, fp8_block, nvfp4, mxfp4, int4_wo); give the unquantized model's config.json, or a spec .yaml with the "
        "weight_bytes to approximate it"
    )


def _modelopt_algo(algo: object, where: str) -> str:
    """servesim's quantization of a ModelOpt ``quant_algo``: ``FP8`` is ``"fp8"``, ``NVFP4`` ``"nvfp4"``; any other
    algorithm (W4A16_AWQ, MIXED_PRECISION...) raises ValueError naming it and ``where`` it was read."""
    if algo == "FP8":
        return "fp8"
    if algo == "NVFP4":
        return "nvfp4"
    raise ValueError(
        f"{where} {algo!r} is not modelled by servesim (it models FP8 and NVFP4); give the unquantized model, or a "
        "spec .yaml with the weight_bytes to approximate it"
    )


def _modelopt_section(path: Path) -> dict:
    """The ``quantization`` section of a ModelOpt ``hf_quant_config.json`` (empty when it has none: its
    ``quant_algo`` is then refused by ``_modelopt_algo``)."""
    section = read_json_object(path, "quantization config").get("quantization")
    return section if isinstance(section, dict) else {}


def _declared_fp8_kv(section: dict) -> bool:
    """Whether a ModelOpt quantization section declares an FP8 KV cache, which the engines then allocate unless told
    otherwise (``--kv-cache-dtype auto``, their default).

    ModelOpt writes the declaration as ``kv_cache_quant_algo: "FP8"`` (``hf_quant_config.json``'s ``quantization``)
    or, in a config.json's ``quantization_config``, as ``kv_cache_scheme`` of 8-bit floats with static scales.
    vLLM resolves ``auto`` from either when it builds its cache config (``resolve_kv_cache_dtype_string`` and
    ``get_kv_cache_quant_algo_string``, vllm/utils/torch_utils.py, read on main at 0024350b5; the resolution came with
    vllm-project/vllm#29980, December 2025); SGLang takes FP8 when the model's quant config has ``kv_cache_quant_algo``
    FP8 (``configure_kv_cache_dtype``, python/sglang/srt/model_executor/model_runner.py); TensorRT-LLM copies
    ``kv_cache_quant_algo`` from ``hf_quant_config.json`` into its quant config
    (``ModelLoader._update_from_hf_quant_config``, tensorrt_llm/llmapi/llm_utils.py). A 4-bit declaration (NVFP4,
    which vLLM main and TensorRT-LLM read) is not: servesim has no NVFP4 KV cache, so the cache keeps the weights'
    dtype.
    """
    scheme = section.get("kv_cache_scheme")
    if isinstance(scheme, dict):
        return scheme.get("type") == "float" and scheme.get("num_bits") == 8 and scheme.get("dynamic") is False
    algo = section.get("kv_cache_quant_algo")
    return isinstance(algo, str) and algo.upper() == "FP8"


_TOP_LEVEL_FIELDS = ("_name_or_path", "quantization_config", "tie_word_embeddings", "torch_dtype", "dtype")
"""What a vision-language config keeps beside its ``text_config`` (the text model's own fields win)."""


def model_spec_from_hf_config(
    path: Path, name: str | None = None, quant_config: Path | None = None, source: str | None = None
) -> ModelSpec:
    """Build a ModelSpec from the fields of a Hugging Face decoder ``config.json``.

    A ``quantization_config`` gives the quantization it names (FP8, block-wise FP8, NVFP4, MXFP4) and
    its bytes per weight (the KV cache keeps ``torch_dtype``, or is FP8 where a ModelOpt section declares it:
    ``_declared_fp8_kv``); other quantization methods are refused. Without one, a ModelOpt ``quant_config``
    (``hf_quant_config.json``) beside the config is read the same way (vLLM reads it then).
    ``name`` labels the spec (default: the config's ``_name_or_path``, else its folder's name);
    ``source`` is recorded as the spec's ``source``.
    Raises ValueError naming the file and the missing or bad field.
    """
    cfg = read_json_object(path, "model config")
    text = cfg.get("text_config")
    if isinstance(text, dict) and "num_hidden_layers" not in cfg:
        # a vision-language checkpoint (Kimi-K2.5, Llama-4...): its language model serves text prompts; the
        # vision tower's weights (under 1 % of Kimi-K2.5's) are left out
        cfg = {**{k: v for k, v in cfg.items() if k in _TOP_LEVEL_FIELDS}, **text}
    if cfg.get("linear_attn_config") is not None:  # Kimi-K3 (Kimi Delta Attention): not the Gated DeltaNet
        raise ValueError(
            f"{path}: field 'linear_attn_config' makes this a Kimi Delta Attention model, not modelled by servesim "
            "(it models full, sliding-window and Gated DeltaNet attention)"
        )
    if cfg.get("hybrid_override_pattern") is not None:  # Nemotron-H: Mamba, attention and MLP layers interleaved
        raise ValueError(
            f"{path}: field 'hybrid_override_pattern' makes this a hybrid Mamba model, not modelled by servesim "
            "(its layers are attention plus MLP)"
        )
    _refuse_unmodelled_layers(cfg, path)

    def count(key: str) -> int:
        value = cfg[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{path}: field {key!r} must be a positive integer, got {value!r}")
        return value

    def need(*keys: str) -> int:
        for key in keys:
            if key in cfg and cfg[key] is not None:
                return count(key)
        raise ValueError(f"{path}: missing field {keys[0]!r}")

    def optional(*keys: str, zero_is_none: bool = False) -> int | None:
        """The first key present (not null; with ``zero_is_none``, not 0 either: "no experts")."""
        present = [k for k in keys if cfg.get(k) is not None and not (zero_is_none and cfg[k] == 0)]
        return count(present[0]) if present else None

    num_layers = need("num_hidden_layers", "n_layer")
    hidden = need("hidden_size", "n_embd", "d_model")
    heads = need("num_attention_heads", "n_head")
    model_type = str(cfg.get("model_type", ""))
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    if dtype not in _DTYPE_BYTES:
        raise ValueError(f"{path}: torch_dtype {dtype!r} not one of {', '.join(_DTYPE_BYTES)}")
    moe = _moe_fields(cfg, path, num_layers, count, need, optional)
    mla = _mla_fields(cfg, path, need, optional)
    head_dim = optional("head_dim") or hidden // heads
    if mla:  # the query/key head: its non-rotary and rotary parts
        head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    quantization = _quantization(cfg, path)
    modelopt = None  # ModelOpt's quantization section, inline or beside the config: it may declare the KV cache
    if quantization is not None and cfg["quantization_config"].get("quant_method") == "modelopt":
        modelopt = cfg["quantization_config"]
    if quantization is None and "quantization_config" not in cfg and quant_config is not None:
        modelopt = _modelopt_section(quant_config)
        quantization = _modelopt_algo(modelopt.get("quant_algo"), f"{quant_config}: quantization.quant_algo")
    kv_bytes = 1.0 if modelopt is not None and _declared_fp8_kv(modelopt) else _DTYPE_BYTES[dtype]
    try:
        return ModelSpec(
            name=name or str(cfg.get("_name_or_path") or Path(path).parent.name or model_type or "model"),
            source=source,
            num_layers=num_layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=optional("num_key_value_heads") or heads,
            head_dim=head_dim,
            gated_mlp=model_type not in _UNGATED_MODEL_TYPES,
            vocab_size=need("vocab_size"),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", model_type.startswith("qwen2"))),
            weight_bytes=QUANTIZATIONS[quantization].weight_bytes if quantization is not None else _DTYPE_BYTES[dtype],
            quantization=quantization,
            kv_cache_bytes=kv_bytes,
            max_context_tokens=need("max_position_embeddings", "n_positions", "max_sequence_length"),
            # MiniMax-M2: RMSNorm over the whole q (and k) projection, not per head (its modeling code's
            # qk_norm_type "per_layer"; vLLM's MiniMaxText01RMSNormTP all-reduces the variance under tp)
            qk_norm_across_heads=bool(cfg.get("use_qk_norm")) and cfg.get("qk_norm_type") == "per_layer",
            **_sliding_fields(cfg, path, num_layers, need),
            **_linear_fields(cfg, path, num_layers, need),
            **moe,
            **mla,
        )
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(path))) from None


# The fields naming the routed experts per layer, by family (the first present is read).
_EXPERT_FIELDS = ("n_routed_experts", "num_local_experts", "num_experts")
_EXPERT_FAMILIES = "'n_routed_experts' (DeepSeek), 'num_experts' (Qwen-MoE) or 'num_local_experts' (Mixtral)"


def _moe_fields(cfg: dict, path: Path, num_layers: int, count, need, optional) -> dict:
    """The ModelSpec MoE fields of a config.json: routed experts, top-k, expert width, shared experts, dense layers.

    DeepSeek-V2/V3: ``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
    ``n_shared_experts`` (each as wide as a routed expert), the first ``first_k_dense_replace`` layers
    dense at ``intermediate_size``. Qwen2-MoE / Qwen3-MoE: ``num_experts``, ``moe_intermediate_size``,
    ``shared_expert_intermediate_size`` (one shared expert; 0 or absent: none), layer i sparse when
    ``(i + 1) % decoder_sparse_step == 0`` and i is not in ``mlp_only_layers`` (transformers'
    Qwen2MoeDecoderLayer), the others dense at ``intermediate_size``. Mixtral: ``num_local_experts``,
    ``intermediate_size`` per expert.
    """
    num_experts = optional(*_EXPERT_FIELDS, zero_is_none=True) or 1
    top_k = optional("num_experts_per_tok", zero_is_none=True) or 1
    if num_experts == 1:
        if top_k > 1:
            raise ValueError(
                f"{path}: field 'num_experts_per_tok' is {top_k} but the number of routed experts is missing: "
                f"expected {_EXPERT_FAMILIES}"
            )
        return {"intermediate_size": need("intermediate_size", "n_inner", "ffn_dim")}
    field = next(k for k in _EXPERT_FIELDS if cfg.get(k) not in (None, 0))
    if top_k > num_experts:
        raise ValueError(f"{path}: field 'num_experts_per_tok' ({top_k}) exceeds {field!r} ({num_experts})")
    out: dict = {"num_experts": num_experts, "num_experts_per_token": top_k}
    if field == "n_routed_experts":  # DeepSeek's intermediate_size is the dense layers' width
        out["intermediate_size"] = need("moe_intermediate_size")
    else:  # Qwen-MoE gives moe_intermediate_size; Mixtral (and OLMoE) the expert width as intermediate_size
        out["intermediate_size"] = optional("moe_intermediate_size") or need("intermediate_size", "ffn_dim")
    dense = 0
    if field == "n_routed_experts":
        out["num_shared_experts"] = (cfg.get("n_shared_experts") and count("n_shared_experts")) or 0
        first_dense = cfg.get("first_k_dense_replace")
        if first_dense is not None:
            if isinstance(first_dense, bool) or not isinstance(first_dense, int) or first_dense < 0:
                raise ValueError(
                    f"{path}: field 'first_k_dense_replace' must be a non-negative integer, got {first_dense!r}"
                )
            if first_dense >= num_layers:
                raise ValueError(
                    f"{path}: field 'first_k_dense_replace' ({first_dense}) leaves none of the {num_layers} layers MoE"
                )
            dense = first_dense
        freq = cfg.get("moe_layer_freq", 1)
        if freq != 1:
            raise ValueError(f"{path}: field 'moe_layer_freq' {freq!r} is not modelled (servesim reads 1)")
    elif field == "num_experts":
        shared = cfg.get("shared_expert_intermediate_size")
        if shared not in (None, 0):
            out["num_shared_experts"] = 1
            out["shared_expert_intermediate_size"] = count("shared_expert_intermediate_size")
        step = optional("decoder_sparse_step") or 1
        only = cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < num_layers for i in only
        ):
            raise ValueError(
                f"{path}: field 'mlp_only_layers' must be a list of layer indices below {num_layers}, got {only!r}"
            )
        sparse = [i for i in range(num_layers) if (i + 1) % step == 0 and i not in only]
        if not sparse:
            raise ValueError(f"{path}: fields 'decoder_sparse_step' ({step}) and 'mlp_only_layers' leave no MoE layer")
        dense = num_layers - len(sparse)
    if dense:
        out["num_dense_layers"] = dense
        out["dense_intermediate_size"] = need("intermediate_size")
    return out


def _mla_fields(cfg: dict, path: Path, need, optional) -> dict:
    """The MLA fields (DeepSeek-V2/V3's multi-head latent attention) when ``kv_lora_rank`` is given."""
    if cfg.get("kv_lora_rank") is None:
        return {}
    return {
        "kv_lora_rank": need("kv_lora_rank"),
        "q_lora_rank": optional("q_lora_rank"),  # null in DeepSeek-V2-Lite: the query is projected directly
        "qk_rope_head_dim": need("qk_rope_head_dim"),
        "qk_nope_head_dim": need("qk_nope_head_dim"),
        "v_head_dim": need("v_head_dim"),
    } | _dsa_fields(cfg, path, need)


# Fields of architectures whose layers servesim does not model, each with what it would need: (field, whether its
# value changes the layer, what it is). Read silently, each made a wrong spec of a config the dependency ships.
_UNMODELLED_LAYER_FIELDS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    # DeepSeek-V4: attention over keys compressed 4x or 128x with a sliding window, hyper-connections, hash routing
    ("compress_ratios", bool, "DeepSeek-V4's compressed sparse attention"),
    ("hc_mult", lambda v: v not in (None, 1), "hyper-connections (several residual streams a layer)"),
    # Nemotron-H's newer configs name each layer's block instead of a hybrid_override_pattern
    ("layers_block_type", lambda v: isinstance(v, list) and "mamba" in v, "Mamba layers (a hybrid Mamba model)"),
    ("sparse_attention_config", bool, "MiniMax-M3's sparse attention"),
    ("hybrid_layer_pattern", bool, "layers of two attention kinds, each with its own heads (MiMo-V2)"),
    # Llama-4: local attention within chunks on three layers of four, experts on every k-th layer
    ("attention_chunk_size", bool, "local attention within chunks of that many tokens (Llama-4)"),
    ("interleave_moe_layer_step", lambda v: v not in (None, 1), "experts on every k-th layer only (Llama-4)"),
    # Gemma-4: its full-attention layers have their own head size and KV heads, K shared with V
    ("global_head_dim", bool, "a head size of the full-attention layers of their own (Gemma-4)"),
    ("num_global_key_value_heads", bool, "KV heads of the full-attention layers of their own (Gemma-4)"),
    ("attention_k_eq_v", bool, "keys reused as values (Gemma-4)"),
    ("num_kv_shared_layers", bool, "layers reading another layer's KV cache"),
    ("hidden_size_per_layer_input", bool, "per-layer input embeddings"),
    ("share_expert_dim", bool, "Step-3's shared expert beside the routed ones"),
)


def _refuse_unmodelled_layers(cfg: dict, path: Path) -> None:
    """ValueError naming the first field of ``_UNMODELLED_LAYER_FIELDS`` whose value ``cfg`` sets."""
    for field, changes, what in _UNMODELLED_LAYER_FIELDS:
        value = cfg.get(field)
        if value is not None and changes(value):
            raise ValueError(
                f"{path}: field {field!r} ({what}) is not modelled by servesim; give a spec .yaml of the nearest "
                "model it reads, or leave the model out"
            )


def _sliding_fields(cfg: dict, path: Path, num_layers: int, need) -> dict:
    """Sliding-window attention where config.json's ``layer_types`` names it per layer ("sliding_attention": gpt-oss,
    Gemma 3), with ``sliding_window`` keys. A ``sliding_window`` without ``layer_types`` is not read: Qwen2's configs
    carry one with ``use_sliding_window`` false."""
    types = cfg.get("layer_types")
    if types is None:
        return {}
    if not isinstance(types, list) or len(types) != num_layers or not all(isinstance(t, str) for t in types):
        raise ValueError(f"{path}: field 'layer_types' must list one attention type per layer ({num_layers})")
    sliding = sum(t == "sliding_attention" for t in types)
    return {"sliding_window": need("sliding_window"), "num_sliding_layers": sliding} if sliding else {}


def _linear_fields(cfg: dict, path: Path, num_layers: int, need) -> dict:
    """Gated DeltaNet layers where ``layer_types`` names them "linear_attention" (Qwen3.5; Qwen3-Next's every layer
    but each ``full_attention_interval``-th, where its config gives no ``layer_types``): their heads,
    the convolution's width, the recurrent state's dtype (``mamba_ssm_dtype``, float32 unless given), and the full
    layers' output gate (``attn_output_gate``). Any other layer type besides full and sliding attention is refused."""
    types = cfg.get("layer_types")
    if types is None and cfg.get("linear_num_key_heads") is not None:
        # Qwen3-Next's config.json gives only the interval: every full_attention_interval-th layer is full attention
        # (transformers' Qwen3NextConfig builds layer_types so)
        interval = cfg.get("full_attention_interval")
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(
                f"{path}: field 'linear_num_key_heads' names Gated DeltaNet layers but neither 'layer_types' nor a "
                f"positive 'full_attention_interval' says which layers they are (got {interval!r})"
            )
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(num_layers)]
    if not isinstance(types, list):  # (a layer_types list of the wrong length: refused by _sliding_fields)
        return {}
    unknown = sorted({t for t in types if t not in _LAYER_TYPES})
    if unknown:
        raise ValueError(
            f"{path}: field 'layer_types' names {', '.join(map(repr, unknown))}, not modelled by servesim (it models "
            f"{', '.join(map(repr, _LAYER_TYPES))})"
        )
    linear = sum(t == "linear_attention" for t in types)
    if not linear:
        return {}
    state = str(cfg.get("mamba_ssm_dtype") or "float32")
    if state not in _DTYPE_BYTES:
        raise ValueError(f"{path}: field 'mamba_ssm_dtype' {state!r} not one of {', '.join(_DTYPE_BYTES)}")
    return {
        "num_linear_layers": linear,
        "linear_num_key_heads": need("linear_num_key_heads"),
        "linear_num_value_heads": need("linear_num_value_heads"),
        "linear_key_head_dim": need("linear_key_head_dim"),
        "linear_value_head_dim": need("linear_value_head_dim"),
        "linear_conv_kernel_dim": need("linear_conv_kernel_dim"),
        "linear_state_bytes": _DTYPE_BYTES[state],
        "attn_output_gate": bool(cfg.get("attn_output_gate", False)),
    }


# the layer types config.json's layer_types may name: DeepSeek-V3.2's and GLM-5's sparse layers are read from their
# indexer's fields (_dsa_fields)
_LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention", "deepseek_sparse_attention")


def _dsa_fields(cfg: dict, path: Path, need) -> dict:
    """DeepSeek sparse attention's indexer (DeepSeek-V3.2, GLM-5) when ``index_topk`` is given."""
    if cfg.get("index_topk") is None:
        return {}
    freq = cfg.get("index_topk_freq", 1)
    if freq != 1:  # GLM-5.2: one layer in index_topk_freq runs the indexer, the others reuse its top-k
        raise ValueError(f"{path}: field 'index_topk_freq' {freq!r} is not modelled (servesim reads 1)")
    return {
        "index_n_heads": need("index_n_heads"),
        "index_head_dim": need("index_head_dim"),
        "index_topk": need("index_topk"),
    }
