"""The counterfactual without a KV cache: every step recomputes the full sequence."""

import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from tests.conftest import make_config, make_stream, run_checked


def test_every_step_recomputes_each_sequence(by_id):
    cfg = make_config(policy="no_kv_cache", cost_model={"kind": "constant", "step_time_s": 1.0, "per_token_s": 0.1})
    result = run_checked(cfg, make_stream([0.0], [5], [3]))
    # Steps compute 5, 6, 7 tokens: 1.5, 1.6, 1.7 s.
    assert result.steps["num_prefill_tokens"].tolist() == [5, 6, 7]
    assert result.steps["num_decode_tokens"].tolist() == [0, 0, 0]
    r = by_id(result)
    assert r.loc[0, "first_token_s"] == pytest.approx(1.5)
    assert r.loc[0, "finished_s"] == pytest.approx(4.8)
    assert result.steps["num_kv_blocks_used"].tolist() == [0, 0, 0]


def test_same_request_costs_more_without_cache_on_real_model():
    from tests.conftest import make_stream as ms

    stream = ms([0.0], [2000], [400])
    e2e = {}
    for policy in ("vllm_v0", "no_kv_cache"):
        cfg = validate_scenario({"policy": policy})
        e2e[policy] = build(cfg, stream=stream).run().summary["mean_e2el_ms"]
    assert e2e["no_kv_cache"] > 5 * e2e["vllm_v0"]


def test_memory_pressure_sends_newest_back_to_the_queue(by_id):
    # 4 blocks of 4 tokens = 16 tokens. Two sequences of 6 (+growing) fit until 8 + 8 > 16... then 9+9.
    cfg = make_config(policy="no_kv_cache", kv_cache={"num_blocks": 4, "block_size": 4})
    result = run_checked(cfg, make_stream([0.0, 0.0], [7, 7], [4, 4]))
    r = by_id(result)
    assert r.loc[1, "num_preemptions"] >= 1
    assert set(r["status"]) == {"finished"}
