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
from policies.batching.registry import BATCH_POLICIES, BatchTraits


def resolve_for_hardware(params: BaseModel, device_memory_bytes: float, device_name: str) -> BaseModel:
    """A policy's parameters with hardware-dependent defaults filled in for the replica's GPU.

    Policies whose traits declare ``hardware_defaults`` have such defaults (``vllm``: its budget and
    ``max_num_seqs``; ``sglang``: its ``chunked_prefill_size``); other policies' parameters are returned as they are.
    """
    if BATCH_POLICIES.entry(params.kind).traits.hardware_defaults:  # type: ignore[attr-defined]
        return params.resolve_for_hardware(device_memory_bytes, device_name)  # type: ignore[attr-defined]
    return params


def traits_of(kind: str) -> BatchTraits:
    """What the policy registered as ``kind`` declares about itself (the engine it models, what it overlaps...)."""
    return BATCH_POLICIES.entry(kind).traits  # type: ignore[return-value]


__all__ = ["BATCH_POLICIES", "BatchTraits", "resolve_for_hardware", "traits_of"]
