"""Trace readers: the named traces match the traces README and the catalogue; formats parse to the right columns."""

import hashlib
import json

import numpy as np
import pytest

from workloads import WorkloadConfig, generate
from workloads.describe import describe, describe_trace
from workloads.traces import TRACE_CATALOG, detect_format, read_trace, resolve_source
from workloads.traces.fetch import trace_path

# From the traces README: rows, span (s, None for lengths only), prompt mean / p50 / p99 / max,
# output mean / p50 / p99 / max, and the sha256 of the original file where it gives one.
README = {
    "azure-code": (
        8819,
        3436,
        (2048, 1469, 7436, 7437),
        (27.9, 13, 251, 1899),
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
    ),
    "azure-conv": (
        19366,
        3502,
        (1155, 1020, 4142, 14050),
        (211, 129, 601, 1000),
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
    ),
    "mooncake-conversation": (
        12031,
        3537,
        (12035, 6909, 85400, 126195),
        (343, 350, 1119, 2000),
        "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
    ),
    "mooncake-synthetic": (
        3993,
        1022,
        (15325, 11587, 66456, 191378),
        (149, 69, 768, 893),
        "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
    ),
    "sharegpt-8k-multiturn": (30731, None, (2340, 1730, 7434, 8141), (439, 415, 998, 1024), None),
    "arxiv": (28257, None, (2588, 2730, 3933, 4054), (291, 167, 3271, 4056), None),
    "bwb": (33768, None, (1067, 1037, 1800, 3504), (1613, 1601, 2533, 2858), None),
}
AGENT_ROUNDS_SHA256 = "314c49483148fe68e230a683f739e3e6e68d478948ecf342739596f30af36b57"


def _trace_bytes(name: str) -> bytes:
    return trace_path(name, TRACE_CATALOG[name]).read_bytes()


def _close(value: float, published: float) -> bool:
    """Equal at the precision the README prints (whole tokens, or one decimal below 100)."""
    return abs(value - published) <= (0.05 if published < 100 and published != int(published) else 0.5)


@pytest.mark.parametrize("name", list(README))
def test_named_trace_matches_readme_and_catalogue(name):
    rows, span, prompt_stats, output_stats, sha = README[name]
    trace = read_trace(name)
    assert len(trace) == rows and trace.num_skipped_rows == 0
    for values, published in ((trace.num_prompt_tokens, prompt_stats), (trace.num_output_tokens, output_stats)):
        mean, p50, p99, top = published
        assert _close(values.mean(), mean), (values.mean(), mean)
        assert _close(np.percentile(values, 50), p50)
        assert _close(np.percentile(values, 99), p99)
        assert values.max() == top
    if span is None:
        assert trace.arrival_s is None
    else:
        assert trace.arrival_s[0] == 0.0 and np.all(np.diff(trace.arrival_s) >= 0)
        assert round(trace.arrival_s[-1]) == span
    entry = TRACE_CATALOG[name]
    raw = _trace_bytes(name)
    assert hashlib.sha256(raw).hexdigest() == entry.sha256 and len(raw) == entry.size_bytes
    if sha is not None:
        assert entry.sha256 == sha
    assert entry.rows == len(trace)


@pytest.mark.parametrize("name", list(TRACE_CATALOG))
def test_catalogue_figures_are_the_files(name):
    """The rows and mean / median lengths `servesim workload list` prints (without reading files) are the files'."""
    entry = TRACE_CATALOG[name]
    trace = read_trace(name)
    assert entry.rows == len(trace)
    assert entry.mean_prompt_tokens == pytest.approx(trace.num_prompt_tokens.mean(), abs=0.05)
    assert entry.mean_output_tokens == pytest.approx(trace.num_output_tokens.mean(), abs=0.05)
    assert entry.median_prompt_tokens == np.median(trace.num_prompt_tokens)
    assert entry.median_output_tokens == np.median(trace.num_output_tokens)
    assert entry.url == f"https://raw.githubusercontent.com/{entry.repository}/{entry.commit}/{entry.path}"
    assert entry.url.endswith("/" + entry.filename) and len(entry.commit) == 40


