import numpy as np
import pandas as pd
import pytest

from simulator.metrics.summary import summarize, weighted_percentile


@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_weighted_percentile_equals_numpy_on_the_expansion(q):
    rng = np.random.default_rng(0)
    values = rng.random(50)
    counts = rng.integers(1, 20, 50)
    assert weighted_percentile(values, counts, q) == pytest.approx(np.percentile(np.repeat(values, counts), q))


def _requests(rows):
    cols = [
        "request_id",
        "arrival_s",
        "first_token_s",
        "finished_s",
        "num_generated_tokens",
        "num_prompt_tokens",
        "status",
        "num_preemptions",
    ]
    return pd.DataFrame(rows, columns=cols)


def test_metric_definitions_and_inclusive_goodput():
    req = _requests(
        [
            [0, 0.0, 0.1, 1.1, 11, 5, "finished", 0],  # ttft 100 ms, tpot 100 ms
            [1, 1.0, 1.3, 1.3, 1, 5, "finished", 0],  # ttft 300 ms, one token: tpot counts as 0 for goodput
            [2, 2.0, np.nan, 2.0, 0, 5, "rejected", 0],
        ]
    )
    s = summarize(req, np.array([0.1]), np.array([10]), {"ttft_ms": 300.0, "tpot_ms": 100.0})
    assert s["completed"] == 2 and s["rejected"] == 1
    assert s["duration"] == pytest.approx(1.3)
    assert s["mean_ttft_ms"] == pytest.approx(200)
    assert s["mean_tpot_ms"] == pytest.approx(100)  # only n > 1
    assert s["request_goodput"] == pytest.approx(2 / 1.3)  # both meet the SLOs (inclusive)
    s2 = summarize(req, np.array([0.1]), np.array([10]), {"ttft_ms": 299.0})
    assert s2["request_goodput"] == pytest.approx(1 / 1.3)
    assert s["output_throughput"] == pytest.approx(12 / 1.3)
    assert s["mean_itl_ms"] == pytest.approx(100)


def test_stream_delay_shifts_client_side_latencies():
    req = _requests([[0, 0.0, 0.1, 1.1, 11, 5, "finished", 0]])
    s = summarize(req, np.array([0.1]), np.array([10]), None, stream_delay_s=0.05)
    assert s["mean_ttft_ms"] == pytest.approx(150) and s["mean_e2el_ms"] == pytest.approx(1150)
    assert s["mean_tpot_ms"] == pytest.approx(100)


def test_no_finished_requests():
    req = _requests([[0, 0.0, np.nan, 0.0, 0, 5, "rejected", 0]])
    s = summarize(req, np.array([]), np.array([], dtype=np.int64))
    assert s["completed"] == 0 and s["mean_ttft_ms"] is None and s["request_throughput"] == 0.0


# -- vLLM's failed, max_output_tokens_per_s and max_concurrent_requests ---------------------


def _token_times_reference(rows, token_times, delay=0.0):
    """vLLM's bucketing written out per token: floor(time - earliest send of a completed request)."""
    done = [r for r in rows if r[6] == "finished"]
    origin = min(r[1] for r in done)
    counts: dict[int, int] = {}
    for t in token_times:
        b = int(np.floor(t + delay - origin))
        counts[b] = counts.get(b, 0) + 1
    return float(max(counts.values()))


def test_failed_peak_tokens_and_peak_concurrency_by_hand():
    rows = [
        # id, arrival, first token, finished, tokens, prompt, status, preemptions
        [0, 0.5, 0.6, 1.2, 4, 5, "finished", 0],  # tokens at 0.6, 0.8, 1.0, 1.2
        [1, 1.2, 1.3, 2.9, 3, 5, "finished", 0],  # starts as 0 ends: not concurrent with it; 1.3, 1.4, 2.9
        [2, 1.25, 1.4, 1.45, 2, 5, "finished", 0],  # 1.4, 1.45
        [3, 2.0, np.nan, 2.0, 0, 5, "rejected", 0],
    ]
    req = _requests(rows)
    firsts = [0.6, 1.3, 1.4]
    later = np.array([0.8, 1.0, 1.2, 1.4, 2.9, 1.45])
    emissions = (later, np.ones(len(later), dtype=np.int64))
    s = summarize(req, np.array([0.1]), np.array([1]), token_emissions=emissions)
    assert s["failed"] == 1 and s["completed"] == 3
    # seconds from 0.5: [0.5, 1.5) holds 0.6 0.8 1.0 1.2 1.3 1.4 1.4 1.45 -> 8; [1.5, 2.5) holds none; 2.9 -> 1
    assert s["max_output_tokens_per_s"] == 8.0 == _token_times_reference(rows, [*firsts, *later])
    # [0.5, 1.2), [1.2, 2.9), [1.25, 1.45): at most 2 at once (request 0 leaves as 1 arrives)
    assert s["max_concurrent_requests"] == 2
    # a client delay shifts token receipts and ends, not sends
    shifted = summarize(req, np.array([0.1]), np.array([1]), stream_delay_s=0.3, token_emissions=emissions)
    assert shifted["max_output_tokens_per_s"] == _token_times_reference(rows, [*firsts, *later], 0.3)
    assert shifted["max_concurrent_requests"] == 3  # request 0 now ends at 1.5


