"""Batch policies, registered by name in ``BATCH_POLICIES``. Importing this package registers the built-ins."""

from policies.batching import continuous, hf_fifo, no_kv_cache, priority, sarathi, static, vllm, vllm_v0  # noqa: F401
from policies.batching.registry import BATCH_POLICIES
from policies.batching.vllm import resolve_for_hardware

__all__ = ["BATCH_POLICIES", "resolve_for_hardware"]
