"""Replicas and routers, tensor and pipeline parallelism, disaggregated prefill/decode."""

import numpy as np
import pytest

from simulator.build import build
from simulator.config.presets import hardware_presets, model_presets
from simulator.config.scenario import validate_scenario
from tests.conftest import make_config, make_stream, run_checked
from workloads import RequestStream


def _skewed_stream(n=1200, rate=8.0):
    # Every 4th request is heavy: aligned with 4 replicas, round robin sends all of them to one.
    rng = np.random.default_rng(0)
    heavy = np.arange(n) % 4 == 0
    return RequestStream(
        np.cumsum(rng.exponential(1 / rate, n)), np.where(heavy, 6000, 300), np.where(heavy, 1000, 100)
    )


def test_load_aware_routers_beat_round_robin_on_a_skewed_workload():
    stream = _skewed_stream()
    p99 = {}
    for router in ("round_robin", "least_outstanding", "power_of_two"):
        cfg = validate_scenario({"replicas": 4, "router": router})
        p99[router] = build(cfg, stream=stream).run().summary["p99_ttft_ms"]
    assert p99["least_outstanding"] < p99["round_robin"] / 5
    assert p99["power_of_two"] < p99["round_robin"] / 5


def test_every_replica_gets_work_and_the_table_says_where():
    cfg = validate_scenario({"replicas": 3, "router": "round_robin", "workload": {"num_requests": 30}})
    result = build(cfg).run()
    assert sorted(result.requests["replica_id"].unique()) == [0, 1, 2]
    assert sorted(result.steps["replica_id"].unique()) == [0, 1, 2]
    assert result.replicas["replica_id"].tolist() == [0, 1, 2]
    assert result.summary["num_replicas"] == 3


def test_heterogeneous_groups():
    cfg = validate_scenario(
        {
            "groups": [
                {"name": "big", "count": 1, "hardware": "h200"},
                {"name": "small", "count": 2, "hardware": "l40s"},
            ],
            "router": "least_outstanding",
            "workload": {"num_requests": 60},
        }
    )
    result = build(cfg).run()
    groups = {g["name"]: g for g in result.config["resolved_groups"]}
    assert groups["big"]["hardware"]["name"].startswith("H200") and groups["small"]["count"] == 2
    assert groups["big"]["num_blocks_per_replica"] > groups["small"]["num_blocks_per_replica"]
    assert set(result.replicas["group"]) == {"big", "small"}


def test_tensor_parallel_all_reduce_timeline_by_hand():
    # One 1024-token prompt producing one token: the run is one prefill step. With the roofline on an
    # H100 without measured tables (so the all-reduce comes from its datasheet link) and on one whose
    # interconnect is free, the same step differs by exactly the 2 x 32 all-reduces: on 2 GPUs the
    # one-shot form, one link latency plus (n - 1) x message over the achievable link bandwidth.
    h100 = hardware_presets()["h100-sxm"].model_dump() | {"silicon_tables": None}
    free_link = h100 | {"interconnect_bandwidth_bytes_per_s": 1e30, "interconnect_latency_s": 0.0}
    stream = make_stream([0.0], [1024], [1])
    e2e = {}
    for name, hw in (("real", h100), ("free", free_link)):
        cfg = validate_scenario({"hardware": hw, "parallelism": {"tp": 2}, "cost_model": "roofline"})
        e2e[name] = build(cfg, stream=stream).run().requests.loc[0, "finished_s"]
    m = model_presets()["llama-3.1-8b"]
    tp, message = 2, 1024 * m.hidden_size * 2
    one = 5e-6 + (tp - 1) * message / (450e9 * 0.80)
    assert e2e["real"] - e2e["free"] == pytest.approx(2 * m.num_layers * one, rel=1e-9)


def test_70b_does_not_fit_at_tp1_and_runs_at_tp4():
    with pytest.raises(ValueError, match="does not fit on H100-SXM5-80GB with tp=1"):
        build(validate_scenario({"model": "llama-3.1-70b"}))
    cfg = validate_scenario({"model": "llama-3.1-70b", "parallelism": {"tp": 4}, "workload": {"num_requests": 20}})
    assert build(cfg).run().summary["completed"] == 20


