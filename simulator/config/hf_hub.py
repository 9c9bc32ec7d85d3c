"""Find a Hugging Face model's ``config.json`` by its id (``Qwen/Qwen3-32B``), offline.

Two places are searched, in order:

1. the local Hugging Face hub cache, as ``huggingface_hub`` lays it out (read here without it):
   ``<cache>/models--<org>--<name>/refs/main`` names the revision, whose files are in
   ``snapshots/<revision>/``. The cache folder is ``HF_HUB_CACHE`` (or the older
   ``HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
   else ``~/.cache/huggingface/hub`` (``huggingface_hub.constants``).
2. the model configs that aiconfigurator-core (NVIDIA, Apache-2.0; a dependency) ships in its
   package folder ``model_configs``: ``<org>--<name>_config.json``, with a ModelOpt
   ``<org>--<name>_hf_quant_config.json`` beside it for some quantized checkpoints.

Nothing is downloaded; a model in neither place is refused by ``unknown_hf_id``'s message.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

DEPENDENCY = "aiconfigurator-core"
_DEPENDENCY_PACKAGE = "aiconfigurator_core"
_CONFIG_SUFFIX = "_config.json"
_QUANT_SUFFIX = "_hf_quant_config.json"
# huggingface_hub's validate_repo_id: word characters, '-' and '.', no '--' or '..' (96 characters at most);
# here always with the owner (``org/name``), since a bare name is a preset or a file.
_HF_ID = re.compile(r"[\w.-]{1,96}/[\w.-]{1,96}")
_FILE_SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True)
class HFModelFiles:
    """Where a model id's config.json was found.

    ``config``: its config.json; ``quant_config``: a ModelOpt ``hf_quant_config.json`` beside it (None
    when there is none); ``source``: where, in words, without this machine's paths (the cache
    revision, or the dependency's version).
    """

    hf_id: str
    config: Path
    quant_config: Path | None
    source: str


def looks_like_hf_id(ref: str) -> bool:
    """True for ``org/name`` as Hugging Face spells a model id (and not a file name ending .json/.yaml)."""
    return (
        bool(_HF_ID.fullmatch(ref))
        and "--" not in ref
        and ".." not in ref
        and not ref.lower().endswith(_FILE_SUFFIXES)
        and not ref.startswith(".")
    )


def hf_hub_cache_dir() -> Path:
    """The Hugging Face hub cache folder this environment names (it need not exist)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _from_cache(hf_id: str) -> HFModelFiles | None:
    """The cached snapshot's config.json: the revision ``refs/main`` names, else the only snapshot."""
    repo = hf_hub_cache_dir() / ("models--" + hf_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    try:
        revision = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except OSError:  # downloaded by commit hash only: no refs/main
        try:
            held = [p.name for p in snapshots.iterdir() if (p / "config.json").is_file()]
        except OSError:
            return None
        if len(held) != 1:
            return None
        revision = held[0]
    folder = snapshots / revision
    if not revision or not (folder / "config.json").is_file():
        return None
    quant = folder / "hf_quant_config.json"
    return HFModelFiles(
        hf_id,
        folder / "config.json",
        quant if quant.is_file() else None,
        f"Hugging Face cache, {hf_id} revision {revision}",
    )


def dependency_model_configs() -> Path:
    """aiconfigurator-core's ``model_configs`` folder (found through importlib.resources)."""
    return Path(str(resources.files(_DEPENDENCY_PACKAGE) / "model_configs"))


def dependency_version() -> str:
    """The installed aiconfigurator-core's version."""
    return metadata.version(DEPENDENCY)


def dependency_model_ids() -> list[str]:
    """The Hugging Face ids whose config.json aiconfigurator-core ships, sorted."""
    folder = dependency_model_configs()
    names = (p.name for p in folder.iterdir() if p.name.endswith(_CONFIG_SUFFIX))
    return sorted(n[: -len(_CONFIG_SUFFIX)].replace("--", "/", 1) for n in names if not n.endswith(_QUANT_SUFFIX))


def dependency_model(hf_id: str) -> HFModelFiles | None:
    """The config.json aiconfigurator-core ships for ``hf_id`` (the HF cache not consulted); None without one."""
    stem = hf_id.replace("/", "--")
    folder = dependency_model_configs()
    config = folder / (stem + _CONFIG_SUFFIX)
    if not config.is_file():
        return None
    quant = folder / (stem + _QUANT_SUFFIX)
    return HFModelFiles(
        hf_id,
        config,
        quant if quant.is_file() else None,
        f"{DEPENDENCY} {dependency_version()} model_configs/{config.name}",
    )


def find_hf_model(hf_id: str) -> HFModelFiles | None:
    """The config.json of Hugging Face model ``hf_id``: from the local HF cache, else from aiconfigurator-core's
    model_configs; None when neither holds it."""
    return _from_cache(hf_id) or dependency_model(hf_id)


def unknown_hf_id(hf_id: str, presets: list[str]) -> str:
    """One line saying that ``hf_id`` is in neither place (with close ids the dependency has) and naming the presets."""
    close = difflib.get_close_matches(hf_id, dependency_model_ids(), n=3, cutoff=0.6)
    hint = f" (close: {', '.join(close)})" if close else ""
    return (
        f"unknown model {hf_id!r}: no such file or folder, not in the Hugging Face cache {hf_hub_cache_dir()} "
        f"(models--{hf_id.replace('/', '--')}), and not among {DEPENDENCY}'s model_configs{hint}; "
        f"presets (servesim presets): {', '.join(presets)}"
    )
