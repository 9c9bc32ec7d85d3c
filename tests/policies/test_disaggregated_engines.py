"""The ``sglang`` and ``trtllm`` policies on the prefill and decode groups of a disaggregated cluster.

A prefill engine hands a request off once its prompt is computed; a decode engine receives it with its
prompt's KV. The runs must conserve requests and tokens, cross every multi-token request over once, count
the KV transfer in TTFT, repeat bit for bit, and leave each policy's mixed-role decisions as they were.
"""

import hashlib

import numpy as np
import pytest

import policies
from policies.batching.sglang import SglangParams, SglangPolicy
from policies.batching.trtllm import TrtllmParams, TrtllmPolicy
from simulator.build import build
from simulator.engine.executor import DecisionLog
from simulator.request import State
from tests.conftest import make_config, make_stream, run_checked
from tests.policies.fake_view import FakeView, running_request

POLICIES = {
    "sglang": {"kind": "sglang", "max_running_requests": 4, "chunked_prefill_size": 64},
    "trtllm": {"kind": "trtllm", "max_batch_size": 4, "max_num_tokens": 128},
}
SPLIT = [{"role": "prefill", "count": 2}, {"role": "decode", "count": 2}]
ARRIVALS = [0.0, 0.0, 1.0, 2.0, 3.0, 5.0, 5.0, 8.0]
PROMPTS = [40, 100, 20, 70, 16, 30, 120, 9]
OUTPUTS = [5, 12, 1, 8, 20, 3, 15, 30]


def _split_run(params, cost_model=None):
    extra = {} if cost_model is None else {"cost_model": cost_model}
    cfg = make_config(policy=params, groups=SPLIT, router="round_robin", **extra)
    return run_checked(cfg, make_stream(ARRIVALS, PROMPTS, OUTPUTS))


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("cost_model", [None, {"kind": "roofline"}], ids=["constant", "roofline"])
def test_split_runs_conserve_requests_and_cross_over_once(policy, cost_model):
    result = _split_run(POLICIES[policy], cost_model)
    req = result.requests.set_index("request_id")
    assert sorted(req.index) == list(range(len(ARRIVALS)))
    assert (req["status"] == "finished").all()
    assert (req["num_generated_tokens"] == req["num_output_tokens"]).all()
    assert result.summary["total_output_tokens"] == sum(OUTPUTS)
    assert int(result.itl_counts.sum()) == sum(o - 1 for o in OUTPUTS)
    roles = result.replicas.set_index("replica_id")["role"]
    multi = req[req["num_output_tokens"] > 1]
    # prefilled on a prefill replica, decoded on a decode replica
    assert (multi["prefill_replica_id"].map(roles) == "prefill").all()
    assert (multi["replica_id"].map(roles) == "decode").all()
    # TTFT includes the KV transfer: the first token reaches the client when the KV lands, or (SGLang) when the
    # decode engine admits the request into a step, at that step's start
    assert (multi["transfer_end_s"] > multi["transfer_start_s"]).all()
    if policies.batching.traits_of(policy).first_token_at_admission:
        assert (multi["first_token_s"] >= multi["transfer_end_s"]).all()
        decode_starts = set(result.steps.loc[result.steps["replica_id"].map(roles) == "decode", "start_s"])
        assert set(multi["first_token_s"]) <= decode_starts
    else:
        assert (multi["first_token_s"] == multi["transfer_end_s"]).all()
    # a one-token request ends where it was prefilled, with no transfer
    single = req[req["num_output_tokens"] == 1]
    assert (single["replica_id"].map(roles) == "prefill").all() and single["transfer_end_s"].isna().all()
    # prefill engines never decode, decode engines never prefill (nothing is preempted here)
    steps = result.steps.assign(role=result.steps["replica_id"].map(roles))
    assert (steps.loc[steps["role"] == "prefill", "num_decode_tokens"] == 0).all()
    assert (steps.loc[steps["role"] == "decode", "num_prefill_tokens"] == 0).all()
    assert result.summary["preemptions"] == 0