def _saturating(extra, rate=20.0, n=600):
    base = {"workload": {"num_requests": n, "arrival": {"kind": "poisson", "rate_per_s": rate}}}
    return build(validate_scenario(base | extra)).run().summary


def test_pipeline_parallel_gains_throughput_and_costs_latency_against_replicas():
    one = _saturating({})
    pp2 = _saturating({"parallelism": {"pp": 2}})
    two = _saturating({"replicas": 2, "router": "least_outstanding"})
    # two pipeline stages serve more than one GPU...
    assert pp2["output_throughput"] > 1.3 * one["output_throughput"]
    # ...but less than the same two GPUs as replicas, and each token waits for both stages and the bubbles
    assert pp2["output_throughput"] < two["output_throughput"]
    assert pp2["median_tpot_ms"] > two["median_tpot_ms"]


def test_pipeline_stages_split_the_step_by_hand(by_id):
    # constant 1 s steps, pp=2: each stage takes 0.5 s; two requests on two virtual engines overlap.
    h = hardware_presets()["h100-sxm"].model_dump() | {
        "interconnect_latency_s": 0.0,
        "interconnect_bandwidth_bytes_per_s": 1e30,
    }
    cfg = make_config(parallelism={"tp": 1, "pp": 2}, hardware=h)
    r = by_id(run_checked(cfg, make_stream([0.0, 0.0], [4, 4], [1, 1])))
    # engine 0's step holds stage 0 over [0, 0.5] then stage 1 over [0.5, 1]; engine 1 follows half a step behind
    assert r.loc[0, "finished_s"] == pytest.approx(1.0)
    assert r.loc[1, "finished_s"] == pytest.approx(1.5)


MIXED = {
    "kind": "independent",
    "prompt": {"kind": "lognormal", "median_tokens": 3000, "sigma": 0.4, "max_tokens": 12000},
    "output": {"kind": "lognormal", "median_tokens": 400, "sigma": 0.4, "max_tokens": 2000},
}


def _mixed(extra, rate=8.0):
    base = {
        "router": "least_outstanding",
        "workload": {"num_requests": 400, "arrival": {"kind": "poisson", "rate_per_s": rate}, "lengths": MIXED},
    }
    return build(validate_scenario(base | extra)).run()


def test_disaggregation_removes_decode_stalls_at_equal_gpu_count_and_ttft_includes_the_transfer():
    colocated = _mixed({"replicas": 2})
    split = _mixed({"groups": [{"role": "prefill", "count": 1}, {"role": "decode", "count": 1}]})
    # co-located decodes wait behind 3000-token prefills (prefill-first steps): the ITL tail is those stalls;
    # split, no decode step carries a prefill (its decode replica runs twice the batch, so TPOT is no better)
    assert split.summary["p99_itl_ms"] < 0.5 * colocated.summary["p99_itl_ms"]
    req = split.requests[split.requests["status"] == "finished"]
    multi = req[req["num_output_tokens"] > 1]
    assert (multi["transfer_end_s"] > multi["transfer_start_s"]).all()
    # vLLM's decode replica computes the last prompt token again: the first token comes at a step's end after the KV
    assert (multi["first_token_s"] > multi["transfer_end_s"]).all()
    assert (multi["prefill_replica_id"] == 0).all() and (multi["replica_id"] == 1).all()
    # 3000-token prompts of Llama-3.1-8B KV (393 MB) over NVLink (450 GB/s): about 0.9 ms
    assert split.summary["mean_kv_transfer_ms"] == pytest.approx(
        (multi["num_prompt_tokens"] * 131072).mean() / 450e9 * 1000 + 0.005, rel=0.05
    )


