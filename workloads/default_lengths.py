"""The default scenario's lengths: ShareGPT-like, parametric, so the default needs no data file.

Prompt and output lengths are drawn independently from quantile functions through the percentiles of
the ShareGPT length set they imitate: Sarathi-Serve's chat trace
``sharegpt_8k_filtered_stats_llama2_tokenizer.csv`` (``sharegpt-8k-multiturn`` in the trace
catalogue: project-etalon/etalon at commit d5f18de, Apache-2.0; 30,731 rows, Llama-2 tokens).

How the figures were taken, once, from that file: the 0th, 1st, 2nd, 5th, 10th, 20th, ..., 90th,
95th, 98th, 99th and 100th percentiles of each column (numpy's ``inverted_cdf``: each is a length
of the file). Between two knots the log length is linear in the probability (``quantiles`` in
``workloads.lengths``). Against the file (1,000,000 draws, ``np.random.default_rng(0)``):

============  ========  =====  =====  =====  =====
tokens        source    mean   p10    p50    p90
============  ========  =====  =====  =====  =====
prompt        file      2,340     74  1,730  5,696
prompt        fitted    2,337     74  1,729  5,701
output        file        439     84    415    834
output        fitted      438     84    415    834
============  ========  =====  =====  =====  =====

The file's prompt and output lengths are nearly independent (Spearman 0.05, 0.06 in log space),
which independent draws ignore; the file keeps prompt + output at or below 8,192 tokens, independent
draws reach 9,165. For the file's own rows use ``lengths: {kind: dataset, name: sharegpt-8k-multiturn}``
(downloaded on first use).
"""

from __future__ import annotations

from workloads.lengths import IndependentLengths, QuantileTokens

# The knots' cumulative probabilities, and each column's lengths there (the module docstring says how).
SHAREGPT_PROBABILITIES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 1.0)
SHAREGPT_PROMPT_TOKENS = (1, 12, 16, 29, 74, 382, 777, 1203, 1730, 2401, 3235, 4278, 5696, 6563, 7164, 7434, 8141)
SHAREGPT_OUTPUT_TOKENS = (2, 6, 19, 44, 84, 181, 271, 346, 415, 493, 581, 683, 834, 920, 975, 998, 1024)


def sharegpt_like_lengths() -> IndependentLengths:
    """The default length config: the ShareGPT set's percentiles above, prompt and output independent."""
    return IndependentLengths(
        prompt=QuantileTokens(probabilities=list(SHAREGPT_PROBABILITIES), tokens=list(SHAREGPT_PROMPT_TOKENS)),
        output=QuantileTokens(probabilities=list(SHAREGPT_PROBABILITIES), tokens=list(SHAREGPT_OUTPUT_TOKENS)),
    )
