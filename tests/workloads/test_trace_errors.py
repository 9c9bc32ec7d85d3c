"""Bad trace input: one clear error naming the file and line; skipping only on request, and counted."""

import gzip
import json

import numpy as np
import pytest

from workloads import WorkloadConfig, generate
from workloads.traces import read_trace

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _error(path: str, **options) -> str:
    with pytest.raises(ValueError) as info:
        read_trace(path, **options)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "a.csv",
            "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.98,10\n",
            "line 1: missing column 'GeneratedTokens' for the Azure format",
        ),
        (
            "v.csv",
            "num_prefill_tokens,pd_ratio\n5,1.0\n",
            "line 1: missing column 'num_decode_tokens' for the Vidur length format",
        ),
        ("g.csv", "arrival_s,prompt_tokens\n0,5\n", "line 1: missing column 'output_tokens' for the generic format"),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}\n'
            '{"timestamp": 1, "input_length": 5, "hash_ids": [0]}\n',
            "line 2: missing field 'output_length'",
        ),
        ("g.jsonl", '{"arrival_s": 0, "prompt_tokens": 5}\n', "line 1: output_tokens: missing value"),
    ],
)
def test_missing_column(tmp_path, name, text, expected):
    path = _write(tmp_path, name, text)
    assert f"{path}: {expected}" in _error(path)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "a.csv",
            AZURE_HEADER + "2023-11-16 18:17:03.98,10,1\n2023-11-16 18:17:04.00,-4,1\n",
            "line 3: ContextTokens: negative (-4)",
        ),
        (
            "v.csv",
            "num_prefill_tokens,num_decode_tokens\n5,1\n5,0\n",
            "line 3: num_decode_tokens: must be at least 1 (0)",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []}\n',
            "line 1: input_length: negative (-5)",
        ),
        ("g.csv", "arrival_s,prompt_tokens,output_tokens\n0,5,2\n-1,5,2\n", "line 3: arrival_s: negative (-1.0)"),
    ],
)
def test_negative_length_or_time(tmp_path, name, text, expected):
    path = _write(tmp_path, name, text)
    assert f"{path}: {expected}" in _error(path)


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("a.csv", AZURE_HEADER + "2023-11-16 18:17:05,10,1\n2023-11-16 18:17:06,10,1\n2023-11-16 18:17:04,10,1\n", 4),
        (
            "m.jsonl",
            "".join(
                json.dumps({"timestamp": t, "input_length": 5, "output_length": 1, "hash_ids": [0]}) + "\n"
                for t in (0, 9, 3)
            ),
            3,
        ),
        ("v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,5,1\n2.0,5,1\n1.5,5,1\n", 4),
        ("g.csv", "arrival_s,prompt_tokens,output_tokens\n0,5,1\n2,5,1\n1,5,1\n", 4),
    ],
)
def test_non_monotonic_timestamps(tmp_path, name, text, line):
    path = _write(tmp_path, name, text)
    message = _error(path)
    assert f"{path}: line {line}: " in message and "is earlier than a previous row's" in message


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("empty.csv", "", "line 1: empty file"),
        ("header.csv", AZURE_HEADER, "line 2: the file has a header but no requests"),
        ("empty.jsonl", "", "line 1: empty file"),
    ],
)
def test_empty_file(tmp_path, name, text, expected):
    path = _write(tmp_path, name, text)
    fmt = "azure" if name.endswith(".csv") else "mooncake"
    assert f"{path}: {expected}" in _error(path, format=fmt)


