"""Read a Hugging Face ``config.json`` into a ModelSpec (no download, no transformers)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from simulator.config.errors import format_validation_error
from simulator.config.files import read_json_object
from simulator.config.specs import ModelSpec

_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float8_e4m3fn": 1.0}
# Architectures whose MLP is a plain up/down projection rather than gate+up (SwiGLU).
_UNGATED_MODEL_TYPES = {"gpt2", "gpt_neox", "opt", "falcon", "gpt_bigcode", "phi", "starcoder2"}
# quantization_config.quant_method values that are FP8 weights and activations (servesim's "fp8"):
# AutoFP8 / llm-compressor / DeepSeek-V3 block-wise checkpoints, and Meta's fbgemm FP8 (Llama 3.1 405B).
_FP8_METHODS = {"fp8", "fbgemm_fp8"}


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
        return "fp8"
    detail = ""
    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        members = groups.values() if isinstance(groups, dict) and groups else [None]
        weights = [g.get("weights") if isinstance(g, dict) else None for g in members]
        if all(isinstance(w, dict) and w.get("type") == "float" and w.get("num_bits") == 8 for w in weights):
            return "fp8"
        detail = " with weights other than 8-bit float"
    raise ValueError(
        f"{path}: quantization_config.quant_method {method!r}{detail} is not modelled by servesim (it models "
        "fp8); give the unquantized model's config.json, or a spec .yaml with the weight_bytes to approximate it"
    )


def model_spec_from_hf_config(path: Path) -> ModelSpec:
    """Build a ModelSpec from the fields of a Hugging Face decoder ``config.json``.

    An FP8 ``quantization_config`` gives quantization ``fp8`` and 1-byte weights (the KV
    cache keeps ``torch_dtype``); other quantization methods are refused.
    Raises ValueError naming the file and the missing or bad field.
    """
    cfg = read_json_object(path, "model config")

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
    num_experts = optional("num_local_experts", "num_experts", zero_is_none=True) or 1
    intermediate = optional("moe_intermediate_size") if num_experts > 1 else None
    intermediate = intermediate or need("intermediate_size", "n_inner", "ffn_dim")
    quantization = _quantization(cfg, path)
    try:
        return ModelSpec(
            name=str(cfg.get("_name_or_path") or Path(path).parent.name or model_type or "model"),
            num_layers=num_layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=optional("num_key_value_heads") or heads,
            head_dim=optional("head_dim") or hidden // heads,
            intermediate_size=intermediate,
            gated_mlp=model_type not in _UNGATED_MODEL_TYPES,
            num_experts=num_experts,
            num_experts_per_token=optional("num_experts_per_tok", zero_is_none=True) or 1,
            vocab_size=need("vocab_size"),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", model_type.startswith("qwen2"))),
            weight_bytes=1.0 if quantization == "fp8" else _DTYPE_BYTES[dtype],
            quantization=quantization,
            kv_cache_bytes=_DTYPE_BYTES[dtype],
            max_context_tokens=need("max_position_embeddings", "n_positions", "max_sequence_length"),
        )
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(path))) from None
