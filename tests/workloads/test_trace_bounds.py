"""Trace lengths and times are bounded row by row, before any array is sized from them (issue 32).

A prompt of 2**63 tokens once ended in a numpy MemoryError after the run (a tokenising delay of
10**13 s sized a per-second table), and an arrival at 10**12 s likewise. Every format's token
columns are refused above ``MAX_TOKENS`` (servesim's limit, 100 times the longest model
context) and its time columns beyond ``MAX_SECONDS`` (the one-year horizon), each as the
row's error naming the file and line; ``skip_bad_rows`` drops such rows and counts them.
"""

from __future__ import annotations

import json

import pytest

from workloads.traces import read_length_column, read_trace
from workloads.validators import MAX_SECONDS, MAX_TOKENS

HUGE = 2**63  # beyond int64 too
TOKEN_LIMIT = f"is more than {MAX_TOKENS:,} tokens (servesim's limit, 100 times the longest model context)"
HORIZON = f"is more than {MAX_SECONDS:,.0f}"


def _agent_row(tokens: int = 10, when: str = "2026-01-01T00:00:00Z") -> dict:
    return {
        "session_id": "s",
        "round_index": 0,
        "input_tokens_total": tokens,
        "prefix_tokens": 0,
        "output_tokens": 2,
        "timing_events": [{"timestamp": when}],
    }


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# (file name, a good row's text, a bad row's text (line 3 of the file), what the error names); CSVs get a header
TOKEN_CASES = {
    "generic csv": ("g.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n", f"1,{HUGE},10\n", "prompt_tokens"),
    "generic jsonl": (
        "g.jsonl",
        _jsonl({"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 10}),
        _jsonl({"arrival_s": 1, "prompt_tokens": 10, "output_tokens": MAX_TOKENS + 1}),
        "output_tokens",
    ),
    "azure": (
        "a.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,10,1\n",
        f"2023-11-16 18:17:04.98,{HUGE},1\n",
        "ContextTokens",
    ),
    "vidur": ("v.csv", "num_prefill_tokens,num_decode_tokens\n10,1\n", f"10,{MAX_TOKENS + 1}\n", "num_decode_tokens"),
    "mooncake": (
        "m.jsonl",
        _jsonl({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}),
        _jsonl({"timestamp": 1, "input_length": HUGE, "output_length": 1, "hash_ids": [0]}),
        "input_length",
    ),
    "agent rounds": ("r.jsonl", _jsonl(_agent_row()), _jsonl(_agent_row(tokens=HUGE)), "input_tokens_total"),
}
TIME_CASES = {
    "generic arrival_s": ("g.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n", "1e12,10,10\n", "arrival_s"),
    "generic think_s": (
        "g.csv",
        "arrival_s,think_s,session_id,prompt_tokens,output_tokens\n0,,s,10,10\n",
        ",4e7,s,10,10\n",
        "think_s",
    ),
    "vidur arrived_at": (
        "v.csv",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,1\n",
        "1e300,10,1\n",
        "arrived_at",
    ),
    "mooncake timestamp (ms)": (
        "m.jsonl",
        _jsonl({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}),
        _jsonl({"timestamp": 1e15, "input_length": 10, "output_length": 1, "hash_ids": [0]}),
        "timestamp",
    ),
    "azure span": (
        "a.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,10,1\n",
        "2093-11-16 18:17:03.98,10,1\n",
        "TIMESTAMP",
    ),
    "agent rounds span": (
        "r.jsonl",
        _jsonl(_agent_row()),
        _jsonl(_agent_row(when="2126-01-01T00:00:00Z") | {"session_id": "t"}),
        "timing_events",
    ),
}


def _file(tmp_path, name: str, good: str, bad: str) -> str:
    """The bad row on line 3: after a CSV's header and good row, or after two good JSON rows."""
    path = tmp_path / name
    second = good.replace('"s"', '"s2"') if name.endswith(".jsonl") else ""  # another agent session
    path.write_text(good + second + bad)
    return str(path)


@pytest.mark.parametrize("case", list(TOKEN_CASES) + list(TIME_CASES))
def test_a_row_beyond_the_bounds_is_its_own_error(tmp_path, case):
    name, good, bad, column = (TOKEN_CASES | TIME_CASES)[case]
    path = _file(tmp_path, name, good, bad)
    with pytest.raises(ValueError) as info:
        read_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path}: line 3: {column}"), message
    assert (TOKEN_LIMIT if case in TOKEN_CASES else HORIZON) in message and "\n" not in message
    trace = read_trace(path, skip_bad_rows=True)
    assert trace.num_skipped_rows == 1 and len(trace.num_prompt_tokens) >= 1


def test_the_limit_itself_is_read(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text(f"arrival_s,prompt_tokens,output_tokens\n0,{MAX_TOKENS},{MAX_TOKENS}\n{MAX_SECONDS},1,1\n")
    trace = read_trace(str(path))
    assert trace.num_prompt_tokens.tolist() == [MAX_TOKENS, 1] and trace.arrival_s[-1] == MAX_SECONDS


def test_a_length_file_is_bounded_alike(tmp_path):
    path = tmp_path / "lengths.csv"
    path.write_text(f"tokens\n10\n{10**30}\n")
    with pytest.raises(ValueError, match=r"line 3: tokens: 1.00e\+30 tokens is more than 1,000,000,000 tokens"):
        read_length_column(str(path), "tokens")


def test_a_time_scale_that_replays_past_the_horizon_is_refused(tmp_path):
    """``time_scale`` divides the trace's times: 1e-9 turns a 1.5 s trace into 1.5e9 s, refused naming the field
    (it ended in a numpy MemoryError) with the smallest scale that stays within a year."""
    from workloads.replay import TraceWorkload, generate_trace

    trace = tmp_path / "ts.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1.5,12,6\n")
    with pytest.raises(ValueError, match=r"workload.time_scale 1e-09: .* runs to 1.5e\+09 s, .* at least 4.76e-08"):
        generate_trace(TraceWorkload(source=str(trace), time_scale=1e-9), seed=0)
    assert len(generate_trace(TraceWorkload(source=str(trace), time_scale=1e-7), seed=0)) == 2
