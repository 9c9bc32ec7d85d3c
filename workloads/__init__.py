"""Workloads: arrival processes, length distributions, sessions and trace readers.

``generate(cfg, seed, base_dir)`` turns a ``WorkloadConfig`` into a ``RequestStream``.
Imports nothing of the other packages.
"""

from workloads.config import WorkloadConfig
from workloads.generate import generate
from workloads.stream import RequestStream

__all__ = ["RequestStream", "WorkloadConfig", "generate"]
