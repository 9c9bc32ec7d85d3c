"""How many KV blocks a replica's GPUs leave after weights and the runtime reserve."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.config.specs import HardwareSpec, ModelSpec


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-GPU memory budget of one replica and the KV blocks it leaves."""

    usable_bytes: float
    weight_bytes: float
    reserve_bytes: float
    kv_bytes: float
    block_bytes: float
    num_blocks: int


def default_reserve_bytes(model: ModelSpec, tp: int, max_batched_tokens: int = 8192, max_seqs: int = 256) -> float:
    """Activation peak and runtime memory besides weights and KV, per GPU (an estimate).

    1 GiB for the CUDA context, cuBLAS workspaces and graphs, plus the activations of a
    step of ``max_batched_tokens`` tokens (residual, QKV and MLP intermediates in bf16)
    and fp32 logits for ``max_seqs`` sampled rows. Calibration measures the real figure.
    """
    act = max_batched_tokens * (4 * model.hidden_size + 3 * model.intermediate_size / tp) * 2
    logits = max_seqs * model.vocab_size / tp * 4
    return float(2**30 + act + logits)


def plan_memory(
    model: ModelSpec,
    hardware: HardwareSpec,
    tp: int,
    block_size: int,
    gpu_memory_utilization: float,
    reserve_bytes: float | None = None,
    pp: int = 1,
    weight_bytes: float | None = None,
    memory_bytes: float | None = None,
    extra_weight_bytes: float = 0.0,
    extra_kv_bytes_per_token: float = 0.0,
) -> MemoryPlan:
    """KV blocks per replica: (memory x utilization - weights/(tp pp) - reserve) / bytes per block, per GPU.

    Every GPU holds its share of the weights and the KV of its layers for every token, so
    the block count is the same on all of them (the fullest pipeline stage decides).

    ``weight_bytes`` and ``memory_bytes`` replace the figures computed from the specs when
    given (a calibration profile measured them on the device: weights as loaded, total
    device memory). ``extra_weight_bytes`` (split over tp) and ``extra_kv_bytes_per_token``
    (per GPU) are a speculative proposer's weights and KV. Raises ValueError with the figures
    when the weights do not leave room for one block.
    """
    device_bytes = hardware.memory_bytes if memory_bytes is None else memory_bytes
    usable = device_bytes * gpu_memory_utilization
    weights = (model.weight_bytes_total() if weight_bytes is None else weight_bytes) / (tp * pp)
    weights += extra_weight_bytes / tp  # a speculative proposer's, split over the tp GPUs
    reserve = default_reserve_bytes(model, tp) if reserve_bytes is None else reserve_bytes
    block_bytes = (model.kv_bytes_per_token_per_gpu(tp, pp) + extra_kv_bytes_per_token) * block_size
    kv_bytes = usable - weights - reserve
    num_blocks = int(kv_bytes // block_bytes) if kv_bytes > 0 else 0
    if num_blocks < 1:
        gib = 2**30
        where = f"{model.name} on {hardware.name} with tp={tp}, pp={pp}"
        budget = (
            f"weights take {weights / gib:,.1f} GiB per GPU and the reserve {reserve / gib:,.1f} GiB, of "
            f"{usable / gib:,.1f} GiB usable (memory x gpu_memory_utilization)"
        )
        if kv_bytes <= 0:
            raise ValueError(
                f"{model.name} does not fit on {hardware.name} with tp={tp}, pp={pp}: {budget}, which leaves "
                "nothing for the KV cache; use a larger tp or pp, or a device with more memory"
            )
        raise ValueError(
            f"{where}: one KV block of {block_size:,} tokens takes {block_bytes / gib:,.3g} GiB per GPU, more than "
            f"the {kv_bytes / gib:,.3g} GiB left for the KV cache ({budget}); use a smaller kv_cache.block_size "
            "(vLLM's default is 16)"
        )
    return MemoryPlan(usable, weights, reserve, kv_bytes, block_bytes, num_blocks)
