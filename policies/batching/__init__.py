"""Batch policies, registered by name in ``BATCH_POLICIES``. Importing this package registers the built-ins."""

from policies.batching import hf_fifo, no_kv_cache, vllm  # noqa: F401  (registration side effect)
from policies.batching.registry import BATCH_POLICIES

__all__ = ["BATCH_POLICIES"]
