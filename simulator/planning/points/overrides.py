"""Dotted-path overrides of a raw scenario mapping.

A point of a sweep (or a plan candidate) is the base scenario's raw mapping with some
fields replaced, then validated as a whole (``ScenarioConfig.model_validate``), never a
``model_copy`` of a validated config, so every cross-field rule runs again.

Contract of ``apply_overrides``:

- paths are dotted field names (``parallelism.tp``, ``workload.arrival.rate_per_s``);
- shorter paths apply first, so ``policy: {kind: vllm}`` then ``policy.max_num_seqs: 64``
  compose; an override of a whole field (``policy``) replaces the base's value entirely;
- a tagged field written as a bare name in the base (``policy: vllm``) becomes
  ``{kind: vllm}`` before one of its parameters is set, and one absent from the base
  (``workload.arrival`` in a scenario that leaves it out) becomes ``{kind: <the default's
  kind>}``;
- the base mapping is never modified.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from simulator.config.schema import TAGGED_FIELDS, ReplicaGroupConfig, ScenarioConfig

_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def check_path(path: str) -> str:
    """``path`` if it is a dotted field path naming a scenario field at its top; ValueError otherwise."""
    if not isinstance(path, str) or not _PATH.match(path):
        raise ValueError(f"{path!r} is not a dotted field path (like parallelism.tp)")
    head = path.split(".", 1)[0]
    if head not in ScenarioConfig.model_fields:
        known = ", ".join(ScenarioConfig.model_fields)
        raise ValueError(f"{path!r}: {head!r} is not a scenario field (known: {known})")
    return path


@functools.cache
def _defaults() -> dict[str, Any]:
    return ScenarioConfig().model_dump(mode="json")


def _empty_like_default(path: str) -> dict[str, Any]:
    """A new mapping for a field absent from the base: ``{kind: <default kind>}`` for tagged fields."""
    default = lookup(_defaults(), path)
    if isinstance(default, dict) and "kind" in default:
        return {"kind": default["kind"]}
    return {}


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    node = data
    for depth, key in enumerate(keys[:-1]):
        child = node.get(key)
        if child is None:
            child = _empty_like_default(".".join(keys[: depth + 1]))
        elif isinstance(child, str) and depth == 0 and key in TAGGED_FIELDS:
            child = {"kind": child}
        elif not isinstance(child, dict):
            where = ".".join(keys[: depth + 1])
            raise ValueError(f"cannot set {path}: {where} is {child!r}, not a mapping of fields")
        node[key] = child
        node = child
    node[keys[-1]] = copy.deepcopy(value)


# The top-level fields a replica group may set for itself: model, hardware, quantization, parallelism, policy...
GROUP_FIELDS = frozenset(ReplicaGroupConfig.model_fields) & frozenset(ScenarioConfig.model_fields)


def group_setting(groups: Any, field: str) -> int | None:
    """The index of the first of a raw scenario's ``groups`` that sets ``field`` itself (a top-level value of it
    does not reach that group), or None."""
    if not isinstance(groups, list):
        return None
    return next((i for i, g in enumerate(groups) if isinstance(g, Mapping) and g.get(field) is not None), None)


def apply_overrides(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``base`` with every ``path: value`` of ``overrides`` set (shorter paths first).

    ValueError when a path sets a top-level field that one of the resulting scenario's groups sets itself: the group
    would not read it (a sweep's grid, a plan's candidate or ``--hardware`` would run unchanged, labelled as set)."""
    data = copy.deepcopy(dict(base))
    for path in sorted(overrides, key=lambda p: p.count(".")):
        _set(data, check_path(path), overrides[path])
    for path in overrides:
        head = path.split(".", 1)[0]
        i = group_setting(data.get("groups"), head) if head in GROUP_FIELDS else None
        if i is not None:
            raise ValueError(
                f"{path}: groups[{i}] sets its own {head}, which {path} does not reach; set it in the groups instead"
            )
    return data


def lookup(data: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in a nested mapping, or None where a key is missing."""
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def scalar(value: Any) -> Any:
    """``value`` when it is a bool, number, string or None; its compact JSON text otherwise (table cells)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def describe(overrides: Mapping[str, Any]) -> str:
    """A short human label: ``hardware=h100-sxm parallelism.tp=2`` (``base`` when empty)."""
    if not overrides:
        return "base"
    return " ".join(f"{path}={scalar(value)}" for path, value in overrides.items())
