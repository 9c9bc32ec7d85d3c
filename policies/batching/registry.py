"""The batch-policy registry: name -> (policy class, its pydantic parameter model)."""

from policies.interface import BatchPolicy
from policies.registry import Registry

BATCH_POLICIES: Registry[type[BatchPolicy]] = Registry("batch policy")