def test_sglang_streams_a_received_requests_first_token_when_a_decode_step_admits_it():
    """SGLang's decode server takes transferred requests into its running batch only while fewer than
    max_running_requests run (get_new_prebuilt_batch), and streams their first token then: with room for one, the
    second request's first token waits for the first request to finish."""
    groups = [
        {"role": "prefill", "policy": {"kind": "sglang"}},
        {"role": "decode", "policy": {"kind": "sglang", "max_running_requests": 1}},
    ]
    cfg = make_config(policy={"kind": "sglang"}, groups=groups)
    req = run_checked(cfg, make_stream([0.0, 0.0], [32, 32], [10, 10])).requests.set_index("request_id")
    first, second = req.sort_values("first_token_s").index
    assert req.loc[second, "transfer_end_s"] < req.loc[first, "finished_s"]  # its KV landed early
    assert req.loc[second, "first_token_s"] >= req.loc[first, "finished_s"]  # its first token waited for room
    assert req.loc[first, "first_token_s"] >= req.loc[first, "transfer_end_s"]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_split_runs_repeat_bit_for_bit(policy):
    cfg = make_config(policy=POLICIES[policy], groups=SPLIT, seed=3, workload={"num_requests": 40})
    first, again = build(cfg).run(), build(cfg).run()
    assert first.summary == again.summary
    assert first.requests.equals(again.requests)
    assert first.steps.equals(again.steps)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_tight_decode_group_still_finishes_everything(policy):
    # 12 blocks of 16 tokens on the decode side: transfers queue for leases, running requests grow into them
    cfg = make_config(
        policy=POLICIES[policy],
        groups=[
            {"role": "prefill", "kv_cache": {"num_blocks": 64, "block_size": 16}},
            {"role": "decode", "kv_cache": {"num_blocks": 12, "block_size": 16}},
        ],
    )
    result = run_checked(cfg, make_stream([0.0] * 6, [40, 30, 50, 20, 60, 10], [30, 40, 20, 50, 10, 60]))
    assert (result.requests["status"] == "finished").all()
    assert result.steps["num_transfer_queue"].max() >= 1


# -- the decisions themselves ---------------------------------------------------------------------------------


def _received(rid, prompt, output=50):
    """A request whose prompt's KV arrived by transfer: waiting on a decode engine, its first token out."""
    r = running_request(FakeView(), rid, prompt, prompt, generated=1, output=output)
    r.state = State.WAITING
    return r


def _sglang(**kw):
    return SglangPolicy(SglangParams(chunked_prefill_size=64, **kw))


