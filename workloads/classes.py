"""Request classes: priority, SLO class and tenant labels assigned to a workload's requests."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from workloads.validators import FINITE, MAX_WEIGHT

# Priorities are stored in int64 columns and compared and aged arithmetically: int32's range is plenty.
MAX_PRIORITY = 2**31 - 1


class RequestClass(BaseModel):
    """One class of requests and its share of the workload."""

    model_config = FINITE

    weight: float = Field(
        1.0, gt=0, le=MAX_WEIGHT, description="Relative share of requests (or sessions) in this class."
    )
    priority: int = Field(
        0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="Scheduling priority; lower is more important."
    )
    slo_class: str | None = Field(None, min_length=1, description="SLO class label, e.g. interactive or batch.")
    tenant: str | None = Field(None, min_length=1, description="Tenant (customer) label.")


def check_classes(classes: tuple[RequestClass, ...] | None) -> tuple[RequestClass, ...] | None:
    """Reject a mix where some classes name an SLO class (or tenant) and others do not."""
    if classes is None:
        return None
    if not classes:
        raise ValueError("classes: give at least one class (or leave classes out)")
    for label in ("slo_class", "tenant"):
        named = [getattr(c, label) is not None for c in classes]
        if any(named) and not all(named):
            raise ValueError(f"classes: give every class a {label}, or none")
    return classes


def assign_classes(
    classes: tuple[RequestClass, ...], group: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray | tuple[str, ...]]:
    """RequestStream columns for a class mix: one class per group, drawn by weight.

    ``group`` holds, per request, the index of its group (a session, a closed-loop user,
    or the request itself); every request of a group gets the group's class. Groups are
    numbered 0..G-1 in order of first appearance.
    """
    num_groups = int(group.max()) + 1 if len(group) else 0
    weights = np.array([c.weight for c in classes])
    drawn = rng.choice(len(classes), size=num_groups, p=weights / weights.sum())
    chosen = drawn[group]
    out: dict[str, np.ndarray | tuple[str, ...]] = {
        "priority": np.array([c.priority for c in classes], dtype=np.int64)[chosen]
    }
    for label in ("slo_class", "tenant"):
        values = [getattr(c, label) for c in classes]
        if values[0] is None:
            continue
        names = tuple(dict.fromkeys(values))
        codes = np.array([names.index(v) for v in values], dtype=np.int64)
        out[label] = codes[chosen]
        out[f"{label}_names"] = names
    return out
