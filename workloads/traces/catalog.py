"""Traces shipped inside the package (``workloads/data``), by name; see data/ATTRIBUTION.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShippedTrace:
    """A trace file in ``workloads/data`` (gzip-compressed) and how to read it."""

    filename: str
    format: str
    description: str


SHIPPED_TRACES: dict[str, ShippedTrace] = {
    "sharegpt": ShippedTrace(
        "sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz", "vidur", "ShareGPT chat lengths (8K), 30,731 rows"
    ),
    "arxiv": ShippedTrace(
        "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv.gz",
        "vidur",
        "arXiv summarization lengths (4K), 28,257 rows",
    ),
    "bwb": ShippedTrace(
        "bwb_stats_llama2_tokenizer_filtered_v2.csv.gz", "vidur", "BWB translation lengths (4K), 33,768 rows"
    ),
    "azure-code": ShippedTrace(
        "AzureLLMInferenceTrace_code.csv.gz", "azure", "Azure 2023 coding service, 1 hour, 8,819 requests"
    ),
    "azure-conv": ShippedTrace(
        "AzureLLMInferenceTrace_conv.csv.gz", "azure", "Azure 2023 conversation service, 1 hour, 19,366 requests"
    ),
    "mooncake-conversation": ShippedTrace(
        "conversation_trace.jsonl.gz",
        "mooncake",
        "Kimi chat (Mooncake FAST'25), 1 hour, 12,031 requests, prefix blocks",
    ),
    "mooncake-synthetic": ShippedTrace(
        "synthetic_trace.jsonl.gz", "mooncake", "Mooncake FAST'25 synthetic, 3,993 requests, prefix blocks"
    ),
    "agent-rounds": ShippedTrace(
        "round_trace.jsonl.gz", "agent_rounds", "TraceLab sample: 2 coding-agent sessions, 19 rounds"
    ),
}
