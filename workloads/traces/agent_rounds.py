"""Agent rounds (TraceLab's ``round_trace.jsonl``): coding-agent sessions, one LLM call per line.

Fields used per line: ``session_id``, ``round_index`` (increasing within a session),
``input_tokens_total`` (prompt), ``prefix_tokens`` (the part of the prompt served from the
provider's prompt cache), ``output_tokens``, ``timing_events`` (objects with an ISO-8601
``timestamp``; the first is the event that triggered the call, the last ends it),
``tools`` (objects with ``result_at``) and ``model``. Other fields are ignored.

How a session becomes requests:

- Round 0 of a session is a root request sent at its first event; times are seconds
  since the earliest session start in the file.
- Round r > 0 depends on round r - 1: it is sent ``think_s`` after round r - 1 completes,
  where ``think_s`` = (the later of round r's first event and the last tool result of
  round r - 1) - (the last event of round r - 1): the tool or user time between the
  answer and the next call. A round whose trigger precedes the previous round's last
  event is sent at once (think 0) and counted in ``meta["num_overlapping_rounds"]``.
- Prefix blocks (``block_tokens`` each): round r's first ``min(prefix_tokens, context)``
  tokens repeat the previous round's context (its prompt followed by its output); the
  rest are new. Round 0's ``prefix_tokens`` are the system prompt of its ``model``, shared
  with every session of the same model.
"""

from __future__ import annotations

import itertools

import numpy as np

from workloads import hashing
from workloads.traces.files import (
    RowChecker,
    TextSource,
    check_not_empty,
    int_column,
    read_jsonl_table,
    reject_above,
    reject_missing_fields,
    report_broken,
    token_column,
)
from workloads.traces.trace import Trace, encode_labels
from workloads.validators import HORIZON, MAX_SECONDS

FIELDS = ("session_id", "round_index", "input_tokens_total", "prefix_tokens", "output_tokens", "timing_events")
OPTIONAL = ("tools", "model")
DEFAULT_BLOCK_TOKENS = 16
NO_TOOLS = np.iinfo(np.int64).min
_SESSION_NAMESPACE = hashing.text_key("agent-rounds session")


def _stamp_ns(value: object) -> int | None:
    """Nanoseconds since the epoch of an ISO-8601 string, None if it is not one."""
    if not isinstance(value, str):
        return None
    import pandas as pd  # lazily: validating a scenario should not wait for pandas

    stamp = pd.to_datetime(value, format="ISO8601", utc=True, errors="coerce")
    return None if pd.isna(stamp) else int(stamp.value)


