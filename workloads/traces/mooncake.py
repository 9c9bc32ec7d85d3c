"""Mooncake (FAST'25) JSON-lines traces: millisecond timestamps and 512-token prefix blocks.

Fields per line: ``timestamp`` (integer ms since trace start, sorted), ``input_length``
(prompt tokens), ``output_length`` (output tokens), ``hash_ids`` (one id per 512-token
prompt block, ``len(hash_ids) == ceil(input_length / 512)``; two requests share a prefix
of k blocks iff their first k ids are equal). Other fields are ignored.
"""

from __future__ import annotations

import itertools

import numpy as np

from workloads.hashing import num_blocks
from workloads.traces.files import (
    RowChecker,
    TextSource,
    check_not_empty,
    check_sorted,
    read_jsonl_table,
    reject_missing_fields,
    report_broken,
    seconds_column,
    token_column,
)
from workloads.traces.trace import Trace, take_ragged

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
BLOCK_TOKENS = 512


def read_block_ids(
    values: list, prompt: np.ndarray, block_tokens: int, checker: RowChecker, skip_rows: np.ndarray, field: str
) -> tuple[np.ndarray, np.ndarray]:
    """Every row's integer block ids as CSR (values, offsets), checked against the prompt length.

    JSON rows hold lists; CSV rows hold space-separated integers. Rejected rows (and rows
    in ``skip_rows``) get no ids.
    """
    expected = num_blocks(prompt, block_tokens)
    if not skip_rows.any() and {type(v) for v in values} == {list}:  # fast path: JSON lists
        counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        flat = list(itertools.chain.from_iterable(values))
        if {type(x) for x in flat} <= {int} and np.array_equal(counts, expected):
            try:
                return np.asarray(flat, dtype=np.int64), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            except OverflowError:
                pass  # an id beyond int64: the row-by-row check below names it
    ids: list[list[int]] = [[] for _ in values]
    bad_type = np.zeros(len(values), dtype=bool)
    bad_count = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if skip_rows[i]:
            continue
        if isinstance(v, str):
            try:
                v = [int(x) for x in v.split()]
            except ValueError:
                bad_type[i] = True
                continue
        if not isinstance(v, list) or not all(type(x) is int and -(2**63) <= x < 2**63 for x in v):
            bad_type[i] = True
            continue
        if len(v) != expected[i]:
            bad_count[i] = True
            continue
        ids[i] = v
    checker.reject(bad_type, lambda row: f"{field}: expected a list of integers, found {values[row]!r:.60}")
    checker.reject(
        bad_count,
        lambda row: (
            f"{field}: {len(values[row]) if isinstance(values[row], list) else len(values[row].split())} "
            f"ids for {prompt[row]} prompt tokens (expected ceil({prompt[row]} / {block_tokens}) = {expected[row]})"
        ),
    )
    counts = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(counts.sum()))
    return flat, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def read_mooncake(source: TextSource, skip_bad_rows: bool = False) -> Trace:
    """Parse a Mooncake trace; ValueError naming the file and line for a bad row."""
    table = read_jsonl_table(source, FIELDS)
    check_not_empty(table)
    checker = RowChecker(source.name, table.lines, skip_bad_rows)
    broken = report_broken(table, checker) | reject_missing_fields(table, FIELDS, checker, "Mooncake")
    prompt = token_column(table, "input_length", checker, broken)
    output = token_column(table, "output_length", checker, broken)
    stamp_ms = seconds_column(table, "timestamp", checker, broken, per_second=1e3)
    check_sorted(stamp_ms, np.flatnonzero(~checker.bad), checker, "timestamp")
    ids, id_offsets = read_block_ids(
        table.columns["hash_ids"], prompt, BLOCK_TOKENS, checker, checker.bad.copy(), "hash_ids"
    )
    keep = checker.finish()
    keys, offsets = take_ragged(ids, id_offsets, np.flatnonzero(keep))
    return Trace(
        name=source.name,
        format="mooncake",
        num_prompt_tokens=prompt[keep],
        num_output_tokens=output[keep],
        arrival_s=stamp_ms[keep] / 1000.0,
        block_keys=keys,
        block_offsets=offsets,
        block_tokens=BLOCK_TOKENS,
        num_skipped_rows=int((~keep).sum()),
    )
