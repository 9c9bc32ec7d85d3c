"""An engine that schedules one step ahead (vLLM V1's async scheduling, SGLang's and TensorRT-LLM's overlap
schedulers) plans step N+1 when step N is launched: a request arriving while step N runs is first planned into
step N+2 (vllm/v1/engine/core.py, step_with_batch_queue). Constant 1 s steps; the vLLM V1 policy."""

import pytest

from simulator.build import build
from tests.conftest import make_config, make_stream


def first_scheduled(arrivals, prompts, outputs, plans_ahead: bool, fast_forward: bool = False) -> list[float]:
    cfg = make_config(policy={"kind": "vllm"})
    sim = build(cfg, stream=make_stream(arrivals, prompts, outputs), fast_forward=fast_forward, check_invariants=True)
    for engine in sim.engines:
        engine._plans_ahead = plans_ahead  # the cost model's cpu_overlap sets it; a constant model has none
    result = sim.run()
    return result.requests.sort_values("request_id").first_scheduled_s.tolist()


@pytest.mark.parametrize("fast_forward", [False, True])
def test_a_request_arriving_mid_step_is_planned_into_the_step_after_the_next(fast_forward):
    # request 0 runs steps from t = 0; request 1 arrives at 1.5, while the step 1 -> 2 runs
    arrivals, prompts, outputs = [0.0, 1.5], [10, 10], [8, 3]
    assert first_scheduled(arrivals, prompts, outputs, plans_ahead=False, fast_forward=fast_forward) == [0.0, 2.0]
    # the step starting at 2 was planned when the step before it was launched, at 1: request 1 joins at 3
    assert first_scheduled(arrivals, prompts, outputs, plans_ahead=True, fast_forward=fast_forward) == [0.0, 3.0]


def test_a_request_reaching_an_idle_engine_is_planned_at_once():
    # request 0 is done (prefill, then two decode steps) by t = 3; request 1 arrives at 5 to an idle engine
    assert first_scheduled([0.0, 5.0], [10, 10], [3, 3], plans_ahead=True) == [0.0, 5.0]


def test_the_engines_cpu_overlap_setting_turns_it_on():
    cfg = make_config(policy={"kind": "vllm"}, cost_model={"kind": "roofline"})
    assert all(e._plans_ahead for e in build(cfg, stream=make_stream([0.0], [10], [2])).engines)
    cfg = make_config(policy={"kind": "vllm"}, cost_model={"kind": "roofline", "cpu_overlap": False})
    assert not any(e._plans_ahead for e in build(cfg, stream=make_stream([0.0], [10], [2])).engines)
    cfg = make_config(policy={"kind": "vllm_v0"}, cost_model={"kind": "roofline"})  # V0 schedules synchronously
    assert not any(e._plans_ahead for e in build(cfg, stream=make_stream([0.0], [10], [2])).engines)


def test_sglang_takes_requests_in_every_recv_interval_decode_steps():
    """--scheduler-recv-interval 4: the scheduler polls its input after 4 decode steps (each weighs 1) or after any
    prefill step (weight 1000); requests arriving in between wait in the input queue (scheduler_recv_skipper.py)."""

    def scheduled(interval: int, fast_forward: bool = False) -> list[float]:
        cfg = make_config(policy={"kind": "sglang", "scheduler_recv_interval": interval})
        stream = make_stream([0.0, 3.5], [10, 10], [12, 3])
        sim = build(cfg, stream=stream, fast_forward=fast_forward, check_invariants=True)
        for engine in sim.engines:
            engine._plans_ahead = False  # synchronous scheduling, to see the interval alone
        return sim.run().requests.sort_values("request_id").first_scheduled_s.tolist()

    # request 0: prefill 0 -> 1 (a poll after it), decodes from 1; request 1 arrives at 3.5 during the decode 3 -> 4
    assert scheduled(1) == [0.0, 4.0]
    # polls after the prefill (at 1), then after decode steps 1-2, 2-3, 3-4, 4-5: at 5
    assert scheduled(4) == [0.0, 5.0]
    assert scheduled(4, fast_forward=True) == [0.0, 5.0]


@pytest.mark.parametrize("policy", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("fast_forward", [False, True])
def test_kv_landing_mid_step_joins_the_plan_after_the_next(policy, fast_forward):
    """Disaggregated: a decode engine that plans ahead learns of a finished KV transfer from the outputs of the step
    in progress, after it planned the next step (vLLM: ``finished_recving`` of a step's output, read at the next
    ``schedule``), so the request joins the step after the next, like a request arriving mid-step."""

    def landed_done_first(plans_ahead: bool) -> tuple[float, float, float]:
        cfg = make_config(
            policy={"kind": policy},
            groups=[{"role": "prefill"}, {"role": "decode"}],
            kv_transfer={"bandwidth_bytes_per_s": 1e30, "latency_s": 0.25},
        )
        # request 0 keeps the decode engine stepping (1 s steps from 1.25); request 1's KV lands at 3.75, mid-step
        sim = build(cfg, stream=make_stream([0.0, 2.5], [10, 10], [12, 3]), fast_forward=fast_forward)
        sim.check_invariants = True
        for engine in sim.engines:
            engine._plans_ahead = plans_ahead
        r = sim.run().requests.set_index("request_id")
        return r.loc[1, "transfer_end_s"], r.loc[1, "finished_s"], r.loc[1, "first_token_s"]

    landed, done_sync, first_sync = landed_done_first(False)
    landed_ahead, done_ahead, first_ahead = landed_done_first(True)
    assert landed == landed_ahead == 3.75
    assert done_ahead == done_sync + 1.0  # one step later: the step starting at 4.25 was planned at 3.25
    if policy == "trtllm":  # its first token comes with the KV: reaching the client when it lands either way
        assert first_sync == first_ahead == landed
    else:  # vLLM computes the last prompt token again, SGLang streams it on admission: a step later too
        assert first_ahead == first_sync + 1.0
