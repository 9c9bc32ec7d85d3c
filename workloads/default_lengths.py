"""The default scenario's lengths: ShareGPT-like, parametric, so the default needs no data file.

Prompt and output lengths are independent lognormals, rounded and clipped to the range of
the ShareGPT length set they imitate: Sarathi-Serve's chat trace
``sharegpt_8k_filtered_stats_llama2_tokenizer.csv`` (``sharegpt-8k-multiturn`` in the trace
catalogue: project-etalon/etalon at commit d5f18de, Apache-2.0; 30,731 rows, Llama-2 tokens).

How the figures were fitted, once, from that file (sha256 6d6c2963...): each median is the
column's median; each sigma was found by bisection so that the mean of the rounded,
clipped lognormal equals the column's mean (prompt 2,340.0, output 438.7), which keeps the
load a request puts on a server the same. The clip bounds are the column's min and max.
Against the file (1,000,000 draws of ``draw_lengths`` with ``np.random.default_rng(0)``):

============  ========  =====  =====  =====  =====
tokens        source    mean   p10    p50    p90
============  ========  =====  =====  =====  =====
prompt        file      2,340     74  1,730  5,696
prompt        fitted    2,342    588  1,731  5,084
output        file        439     84    415    834
output        fitted      439    270    415    638
============  ========  =====  =====  =====  =====

The fit keeps the means and medians; the file's tails are wider at the short end (a few
very short prompts and outputs) and its prompt and output are nearly uncorrelated (0.06 in
log space), which independent draws ignore. For the file's own rows use
``lengths: {kind: dataset, name: sharegpt-8k-multiturn}`` (downloaded on first use).
"""

from __future__ import annotations

from workloads.lengths import IndependentLengths, LognormalTokens

# Fitted as the module docstring says, from sharegpt_8k_filtered_stats_llama2_tokenizer.csv.
SHAREGPT_PROMPT_MEDIAN_TOKENS = 1730.0
SHAREGPT_PROMPT_SIGMA = 0.8409
SHAREGPT_PROMPT_MIN_TOKENS = 1
SHAREGPT_PROMPT_MAX_TOKENS = 8141
SHAREGPT_OUTPUT_MEDIAN_TOKENS = 415.0
SHAREGPT_OUTPUT_SIGMA = 0.3362
SHAREGPT_OUTPUT_MIN_TOKENS = 2
SHAREGPT_OUTPUT_MAX_TOKENS = 1024


def sharegpt_like_lengths() -> IndependentLengths:
    """The default length config: the fitted ShareGPT-like lognormals above."""
    return IndependentLengths(
        prompt=LognormalTokens(
            median_tokens=SHAREGPT_PROMPT_MEDIAN_TOKENS,
            sigma=SHAREGPT_PROMPT_SIGMA,
            min_tokens=SHAREGPT_PROMPT_MIN_TOKENS,
            max_tokens=SHAREGPT_PROMPT_MAX_TOKENS,
        ),
        output=LognormalTokens(
            median_tokens=SHAREGPT_OUTPUT_MEDIAN_TOKENS,
            sigma=SHAREGPT_OUTPUT_SIGMA,
            min_tokens=SHAREGPT_OUTPUT_MIN_TOKENS,
            max_tokens=SHAREGPT_OUTPUT_MAX_TOKENS,
        ),
    )
