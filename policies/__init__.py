"""Decisions: batch policies and their interfaces. Imports nothing of ``simulator``."""

from policies.batching import BATCH_POLICIES
from policies.interface import BatchPolicy, ReplicaView, RequestView, StepPlan
from policies.registry import Registry
from policies.routing import ROUTERS, ReplicaState, Router

__all__ = [
    "BATCH_POLICIES",
    "ROUTERS",
    "BatchPolicy",
    "Registry",
    "ReplicaState",
    "ReplicaView",
    "RequestView",
    "Router",
    "StepPlan",
]
