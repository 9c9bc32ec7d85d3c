"""Time to move bytes over a link (host link for swapping, interconnect for KV transfers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Link:
    """A link of ``bandwidth_bytes_per_s`` per direction and ``latency_s`` per transfer."""

    bandwidth_bytes_per_s: float
    latency_s: float

    def time_s(self, num_bytes: float, num_transfers: int = 1) -> float:
        """Seconds to move ``num_bytes`` split into ``num_transfers`` transfers, back to back."""
        if num_bytes <= 0 and num_transfers <= 0:
            return 0.0
        return num_bytes / self.bandwidth_bytes_per_s + num_transfers * self.latency_s
