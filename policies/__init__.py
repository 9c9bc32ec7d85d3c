"""Decisions: batch policies and their interfaces. Imports nothing of ``simulator``."""

from policies.batching import BATCH_POLICIES
from policies.interface import BatchPolicy, ReplicaView, RequestView, StepPlan
from policies.registry import Registry

__all__ = ["BATCH_POLICIES", "BatchPolicy", "Registry", "ReplicaView", "RequestView", "StepPlan"]