def _event_times(table, checker: RowChecker, skip_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: first event, last event and last tool result, in integer nanoseconds since
    the epoch (exact gaps); ``NO_TOOLS`` where a round called no tool."""
    n = len(table)
    first = np.zeros(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.int64)
    tools_done = np.zeros(n, dtype=np.int64)
    has_tools = np.zeros(n, dtype=bool)
    bad_events = np.zeros(n, dtype=bool)
    bad_tools = np.zeros(n, dtype=bool)
    tools_column = table.columns.get("tools", [None] * n)
    for i in range(n):
        if skip_rows[i]:
            continue
        events = table.columns["timing_events"][i]
        if not isinstance(events, list) or not events:
            bad_events[i] = True
            continue
        stamps = [_stamp_ns(e.get("timestamp")) if isinstance(e, dict) else None for e in events]
        if any(s is None for s in stamps) or any(b < a for a, b in itertools.pairwise(stamps)):  # type: ignore[operator]
            bad_events[i] = True
            continue
        first[i], last[i] = stamps[0], stamps[-1]
        tools = tools_column[i] if tools_column[i] is not None else []
        results = (
            [_stamp_ns(t.get("result_at")) if isinstance(t, dict) else None for t in tools]
            if isinstance(tools, list)
            else [None]
        )
        if any(r is None for r in results):
            bad_tools[i] = True
            continue
        if results:
            has_tools[i] = True
            tools_done[i] = max(results)  # type: ignore[type-var]
    checker.reject(bad_events, "timing_events: expected a non-empty list of events with ISO-8601 timestamps, in order")
    checker.reject(bad_tools, "tools: expected a list of tool calls, each with an ISO-8601 result_at")
    tools_done[~has_tools] = NO_TOOLS
    return first, last, tools_done


def read_agent_rounds(source: TextSource, skip_bad_rows: bool = False, block_tokens: int | None = None) -> Trace:
    """Parse an agent-rounds trace; ValueError naming the file and line for a bad row."""
    block_tokens = block_tokens or DEFAULT_BLOCK_TOKENS
    table = read_jsonl_table(source, FIELDS + OPTIONAL)
    check_not_empty(table)
    checker = RowChecker(source.name, table.lines, skip_bad_rows)
    broken = report_broken(table, checker) | reject_missing_fields(table, FIELDS, checker, "agent-rounds")
    prompt = token_column(table, "input_tokens_total", checker, broken)
    prefix = token_column(table, "prefix_tokens", checker, broken, minimum=0)
    output = token_column(table, "output_tokens", checker, broken)
    round_index = int_column(table, "round_index", checker, broken, minimum=0)
    checker.reject(
        ~broken & (prefix > prompt),
        lambda row: f"prefix_tokens ({prefix[row]}) exceed input_tokens_total ({prompt[row]})",
    )
    first, last, tools_done = _event_times(table, checker, checker.bad.copy())
    timed = ~checker.bad
    if timed.any():
        since_s = np.where(timed, (first - first[timed].min()) / 1e9, np.nan)
        reject_above(since_s, (MAX_SECONDS, "s", HORIZON), checker, "timing_events (time since the earliest round)")
    sessions = [str(s) for s in table.columns["session_id"]]
    models = [str(m) if m is not None else "" for m in table.columns["model"]]

    # Link each round to the previous kept round of its session, in file order.
    previous: dict[str, int] = {}
    parent = np.full(len(table), -1, dtype=np.int64)
    backwards = np.zeros(len(table), dtype=bool)
    after_round: dict[int, int] = {}  # backwards row -> the round it failed to follow
    for i in np.flatnonzero(~checker.bad):
        j = previous.get(sessions[i])
        if j is not None and round_index[i] <= round_index[j]:
            backwards[i] = True
            after_round[int(i)] = int(round_index[j])
            continue
        parent[i] = -1 if j is None else j
        previous[sessions[i]] = i
    checker.reject(
        backwards,
        lambda row: (
            f"round_index: {round_index[row]} does not follow round "
            f"{after_round[row]} of session {sessions[row]!r} (rounds must be in order)"
        ),
    )
    keep = checker.finish()
    before = np.maximum(parent, 0)
    send_ns = np.where(parent >= 0, np.maximum(first, tools_done[before]), first)
    gap_ns = np.where(parent >= 0, send_ns - last[before], 0)
    overlapping = int(((gap_ns < 0) & keep).sum())
    think = np.maximum(gap_ns, 0) / 1e9

    # Order: sessions by start time, each session's rounds together and in order.
    rows = np.flatnonzero(keep)
    group = rows.copy()
    for k, i in enumerate(rows):
        if parent[i] >= 0:
            group[k] = group[np.searchsorted(rows, parent[i])]
    order = rows[np.lexsort((rows, first[group]))]
    new_index = np.full(len(table), -1, dtype=np.int64)
    new_index[order] = np.arange(len(order))
    new_parent = np.where(parent[order] >= 0, new_index[np.maximum(parent[order], 0)], -1)
    origin_ns = int(first[rows].min())
    arrival = np.where(new_parent < 0, (first[order] - origin_ns) / 1e9, np.nan)
    codes, _ = encode_labels([sessions[i] for i in order])

    keys, offsets = _block_keys(
        prompt[order], output[order], prefix[order], new_parent, codes, [models[i] for i in order], block_tokens
    )
    return Trace(
        name=source.name,
        format="agent_rounds",
        num_prompt_tokens=prompt[order],
        num_output_tokens=output[order],
        arrival_s=arrival,
        parent=new_parent,
        think_s=np.where(new_parent < 0, 0.0, think[order]),
        session_id=codes,
        block_keys=keys,
        block_offsets=offsets,
        block_tokens=block_tokens,
        num_skipped_rows=int((~keep).sum()),
        notes={"num_overlapping_rounds": overlapping},
    )


def _block_keys(
    prompt: np.ndarray,
    output: np.ndarray,
    prefix: np.ndarray,
    parent: np.ndarray,
    session: np.ndarray,
    models: list[str],
    block_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt block, the key of the round that introduced the block's last token.

    The context of a round is a list of segments (end position, owner key); a token's
    owner fixes every token before it, so the owner of a block's last token (with the
    block's position, which ``chain`` adds) identifies the whole prefix.
    """
    counts = hashing.num_blocks(prompt, block_tokens)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.empty(int(offsets[-1]), dtype=np.int64)
    contexts: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # row -> (segment ends, owners) of its context
    namespace = np.full(len(prompt), _SESSION_NAMESPACE, dtype=np.int64).view(np.uint64)
    round_keys = hashing.combine(namespace, np.arange(len(prompt), dtype=np.uint64)).view(np.int64)
    for i in range(len(prompt)):
        own = round_keys[i]
        if parent[i] < 0:
            ends, owners = np.array([int(prefix[i])]), np.array([hashing.text_key("system prompt " + models[i])])
            if prefix[i] == 0:
                ends, owners = ends[:0], owners[:0]
        else:
            before_ends, before_owners = contexts[int(parent[i])]
            shared = min(int(prefix[i]), int(before_ends[-1]) if len(before_ends) else 0)
            cut = int(np.searchsorted(before_ends, shared, side="left"))
            ends = np.append(before_ends[:cut], shared)
            owners = before_owners[: cut + 1].copy()
            if shared == 0:
                ends, owners = ends[:0], owners[:0]
        ends = np.append(ends, int(prompt[i]) + int(output[i]))
        owners = np.append(owners, own)
        contexts[i] = (ends, owners)
        last_token = np.minimum((np.arange(counts[i]) + 1) * block_tokens, prompt[i]) - 1
        keys[offsets[i] : offsets[i + 1]] = owners[np.searchsorted(ends, last_token, side="right")]
    return keys, offsets