def test_empty_file_with_auto_format(tmp_path):
    path = _write(tmp_path, "e.csv", "")
    assert _error(path) == f"{path}: line 1: empty file"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prompt_tokens,output_tokens\n5,1\n\n6,1\n", "line 3: blank line"),
        ("prompt_tokens,output_tokens\n5,1\n6,1,9\n", "line 3: expected 2 fields, found 3"),
        ("prompt_tokens,output_tokens\n5,1\n6.5,1\n", "line 3: prompt_tokens: expected an integer, found '6.5'"),
        (
            "prompt_tokens,output_tokens\n5,1\n6,1" + "0" * 25 + "\n",
            "line 3: output_tokens: 1.00e+25 tokens is more than 1,000,000,000 tokens",
        ),
        ("arrival_s,prompt_tokens,output_tokens\n1" + "0" * 400 + ",5,1\n", "line 2: arrival_s: expected a finite"),
        ("prompt_tokens,output_tokens\n5,\n", "line 2: output_tokens: missing value"),
        ("prompt_tokens,output_tokens,colour\n5,1,red\n", "line 1: unknown column 'colour'"),
        ("prompt_tokens,output_tokens,think_s\n5,1,\n", "line 1: a think_s column needs an arrival_s column"),
        (
            "arrival_s,prompt_tokens,output_tokens,session_id,think_s\n0,5,1,a,1.0\n",
            "line 2: give arrival_s or think_s, not both",
        ),
        (
            "arrival_s,prompt_tokens,output_tokens,session_id,think_s\n,5,1,a,1.0\n",
            "line 2: think_s given but no earlier row of session 'a'",
        ),
        (
            "arrival_s,prompt_tokens,output_tokens,session_id,think_s\n0,5,1,,\n,5,1,,1\n",
            "line 3: think_s needs a session_id",
        ),
        ("arrival_s,prompt_tokens,output_tokens,slo_class\n0,5,1,chat\n1,5,1,\n", "line 3: slo_class: missing value"),
        (
            "arrival_s,prompt_tokens,output_tokens\n0,5,1\nnan,5,1\n",
            "line 3: arrival_s: expected a finite number, found 'nan'",
        ),
    ],
)
def test_generic_csv_problems(tmp_path, text, expected):
    path = _write(tmp_path, "g.csv", text)
    assert f"{path}: {expected}" in _error(path)


def test_hash_ids_problems(tmp_path):
    path = _write(tmp_path, "h.csv", "prompt_tokens,output_tokens,hash_ids\n20,1,1 2\n")
    assert "has hash_ids; set hash_block_tokens" in _error(path)
    assert f"{path}: line 2: hash_ids: 2 ids for 20 prompt tokens (expected ceil(20 / 8) = 3)" in _error(
        path, block_tokens=8
    )
    path = _write(
        tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, "x"]}\n'
    )
    assert f"{path}: line 1: hash_ids: expected a list of integers" in _error(path)
    path = _write(
        tmp_path,
        "bad.jsonl",
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}\n{"timestamp": 1,\n',
    )
    assert f"{path}: line 2: not valid JSON" in _error(path, format="mooncake")


