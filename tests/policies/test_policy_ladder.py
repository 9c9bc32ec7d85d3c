"""Hand-worked timelines for each batch policy (constant step cost; times in seconds)."""

import numpy as np
import pytest

import policies
from tests.conftest import make_config, make_stream, run_checked
from workloads import RequestStream

ALL = {"static", "dynamic", "continuous", "vllm", "vllm_v0", "sarathi", "priority", "no_kv_cache"}


def test_the_whole_ladder_is_registered():
    assert set(policies.BATCH_POLICIES.names()) >= ALL


def test_static_batch_waits_for_its_longest_member(by_id):
    # A (4, 3) and B (4, 1) at 0 form a batch; C at 0.5 cannot join until A finishes at 3.
    cfg = make_config(policy={"kind": "static", "max_batch_size": 2})
    r = by_id(run_checked(cfg, make_stream([0.0, 0.0, 0.5], [4, 4, 4], [3, 1, 1])))
    assert r.loc[1, "finished_s"] == 1.0
    assert r.loc[0, "finished_s"] == 3.0
    assert r.loc[2, "first_scheduled_s"] == 3.0 and r.loc[2, "finished_s"] == 4.0


def test_static_reserves_kv_for_the_full_output():
    cfg = make_config(policy={"kind": "static", "max_batch_size": 4}, kv_cache={"num_blocks": 20, "block_size": 2})
    result = run_checked(cfg, make_stream([0.0], [4], [6]))
    # 4 + 6 = 10 tokens = 5 blocks held from the first step on
    assert result.steps["num_kv_blocks_used"].tolist()[:5] == [5, 5, 5, 5, 5]


def test_dynamic_window_fires_when_full_or_at_the_timeout(by_id):
    cfg = make_config(policy={"kind": "dynamic", "max_batch_size": 2, "max_wait_s": 0.7})
    stream = make_stream([0.0, 0.5, 2.0, 2.1, 10.0], [4, 4, 4, 4, 4], [2, 1, 1, 1, 1])
    r = by_id(run_checked(cfg, stream))
    # A waits for B (batch full at 0.5); C and D wait for the batch to end at 2.5; E alone waits 0.7 s.
    assert r.loc[0, "first_scheduled_s"] == 0.5 and r.loc[1, "finished_s"] == 1.5 and r.loc[0, "finished_s"] == 2.5
    assert r.loc[2, "first_scheduled_s"] == 2.5 and r.loc[3, "finished_s"] == 3.5
    assert r.loc[4, "first_scheduled_s"] == pytest.approx(10.7) and r.loc[4, "finished_s"] == pytest.approx(11.7)


def test_orca_admits_mid_batch_with_full_prefill(by_id):
    cfg = make_config(policy={"kind": "continuous", "max_num_seqs": 4}, kv_cache={"num_blocks": 20, "block_size": 2})
    result = run_checked(cfg, make_stream([0.0, 0.5], [4, 4], [3, 2]))
    r = by_id(result)
    assert r.loc[1, "first_scheduled_s"] == 1.0 and r.loc[1, "first_token_s"] == 2.0  # joined A's decode step
    assert r.loc[0, "finished_s"] == 3.0 and r.loc[1, "finished_s"] == 3.0
    assert result.steps["num_prefill_tokens"].tolist() == [4, 4, 0]
    assert result.steps["num_decode_tokens"].tolist() == [0, 1, 2]
    assert result.steps["num_kv_blocks_used"].tolist() == [4, 7, 0]  # 7 and 6 tokens reserved


def test_orca_reservation_blocks_admission_instead_of_preempting(by_id):
    cfg = make_config(policy={"kind": "continuous", "max_num_seqs": 4}, kv_cache={"num_blocks": 6, "block_size": 2})
    result = run_checked(cfg, make_stream([0.0, 0.5], [4, 4], [3, 2]))
    r = by_id(result)
    assert r.loc[1, "first_scheduled_s"] == 3.0 and r.loc[1, "finished_s"] == 5.0
    assert result.summary["preemptions"] == 0