def test_vllm_decode_samples_the_first_token_again_sglang_sends_the_prefills():
    """vLLM's scheduler leaves a received prompt's last token uncomputed (``_update_waiting_for_remote_kv``): the
    decode replica computes it in a step whose end emits the first token. SGLang's decode replica streams the token
    that came with the KV as it admits the request, at the start of a step (get_new_prebuilt_batch)."""
    groups = {"groups": [{"role": "prefill"}, {"role": "decode"}]}
    runs = {policy: _mixed(groups | {"policy": policy}, rate=2.0) for policy in ("vllm", "sglang")}
    for policy, run in runs.items():
        req = run.requests[run.requests["num_output_tokens"] > 1]
        assert set(req["status"]) == {"finished"}
        assert (req["num_generated_tokens"] == req["num_output_tokens"]).all()
        decode_steps = run.steps[run.steps["replica_id"] == 1]
        prompt_tokens = int(decode_steps["num_prefill_tokens"].sum())
        if policy == "sglang":
            assert (req["first_token_s"] >= req["transfer_end_s"]).all()
            assert set(req["first_token_s"]) <= set(decode_steps["start_s"])
            assert prompt_tokens == 0
            continue
        # one prompt token a received request, and each first token at the end of a decode-replica step
        assert prompt_tokens == len(req)
        ends = set((decode_steps["start_s"] + decode_steps["duration_s"]).round(9))
        assert set(req["first_token_s"].round(9)) <= ends
        assert (req["first_token_s"] > req["transfer_end_s"]).all()


def test_layerwise_overlap_hides_most_of_the_transfer():
    slow_link = {"bandwidth_bytes_per_s": 5e9, "latency_s": 1e-4}
    groups = {"groups": [{"role": "prefill"}, {"role": "decode"}]}
    plain = _mixed(groups | {"kv_transfer": slow_link}, rate=2.0)
    overlap = _mixed(groups | {"kv_transfer": slow_link | {"layerwise_overlap": True}}, rate=2.0)
    assert overlap.summary["mean_kv_transfer_ms"] < plain.summary["mean_kv_transfer_ms"] / 4
    assert overlap.summary["mean_ttft_ms"] < plain.summary["mean_ttft_ms"]


def test_decode_side_memory_gates_transfers(by_id):
    # The decode replica holds 10 blocks of 16 tokens: two 80-token prompts cannot both land at once.
    cfg = make_config(
        groups=[
            {"role": "prefill", "kv_cache": {"num_blocks": 64, "block_size": 16}},
            {"role": "decode", "kv_cache": {"num_blocks": 10, "block_size": 16}},
        ],
    )
    result = run_checked(cfg, make_stream([0.0, 0.0], [80, 80], [20, 20]))
    r = by_id(result)
    assert set(r["status"]) == {"finished"}
    first, second = sorted(r["transfer_start_s"])
    assert second > first + 10  # the second waited for the first to finish decoding
    assert result.steps["num_transfer_queue"].max() >= 1


def test_decode_side_preemption_never_strands_received_kv():
    # An overloaded decode replica: running requests preempt each other while received KV waits.
    # A recomputing request must queue behind requests that already hold their KV, or with
    # nothing running neither could start (this scenario stalled before that rule).
    cfg = validate_scenario(
        {
            "groups": [
                {"role": "prefill", "count": 3},
                {"role": "decode", "count": 1, "kv_cache": {"num_blocks": 3000}},
            ],
            "router": "least_outstanding",
            "workload": {"num_requests": 300, "arrival": {"kind": "poisson", "rate_per_s": 12}, "lengths": MIXED},
        }
    )
    result = build(cfg).run()
    assert (result.requests["status"] == "finished").all()
    assert result.summary["preemptions"] > 0


def test_requests_too_long_for_every_decode_replica_are_rejected_at_arrival(by_id):
    cfg = make_config(
        groups=[
            {"role": "prefill", "kv_cache": {"num_blocks": 64, "block_size": 16}},
            {"role": "decode", "kv_cache": {"num_blocks": 4, "block_size": 16}},
        ]
    )
    r = by_id(run_checked(cfg, make_stream([0.0, 0.0], [50, 20], [30, 10])))
    assert r.loc[0, "status"] == "rejected" and "every decode replica (64 tokens)" in r.loc[0, "reject_reason"]
    assert r.loc[1, "status"] == "finished"


