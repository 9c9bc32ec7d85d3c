"""Length datasets shipped inside the package (see data/ATTRIBUTION.md for sources and licences)."""

from __future__ import annotations

import functools
import gzip
import io
from importlib import resources

import numpy as np
import pandas as pd

# name -> (file in workloads/data, prompt column, output column)
LENGTH_DATASETS: dict[str, tuple[str, str, str]] = {
    "sharegpt": ("sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz", "num_prefill_tokens", "num_decode_tokens"),
}


@functools.cache
def load_length_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) token counts of a shipped dataset; ValueError listing the names if unknown."""
    if name not in LENGTH_DATASETS:
        raise ValueError(f"unknown length dataset {name!r}; shipped: {', '.join(LENGTH_DATASETS)}")
    filename, prompt_col, output_col = LENGTH_DATASETS[name]
    raw = resources.files("workloads").joinpath("data", filename).read_bytes()
    frame = pd.read_csv(io.BytesIO(gzip.decompress(raw)), usecols=[prompt_col, output_col])
    prompt = frame[prompt_col].to_numpy(dtype=np.int64)
    output = frame[output_col].to_numpy(dtype=np.int64)
    prompt.flags.writeable = False
    output.flags.writeable = False
    return prompt, output
