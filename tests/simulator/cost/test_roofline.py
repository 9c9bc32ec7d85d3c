"""The roofline cost model against the arithmetic of prefill and decode."""

import pytest

from simulator.config.presets import hardware_presets, model_presets
from simulator.cost import COST_MODELS, BatchShape
from simulator.cost.collectives import AllReduceLatencyModel
from simulator.cost.roofline import RooflineCostModel, RooflineParams

M = model_presets()["llama-3.1-8b"]
H = hardware_presets()["h100-sxm"]


def model(tp=1, **params):
    return RooflineCostModel(RooflineParams(**params), M, H, tp)


def prefill(n, cached=0):
    return BatchShape((n,), (cached,), num_sampled_tokens=1)


def decode(batch, ctx):
    return BatchShape(num_decode_seqs=batch, decode_context_tokens=batch * ctx, num_sampled_tokens=batch)


def test_prefill_linear_flops_are_two_per_parameter_per_token():
    ops = model().breakdown(prefill(1000)).ops
    linear = sum(ops[k].flops for k in ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down"))
    non_embedding = M.num_params() - 2 * M.vocab_size * M.hidden_size - M.num_layers * 2 * M.hidden_size
    assert linear == pytest.approx(2 * 1000 * non_embedding, rel=1e-3)
    assert ops["lm_head"].flops == pytest.approx(2 * M.hidden_size * M.vocab_size)


def test_prefill_attention_flops_are_causal():
    n = 2048
    ops = model().breakdown(prefill(n)).ops
    expected = 4 * M.num_attention_heads * M.head_dim * (n * (n + 1) // 2) * M.num_layers
    assert ops["attn_prefill"].flops == expected
    # with 1000 cached tokens each new token attends to 1000 more keys
    ops2 = model().breakdown(prefill(n, 1000)).ops
    assert ops2["attn_prefill"].flops - expected == 4 * M.q_size * n * 1000 * M.num_layers


def test_decode_is_memory_bound_reading_all_weights():
    ops = model().breakdown(decode(1, 100)).ops
    weights_read = sum(ops[k].bytes for k in ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "lm_head"))
    assert weights_read == pytest.approx(M.weight_bytes_total() - M.vocab_size * M.hidden_size * 2, rel=0.01)
    step = model().step_time(decode(1, 100)).total_s
    floor = M.weight_bytes_total() / H.memory_bandwidth_bytes_per_s
    assert floor < step < 2 * floor


def test_decode_attention_reads_the_whole_kv_cache():
    ops = model().breakdown(decode(8, 4000)).ops
    kv_read = 8 * 4000 * M.kv_bytes_per_token()
    assert ops["attn_decode"].bytes == pytest.approx(kv_read, rel=0.01)


def test_prefill_is_compute_bound_and_quadratic_attention_grows_faster():
    m = model()
    t1 = m.breakdown(prefill(4000)).ops
    t2 = m.breakdown(prefill(8000)).ops
    assert t2["mlp_gate_up"].seconds / t1["mlp_gate_up"].seconds == pytest.approx(2, rel=0.01)
    assert t2["attn_prefill"].seconds / t1["attn_prefill"].seconds == pytest.approx(4, rel=0.02)


def test_tensor_parallel_all_reduce_by_hand():
    tp, T = 4, 512
    m = model(tp=tp)
    ops = m.breakdown(prefill(T)).ops
    msg = 2 * T * M.hidden_size
    # The all-reduce is the fitted alpha-beta model of simulator/cost/collectives.py (was the ring
    # formula 2(tp-1)/tp x msg / (0.8 bw) + 2(tp-1) x latency): a 4 MiB message on 4 H100s is under
    # vLLM's 8 MiB custom all-reduce cap, so min(one-shot, two-shot) with the h100_sxm constants.
    fit = AllReduceLatencyModel.fitted("h100_sxm").fits[tp]
    one_shot = fit.one_shot.alpha_s + (tp - 1) * msg / fit.one_shot.bus_bytes_per_s
    two_shot = fit.two_shot.alpha_s + 2 * (tp - 1) / tp * msg / fit.two_shot.bus_bytes_per_s
    assert ops["all_reduce"].seconds == pytest.approx(2 * M.num_layers * min(one_shot, two_shot))
    assert ops["all_reduce"].bytes == pytest.approx(2 * M.num_layers * 2 * (tp - 1) / tp * msg)
    assert "all_reduce" not in model().breakdown(prefill(T)).ops
    assert m.step_time(prefill(4096)).total_s < model().step_time(prefill(4096)).total_s


def test_tp_that_does_not_divide_heads_is_refused():
    with pytest.raises(ValueError, match="tp=3 does not divide the 32 attention heads"):
        model(tp=3)


def test_moe_reads_only_touched_experts_at_small_batch():
    mix = model_presets()["mixtral-8x7b"]
    m = RooflineCostModel(RooflineParams(), mix, H, 2)
    one = m.breakdown(decode(1, 100)).ops["mlp_down"].bytes
    many = m.breakdown(decode(256, 100)).ops["mlp_down"].bytes
    assert many / one == pytest.approx(4, rel=0.05)  # 2 of 8 experts at batch 1, all 8 at 256


SHAPES = [
    prefill(1),
    prefill(100),
    prefill(1000),
    prefill(1000, 3000),
    decode(1, 10),
    decode(64, 500),
    BatchShape((100, 20), (0, 50), 10, 5000, 12),
]


@pytest.mark.parametrize("name", COST_MODELS.names())
def test_cost_model_conformance(name):
    params = COST_MODELS.entry(name).params()
    cost = COST_MODELS.get(name)(params, M, H, 1)
    for shape in SHAPES:
        t = cost.step_time(shape).total_s
        assert t > 0
        assert cost.step_time(shape).total_s == t
        assert cost.breakdown(shape).total_s == pytest.approx(t)
    seq = [cost.step_time(prefill(n)).total_s for n in (1, 10, 100, 1000, 10000)]
    assert seq == sorted(seq)
    seq = [cost.step_time(decode(b, 1000)).total_s for b in (1, 8, 64, 256)]
    assert seq == sorted(seq)
    seq = [cost.step_time(decode(16, c)).total_s for c in (10, 100, 1000, 10000)]
    assert seq == sorted(seq)


@pytest.mark.parametrize("tp", [1, 2])
def test_decode_step_times_equal_step_time_float_for_float(tp):
    """The fast-forward path's batched decode times (plain floats for short runs, numpy for long ones)
    are step_time's, bit for bit."""
    m = model(tp)
    for n in (1, 7, 64, 256):
        for steps in (1, 5, 32, 33, 300):
            contexts = range(n * 3, n * 3 + n * steps, n)
            want = [model(tp).step_time(BatchShape((), (), n, c, n)).total_s for c in contexts]
            assert m.decode_step_times(n, contexts) == want
    long = range(200_000, 200_000 + 256 * 100, 256)  # deep contexts
    assert m.decode_step_times(256, long) == [m.step_time(BatchShape((), (), 256, c, 256)).total_s for c in long]
