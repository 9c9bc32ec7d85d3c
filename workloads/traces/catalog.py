"""Traces shipped inside the package (``workloads/data``), by name; see data/ATTRIBUTION.md.

``TRACE_ALIASES`` are older names that still work: ``canonical_name`` maps one to its
shipped name and prints one warning line on stderr (once per name and process) saying
what the trace is and which name to use.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShippedTrace:
    """A trace file in ``workloads/data`` (gzip-compressed) and how to read it."""

    filename: str
    format: str
    description: str


SHIPPED_TRACES: dict[str, ShippedTrace] = {
    "sharegpt-8k-multiturn": ShippedTrace(
        "sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz",
        "vidur",
        "ShareGPT multi-turn chats up to 8K tokens (Sarathi-Serve's chat trace), 30,731 rows",
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

# old name -> (shipped name, what the old name stood for)
TRACE_ALIASES: dict[str, tuple[str, str]] = {
    "sharegpt": (
        "sharegpt-8k-multiturn",
        "Sarathi-Serve's 8K multi-turn ShareGPT set (mean 2,340 prompt / 439 output "
        "tokens), not the ~200-token first-turn prompts of `vllm bench serve --dataset-name sharegpt`",
    ),
}
_warned: set[str] = set()


def canonical_name(name: str) -> str:
    """The shipped name ``name`` stands for: itself, or an alias's target (warning once on stderr)."""
    alias = TRACE_ALIASES.get(name)
    if alias is None:
        return name
    target, what = alias
    if name not in _warned:
        _warned.add(name)
        print(
            f"servesim: warning: dataset name {name!r} is {what}; it still works, but use {target!r}",
            file=sys.stderr,
        )
    return target
