"""Read a Hugging Face ``config.json`` into a ModelSpec (no download, no transformers)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from simulator.files import read_json_object
from simulator.specs import ModelSpec
from simulator.validation import format_validation_error

_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0, "float8_e4m3fn": 1.0}
# Architectures whose MLP is a plain up/down projection rather than gate+up (SwiGLU).
_UNGATED_MODEL_TYPES = {"gpt2", "gpt_neox", "opt", "falcon", "gpt_bigcode", "phi", "starcoder2"}


def model_spec_from_hf_config(path: Path) -> ModelSpec:
    """Build a ModelSpec from the fields of a Hugging Face decoder ``config.json``.

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
            weight_bytes=_DTYPE_BYTES[dtype],
            kv_cache_bytes=_DTYPE_BYTES[dtype],
            max_context_tokens=need("max_position_embeddings", "n_positions", "max_sequence_length"),
        )
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(path))) from None