def test_bad_timestamp_and_agent_rounds_order(tmp_path):
    path = _write(tmp_path, "a.csv", AZURE_HEADER + "2023-11-16 18:17:03.98,10,1\nyesterday,10,1\n")
    assert f"{path}: line 3: TIMESTAMP: not a date and time ('yesterday')" in _error(path)
    event = {"timing_events": [{"timestamp": "2026-01-01T00:00:00Z"}]}
    rows = [
        {
            "session_id": "s",
            "round_index": 1,
            "input_tokens_total": 10,
            "prefix_tokens": 0,
            "output_tokens": 2,
            **event,
        },
        {
            "session_id": "s",
            "round_index": 0,
            "input_tokens_total": 12,
            "prefix_tokens": 12,
            "output_tokens": 2,
            **event,
        },
    ]
    path = _write(tmp_path, "r.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert f"{path}: line 2: round_index: 0 does not follow round 1 of session 's'" in _error(path)
    rows[1]["round_index"], rows[1]["prefix_tokens"] = 2, 13
    path = _write(tmp_path, "r2.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    assert f"{path}: line 2: prefix_tokens (13) exceed input_tokens_total (12)" in _error(path)


def test_the_earliest_bad_line_is_reported(tmp_path):
    text = "prompt_tokens,output_tokens\n5,1\n5,x\n-2,1\n"  # output bad on line 3, prompt bad on line 4
    path = _write(tmp_path, "g.csv", text)
    assert "line 3: output_tokens" in _error(path)


def test_skipping_bad_rows_counts_them(tmp_path):
    text = AZURE_HEADER + (
        "2023-11-16 18:17:03.0,10,1\n"
        "2023-11-16 18:17:04.0,-1,1\n"  # negative
        "\n"  # blank
        "2023-11-16 18:17:05.0,10,1\n"
        "2023-11-16 18:17:04.5,10,1\n"  # back in time
        "2023-11-16 18:17:06.0,11,1,extra\n"  # wrong field count
        "2023-11-16 18:17:07.0,12,1\n"
    )
    path = _write(tmp_path, "a.csv", text)
    with pytest.raises(ValueError, match="line 3"):
        read_trace(path)
    trace = read_trace(path, skip_bad_rows=True)
    assert len(trace) == 3 and trace.num_skipped_rows == 4
    assert trace.arrival_s.tolist() == [0.0, 2.0, 4.0] and trace.num_prompt_tokens.tolist() == [10, 10, 12]
    cfg = WorkloadConfig.model_validate({"kind": "trace", "source": path, "skip_bad_rows": True})
    assert generate(cfg, 0).meta["num_skipped_rows"] == 4
    all_bad = _write(tmp_path, "b.csv", AZURE_HEADER + "x,1,1\n")
    assert "every row is bad (1 skipped)" in _error(all_bad, skip_bad_rows=True)


def test_skipping_in_sessions_relinks_to_the_previous_kept_row(tmp_path):
    text = (
        "arrival_s,prompt_tokens,output_tokens,session_id,think_s\n"
        "0,5,1,a,\n"
        ",-5,1,a,1\n"  # bad: dropped
        ",9,1,a,2\n"
    )
    trace = read_trace(_write(tmp_path, "s.csv", text), skip_bad_rows=True)
    assert trace.parent.tolist() == [-1, 0] and trace.think_s.tolist() == [0.0, 2.0] and trace.num_skipped_rows == 1


def test_gzip_and_unreadable_files(tmp_path):
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(b"prompt_tokens,output_tokens\n5,1\n"))
    assert read_trace(str(path)).num_prompt_tokens.tolist() == [5]
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(b"\x1f\x8b" + b"junk")
    assert f"{broken}: not a valid gzip file" in _error(str(broken))
    assert _error(str(tmp_path / "nowhere.csv")) == f"{tmp_path / 'nowhere.csv'}: no such file"
    assert _error(str(tmp_path)) == f"{tmp_path}: is a directory, not a trace file"


def test_relative_paths_resolve_against_the_scenario_folder(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,5,1\n1,6,1\n")
    cfg = WorkloadConfig.model_validate({"kind": "trace", "source": "traces/t.csv"})
    assert np.array_equal(generate(cfg, 0, base_dir=tmp_path).num_prompt_tokens, [5, 6])
    with pytest.raises(ValueError, match="no such file"):
        generate(cfg, 0, base_dir=tmp_path / "elsewhere")


def test_integers_beyond_64_bits_are_bad_rows_not_crashes(tmp_path):
    huge = 10**23
    row = f'{{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1, "priority": {huge}}}\n'
    path = _write(tmp_path, "g.jsonl", row)
    assert f"line 1: priority: expected an integer, found {huge}" in _error(path)
    row = f'{{"timestamp": 0, "input_length": 20, "output_length": 5, "hash_ids": [{huge}]}}\n'
    path = _write(tmp_path, "m.jsonl", row)
    assert "line 1: hash_ids: expected a list of integers" in _error(path, format="mooncake")