def test_sglang_decode_server_merges_received_requests_into_the_decode_batch():
    view = FakeView(role="decode", free=10)
    running = [running_request(view, 0, 32, 33, generated=2), running_request(view, 1, 16, 20, generated=5)]
    arrived = [_received(2, 40), _received(3, 8)]
    view.running, view.waiting = running, arrived
    for r in arrived:
        view.blocks[r.request_id] = -(-(r.num_computed_tokens + 1) // view.block_size)  # the lease
    plan = _sglang().plan_step(view, 0.0)
    # one decode batch: the running requests and the received ones, one token each (no prefill batch)
    assert [(r.request_id, n) for r, n in plan.scheduled] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    # a mixed engine would admit them by PrefillAdder's reservation (their output against the free KV less the
    # running requests' share): here that does not fit, so only the running requests decode
    view.role = "mixed"
    assert [(r.request_id, n) for r, n in _sglang().plan_step(view, 0.0).scheduled] == [(0, 1), (1, 1)]


def test_sglang_decode_server_takes_only_what_max_running_requests_leaves():
    view = FakeView(role="decode")
    view.running = [running_request(view, 0, 32, 33, generated=2)]
    view.waiting = [_received(1, 16), _received(2, 16), _received(3, 16)]
    for r in view.waiting:
        view.blocks[r.request_id] = 2
    plan = _sglang(max_running_requests=3).plan_step(view, 0.0)
    assert [r.request_id for r, _ in plan.scheduled] == [0, 1, 2]


def test_sglang_prefill_server_counts_one_output_token():
    # 20 free blocks = 320 tokens; a 200-token prompt with 4096 output tokens to come: a mixed server reserves
    # min(4096, CLIP) of output and cannot admit it, a prefill server reserves one token (max_new_tokens = 1)
    def waiting():
        r = running_request(FakeView(), 0, 200, 0, output=4096)
        r.state = State.WAITING
        return r

    mixed = FakeView(waiting=[waiting()], free=20, total=400)
    assert _sglang().plan_step(mixed, 0.0).scheduled == []
    prefill = FakeView(waiting=[waiting()], free=20, total=400, role="prefill")
    assert [n for _, n in _sglang().plan_step(prefill, 0.0).scheduled] == [64]  # its first chunk


def test_trtllm_context_server_reserves_the_prompt_and_one_token():
    # GUARANTEED_NO_EVICT: 10 free blocks of 16; a 64-token prompt with 200 output tokens needs 17 blocks to complete
    # on a mixed server (not admitted) but 5 on a context server (max_tokens = 1)
    def view(role):
        r = running_request(FakeView(), 0, 64, 0, output=200)
        r.state = State.WAITING
        return FakeView(waiting=[r], free=10, total=40, role=role)

    pol = TrtllmPolicy(TrtllmParams())
    assert pol.plan_step(view("mixed"), 0.0).scheduled == []
    assert [n for _, n in pol.plan_step(view("prefill"), 0.0).scheduled] == [64]


def test_trtllm_generation_server_reserves_what_a_received_request_still_needs():
    # a received 64-token prompt holds 5 blocks (prompt + first decode token); 125 tokens at completion need 3 more
    def view(free):
        v = FakeView(role="decode", free=free, total=40)
        r = _received(0, 64, output=61)
        v.waiting, v.blocks[0] = [r], 5
        v.running = [running_request(v, 1, 16, 16, generated=1, output=2, blocks=2)]  # holds all it will need
        return v

    pol = TrtllmPolicy(TrtllmParams())
    assert [r.request_id for r, _ in pol.plan_step(view(2), 0.0).scheduled] == [1]
    assert [(r.request_id, n) for r, n in pol.plan_step(view(3), 0.0).scheduled] == [(1, 1), (0, 1)]
    # with nothing running the first received request is admitted anyway (its lease holds blocks TensorRT-LLM
    # would have reserved before the transfer; waiting for them would wait for ever)
    idle = view(2)
    idle.running = []
    assert [r.request_id for r, _ in pol.plan_step(idle, 0.0).scheduled] == [0]


def _seated_run(kind: str, seats: int):
    # one context server, one generation server of ``seats`` requests; four requests at once, 5 output tokens each
    policy = {"kind": kind, **({"max_batch_size": 8} if kind == "trtllm" else {"max_running_requests": 8})}
    decode = {"max_batch_size": seats} if kind == "trtllm" else {"max_running_requests": seats}
    groups = [{"role": "prefill", "count": 1}, {"role": "decode", "count": 1, "policy": policy | decode}]
    cfg = make_config(policy=policy, groups=groups)
    return run_checked(cfg, make_stream([0.0] * 4, [32] * 4, [5] * 4)).requests.sort_values("transfer_start_s")


def test_trtllm_generation_server_seats_a_request_before_its_kv_is_sent():
    # max_batch_size 1 on the generation server: each transfer waits for the request before it to finish there,
    # with its KV held on the context server; its first token, sent by the generation server, waits with it
    req = _seated_run("trtllm", 1)
    starts, ends = req["transfer_start_s"].to_numpy(), req["finished_s"].to_numpy()
    assert (starts[1:] >= ends[:-1]).all()
    assert (req["first_token_s"] == req["transfer_end_s"]).all()
    ttft = (req["first_token_s"] - req["arrival_s"]).to_numpy()
    assert (np.diff(ttft) > 4.0).all()  # each waits out the 4 decode steps of the one before
    # with seats for all four, every transfer starts once its prompt is computed
    free = _seated_run("trtllm", 4)
    assert (free["transfer_start_s"] < free["finished_s"].min()).all()
    # SGLang's decode server is not seated before the transfer: the KV lands, the request waits in its queue
    sglang = _seated_run("sglang", 1)
    assert (sglang["transfer_start_s"] < sglang["finished_s"].min()).all()


# -- mixed-role decisions pinned --------------------------------------------------------------------------------

MIXED_PINS = {
    # a DecisionLog digest of each policy on one co-located engine under KV pressure, taken before the
    # policies learnt disaggregation: a mixed engine must decide exactly as it did
    "sglang": ({"kind": "sglang", "max_running_requests": 6, "chunked_prefill_size": 48}, "8fe5843cc4ae7ada"),
    "sglang_mixed_lpm": (
        {
            "kind": "sglang",
            "max_running_requests": 5,
            "chunked_prefill_size": 32,
            "enable_mixed_chunk": True,
            "schedule_policy": "lpm",
        },
        "72a7730933a77736",
    ),
    "sglang_nochunk": ({"kind": "sglang", "chunked_prefill_size": -1, "max_prefill_tokens": 64}, "84bbecc654c2f8ce"),
    "trtllm": ({"kind": "trtllm", "max_batch_size": 6, "max_num_tokens": 96}, "2b4626c306e8b738"),
    "trtllm_maxutil_chunked": (
        {
            "kind": "trtllm",
            "max_batch_size": 5,
            "max_num_tokens": 40,
            "capacity_scheduler_policy": "MAX_UTILIZATION",
            "enable_chunked_prefill": True,
        },
        "d6111b7112c55dc3",
    ),
}


@pytest.mark.parametrize("case", sorted(MIXED_PINS))
def test_mixed_role_decisions_are_unchanged(case):
    params, pin = MIXED_PINS[case]
    rng = np.random.default_rng(7)
    n = 40
    arrivals = np.cumsum(rng.integers(0, 3, n)).astype(float).tolist()
    prompts = rng.integers(1, 90, n).tolist()
    outputs = rng.integers(1, 30, n).tolist()
    cfg = make_config(policy=params, kv_cache={"num_blocks": 24, "block_size": 4})
    sim = build(cfg, stream=make_stream(arrivals, prompts, outputs), fast_forward=False)
    (engine,) = sim.engines
    log = engine.executor.log = DecisionLog()
    sim.run()
    assert hashlib.sha256(repr(log.rows).encode()).hexdigest()[:16] == pin
