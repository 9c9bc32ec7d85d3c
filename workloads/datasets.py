"""Length datasets by name: the (prompt, output) columns of the traces shipped in ``data/``.

Every shipped trace has both lengths, so every name in ``LENGTH_DATASETS`` can drive a
``{kind: dataset, name: ...}`` length config (see data/ATTRIBUTION.md for sources and licences).
"""

from __future__ import annotations

import numpy as np

from workloads.traces import SHIPPED_TRACES, read_trace

LENGTH_DATASETS = SHIPPED_TRACES


def load_length_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) token counts of a shipped trace (read-only arrays); ValueError listing the names if unknown."""
    if name not in LENGTH_DATASETS:
        raise ValueError(f"unknown length dataset {name!r}; shipped: {', '.join(LENGTH_DATASETS)}")
    trace = read_trace(name)
    return trace.num_prompt_tokens, trace.num_output_tokens
