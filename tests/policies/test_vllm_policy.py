"""Hand-worked timelines of the vllm policy under a constant 1 s step."""

import numpy as np
import pytest

from tests.conftest import make_config, make_stream, run_checked


def test_prefill_first_timeline(by_id):
    # A (4 prompt, 3 out) at 0; B (4, 2) at 0.5.
    # [0,1] prefill A -> A tok1 @1. [1,2] prefill B (prefill first) -> B tok1 @2.
    # [2,3] decode A,B -> A tok2, B tok2 @3, B done. [3,4] decode A -> A tok3 @4, done.
    result = run_checked(make_config(), make_stream([0.0, 0.5], [4, 4], [3, 2]))
    r = by_id(result)
    assert r.loc[0, "first_token_s"] == 1.0 and r.loc[0, "finished_s"] == 4.0
    assert r.loc[1, "first_token_s"] == 2.0 and r.loc[1, "finished_s"] == 3.0
    assert r.loc[1, "first_scheduled_s"] == 1.0
    assert r.loc[1, "ttft_s"] == 1.5 and r.loc[1, "e2el_s"] == 2.5
    # ITLs: A 3-1=2, 4-3=1; B 3-2=1.
    s = result.summary
    assert s["mean_itl_ms"] == pytest.approx(4000 / 3)
    assert s["median_itl_ms"] == pytest.approx(1000)
    assert s["mean_tpot_ms"] == pytest.approx((1500 + 1000) / 2)
    assert s["duration"] == 4.0 and s["completed"] == 2
    assert s["num_steps"] == 4
    steps = result.steps
    assert steps["num_prefill_tokens"].tolist() == [4, 4, 0, 0]
    assert steps["num_decode_tokens"].tolist() == [0, 0, 2, 1]


def test_idle_replica_wakes_on_arrival(by_id):
    result = run_checked(make_config(), make_stream([2.5], [8], [2]))
    r = by_id(result)
    assert r.loc[0, "first_scheduled_s"] == 2.5
    assert r.loc[0, "first_token_s"] == 3.5 and r.loc[0, "finished_s"] == 4.5


def test_max_num_seqs_caps_the_batch(by_id):
    cfg = make_config(policy={"kind": "vllm_v0", "max_num_seqs": 1})
    result = run_checked(cfg, make_stream([0.0, 0.0], [4, 4], [2, 2]))
    r = by_id(result)
    # B waits for A: A prefill [0,1], decode [1,2]; B prefill [2,3], decode [3,4].
    assert r.loc[0, "finished_s"] == 2.0
    assert r.loc[1, "first_scheduled_s"] == 2.0 and r.loc[1, "finished_s"] == 4.0


def test_token_budget_splits_prefills_across_steps(by_id):
    cfg = make_config(policy={"kind": "vllm_v0", "max_num_batched_tokens": 10, "max_num_seqs": 4})
    result = run_checked(cfg, make_stream([0.0, 0.0, 0.0], [6, 4, 5], [1, 1, 1]))
    r = by_id(result)
    # 6 + 4 fit in 10; the third (5) waits a step.
    assert r.loc[0, "finished_s"] == 1.0 and r.loc[1, "finished_s"] == 1.0
    assert r.loc[2, "finished_s"] == 2.0


def test_newest_request_is_preempted_by_recompute(by_id):
    # 4 blocks of 2 tokens. A and B (3 prompt, 4 out) both admitted (2 blocks each).
    # [0,1] prefill both -> tok1 @1; [1,2] decode both (4 tokens fit in 2 blocks) -> tok2 @2.
    # @2 A needs a 3rd block, none free: B (newest) is preempted, its KV dropped.
    # [2,3] decode A -> tok3; [3,4] decode A -> tok4, done (B cannot fit 3 blocks meanwhile).
    # [4,5] B recomputes its 3 + 2 tokens and samples tok3; [5,6] decode -> tok4, done.
    cfg = make_config(kv_cache={"num_blocks": 4, "block_size": 2}, policy={"kind": "vllm_v0", "watermark": 0})
    result = run_checked(cfg, make_stream([0.0, 0.0], [3, 3], [4, 4]))
    r = by_id(result)
    assert r.loc[0, "finished_s"] == 4.0 and r.loc[0, "num_preemptions"] == 0
    assert r.loc[1, "num_preemptions"] == 1
    assert r.loc[1, "first_token_s"] == 1.0 and r.loc[1, "finished_s"] == 6.0
    steps = result.steps
    assert steps["num_preempted"].tolist() == [0, 0, 1, 0, 0, 0]
    assert steps["num_prefill_tokens"].tolist() == [6, 0, 0, 0, 5, 0]
    assert result.summary["preemptions"] == 1
    # B's third token came 3 s after its second (preempted in between).
    assert result.summary["p99_itl_ms"] > 2000


def test_requests_that_can_never_run_are_rejected_with_reasons(by_id):
    cfg = make_config(kv_cache={"num_blocks": 4, "block_size": 16}, max_model_len=100)
    result = run_checked(cfg, make_stream([0.0, 0.0, 0.0], [90, 70, 10], [20, 10, 5]))
    r = by_id(result)
    assert r.loc[0, "status"] == "rejected" and "max model length (100)" in r.loc[0, "reject_reason"]
    assert r.loc[1, "status"] == "rejected" and "cache holds 4" in r.loc[1, "reject_reason"]
    assert r.loc[2, "status"] == "finished"
    assert result.summary["rejected"] == 2 and result.summary["completed"] == 1


def test_prompt_beyond_token_budget_is_rejected(by_id):
    cfg = make_config(policy={"kind": "vllm_v0", "max_num_batched_tokens": 16, "max_num_seqs": 4})
    result = run_checked(cfg, make_stream([0.0, 0.0], [20, 8], [2, 2]))
    r = by_id(result)
    assert r.loc[0, "status"] == "rejected" and "max_num_batched_tokens (16)" in r.loc[0, "reject_reason"]
    assert r.loc[1, "status"] == "finished"


def test_same_seed_same_result_different_seed_different_result():
    from simulator.build import build

    cfg = make_config(workload={"num_requests": 60, "arrival": {"kind": "poisson", "rate_per_s": 0.5}})
    a, b = build(cfg).run(), build(cfg).run()
    assert a.summary == b.summary
    assert a.requests.equals(b.requests)
    other = build(cfg.model_copy(update={"seed": 1})).run()
    assert not np.array_equal(a.requests["arrival_s"], other.requests["arrival_s"])
