"""GPUs, replicas and cost of a deployment.

A scenario (one replica, or a cluster of replica groups) is the unit a plan repeats: a
deployment serving a target rate is ``replicas = ceil(target / the unit's max rate)``
copies of it, each receiving ``target / replicas``, the deployment's throughput being a
copy's times ``replicas``. Its GPUs and price come from the resolved config's
``deployment`` (``simulator.planning.points.keys.resolved_config``), one entry per group.
``ReplicaScaling`` is the seam for a check that simulates the copies together: it decides
how many copies a target needs, which config overrides and rate the operating-point
simulation runs with, and how that run's throughput scales to the deployment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

HOURS_PER_S = 1 / 3600


def gpus_per_replica(resolved: Mapping[str, Any]) -> int:
    """GPUs one copy of a resolved scenario occupies: tp x pp per replica, summed over its groups."""
    return sum(int(g["count"]) * int(g["tp"]) * int(g["pp"]) for g in resolved["deployment"])


def deployment_cost_per_hour(resolved: Mapping[str, Any], price_of) -> float | None:
    """USD per hour of one copy of the scenario; ``price_of(hardware_ref, spec)`` gives a GPU-hour's price."""
    total = 0.0
    for g in resolved["deployment"]:
        price = price_of(g["hardware_ref"], g["hardware"])
        if price is None:
            return None
        total += int(g["count"]) * int(g["tp"]) * int(g["pp"]) * price
    return total


class ReplicaScaling(Protocol):
    """How a per-replica capacity becomes a deployment for a target rate."""

    def replicas_for(self, target_rate_per_s: float, max_rate_per_replica_s: float) -> int | None:
        """Replicas needed to serve ``target_rate_per_s``; None when no number of replicas will do."""
        ...

    def least_rate_for(self, target_rate_per_s: float, num_replicas: int) -> float:
        """The smallest per-replica max rate ``num_replicas`` replicas serve the target with: a copy whose max
        rate is below it needs more (``replicas_for`` is at most ``num_replicas`` from it on)."""
        ...

    def replica_rate(self, target_rate_per_s: float, num_replicas: int) -> float:
        """The request rate the operating-point simulation runs at."""
        ...

    def operating_overrides(self, num_replicas: int) -> dict[str, Any]:
        """Config overrides (dotted paths) of the operating-point simulation."""
        ...

    def deployment_factor(self, num_replicas: int) -> float:
        """How the operating-point run's throughput and goodput scale to the whole deployment."""
        ...


class IndependentReplicas:
    """Replicas that share nothing, behind a router that splits the load evenly."""

    def replicas_for(self, target_rate_per_s: float, max_rate_per_replica_s: float) -> int | None:
        if target_rate_per_s <= 0:
            raise ValueError(f"target rate must be positive (got {target_rate_per_s})")
        if not max_rate_per_replica_s > 0:
            return None
        # the 1e-9 slack keeps a float quotient like 3.0000000000000004 from asking for a 4th replica
        return max(1, math.ceil(target_rate_per_s / max_rate_per_replica_s * (1 - 1e-9)))

    def least_rate_for(self, target_rate_per_s: float, num_replicas: int) -> float:
        return target_rate_per_s * (1 - 1e-9) / num_replicas  # the slack of replicas_for

    def replica_rate(self, target_rate_per_s: float, num_replicas: int) -> float:
        return target_rate_per_s / num_replicas

    def operating_overrides(self, num_replicas: int) -> dict[str, Any]:
        return {}

    def deployment_factor(self, num_replicas: int) -> float:
        return float(num_replicas)


def cost_per_million_tokens_usd(cost_per_hour_usd: float | None, tokens_per_s: float | None) -> float | None:
    """Dollars per million tokens at ``tokens_per_s`` for a deployment costing ``cost_per_hour_usd``."""
    if cost_per_hour_usd is None or tokens_per_s is None or not tokens_per_s > 0:
        return None
    return cost_per_hour_usd * HOURS_PER_S / tokens_per_s * 1e6
