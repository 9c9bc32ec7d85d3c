"""Built-in model and hardware presets, and resolution of a user's reference to a spec.

A reference is a preset name (``llama-3.1-8b``, ``h100-sxm``), a path to a YAML file
holding a spec, or (models only) a path to a Hugging Face ``config.json`` or to a folder holding one
(a local Hugging Face snapshot), or a Hugging Face model id (``Qwen/Qwen3-32B``) found offline in the
local HF cache or in aiconfigurator-core's model_configs (``simulator.config.hf_hub``).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from simulator.config.errors import format_validation_error
from simulator.config.files import read_yaml_mapping
from simulator.config.hf_config import model_spec_from_hf_config
from simulator.config.hf_hub import find_hf_model, looks_like_hf_id, unknown_hf_id
from simulator.config.specs import HardwareSpec, ModelSpec


def _load_yaml_resource(filename: str) -> dict:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.cache
def model_presets() -> dict[str, ModelSpec]:
    """Model presets by name (lowercase, hyphenated)."""
    return {k: ModelSpec(**v) for k, v in _load_yaml_resource("models.yaml").items()}


@functools.cache
def hardware_presets() -> dict[str, HardwareSpec]:
    """Hardware presets by name (lowercase, hyphenated)."""
    return {k: HardwareSpec(**v) for k, v in _load_yaml_resource("hardware.yaml").items()}


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml", ".json")) or "/" in ref or "\\" in ref


def _read_yaml_spec(path: Path, cls: type[ModelSpec] | type[HardwareSpec]):
    data = read_yaml_mapping(path, "spec file", f"{cls.__name__} fields")
    try:
        return cls(**data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(path))) from None


def resolve_model(ref: str | ModelSpec, base_dir: Path | None = None) -> ModelSpec:
    """Turn a preset name, a spec YAML path, a Hugging Face config.json path, a Hugging Face model folder
    (holding a config.json) or a Hugging Face model id into a ModelSpec.

    A file or folder of the name comes before an id; an id is read from the local HF cache, else from
    aiconfigurator-core's model_configs, and its spec is named by the id with ``source`` saying which.
    Raises ValueError (one line) for a name found nowhere.
    """
    if isinstance(ref, ModelSpec):
        return ref
    presets = model_presets()
    if ref in presets:
        return presets[ref]
    path = (base_dir or Path.cwd()) / ref
    if looks_like_hf_id(ref) and not path.exists():
        found = find_hf_model(ref)
        if found is None:
            raise ValueError(unknown_hf_id(ref, list(presets)))
        return model_spec_from_hf_config(found.config, name=ref, quant_config=found.quant_config, source=found.source)
    if path.is_dir():  # a Hugging Face model folder (a local snapshot): its config.json
        config = path / "config.json"
        if not config.is_file():
            raise ValueError(
                f"{path}: a folder without a config.json (give a Hugging Face model folder, a config.json "
                "or a spec .yaml)"
            )
        return model_spec_from_hf_config(config)
    if _looks_like_path(ref):
        if path.suffix == ".json":
            return model_spec_from_hf_config(path)
        return _read_yaml_spec(path, ModelSpec)
    raise ValueError(
        f"unknown model {ref!r}; presets: {', '.join(presets)} (or give a Hugging Face model id such as "
        "Qwen/Qwen3-32B, a path to a Hugging Face model folder, a config.json or a spec .yaml)"
    )


def resolve_hardware(ref: str | HardwareSpec, base_dir: Path | None = None) -> HardwareSpec:
    """Turn a preset name or a spec YAML path into a HardwareSpec."""
    if isinstance(ref, HardwareSpec):
        return ref
    presets = hardware_presets()
    if ref in presets:
        return presets[ref]
    if _looks_like_path(ref):
        return _read_yaml_spec((base_dir or Path.cwd()) / ref, HardwareSpec)
    raise ValueError(f"unknown hardware {ref!r}; presets: {', '.join(presets)} (or give a path to a spec .yaml)")
