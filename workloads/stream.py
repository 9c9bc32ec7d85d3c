"""The plain request specs a workload yields: columns of numpy arrays, one row per request.

Required columns: ``arrival_s``, ``num_prompt_tokens``, ``num_output_tokens``. Optional
ones (None when the workload has no such information):

- ``priority`` (int64, lower is more important, 0 default) and ``slo_class`` / ``tenant``
  (int64 codes into ``slo_class_names`` / ``tenant_names``).
- ``session_id`` (int64, -1 for none): requests of one conversation or agent loop.
- ``parent`` (int64, -1 for none) and ``think_s`` (float64): a dependent request is sent
  ``think_s`` seconds after request ``parent`` ends (finishes or is rejected); its
  ``arrival_s`` is then ignored (NaN by convention). Closed-loop users and multi-turn
  sessions are chains of such requests; a parent always has a smaller index.
- ``hash_values`` / ``hash_offsets`` (int64, CSR layout) and ``hash_block_tokens``: the
  prompt's prefix blocks, see below.
- ``meta``: facts about how the stream was made (``kind``, ``source``, and counts worth
  reporting such as ``num_skipped_rows``: bad trace rows dropped on request).

Prefix-block hashes. Request i's prompt is cut into blocks of ``B = hash_block_tokens``
tokens; block j covers prompt tokens ``[j * B, min((j + 1) * B, L))`` (the last block may
be partial). ``hash_values[hash_offsets[i]:hash_offsets[i + 1]]`` holds one 64-bit hash per
block, ``ceil(L / B)`` of them. The hashes are *chained*: two equal hash values (in any
requests) mean the two prompts are identical from token 0 through the end of that block,
so the blocks sit at the same position and hold the same number of tokens; a partial
last block never equals the full block that extends it. Hence two prompts share their
first ``m * B`` tokens (at block granularity) when their first m hashes agree, and a
prefix cache can key cached blocks by hash alone (up to 64-bit collisions). ``B`` is the
workload's granularity (512 for Mooncake traces, 16 by default for generated sessions); a
KV cache with blocks of b tokens, b dividing B, may reuse KV block t (tokens
``[t * b, (t + 1) * b)``) of an earlier request when hash block ``(t * b) // B`` is equal
in both (sharing finer than B is invisible at this granularity). Hash values mean nothing
across streams generated from different sources.

Rows without a parent are sorted by ``arrival_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class RequestStream:
    """Requests to simulate, one row per request; see the module docstring for the columns."""

    arrival_s: np.ndarray
    num_prompt_tokens: np.ndarray
    num_output_tokens: np.ndarray
    priority: np.ndarray | None = None
    slo_class: np.ndarray | None = None
    slo_class_names: tuple[str, ...] = ()
    tenant: np.ndarray | None = None
    tenant_names: tuple[str, ...] = ()
    session_id: np.ndarray | None = None
    parent: np.ndarray | None = None
    think_s: np.ndarray | None = None
    hash_values: np.ndarray | None = None
    hash_offsets: np.ndarray | None = None
    hash_block_tokens: int = 0
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        for name in (
            "num_prompt_tokens",
            "num_output_tokens",
            "priority",
            "slo_class",
            "tenant",
            "session_id",
            "parent",
            "think_s",
        ):
            column = getattr(self, name)
            assert column is None or len(column) == n, f"column {name} has {len(column)} rows, expected {n}"
        assert (self.parent is None) == (self.think_s is None), "parent and think_s come together"
        roots = self.arrival_s if self.parent is None else self.arrival_s[self.parent < 0]
        assert n == 0 or bool(np.all(np.diff(roots) >= 0)), "arrivals of independent requests must be sorted"
        if self.parent is not None:
            idx = np.arange(n)
            assert bool(np.all(self.parent < idx)), "a request's parent must come before it"
        if self.hash_values is not None:
            assert self.hash_offsets is not None and len(self.hash_offsets) == n + 1
            assert self.hash_block_tokens > 0

    def __len__(self) -> int:
        return len(self.arrival_s)

    def prefix_hashes(self, i: int) -> np.ndarray | None:
        """Request i's prefix-block hashes, or None when the stream has none."""
        if self.hash_values is None:
            return None
        assert self.hash_offsets is not None
        return self.hash_values[self.hash_offsets[i] : self.hash_offsets[i + 1]]
