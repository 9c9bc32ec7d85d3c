"""A parsed trace: the requests of one file as columns, before replay options are applied."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from workloads import hashing
from workloads.stream import RequestStream


@dataclass(frozen=True, slots=True)
class Trace:
    """One row per request, in an order where roots are sorted by arrival and parents come first.

    Columns follow ``RequestStream`` with three differences:

    - ``arrival_s`` is None for a lengths-only trace (no timestamps); otherwise it is in
      seconds, NaN on dependent rows (those with a parent).
    - ``block_keys`` / ``block_offsets`` (CSR, one key per ``block_tokens`` tokens of
      prompt) hold the file's own block identifiers, unchained: two requests share their
      first k blocks iff their first k keys are equal. ``to_stream`` chains them (with each
      block's fill) into the stream's hashes, so capping a prompt stays consistent.
    - ``num_skipped_rows`` counts the bad rows dropped when reading with skipping on, and
      ``notes`` holds a reader's other counts worth reporting; both go to the stream's ``meta``.
    """

    name: str
    format: str
    num_prompt_tokens: np.ndarray
    num_output_tokens: np.ndarray
    arrival_s: np.ndarray | None = None
    parent: np.ndarray | None = None
    think_s: np.ndarray | None = None
    session_id: np.ndarray | None = None
    block_keys: np.ndarray | None = None
    block_offsets: np.ndarray | None = None
    block_tokens: int = 0
    priority: np.ndarray | None = None
    slo_class: np.ndarray | None = None
    slo_class_names: tuple[str, ...] = ()
    tenant: np.ndarray | None = None
    tenant_names: tuple[str, ...] = ()
    num_skipped_rows: int = 0
    notes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.num_prompt_tokens)
        for column in (self.num_output_tokens, self.arrival_s, self.parent, self.session_id, self.priority):
            assert column is None or len(column) == n
        assert (self.parent is None) == (self.think_s is None)
        if self.block_keys is not None:
            assert self.block_offsets is not None and len(self.block_offsets) == n + 1 and self.block_tokens > 0
            assert np.array_equal(
                np.diff(self.block_offsets), hashing.num_blocks(self.num_prompt_tokens, self.block_tokens)
            )

    def __len__(self) -> int:
        return len(self.num_prompt_tokens)

    @property
    def has_arrivals(self) -> bool:
        return self.arrival_s is not None

    @property
    def is_root(self) -> np.ndarray:
        """True for rows that do not depend on an earlier request."""
        return np.ones(len(self), dtype=bool) if self.parent is None else self.parent < 0

    def group_of(self) -> np.ndarray:
        """For every row, the index of its root (its session's first request, or itself)."""
        group = np.arange(len(self), dtype=np.int64)
        if self.parent is not None:
            for i in np.flatnonzero(self.parent >= 0):  # parents come first, so one pass suffices
                group[i] = group[self.parent[i]]
        return group

    def select(self, rows: np.ndarray) -> Trace:
        """The trace restricted to ``rows``, in that order.

        With dependent rows, ``rows`` must be ascending and contain the parent of every row;
        without, any order works (a lengths-only trace resampled for an arrival process).
        """
        rows = np.asarray(rows, dtype=np.int64)
        assert self.parent is None or bool(np.all(np.diff(rows) > 0)), "rows must be ascending and distinct"
        fields: dict = {}
        for name in ("num_prompt_tokens", "num_output_tokens", "arrival_s", "think_s", "session_id"):
            column = getattr(self, name)
            fields[name] = None if column is None else column[rows]
        for name in ("priority", "slo_class", "tenant"):
            column = getattr(self, name)
            fields[name] = None if column is None else column[rows]
        if self.parent is not None:
            new_index = np.full(len(self), -1, dtype=np.int64)
            new_index[rows] = np.arange(len(rows))
            old_parent = self.parent[rows]
            parent = np.where(old_parent >= 0, new_index[np.maximum(old_parent, 0)], -1)
            assert bool(np.all((old_parent < 0) | (parent >= 0))), "a selected request's parent was not selected"
            fields["parent"] = parent
        if self.block_keys is not None:
            assert self.block_offsets is not None
            keys, offsets = take_ragged(self.block_keys, self.block_offsets, rows)
            fields["block_keys"], fields["block_offsets"] = keys, offsets
        return dataclasses.replace(self, **fields)

    def with_lengths(self, num_prompt_tokens: np.ndarray, num_output_tokens: np.ndarray) -> Trace:
        """The trace with new lengths; block keys are cut to the new prompt lengths (never extended)."""
        fields: dict = {"num_prompt_tokens": num_prompt_tokens, "num_output_tokens": num_output_tokens}
        if self.block_keys is not None:
            assert self.block_offsets is not None
            counts = hashing.num_blocks(num_prompt_tokens, self.block_tokens)
            assert bool(np.all(counts <= np.diff(self.block_offsets))), "prompts may only shrink"
            keep = np.arange(len(self.block_keys)) - np.repeat(self.block_offsets[:-1], np.diff(self.block_offsets))
            keep = keep < np.repeat(counts, np.diff(self.block_offsets))
            fields["block_keys"] = self.block_keys[keep]
            fields["block_offsets"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return dataclasses.replace(self, **fields)

    def to_stream(self, arrival_s: np.ndarray | None = None, meta: dict | None = None) -> RequestStream:
        """The RequestStream of this trace; ``arrival_s`` replaces the trace's own times (needed
        for a lengths-only trace)."""
        times = arrival_s if arrival_s is not None else self.arrival_s
        assert times is not None, "a lengths-only trace needs arrival times"
        hash_values = None
        if self.block_keys is not None:
            assert self.block_offsets is not None
            fills = hashing.block_fills(self.num_prompt_tokens, self.block_offsets, self.block_tokens)
            hash_values = hashing.chain(self.block_keys, fills, self.block_offsets)
        return RequestStream(
            arrival_s=np.asarray(times, dtype=np.float64),
            num_prompt_tokens=self.num_prompt_tokens.astype(np.int64),
            num_output_tokens=self.num_output_tokens.astype(np.int64),
            priority=self.priority,
            slo_class=self.slo_class,
            slo_class_names=self.slo_class_names,
            tenant=self.tenant,
            tenant_names=self.tenant_names,
            session_id=self.session_id,
            parent=self.parent,
            think_s=self.think_s,
            hash_values=hash_values,
            hash_offsets=self.block_offsets if hash_values is not None else None,
            hash_block_tokens=self.block_tokens if hash_values is not None else 0,
            meta=self.notes | {"num_skipped_rows": self.num_skipped_rows} | dict(meta or {}),
        )


def take_ragged(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` of a CSR array: (values, offsets) of the selection."""
    counts = np.diff(offsets)[rows]
    new_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    starts = np.repeat(offsets[rows] - new_offsets[:-1], counts)
    return values[np.arange(int(new_offsets[-1]), dtype=np.int64) + starts], new_offsets


def encode_labels(values: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer codes and names of text labels, names in order of first appearance."""
    names: dict[str, int] = {}
    codes = np.fromiter((names.setdefault(v, len(names)) for v in values), dtype=np.int64, count=len(values))
    return codes, tuple(names)