def test_sarathi_chunks_prompts_and_never_stalls_decodes(by_id):
    cfg = make_config(policy={"kind": "sarathi", "max_num_seqs": 4, "token_budget": 4})
    result = run_checked(cfg, make_stream([0.0, 0.5], [2, 7], [5, 1]))
    r = by_id(result)
    # A prefills (2), then decodes every step while B's 7-token prompt goes in chunks 3, 3, 1.
    assert result.steps["num_prefill_tokens"].tolist() == [2, 3, 3, 1, 0]
    assert result.steps["num_decode_tokens"].tolist() == [0, 1, 1, 1, 1]
    assert r.loc[1, "first_token_s"] == 4.0 and r.loc[0, "finished_s"] == 5.0
    assert result.summary["p99_itl_ms"] == pytest.approx(1000)  # every gap of A is one step
    # vllm stalls A's decode for B's prefill-only step
    v = run_checked(make_config(), make_stream([0.0, 0.5], [2, 7], [5, 1]))
    assert v.summary["p99_itl_ms"] > 1000


def test_sarathi_splits_a_long_prompt_at_the_budget(by_id):
    cfg = make_config(policy={"kind": "sarathi", "max_num_seqs": 4, "token_budget": 4})
    result = run_checked(cfg, make_stream([0.0], [6], [2]))
    assert result.steps["num_prefill_tokens"].tolist() == [4, 2, 0]
    r = by_id(result)
    assert r.loc[0, "first_token_s"] == 2.0 and r.loc[0, "finished_s"] == 3.0


def _preemption_case(mode):
    # 4 blocks of 2 tokens; A and B (3 prompt, 4 out); 1 s + 0.1 s per token computed.
    cfg = make_config(
        kv_cache={"num_blocks": 4, "block_size": 2},
        policy={"kind": "vllm_v0", "watermark": 0, "preemption_mode": mode},
        cost_model={"kind": "constant", "step_time_s": 1.0, "per_token_s": 0.1},
    )
    return run_checked(cfg, make_stream([0.0, 0.0], [3, 3], [4, 4]))


def test_recompute_versus_swap_costs(by_id):
    rec = by_id(_preemption_case("recompute"))
    # [0,1.6] prefill 6; [1.6,2.8] decode 2; B preempted; A decodes [2.8,3.9], [3.9,5.0];
    # B recomputes 3 + 2 tokens [5.0,6.5] and decodes [6.5,7.6].
    assert rec.loc[0, "finished_s"] == pytest.approx(5.0)
    assert rec.loc[1, "finished_s"] == pytest.approx(7.6)
    # Swap: B's 2 blocks (2 x 2 tokens x 131,072 B of Llama-3.1-8B KV) cross the H100's 64 GB/s host link
    # (+10 us latency) out at 2.8 and back at 5.0+d; B then only decodes one token (1.1 s).
    d = 2 * 2 * 131072 / 64e9 + 1e-5
    sw_result = _preemption_case("swap")
    sw = by_id(sw_result)
    assert sw.loc[0, "finished_s"] == pytest.approx(5.0 + d)
    assert sw.loc[1, "finished_s"] == pytest.approx(7.2 + 2 * d)
    assert sw.loc[1, "num_preemptions"] == 1 and sw_result.summary["swaps_out"] == 1


def test_swap_falls_back_to_recompute_when_host_memory_is_full(by_id):
    cfg = make_config(
        kv_cache={"num_blocks": 4, "block_size": 2, "swap_space_bytes": 0},
        policy={"kind": "vllm_v0", "watermark": 0, "preemption_mode": "swap"},
        cost_model={"kind": "constant", "step_time_s": 1.0, "per_token_s": 0.1},
    )
    result = run_checked(cfg, make_stream([0.0, 0.0], [3, 3], [4, 4]))
    assert by_id(result).loc[1, "finished_s"] == pytest.approx(7.6) and result.summary["swaps_out"] == 0


def _with_priority(stream, prio):
    return RequestStream(stream.arrival_s, stream.num_prompt_tokens, stream.num_output_tokens, priority=np.array(prio))


