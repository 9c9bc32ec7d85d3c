"""Length datasets by name: the (prompt, output) columns of the named traces (see ``workloads.traces.catalog``).

Every named trace has both lengths, so every name in ``LENGTH_DATASETS`` (and every old
name in ``TRACE_ALIASES``, with a warning) can drive a ``{kind: dataset, name: ...}`` length
config. The file is found locally or downloaded on first use (``workloads.traces.fetch``);
the default scenario's lengths are parametric and need no file (``workloads.default_lengths``).
"""

from __future__ import annotations

import numpy as np

from workloads.traces import TRACE_CATALOG, canonical_name, read_trace

LENGTH_DATASETS = TRACE_CATALOG
DEFAULT_LENGTH_DATASET = "sharegpt-8k-multiturn"


def load_length_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) token counts of a named trace (read-only arrays); ValueError listing the names if unknown."""
    name = canonical_name(name)
    if name not in LENGTH_DATASETS:
        raise ValueError(f"unknown length dataset {name!r}; named: {', '.join(LENGTH_DATASETS)}")
    trace = read_trace(name)
    return trace.num_prompt_tokens, trace.num_output_tokens
