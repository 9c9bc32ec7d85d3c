"""Batch policies, registered by name in ``BATCH_POLICIES``. Importing this package registers the built-ins."""

from policies.batching import continuous, no_kv_cache, priority, sarathi, static, vllm  # noqa: F401  (registration)
from policies.batching.registry import BATCH_POLICIES

__all__ = ["BATCH_POLICIES"]
