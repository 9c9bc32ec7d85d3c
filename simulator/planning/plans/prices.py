"""The price table: USD per GPU-hour of each hardware a plan considers.

A hardware's price is looked up, first match wins, in the overrides (keyed by the
scenario's hardware reference, e.g. ``h100-sxm``, or by the spec's name, e.g.
``H100-SXM5-80GB``), then in the spec's own ``price_per_hour_usd``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import RootModel, ValidationError, field_validator

from simulator.config.errors import format_validation_error
from simulator.config.files import read_yaml_mapping


class PriceTable(RootModel[dict[str, float]]):
    """hardware preset or spec name -> USD per GPU-hour (positive)."""

    @field_validator("root")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for name, price in value.items():
            if not 0 < price < math.inf:
                raise ValueError(f"{name}: a price per GPU-hour must be a positive number (got {price})")
        return value


def validate_prices(data: Any, source: str) -> dict[str, float]:
    """A validated price mapping; ValueError naming ``source`` and the entry."""
    try:
        return dict(PriceTable.model_validate(data).root)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=source)) from None


def read_prices(path: Path) -> dict[str, float]:
    """A YAML file of ``hardware: usd_per_gpu_hour``."""
    return validate_prices(read_yaml_mapping(path), str(path))


def parse_price(text: str) -> tuple[str, float]:
    """``HARDWARE=USD`` from the command line; ValueError otherwise."""
    name, sep, value = text.partition("=")
    try:
        price = float(value)
    except ValueError:
        price = float("nan")
    if not sep or not name or not 0 < price < math.inf:
        raise ValueError(f"--price {text!r}: expected HARDWARE=USD_PER_GPU_HOUR with a positive price")
    return name, price


def price_per_gpu_hour(
    hardware_ref: Any, hardware_spec: Mapping[str, Any], overrides: Mapping[str, float]
) -> float | None:
    """The price of one GPU-hour, or None when neither the overrides nor the spec give one."""
    if isinstance(hardware_ref, str) and hardware_ref in overrides:
        return overrides[hardware_ref]
    if hardware_spec.get("name") in overrides:
        return overrides[hardware_spec["name"]]
    return hardware_spec.get("price_per_hour_usd")
