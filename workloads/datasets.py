"""Length datasets by name: the (prompt, output) columns of the traces shipped in ``data/``.

Every shipped trace has both lengths, so every name in ``LENGTH_DATASETS`` (and every old
name in ``TRACE_ALIASES``, with a warning) can drive a ``{kind: dataset, name: ...}`` length
config (see data/ATTRIBUTION.md for sources and licences).
"""

from __future__ import annotations

import numpy as np

from workloads.traces import SHIPPED_TRACES, canonical_name, read_trace

LENGTH_DATASETS = SHIPPED_TRACES
DEFAULT_LENGTH_DATASET = "sharegpt-8k-multiturn"


def length_summary(name: str) -> dict[str, float | int]:
    """Rows and mean / median prompt and output tokens of a shipped trace, computed from its file."""
    prompt, output = load_length_dataset(name)
    return {
        "num_rows": len(prompt),
        "mean_prompt_tokens": float(prompt.mean()),
        "median_prompt_tokens": float(np.median(prompt)),
        "mean_output_tokens": float(output.mean()),
        "median_output_tokens": float(np.median(output)),
    }


def load_length_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) token counts of a shipped trace (read-only arrays); ValueError listing the names if unknown."""
    name = canonical_name(name)
    if name not in LENGTH_DATASETS:
        raise ValueError(f"unknown length dataset {name!r}; shipped: {', '.join(LENGTH_DATASETS)}")
    trace = read_trace(name)
    return trace.num_prompt_tokens, trace.num_output_tokens
