"""Expert load imbalance: the busiest expert-parallel GPU's share of a step's expert tokens.

Under expert parallelism the MoE layer waits for the GPU whose experts received the most
tokens. servesim follows how the measured MoE tables were made (NVIDIA aiconfigurator's
``collector/*/collect_moe.py``, ``power_law_logits_v3``; its ``collector`` docs, "Power-Law
Distribution in MoE Workload Simulation"): each of the E experts gets a load drawn from a power
law ``P(x) ~ x^-alpha`` on ``[1, 0.8 T]`` (``[0.01, 2]`` when ``T k <= E``), scaled to the step's
``T k`` expert tokens; the experts are cut into ``ep`` contiguous groups and the busiest group is
the one measured. aiconfigurator ships tables at alpha 1.01 ("estimated for DeepSeek-V3/R1 on
CNNDaily/OpenOrca by latency matching") and 1.2 ("estimated for Qwen3-235B ... typical
production"); alpha 0 is its balanced case. No expert takes more than ``T`` tokens (a token
picks an expert once; aiconfigurator's ``power_law_logits_v4`` enforces the same).

The share is the mean over ``DRAWS`` draws from a fixed seed, so a cost model stays a pure
function of the batch shape.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

DRAWS = 64
SEED = 0

# The token distributions the measured MoE tables hold (aiconfigurator's ``distribution`` column).
DISTRIBUTIONS = {"balanced": 0.0, "power_law_1.01": 1.01, "power_law_1.2": 1.2}


def default_distribution(model) -> str:
    """aiconfigurator's default expert load for ``model`` (``workload_distribution = "power_law"`` in its
    ``sdk/config.py``, with the model class's alpha): 1.01 for DeepSeek-V3-built MLA models (its ``DeepSeekModel``,
    ``DeepSeekV32Model`` and Kimi models; DeepSeek-V3, R1, Kimi-K2, GLM-5), 1.2 for the other MoE models (its
    generic ``MOEModel``: gpt-oss, MiniMax-M2, Qwen3-MoE); "balanced" for a dense model (no experts)."""
    if not model.is_moe:
        return "balanced"
    return "power_law_1.01" if model.is_mla else "power_law_1.2"


def _power_law(rng: np.random.Generator, size: tuple[int, int], alpha: float, lo: float, hi: float) -> np.ndarray:
    """aiconfigurator's ``sample_power_law``: inverse-CDF samples of x^-alpha on [lo, hi]."""
    u = rng.random(size)
    return ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))


@lru_cache(maxsize=1 << 14)
def busiest_group_share(num_tokens: int, num_experts: int, top_k: int, ep: int, alpha: float) -> float:
    """Expected fraction of the ``num_tokens x top_k`` expert tokens on the busiest of ``ep`` expert groups.

    1 when ep = 1, 1/ep when balanced (alpha 0); between, what the power law gives.
    """
    if ep == 1:
        return 1.0
    if alpha == 0 or num_tokens < 1:
        return 1.0 / ep
    total = num_tokens * top_k
    lo, hi = (1.0, 0.8 * num_tokens) if total > num_experts else (0.01, 2.0)
    rng = np.random.default_rng(SEED)
    if hi <= lo:
        return 1.0 / ep
    loads = _power_law(rng, (DRAWS, num_experts), alpha, lo, hi)
    loads = loads / loads.sum(axis=1, keepdims=True) * total
    loads = np.minimum(loads, num_tokens)  # a token picks an expert at most once
    groups = loads.reshape(DRAWS, ep, num_experts // ep).sum(axis=2)
    share = groups.max(axis=1) / groups.sum(axis=1)
    return float(share.mean())