def test_azure_timestamps_become_seconds_since_the_first():
    # 18:15:46.6805900 -> 18:15:50.9951690 and 18:15:51.2224670 (first rows of the conv file)
    conv = read_trace("azure-conv").arrival_s
    assert conv[1] == pytest.approx(4.314579, abs=1e-7) and conv[2] == pytest.approx(4.541877, abs=1e-7)
    assert read_trace("azure-code").arrival_s[1] == pytest.approx(0.052, abs=1e-7)
    stats = describe_trace(read_trace("azure-conv"))["arrivals"]
    assert stats["mean_rate_per_s"] == pytest.approx(5.53, abs=0.005)  # README: 5.53 req/s
    assert describe_trace(read_trace("azure-code"))["arrivals"]["mean_rate_per_s"] == pytest.approx(2.57, abs=0.005)


def test_azure_2024_timestamps_with_offsets_and_mixed_precision(tmp_path):
    path = tmp_path / "AzureLLMInferenceTrace_conv_1week.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-12 00:00:00+00:00,100,10\n"
        "2024-05-12 00:00:00.009930+00:00,200,20\n"
        "2024-05-12 00:00:01.5+00:00,300,30\n"
    )
    trace = read_trace(str(path))
    assert trace.format == "azure" and np.allclose(trace.arrival_s, [0.0, 0.00993, 1.5], atol=1e-9, rtol=0)


@pytest.mark.parametrize(
    ("name", "fraction", "distinct"), [("mooncake-conversation", 0.366, 182_790), ("mooncake-synthetic", 0.640, 43_924)]
)
def test_mooncake_repeat_fraction_against_an_independent_count(name, fraction, distinct):
    # Independent count from the raw JSON lines: a block reference repeats when the same
    # prefix of ids (this block and every block before it) occurred in an earlier request.
    seen: set[tuple[int, ...]] = set()
    total = repeats = 0
    for line in _trace_bytes(name).decode().splitlines():
        ids = tuple(json.loads(line)["hash_ids"])
        for k in range(1, len(ids) + 1):
            total += 1
            prefix = ids[:k]
            repeats += prefix in seen
            seen.add(prefix)
    stats = describe_trace(read_trace(name))["prefix_blocks"]
    assert stats["block_tokens"] == 512
    assert stats["num_blocks"] == total and stats["num_distinct_blocks"] == total - repeats == distinct
    assert stats["repeat_fraction"] == pytest.approx(repeats / total, abs=1e-12)
    assert stats["repeat_fraction"] == pytest.approx(fraction, abs=0.0005)  # README: 36.6 % and 64.0 %


