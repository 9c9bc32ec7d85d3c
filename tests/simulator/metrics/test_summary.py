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
