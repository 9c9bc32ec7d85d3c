"""Validators shared by the workload config models."""

from __future__ import annotations

from typing import Any


def one_stop_rule(data: Any) -> Any:
    """A workload stops after a number of requests or at a time, not both (a ``before`` model validator)."""
    if isinstance(data, dict) and data.get("num_requests") is not None and data.get("duration_s") is not None:
        raise ValueError("give num_requests or duration_s, not both")
    return data