def test_priority_preempts_lower_priority_to_admit(by_id):
    # One slot. A (prio 1) runs; B (prio 0) arrives and takes A's slot at the next step; C (prio 2) goes last.
    cfg = make_config(policy={"kind": "priority", "max_num_seqs": 1})
    stream = _with_priority(make_stream([0.0, 0.5, 0.6], [4, 4, 4], [3, 1, 1]), [1, 0, 2])
    r = by_id(run_checked(cfg, stream))
    assert r.loc[1, "first_scheduled_s"] == 1.0 and r.loc[1, "finished_s"] == 2.0
    assert r.loc[0, "num_preemptions"] == 1 and r.loc[0, "finished_s"] == 4.0  # recompute 5 tokens, 1 decode
    assert r.loc[2, "first_scheduled_s"] == 4.0 and r.loc[2, "finished_s"] == 5.0


def test_priority_victim_is_lowest_priority_not_newest(by_id):
    # L (prio 1) is admitted first, H (prio 0) second; at t=3 L needs a block and none is free.
    policy = {"kind": "priority", "max_num_seqs": 4, "preempt_for_admission": False}
    cfg = make_config(policy=policy, kv_cache={"num_blocks": 4, "block_size": 2})
    stream = _with_priority(make_stream([0.0, 0.5], [3, 3], [4, 4]), [1, 0])
    r = by_id(run_checked(cfg, stream))
    assert r.loc[0, "num_preemptions"] == 1 and r.loc[1, "num_preemptions"] == 0
    # vllm would have preempted the newest (H): it serves arrival order (and refuses prioritised requests)
    plain = _with_priority(make_stream([0.0, 0.5], [3, 3], [4, 4]), [0, 0])
    v = by_id(
        run_checked(
            make_config(policy={"kind": "vllm_v0", "watermark": 0}, kv_cache={"num_blocks": 4, "block_size": 2}), plain
        )
    )
    assert v.loc[1, "num_preemptions"] == 1 and v.loc[0, "num_preemptions"] == 0


def test_priority_aging_lets_old_low_priority_requests_through(by_id):
    # One slot. A (prio 0) runs until 3; B (prio 5) waits from 0; C (prio 0) arrives at 2.5.
    # Strict: C goes before B at t=3. Aging at 0.4 s per class: at t=3 B's effective priority is
    # 5 - 3/0.4 = -2.5 and C's 0 - 0.5/0.4 = -1.25, so B goes first.
    stream = _with_priority(make_stream([0.0, 0.0, 2.5], [4, 4, 4], [3, 1, 1]), [0, 5, 0])
    strict = by_id(run_checked(make_config(policy={"kind": "priority", "max_num_seqs": 1}), stream))
    aging = by_id(
        run_checked(
            make_config(policy={"kind": "priority", "max_num_seqs": 1, "mode": "aging", "aging_s": 0.4}), stream
        )
    )
    assert strict.loc[2, "finished_s"] == 4.0 and strict.loc[1, "finished_s"] == 5.0
    assert aging.loc[1, "finished_s"] == 4.0 and aging.loc[2, "finished_s"] == 5.0


def test_parameter_of_another_policy_is_refused_with_its_name():
    with pytest.raises(ValueError, match="policy: token_budget: unknown field"):
        make_config(policy={"kind": "vllm_v0", "token_budget": 512})
    with pytest.raises(ValueError, match=r"unknown batch policy 'orca'; known: .*continuous"):
        make_config(policy={"kind": "orca"})


def test_priority_preempts_nobody_for_a_request_that_still_cannot_run():
    """W2 could only run if both running requests left; R2 outranks it, so R1 must stay too."""
    from policies.batching.priority import PriorityParams, PriorityPolicy
    from simulator.request import Request
    from tests.policies.fake_view import FakeView, running_request

    view = FakeView(free=2, total=20)

    def waiting(rid, priority, prompt):
        r = Request(rid, 0.0, prompt, 10, priority)
        r.enqueued_s = 0.0
        return r

    r1 = running_request(view, 0, 64, 64, generated=1, blocks=4, output=10, priority=5)
    r2 = running_request(view, 1, 64, 64, generated=1, blocks=4, output=10, priority=1)
    w1, w2 = waiting(2, 0, 16), waiting(3, 2, 160)  # W1 needs 1 block, W2 10
    view.waiting, view.running = [w1, w2], [r1, r2]
    plan = PriorityPolicy(PriorityParams(max_num_seqs=8)).plan_step(view, 1.0)
    assert [r.request_id for r, _ in plan.scheduled] == [2] and plan.preempt == []
