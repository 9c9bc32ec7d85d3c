"""Workloads: arrival processes, length distributions and traces. Imports nothing of the other packages."""

from workloads.config import WorkloadConfig
from workloads.generate import generate
from workloads.stream import RequestStream

__all__ = ["RequestStream", "WorkloadConfig", "generate"]
