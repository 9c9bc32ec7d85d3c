"""The named trace data sets: where each one is maintained, its licence, its sha256, and how to read it.

None of these files is in servesim's git or package. ``workloads.traces.fetch`` finds a
named file in ``SERVESIM_DATA_DIR`` or the user's cache, or downloads it from ``url`` (the
raw file of ``repository`` at the pinned ``commit``) and checks its sha256. The sha256s
were computed from byte-for-byte copies of the source files (checked with ``git
hash-object`` against the source blobs); ``rows`` and the mean / median lengths were
computed from the same files with ``read_trace`` (a test checks them against the files).

``TRACE_ALIASES`` are older names that still work: ``canonical_name`` maps one to its
catalogue name and prints one warning line on stderr (once per name and process) saying
what the trace is and which name to use.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

RAW_FILES_URL = "https://raw.githubusercontent.com"  # GitHub's raw file host: /<owner>/<name>/<commit>/<path>
AZURE_COMMIT = "b469a113cedca53ddc3bdea71a143dc4b7d8700c"  # Azure/AzurePublicDataset
MOONCAKE_COMMIT = "3b5a594133958449a1feaf1c9e0fc1b553e34a28"  # kvcache-ai/Mooncake
ETALON_COMMIT = "d5f18de15a2227a2d469365afc4fa9e2df0c631d"  # project-etalon/etalon
VIDUR_COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"  # microsoft/vidur
TRACELAB_COMMIT = "0b8a262ba69602869133b65972d51a388bde45e1"  # uw-syfi/TraceLab

SPLITWISE = 'Patel et al., "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024'
MOONCAKE = (
    'Qin et al., "Mooncake: Trading More Storage for Less Computation - A KVCache-centric Architecture '
    'for Serving LLM Chatbot", FAST 2025'
)
SARATHI = 'Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024'
VIDUR = 'Agrawal et al., "Vidur: A Large-Scale Simulation Framework for LLM Inference", MLSys 2024'
TRACELAB = "uw-syfi/TraceLab, example_sessions/sanitized (sanitized coding-agent sessions)"


@dataclass(frozen=True, slots=True)
class NamedTrace:
    """A public trace file by name: its canonical source, licence, sha256, and how servesim reads it."""

    filename: str  # the source file's own name, as kept in SERVESIM_DATA_DIR and the cache
    format: str  # the trace reader (see workloads.traces.FORMATS)
    description: str
    repository: str  # GitHub owner/name where the file is maintained
    commit: str  # the commit the sha256 was taken at
    path: str  # the file's path in the repository
    licence: str
    citation: str
    sha256: str
    size_bytes: int
    rows: int
    mean_prompt_tokens: float
    median_prompt_tokens: float
    mean_output_tokens: float
    median_output_tokens: float

    @property
    def url(self) -> str:
        """The raw file at the pinned commit."""
        return f"{RAW_FILES_URL}/{self.repository}/{self.commit}/{self.path}"

    @property
    def source(self) -> str:
        """``owner/name@commit:path``, short enough for a table."""
        return f"{self.repository}@{self.commit[:7]}:{self.path}"


TRACE_CATALOG: dict[str, NamedTrace] = {
    "sharegpt-8k-multiturn": NamedTrace(
        "sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "vidur",
        "ShareGPT multi-turn chats up to 8K tokens (Sarathi-Serve's chat trace), lengths only",
        "project-etalon/etalon",
        ETALON_COMMIT,
        "data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "Apache-2.0 (byte-identical in microsoft/sarathi-serve, Apache-2.0); token counts of the community "
        "ShareGPT dump",
        SARATHI,
        "6d6c296302a853e2669a674a96f269283e60c57e60363bd450588a1066919f9f",
        949_600,
        30_731,
        2340.0,
        1730,
        438.7,
        415,
    ),
    "arxiv": NamedTrace(
        "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "vidur",
        "arXiv summarization lengths, total up to 4K tokens (Vidur's Arxiv-Summarization-4K), lengths only",
        "microsoft/vidur",
        VIDUR_COMMIT,
        "data/processed_traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "MIT",
        VIDUR,
        "9d3580538d915ca75e4aaaa54590b42dbb17abc6d74c8913310cf07c232adcdc",
        884_932,
        28_257,
        2588.1,
        2730,
        291.4,
        167,
    ),
    "bwb": NamedTrace(
        "bwb_stats_llama2_tokenizer_filtered_v2.csv",
        "vidur",
        "BWB document translation lengths, total up to 4K tokens (Vidur's BWB-4K), lengths only",
        "project-etalon/etalon",
        ETALON_COMMIT,
        "data/processed_traces/bwb_stats_llama2_tokenizer_filtered_v2.csv",
        "Apache-2.0",
        VIDUR,
        "389419d2f2e55149b5d6ccfedb881572798d39650436ab86fd61f3c40337a990",
        1_123_791,
        33_768,
        1067.2,
        1037,
        1612.8,
        1601,
    ),
    "azure-code": NamedTrace(
        "AzureLLMInferenceTrace_code.csv",
        "azure",
        "Azure 2023 coding service, 1 hour of arrivals",
        "Azure/AzurePublicDataset",
        AZURE_COMMIT,
        "data/AzureLLMInferenceTrace_code.csv",
        "CC-BY-4.0",
        SPLITWISE,
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
        320_117,
        8_819,
        2047.8,
        1469,
        27.9,
        13,
    ),
    "azure-conv": NamedTrace(
        "AzureLLMInferenceTrace_conv.csv",
        "azure",
        "Azure 2023 conversation service, 1 hour of arrivals",
        "Azure/AzurePublicDataset",
        AZURE_COMMIT,
        "data/AzureLLMInferenceTrace_conv.csv",
        "CC-BY-4.0",
        SPLITWISE,
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
        719_188,
        19_366,
        1154.7,
        1020,
        211.1,
        129,
    ),
    "mooncake-conversation": NamedTrace(
        "conversation_trace.jsonl",
        "mooncake",
        "Kimi chat (Mooncake FAST'25), 1 hour of arrivals, 512-token prefix blocks",
        "kvcache-ai/Mooncake",
        MOONCAKE_COMMIT,
        "FAST25-release/traces/conversation_trace.jsonl",
        "Apache-2.0",
        MOONCAKE,
        "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
        3_029_533,
        12_031,
        12035.1,
        6909,
        342.6,
        350,
    ),
    "mooncake-synthetic": NamedTrace(
        "synthetic_trace.jsonl",
        "mooncake",
        "Mooncake FAST'25 synthetic (public data sets, Poisson arrivals), 512-token prefix blocks",
        "kvcache-ai/Mooncake",
        MOONCAKE_COMMIT,
        "FAST25-release/traces/synthetic_trace.jsonl",
        "Apache-2.0",
        MOONCAKE,
        "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
        1_136_313,
        3_993,
        15325.5,
        11587,
        149.1,
        69,
    ),
    "agent-rounds": NamedTrace(
        "round_trace.jsonl",
        "agent_rounds",
        "TraceLab sample: 2 coding-agent sessions (Claude Code, Codex), one LLM call a row",
        "uw-syfi/TraceLab",
        TRACELAB_COMMIT,
        "example_sessions/sanitized/round_trace.jsonl",
        "Apache-2.0 (repository; the full TraceLab data set is CC-BY-4.0)",
        TRACELAB,
        "314c49483148fe68e230a683f739e3e6e68d478948ecf342739596f30af36b57",
        32_960,
        19,
        27053.3,
        32272,
        596.6,
        273,
    ),
}

# old name -> (catalogue name, what the old name stood for)
TRACE_ALIASES: dict[str, tuple[str, str]] = {
    "sharegpt": (
        "sharegpt-8k-multiturn",
        "Sarathi-Serve's 8K multi-turn ShareGPT set (mean 2,340 prompt / 439 output "
        "tokens), not the ~200-token first-turn prompts of `vllm bench serve --dataset-name sharegpt`",
    ),
}
_warned: set[str] = set()


def canonical_name(name: str) -> str:
    """The catalogue name ``name`` stands for: itself, or an alias's target (warning once on stderr)."""
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
