"""Property tests over random small configs and workloads, for every registered policy.

After every step the replica asserts its invariants (check_invariants): KV blocks never
over capacity, free + used == total, running requests hold exactly the blocks their KV
tokens need, no request both waiting and running. After the run: every request ended
exactly once, finished requests produced exactly the tokens they asked for, all KV freed,
and the same seed gives the same result.
"""

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import policies
from simulator.build import build
from simulator.config.scenario import validate_scenario
from tests.conftest import make_stream


@st.composite
def scenarios(draw):
    policy = draw(st.sampled_from(policies.BATCH_POLICIES.names()))
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.floats(0, 3), min_size=n, max_size=n))
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 20), min_size=n, max_size=n))
    block_size = draw(st.sampled_from([1, 2, 4, 16]))
    num_blocks = draw(st.integers(4, 120))
    max_num_seqs = draw(st.integers(1, 8))
    fields = policies.BATCH_POLICIES.entry(policy).params.model_fields
    cap = next(c for c in ("max_num_seqs", "max_batch_size", "max_running_requests") if c in fields)
    params = {"kind": policy, cap: max_num_seqs}
    if "token_budget" in fields:
        params["token_budget"] = draw(st.integers(max_num_seqs, 64))
    if policy == "priority":
        params["mode"] = draw(st.sampled_from(["strict", "aging"]))
    if "preemption_mode" in fields:
        params["preemption_mode"] = draw(st.sampled_from(["recompute", "swap"]))
    if policy == "vllm_v0":
        params["watermark"] = draw(st.sampled_from([0.0, 0.01, 0.1]))
    cfg = validate_scenario(
        {
            "policy": params,
            "cost_model": {"kind": "constant", "step_time_s": draw(st.sampled_from([0.5, 1.0])), "per_token_s": 0.01},
            "kv_cache": {
                "num_blocks": num_blocks,
                "block_size": block_size,
                "swap_space_bytes": draw(st.sampled_from([0, 2**20, 2**30])),
            },
            "max_model_len": draw(st.integers(20, 60)),
        }
    )
    stream = make_stream(np.cumsum(gaps).tolist(), prompts, outputs)
    if policy == "priority":
        from workloads import RequestStream

        prio = np.asarray(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
        stream = RequestStream(stream.arrival_s, stream.num_prompt_tokens, stream.num_output_tokens, priority=prio)
    return cfg, stream


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_conservation_and_kv_invariants(case):
    cfg, stream = case
    sim = build(cfg, stream=stream, check_invariants=True)
    result = sim.run()
    req = result.requests
    assert len(req) == len(stream)
    assert sorted(req["request_id"]) == list(range(len(stream)))  # each ended exactly once
    assert set(req["status"]) <= {"finished", "rejected"}
    done = req[req["status"] == "finished"]
    assert (done["num_generated_tokens"] == done["num_output_tokens"]).all()
    assert (done["first_token_s"] >= done["arrival_s"]).all()
    assert (done["finished_s"] >= done["first_token_s"]).all()
    rejected = req[req["status"] == "rejected"]
    assert (rejected["reject_reason"] != "").all()
    for engine in sim.engines:
        assert engine.kv.num_free_blocks == engine.kv.num_total_blocks
        assert not engine.running and not engine.waiting
    # the summary agrees with the table
    assert result.summary["completed"] + result.summary["rejected"] == len(stream)
    assert result.summary["total_output_tokens"] == int(done["num_output_tokens"].sum())
    assert int(result.itl_counts.sum()) == int((done["num_output_tokens"] - 1).sum())
    # determinism
    again = build(cfg, stream=stream).run()
    assert again.summary == result.summary
    assert again.requests.equals(result.requests)


@st.composite
def clusters(draw):
    """Random clusters: replicas behind any router, pipeline engines, prefix caching, disaggregation."""
    cfg, stream = draw(scenarios())
    data = cfg.model_dump(mode="json")
    traits = policies.BATCH_POLICIES.entry(data["policy"]["kind"]).traits
    transfers_ok = traits.kv_transfer
    layout = draw(st.sampled_from(["replicas", "pp2", "disaggregated"] if transfers_ok else ["replicas", "pp2"]))
    if layout == "replicas":
        data["replicas"] = draw(st.integers(2, 3))
    elif layout == "pp2":
        data["parallelism"]["pp"] = 2
    else:
        data["groups"] = [
            {"role": "prefill", "count": draw(st.integers(1, 2))},
            {"role": "decode", "count": draw(st.integers(1, 2))},
        ]
    data["router"] = {"kind": draw(st.sampled_from(policies.ROUTERS.names()))}
    if traits.prefix_caching and draw(st.booleans()):
        data["kv_cache"]["prefix_caching"] = True
        data["kv_cache"]["host_cache_bytes"] = draw(st.sampled_from([0, 2**22]))
    n = len(stream)
    width = draw(st.sampled_from([1, 2, 4]))
    groups = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    offsets, values = [0], []
    for i in range(n):
        blocks = -(-int(stream.num_prompt_tokens[i]) // width)
        shared = draw(st.integers(0, blocks))
        # the first `shared` blocks come from one of three common prefixes, the rest are unique
        values += [groups[i] * 1000 + j for j in range(shared)] + [10**6 + i * 1000 + j for j in range(blocks - shared)]
        offsets.append(len(values))
    from workloads import RequestStream

    stream = RequestStream(
        stream.arrival_s,
        stream.num_prompt_tokens,
        stream.num_output_tokens,
        priority=stream.priority,
        session_id=np.asarray(groups),
        hash_values=np.asarray(values, dtype=np.int64),
        hash_offsets=np.asarray(offsets, dtype=np.int64),
        hash_block_tokens=width,
    )
    from simulator.config.scenario import validate_scenario as v

    return v(data), stream


def _ignored_after_preemption():
    """A decode replica of 4 one-token blocks preempts a received request, then refuses it as it no longer fits
    (vLLM V0's FINISHED_IGNORED, ``StepExecutor.carry_out``): it ends finished, short (hypothesis found it)."""
    from simulator.config.scenario import validate_scenario as v
    from workloads import RequestStream

    n = 7
    data = {
        "model": "llama-3.1-8b",
        "max_model_len": 20,
        "policy": {"kind": "sglang", "max_running_requests": 1},
        "cost_model": {"kind": "constant", "step_time_s": 0.5, "per_token_s": 0.01},
        "kv_cache": {"block_size": 1, "num_blocks": 4, "swap_space_bytes": 0, "prefix_caching": False},
        "groups": [{"role": "prefill"}, {"role": "decode"}],
        "router": "round_robin",
    }
    stream = RequestStream(
        np.zeros(n),
        np.ones(n, dtype=np.int64),
        np.array([1, 1, 1, 1, 1, 3, 2]),
        session_id=np.zeros(n, dtype=np.int64),
        hash_values=np.arange(n, dtype=np.int64) * 1000 + 10**6,
        hash_offsets=np.arange(n + 1, dtype=np.int64),
        hash_block_tokens=1,
    )
    return v(data), stream


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
@example(_ignored_after_preemption())
def test_cluster_conservation_and_kv_invariants(case):
    cfg, stream = case
    sim = build(cfg, stream=stream, check_invariants=True)
    result = sim.run()
    req = result.requests
    assert sorted(req["request_id"]) == list(range(len(stream)))
    done = req[req["status"] == "finished"]
    # short only when refused after a preemption (its client keeps the tokens it had)
    assert ((done["num_generated_tokens"] == done["num_output_tokens"]) | (done["num_preemptions"] > 0)).all()
    assert (done["num_cached_tokens"] < done["num_prompt_tokens"]).all()
    for engine in sim.engines:
        assert engine.kv.num_free_blocks == engine.kv.num_total_blocks
        assert not engine.running and not engine.waiting
    if cfg.groups is not None:  # disaggregated: every multi-token request crossed over once
        multi = done[done["num_output_tokens"] > 1]
        decode_policy = next(g.policy for g in cfg.groups if g.role == "decode") or cfg.policy
        traits = policies.batching.traits_of(decode_policy.kind)
        if traits.recomputes_first_token:  # a step after the KV lands
            assert (multi["first_token_s"] > multi["transfer_end_s"]).all()
        elif traits.first_token_at_admission:  # as a step admits it, once it lands
            assert (multi["first_token_s"] >= multi["transfer_end_s"]).all()
        else:  # with the KV
            assert (multi["first_token_s"] == multi["transfer_end_s"]).all()
        assert (multi["prefill_replica_id"] != multi["replica_id"]).all()
    assert int(result.itl_counts.sum()) == int((done["num_generated_tokens"] - 1).sum())
    again = build(cfg, stream=stream).run()
    assert again.requests.equals(result.requests)
