"""Batch policies, registered by name in ``BATCH_POLICIES``. Importing this package registers the built-ins."""

from pydantic import BaseModel

from policies.batching import (  # noqa: F401
    continuous,
    hf_fifo,
    no_kv_cache,
    priority,
    sarathi,
    sglang,
    static,
    trtllm,
    vllm,
    vllm_v0,
)
from policies.batching.registry import BATCH_POLICIES


def resolve_for_hardware(params: BaseModel, device_memory_bytes: float, device_name: str) -> BaseModel:
    """A policy's parameters with hardware-dependent defaults filled in for the replica's GPU.

    ``vllm`` (its budget and ``max_num_seqs``) and ``sglang`` (its ``chunked_prefill_size``) have such
    defaults; other policies' parameters are returned as they are.
    """
    if isinstance(params, (vllm.VllmParams, sglang.SglangParams)):
        return params.resolve_for_hardware(device_memory_bytes, device_name)
    return params


__all__ = ["BATCH_POLICIES", "resolve_for_hardware"]