def test_peak_tokens_per_second_a_chunk_at_a_time_is_the_whole_bucketing(monkeypatch):
    """The emissions are bucketed a chunk at a time (their temporaries stay small at a million requests): the same
    peak as bucketing them all at once, chunk boundaries and a later chunk reaching further included."""
    from simulator.metrics import summary

    rng = np.random.default_rng(5)
    n = 40
    arrival = np.sort(rng.uniform(0, 20, n))
    first = arrival + rng.uniform(0.01, 0.5, n)
    rows = [[i, arrival[i], first[i], first[i] + 1, 3, 5, "finished", 0] for i in range(n)]
    req = _requests(rows)
    times = rng.uniform(0, 40, 1000)
    counts = rng.integers(1, 9, 1000)
    whole = np.concatenate([first, times]) + 0.25
    weights = np.concatenate([np.ones(n, dtype=np.int64), counts])
    expected = float(np.bincount(np.floor(whole - arrival.min()).astype(np.int64), weights=weights).max())
    for chunk in (1 << 20, 7, 64):
        monkeypatch.setattr(summary, "EMISSIONS_CHUNK", chunk)
        s = summarize(req, np.array([0.1]), np.array([1]), stream_delay_s=0.25, token_emissions=(times, counts))
        assert s["max_output_tokens_per_s"] == expected


def test_peak_fields_without_emissions_or_completions():
    req = _requests([[0, 0.0, np.nan, 0.0, 0, 5, "rejected", 0]])
    s = summarize(
        req,
        np.array([], dtype=float),
        np.array([], dtype=np.int64),
        token_emissions=(np.array([]), np.array([], dtype=np.int64)),
    )
    assert s["failed"] == 1 and s["max_output_tokens_per_s"] == 0.0 and s["max_concurrent_requests"] == 0
    assert summarize(req, np.array([], dtype=float), np.array([], dtype=np.int64))["max_output_tokens_per_s"] is None


def test_recorder_attributes_itls_to_the_step_row_that_follows():
    from simulator.metrics.recorder import MetricsRecorder

    for record_steps in (True, False):
        rec = MetricsRecorder(record_steps=record_steps)
        rec.itl(0.1, 2)
        rec.itl(0.3, 1)
        rec.step(0, 0, 1.0, 0.5, 3, 0, 0, 3, 10, 0, 0, 0, 0)  # 3 tokens at 1.5
        rec.step(0, 0, 1.5, 0.5, 1, 0, 100, 0, 10, 0, 0, 0, 0)  # a prefill step emitting no later token
        columns = {name: 0 for name in ("num_running", "num_waiting", "num_prefill_tokens", "num_kv_blocks_used")}
        columns |= {"num_kv_blocks_cached": 0, "num_preempted": 0, "num_swapped": 0, "num_transfer_queue": 0}
        rec.itl(0.2, 4)
        rec.itl_bulk([0.25, 0.25], 4)
        rec.steps_bulk(0, 0, [2.0, 2.25, 2.5, 2.75], [0.25, 0.25, 0.25], columns | {"num_decode_tokens": 4})
        times, counts = rec.token_emissions()
        assert times.tolist() == [1.5, 2.25, 2.5, 2.75] and counts.tolist() == [3, 4, 4, 4]


def _scenario_run(extra, fast_forward):
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    lengths = {
        "kind": "independent",
        "prompt": {"kind": "lognormal", "median_tokens": 3000, "sigma": 0.4, "max_tokens": 12000},
        "output": {"kind": "lognormal", "median_tokens": 400, "sigma": 0.4, "max_tokens": 2000},
    }
    base = {
        "seed": 3,
        "workload": {"num_requests": 200, "arrival": {"kind": "poisson", "rate_per_s": 20}, "lengths": lengths},
    }
    if "workload" in extra:
        extra = extra | {"workload": base["workload"] | extra["workload"]}
    return build(validate_scenario(base | extra), fast_forward=fast_forward).run()


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"kv_cache": {"num_blocks": 2000}, "policy": {"kind": "sarathi"}},  # preemptions by recompute
        {"workload": {"arrival": {"kind": "offline"}}},
        {
            "policy": {"kind": "sarathi"},
            "groups": [{"role": "prefill", "count": 1}, {"role": "decode", "count": 1}],
        },
    ],
    ids=["vllm", "sarathi-preempting", "offline", "disaggregated"],
)
def test_peak_fields_agree_between_fast_forward_and_plain_paths(extra):
    fast, plain = _scenario_run(extra, True), _scenario_run(extra, False)
    for key in ("failed", "max_output_tokens_per_s", "max_concurrent_requests"):
        assert fast.summary[key] == plain.summary[key], key
    assert fast.summary["max_output_tokens_per_s"] > 0
    if extra.get("policy"):
        assert fast.summary["preemptions"] > 0 or "groups" in extra


def test_every_output_token_is_counted_once():
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    cfg = validate_scenario(
        {"seed": 2, "kv_cache": {"num_blocks": 2000}, "policy": {"kind": "sarathi"}, "workload": {"num_requests": 150}}
    )
    for fast_forward in (True, False):
        sim = build(cfg, fast_forward=fast_forward)
        result = sim.run()
        _, counts = sim.recorder.token_emissions()
        assert result.summary["preemptions"] > 0
        assert int(counts.sum()) + result.summary["completed"] == result.summary["total_output_tokens"]