def test_least_loaded_asks_for_kv_usage_only_among_ties_and_picks_as_the_full_key():
    from types import SimpleNamespace

    from policies.routing.routers import _least, _least_loaded, _load

    class Replica(SimpleNamespace):
        asked = 0

        @property
        def kv_usage(self):
            Replica.asked += 1
            return self.usage

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        replicas = [Replica(num_outstanding=int(rng.integers(0, 3)), usage=float(rng.integers(0, 3))) for _ in range(n)]
        Replica.asked = 0
        got = _least_loaded(replicas)
        fewest = min(r.num_outstanding for r in replicas)
        tied = sum(r.num_outstanding == fewest for r in replicas)
        assert Replica.asked == (tied if tied > 1 else 0)
        assert got == _least(replicas, _load)


def test_routers_count_the_requests_an_engine_has_not_taken_in_yet(by_id):
    # vLLM V1 plans one step ahead: a request reaching a busy engine waits in its input queue for the next plan.
    # It is load all the same: the next arrival must see it (the first replica holds the longer prompt, so
    # least_outstanding breaks the tie at one request each by KV usage towards the second).
    cfg = validate_scenario(
        {
            "replicas": 2,
            "router": "least_outstanding",
            "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0},
        }
    )
    stream = make_stream([0.0, 0.0, 0.001, 0.002], [2000, 100, 100, 100], [20, 20, 20, 20])
    r = by_id(run_checked(cfg, stream))
    assert r["replica_id"].tolist() == [0, 1, 1, 0]


def test_a_prefill_replica_counts_the_requests_whose_kv_waits_to_leave(by_id):
    # The decode replica holds one 500-token request at a time, so request 1's KV waits on prefill replica 1 (half its
    # blocks) while request 0 decodes. That request is replica 1's load until its KV has left: request 3, arriving
    # when each prefill replica holds one request, goes by KV usage to replica 0, not to replica 1, where it could
    # not be prefilled before request 1's KV left (about 100 steps later).
    cfg = make_config(
        groups=[
            {"role": "prefill", "count": 2, "kv_cache": {"num_blocks": 64, "block_size": 16}},
            {"role": "decode", "count": 1, "kv_cache": {"num_blocks": 40, "block_size": 16}},
        ],
        router="least_outstanding",
    )
    stream = make_stream([0.0, 0.0, 1.5, 2.0], [500, 500, 100, 600], [100, 100, 1, 10])
    r = by_id(run_checked(cfg, stream))
    assert r.loc[3, "prefill_replica_id"] == 0
    assert r.loc[3, "first_scheduled_s"] < 5.0


def test_vllm_attention_dp_counts_requests_whose_kv_is_on_its_way():
    # vLLM's DP balance (4 x waiting + running) counts a request waiting for its KV as waiting
    # (WAITING_FOR_REMOTE_KVS): eight prompts prefilled at once spread over the decode replica's four ranks.
    cfg = validate_scenario(
        {
            "model": "deepseek-ai/DeepSeek-R1",
            "hardware": "h200",
            "policy": {"kind": "vllm"},
            "groups": [
                {"role": "prefill", "count": 1, "parallelism": {"tp": 8, "ep": 8}},
                {"role": "decode", "count": 1, "parallelism": {"tp": 8, "ep": 8, "dp_attention": 4}},
            ],
            "client": {"ingest_delay_s": 0.0, "tokenize_s_per_token": 0.0},
            "kv_transfer": {"bandwidth_bytes_per_s": 2e9},  # a slow link: the KV is on its way for a while
        }
    )
    sim = build(cfg, stream=make_stream([0.0] * 8, [2000] * 8, [50] * 8), check_invariants=True)
    sim.run()
    assert [e.executor.num_steps > 0 for e in sim.decode[0].engines] == [True] * 4