def test_mooncake_hashes_identify_prefixes():
    stream = read_trace("mooncake-conversation").to_stream()
    lines = _trace_bytes("mooncake-conversation").decode().splitlines()[:3000]
    by_prefix: dict[tuple[int, ...], int] = {}
    by_hash: dict[int, tuple[int, ...]] = {}
    for i, line in enumerate(lines):
        record = json.loads(line)
        ids, hashes = record["hash_ids"], stream.prefix_hashes(i).tolist()
        assert len(hashes) == len(ids) == -(-record["input_length"] // 512)
        for k, h in enumerate(hashes):
            prefix = tuple(ids[: k + 1])  # (the trace's blocks of equal ids also have equal fills)
            assert by_prefix.setdefault(prefix, h) == h  # equal id prefixes, equal hash
            assert by_hash.setdefault(h, prefix) == prefix  # equal hash, equal id prefix


def test_agent_rounds_sessions_times_and_prefixes():
    trace = read_trace("agent-rounds")
    assert len(trace) == 19
    roots = np.flatnonzero(trace.parent < 0)
    assert roots.tolist() == [0, 9]  # the Codex session (March) first, then Claude Code (June)
    assert trace.arrival_s[9] == pytest.approx(6_204_860.823, abs=1e-6)
    assert np.bincount(trace.session_id).tolist() == [9, 10]
    assert np.all(trace.parent[1:9] == np.arange(0, 8)) and np.all(trace.parent[10:] == np.arange(9, 18))
    # Codex round 1: round 0 ended at 10:06:05.542; its last tool result came at 10:06:06.704.
    assert trace.think_s[1] == pytest.approx(1.162, abs=1e-9)
    # Claude round 1: the WebSearch result at 05:40:50.938, round 0 ended at 05:40:31.647.
    assert trace.think_s[10] == pytest.approx(19.291, abs=1e-9)
    assert np.all(trace.think_s >= 0) and trace.notes["num_overlapping_rounds"] == 0
    stream = trace.to_stream()
    records = [json.loads(line) for line in _trace_bytes("agent-rounds").decode().splitlines()]
    codex = [r for r in records if r["session_id"].startswith("codex")]
    for r in range(1, 9):
        prev, cur = codex[r - 1], codex[r]
        shared = min(cur["prefix_tokens"], prev["input_tokens_total"] + prev["output_tokens"])
        expected = min(shared, prev["input_tokens_total"]) // 16
        a, b = stream.prefix_hashes(r - 1), stream.prefix_hashes(r)
        common = int(np.argmin(np.append(a[: len(b)] == b[: len(a)], False)))
        assert common == expected, r
    # Different models: the two sessions' system prompts share nothing.
    assert stream.prefix_hashes(0)[0] != stream.prefix_hashes(9)[0]


def test_generic_csv_with_every_column(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(
        "arrival_s,prompt_tokens,output_tokens,session_id,think_s,hash_ids,priority,slo_class,tenant\n"
        "0.0,20,5,a,,1 2 3,1,chat,acme\n"
        "0.5,10,3,,,7 8,0,batch,beta\n"
        ",30,4,a,2.5,1 2 3 4,1,chat,acme\n"
        "1.0,12,2,b,,1 2,0,batch,acme\n"
    )
    trace = read_trace(str(path), block_tokens=8)
    assert trace.format == "generic" and len(trace) == 4
    assert trace.parent.tolist() == [-1, -1, 0, -1] and trace.think_s.tolist() == [0, 0, 2.5, 0]
    assert np.isnan(trace.arrival_s[2]) and trace.arrival_s[[0, 1, 3]].tolist() == [0.0, 0.5, 1.0]
    assert trace.session_id.tolist() == [0, -1, 0, 1]
    assert trace.priority.tolist() == [1, 0, 1, 0]
    assert trace.slo_class_names == ("chat", "batch") and trace.slo_class.tolist() == [0, 1, 0, 1]
    assert trace.tenant_names == ("acme", "beta")
    s = trace.to_stream()
    # request 2 extends request 0's 3 blocks (the third block of request 0 holds 4 of 8 tokens)
    assert s.prefix_hashes(2)[:2].tolist() == s.prefix_hashes(0)[:2].tolist()
    assert s.prefix_hashes(2)[2] != s.prefix_hashes(0)[2]  # same id, different fill
    assert s.prefix_hashes(3)[0] == s.prefix_hashes(0)[0] and s.prefix_hashes(3)[1] != s.prefix_hashes(0)[1]


def test_generic_jsonl_and_lengths_only(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [
        {"prompt_tokens": 5, "output_tokens": 2, "arrival_s": 0.25, "hash_ids": [4]},
        {"prompt_tokens": 9, "output_tokens": 1, "arrival_s": 0.75, "hash_ids": [4, 5]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    trace = read_trace(str(path), block_tokens=8)
    assert trace.arrival_s.tolist() == [0.25, 0.75] and trace.block_keys.tolist() == [4, 4, 5]
    (tmp_path / "lengths.csv").write_text("prompt_tokens,output_tokens\n5,6\n7,8\n")
    assert read_trace(str(tmp_path / "lengths.csv")).arrival_s is None


def test_format_detection_and_names(tmp_path):
    for name, entry in TRACE_CATALOG.items():
        source, _ = resolve_source(name)
        assert detect_format(source) == entry.format, name
    with pytest.raises(ValueError, match="unknown trace 'azure-cnv'; named: sharegpt-8k-multiturn, arxiv"):
        read_trace("azure-cnv")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"x\.csv: line 1: cannot tell the trace format"):
        read_trace(str(tmp_path / "x.csv"))
    (tmp_path / "splitwise.csv").write_text(
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,4808,10\n0.052,3180,8\n"
    )
    trace = read_trace(str(tmp_path / "splitwise.csv"))
    assert trace.format == "vidur" and trace.arrival_s.tolist() == [0.0, 0.052]


def _replay(**fields):
    return generate(WorkloadConfig.model_validate({"kind": "trace", **fields}), seed=4)


def test_replay_window_scale_duration_and_caps():
    full = read_trace("azure-conv")
    s = _replay(source="azure-conv", window_s=[600, 1200], time_scale=2.0)
    inside = (full.arrival_s >= 600) & (full.arrival_s < 1200)
    assert len(s) == inside.sum()
    assert np.allclose(s.arrival_s, (full.arrival_s[inside] - 600) / 2)
    assert s.arrival_s.max() < 300
    s = _replay(source="azure-conv", duration_s=60.0)
    assert len(s) == np.sum(full.arrival_s <= 60.0)
    s = _replay(source="mooncake-conversation", num_requests=500, max_prompt_tokens=3000, max_output_tokens=100)
    raw = read_trace("mooncake-conversation")
    assert np.array_equal(s.num_prompt_tokens, np.minimum(raw.num_prompt_tokens[:500], 3000))
    assert s.num_output_tokens.max() == 100 and s.meta["num_capped_prompts"] == int(
        np.sum(raw.num_prompt_tokens[:500] > 3000)
    )
    assert np.all(np.diff(s.hash_offsets) == -(-s.num_prompt_tokens // 512))
    full_stream = raw.to_stream()
    i = int(np.argmax(raw.num_prompt_tokens[:500] > 3000))  # a capped prompt: 5 full blocks then a partial one
    assert s.prefix_hashes(i)[:5].tolist() == full_stream.prefix_hashes(i)[:5].tolist()
    assert s.prefix_hashes(i)[5] != full_stream.prefix_hashes(i)[5]


def test_time_scale_compresses_think_times_too():
    raw = read_trace("agent-rounds")
    s = _replay(source="agent-rounds", time_scale=4.0)
    assert np.allclose(s.think_s, raw.think_s / 4) and s.arrival_s[9] == pytest.approx(raw.arrival_s[9] / 4)


def test_replay_sampling():
    first = _replay(source="azure-code", num_requests=100)
    assert np.array_equal(first.arrival_s, read_trace("azure-code").arrival_s[:100])
    a = _replay(source="azure-code", num_requests=300, sample="random")
    b = _replay(source="azure-code", num_requests=300, sample="random")
    assert len(a) == 300 and np.array_equal(a.arrival_s, b.arrival_s) and np.all(np.diff(a.arrival_s) >= 0)
    assert a.arrival_s[-1] > 3000  # spread over the hour, not the first 300
    # Sessions are kept whole (the last one cut short), parents always included.
    s = _replay(source="agent-rounds", num_requests=12, sample="random")
    assert len(s) == 12 and sorted(np.bincount(s.session_id).tolist()) in ([2, 10], [3, 9])
    assert np.all(s.parent < np.arange(12))


def test_lengths_only_trace_needs_an_arrival_process():
    s = _replay(source="bwb", arrival={"kind": "poisson", "rate_per_s": 4.0}, num_requests=1000)
    bwb = read_trace("bwb")
    assert np.array_equal(s.num_prompt_tokens, bwb.num_prompt_tokens[:1000])
    assert s.arrival_s[-1] == pytest.approx(250.0)
    r = _replay(source="bwb", arrival={"kind": "poisson", "rate_per_s": 4.0}, num_requests=1000, sample="random")
    assert len(set(zip(r.num_prompt_tokens.tolist(), r.num_output_tokens.tolist(), strict=True))) > 900
    with pytest.raises(ValueError, match=r"has lengths only .* give workload\.arrival"):
        _replay(source="bwb")
    with pytest.raises(ValueError, match=r"has its own arrival times; remove workload\.arrival"):
        _replay(source="azure-conv", arrival={"kind": "poisson", "rate_per_s": 4.0})
    with pytest.raises(ValueError, match="has 33,768 rows but 40,000 requests"):
        _replay(source="bwb", arrival={"kind": "poisson", "rate_per_s": 4.0}, num_requests=40_000)


def test_trace_classes_from_config_and_from_file(tmp_path):
    s = _replay(source="agent-rounds", classes=[{"priority": 2, "slo_class": "agent", "tenant": "t1"}])
    assert set(s.priority) == {2} and s.slo_class_names == ("agent",) and s.tenant_names == ("t1",)
    mixed = _replay(
        source="azure-conv", classes=[{"weight": 3, "slo_class": "chat"}, {"weight": 1, "slo_class": "batch"}]
    )
    share = np.mean(np.asarray(mixed.slo_class_names)[mixed.slo_class] == "chat")
    assert share == pytest.approx(0.75, abs=4 * np.sqrt(0.75 * 0.25 / len(mixed)))
    path = tmp_path / "labelled.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,tenant\n0,5,5,x\n")
    with pytest.raises(ValueError, match="already labels its requests"):
        generate(WorkloadConfig.model_validate({"kind": "trace", "source": str(path), "classes": [{"priority": 1}]}), 0)


def test_describe_a_generated_stream_matches_its_trace():
    stream = _replay(source="mooncake-synthetic")
    assert describe(stream)["prefix_blocks"] == describe_trace(read_trace("mooncake-synthetic"))["prefix_blocks"]
