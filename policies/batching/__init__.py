"""Batch policies, registered by name in ``BATCH_POLICIES``. Importing this package registers the built-ins."""

from policies.batching import continuous, hf_fifo, no_kv_cache, priority, sarathi, static, vllm  # noqa: F401
from policies.batching.registry import BATCH_POLICIES

__all__ = ["BATCH_POLICIES"]
