"""The plain request specs a workload yields: columns of numpy arrays, sorted by arrival."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class RequestStream:
    """Requests to simulate, one row per request, in arrival order.

    ``arrival_s`` is seconds since the start of the arrival schedule.
    """

    arrival_s: np.ndarray
    num_prompt_tokens: np.ndarray
    num_output_tokens: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        assert len(self.num_prompt_tokens) == n and len(self.num_output_tokens) == n
        assert n == 0 or bool(np.all(np.diff(self.arrival_s) >= 0)), "arrivals must be sorted"

    def __len__(self) -> int:
        return len(self.arrival_s)
