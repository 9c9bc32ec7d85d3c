"""Speculative decoding in the engine: how many proposed tokens each verification step accepts.

Each step a decoding request verifies ``K`` proposed tokens; it keeps the accepted prefix of
them plus the model's own next token, so a step emits 1 to K + 1 tokens for it (Leviathan et
al., "Fast Inference from Transformers via Speculative Decoding", ICML 2023). With an
acceptance rate a and independent tokens, accepting j of K has probability a^j (1 - a) for
j < K and a^K for j = K, and the tokens per step average (1 - a^(K+1)) / (1 - a) (the paper's
equation 1). A measured distribution of accepted lengths (vLLM reports acceptance counts per
position) replaces the independence assumption.

The draws come from the replica's own seeded stream, in the order the step lists its
requests, so the same seed gives the same run.
"""

from __future__ import annotations

import numpy as np

DRAWS_PER_BATCH = 4096  # draws are made in batches of this many (one rng call, same sequence)


def acceptance_probabilities(num_tokens: int, rate: float | None, lengths: tuple[float, ...] | None) -> np.ndarray:
    """P(accepting j of ``num_tokens`` proposals), j = 0..K, from a rate or a measured distribution."""
    if lengths is not None:
        probs = np.asarray(lengths, dtype=float)
        return probs / probs.sum()
    assert rate is not None
    j = np.arange(num_tokens + 1)
    probs = rate**j * (1 - rate)
    probs[-1] = rate**num_tokens
    return probs


def expected_tokens_per_step(probs: np.ndarray) -> float:
    """Tokens a verification step emits on average: one more than the proposals it accepts."""
    return float(1 + (np.arange(len(probs)) * probs).sum())


class Speculation:
    """One engine's speculative decoding: K proposals a step and the accepted-length draws."""

    def __init__(self, num_tokens: int, probs: np.ndarray, rng: np.random.Generator) -> None:
        self.num_tokens = num_tokens
        self._cdf = np.cumsum(probs)
        self._cdf[-1] = 1.0
        self._rng = rng
        self._draws: list[int] = []

    def accepted(self) -> int:
        """Proposals the next verification accepts (0..K)."""
        if not self._draws:
            u = self._rng.random(DRAWS_PER_BATCH)
            self._draws = np.searchsorted(self._cdf, u, side="right").tolist()[::-1]
        return self._draws.pop()
