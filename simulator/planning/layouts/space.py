"""The layouts of N GPUs the question searches, and the settings tried on each.

A layout is aggregated (``replicas`` copies of one TP degree, each prefilling and decoding, N =
replicas x tp) or disaggregated (a prefill pool of ``prefill_count`` replicas of TP
``prefill_tp`` and a decode pool of ``decode_count`` of TP ``decode_tp``, N = the sum of the
pools' GPUs). Every GPU is used: a layout that leaves some idle serves less per GPU than one
that does not (its idle GPUs count in the denominator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Tensor-parallel degrees tried: within one NVLink/NVSwitch domain (an HGX board's 8 GPUs), the
# degrees aiconfigurator's default search and vLLM's usual deployments use.
TP_DEGREES = (1, 2, 4, 8)
# Token budgets (vLLM's max_num_batched_tokens) tried: vLLM's two defaults (2048, and 8192 on GPUs of
# 70 GiB or more: ``policies.batching.vllm.vllm_batch_defaults``), the doubling between them and the one above.
TOKEN_BUDGETS = (2048, 4096, 8192, 16384)
# Batch limits (vLLM's max_num_seqs) a layout's concurrency is rounded up to: powers of two up to 1024,
# vLLM's default on GPUs of 70 GiB or more (``vllm_batch_defaults``).
MAX_NUM_SEQS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# Standard deviations of the running count a batch limit leaves room for: 3 covers a Poisson count's 99.9th
# percentile within a request or two from a mean of about 10 up.
SEQS_SIGMAS = 3.0


@dataclass(frozen=True, slots=True)
class Layout:
    """One way to deploy on N GPUs: aggregated (``decode_tp`` None) or disaggregated pools."""

    tp: int  # aggregated: each replica's TP; disaggregated: the prefill pool's
    count: int  # aggregated: replicas; disaggregated: prefill replicas
    budget_tokens: int  # max_num_batched_tokens of the (prefill) replicas
    decode_tp: int | None = None
    decode_count: int | None = None

    @property
    def disaggregated(self) -> bool:
        return self.decode_tp is not None

    @property
    def num_gpus(self) -> int:
        return self.tp * self.count + (self.decode_tp or 0) * (self.decode_count or 0)

    @property
    def name(self) -> str:
        """``4x tp2 b8192`` or ``P 2x tp2 b8192 + D 1x tp4``."""
        if not self.disaggregated:
            return f"{self.count}x tp{self.tp} b{self.budget_tokens}"
        return f"P {self.count}x tp{self.tp} b{self.budget_tokens} + D {self.decode_count}x tp{self.decode_tp}"

    def overrides(self, max_num_seqs: int) -> dict[str, Any]:
        """The scenario overrides that deploy this layout (vLLM V1 with these limits)."""
        policy = {"kind": "vllm", "max_num_seqs": max_num_seqs, "max_num_batched_tokens": self.budget_tokens}
        if not self.disaggregated:
            return {"parallelism.tp": self.tp, "replicas": self.count, "groups": None, "policy": policy}
        decode_policy = policy | {"max_num_batched_tokens": max(self.budget_tokens, max_num_seqs)}
        return {
            "replicas": 1,
            "groups": [
                {"role": "prefill", "count": self.count, "parallelism": {"tp": self.tp}, "policy": policy},
                {"role": "decode", "count": self.decode_count, "parallelism": {"tp": self.decode_tp},
                 "policy": decode_policy},
            ],
        }  # fmt: skip


def layouts(num_gpus: int, tps: tuple[int, ...], disaggregated: bool = True) -> list[Layout]:
    """Every layout using all ``num_gpus`` GPUs with TP degrees from ``tps`` (those the model can run), each
    token budget; disaggregated ones too (``disaggregated``)."""
    out = []
    for budget in TOKEN_BUDGETS:
        out += [Layout(tp, num_gpus // tp, budget) for tp in tps if num_gpus % tp == 0]
        if not disaggregated:
            continue
        for ptp in tps:
            for pn in range(1, num_gpus // ptp + 1):
                rest = num_gpus - ptp * pn
                out += [Layout(ptp, pn, budget, dtp, rest // dtp) for dtp in tps if rest > 0 and rest % dtp == 0]
    return out


def seqs_limit(concurrency: int) -> int:
    """The least batch limit of ``MAX_NUM_SEQS`` that holds ``concurrency`` running requests and their
    fluctuation (else the largest): under Poisson arrivals the number running is about Poisson with that
    mean (an M/G/inf count), so the limit covers its mean plus ``SEQS_SIGMAS`` standard deviations; a limit at
    the mean would queue requests for a slot half the time."""
    need = concurrency + SEQS_SIGMAS * math.sqrt(concurrency)
    return next((s for s in MAX_NUM_SEQS if s >= need), MAX_NUM_SEQS[-1])
