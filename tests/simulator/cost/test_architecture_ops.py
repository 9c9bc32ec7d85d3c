"""What some architectures' layers do besides the common decoder layer: an MoE model's router GEMM, MiniMax-M2's
all-reduce of the q/k variance under tensor parallelism, gpt-oss's sliding-window attention layers."""

from __future__ import annotations

import pytest

from simulator.config.presets import resolve_hardware, resolve_model
from simulator.cost.roofline import QK_NORM_VARIANCE_BYTES, RooflineCostModel, RooflineParams
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams
from simulator.cost.silicon.model import SiliconCostModel

H200 = resolve_hardware("h200")
DSV3 = resolve_model("deepseek-ai/DeepSeek-V3")
MINIMAX = resolve_model("MiniMaxAI/MiniMax-M2.5")
LLAMA = resolve_model("llama-3.1-70b")
DECODE = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 1500, num_sampled_tokens=8)


def test_the_router_is_one_gemm_of_every_token_to_the_experts_logits_on_every_moe_layer():
    c = RooflineCostModel(RooflineParams(), DSV3, H200, tp=8)
    router = c.breakdown(DECODE).ops["moe_router"]
    # replicated on every GPU (not split by tp), only on the 58 MoE layers of DeepSeek-V3's 61
    assert router.flops == pytest.approx(2 * 8 * 7168 * 256 * 58)
    assert router.bytes > 2 * 7168 * 256 * 58  # the bf16 gate read once a layer
    assert list(c.breakdown(DECODE).ops).index("moe_router") == list(c.breakdown(DECODE).ops).index("mlp_gate_up") - 1
    assert "moe_router" not in RooflineCostModel(RooflineParams(), LLAMA, H200, tp=8).breakdown(DECODE).ops


def test_silicon_prices_the_router_from_the_bf16_gemm_table():
    """The fused-MoE tables time the experts given the router's logits; the router is the engine's bf16 GEMM of
    hidden x experts, read from the same engine's GEMM table (aiconfigurator's ``router_gemm``)."""
    c = SiliconCostModel(SiliconParams(), MINIMAX, H200, tp=8)
    ops, sources = c.breakdown(DECODE).ops, c.sources(DECODE)
    assert sources["moe_router"] in ("measured", "interpolated")
    assert c.tables_of(DECODE)["moe_router"] == c.tables_of(DECODE)["lm_head"]  # the bf16 GEMM table
    assert c.tables.gemm("bf16") is not None
    one = ops["moe_router"].seconds / MINIMAX.num_moe_layers
    assert 2e-6 < one < 20e-6  # a latency-bound kernel at 8 rows: a few microseconds
    assert ops["moe_router"].seconds == pytest.approx(c._gemm_lookup("moe_router", 8)[0] * 62, rel=1e-12)
    assert "moe_router" not in SiliconCostModel(SiliconParams(), LLAMA, H200, tp=8).breakdown(DECODE).ops
    assert c.step_time(DECODE).total_s == pytest.approx(c.breakdown(DECODE).total_s, rel=1e-12)  # the fast path


def test_minimax_m2_normalises_q_and_k_across_heads_and_all_reduces_their_variance_under_tp():
    assert MINIMAX.qk_norm_across_heads  # config.json: use_qk_norm, qk_norm_type "per_layer"
    assert not LLAMA.qk_norm_across_heads and not DSV3.qk_norm_across_heads
    assert "qk_norm_across_heads" not in LLAMA.model_dump()  # the dump (a stored point's key) as before the field
    without = MINIMAX.model_copy(update={"qk_norm_across_heads": False})
    for cls, params in ((RooflineCostModel, RooflineParams()), (SiliconCostModel, SiliconParams())):
        with_norm = cls(params, MINIMAX, H200, tp=8).breakdown(DECODE).ops["all_reduce"].seconds
        plain = cls(params, without, H200, tp=8).breakdown(DECODE).ops["all_reduce"].seconds
        # one more all-reduce a layer, of 8 tokens x QK_NORM_VARIANCE_BYTES: latency-bound, a few microseconds
        assert 62 * 2e-6 < with_norm - plain < 62 * 30e-6, cls.__name__
        assert cls(params, MINIMAX, H200, tp=1).breakdown(DECODE).ops.get("all_reduce") is None
    assert QK_NORM_VARIANCE_BYTES == 8  # q's and k's variance, one fp32 each


GPT_OSS = resolve_model("openai/gpt-oss-120b")


def test_gpt_oss_every_other_layer_attends_a_128_token_window():
    """config.json's layer_types: 18 of gpt-oss-120b's 36 layers are sliding_attention with sliding_window 128."""
    assert (GPT_OSS.sliding_window, GPT_OSS.num_sliding_layers) == (128, 18)
    assert LLAMA.sliding_window is None and "sliding_window" not in LLAMA.model_dump()
    full = GPT_OSS.model_copy(update={"sliding_window": None, "num_sliding_layers": 0})
    shape = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 4000, num_sampled_tokens=8)
    for cls, params in ((RooflineCostModel, RooflineParams()), (SiliconCostModel, SiliconParams())):
        windowed, plain = cls(params, GPT_OSS, H200, tp=2), cls(params, full, H200, tp=2)
        w, p = windowed.breakdown(shape).ops["attn_decode"], plain.breakdown(shape).ops["attn_decode"]
        # half the layers read 128 of 4000 keys a sequence
        assert 0.5 * p.seconds < w.seconds < 0.9 * p.seconds, cls.__name__
        if cls is SiliconCostModel:  # the table at the step's context on 18 layers, at 8 x 128 keys on the other 18
            t_full, t_window = windowed._decode_attention(8, 8 * 4000)[0], windowed._decode_attention(8, 8 * 128)[0]
            assert w.seconds == pytest.approx(18 * t_full + 18 * t_window, rel=1e-12)
        # below the window every layer reads the whole context alike
        short = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 100, num_sampled_tokens=8)
        assert windowed.breakdown(short).ops["attn_decode"].seconds == pytest.approx(
            plain.breakdown(short).ops["attn_decode"].seconds, rel=1e-12
        )
        # decode windows priced at once give the step-by-step times
        contexts = [8 * c for c in range(3000, 3040)]
        assert windowed.decode_step_times(8, contexts) == [
            windowed.step_time(BatchShape(num_decode_seqs=8, decode_context_tokens=c, num_sampled_tokens=8)).total_s
            for c in contexts
        ]
        prefill = BatchShape((2000,), (6000,), num_sampled_tokens=1)
        wp, pp = windowed.breakdown(prefill).ops["attn_prefill"], plain.breakdown(prefill).ops["attn_prefill"]
        assert 0.5 * pp.seconds < wp.seconds < 0.9 * pp.seconds, cls.__name__


def test_the_pricing_fast_path_equals_the_plain_one_with_sliding_window_layers():
    c = SiliconCostModel(SiliconParams(), GPT_OSS, H200, tp=2)
    assert c._fast
    first = BatchShape((512,), (3000,), num_decode_seqs=7, decode_context_tokens=7 * 2000, num_sampled_tokens=8)
    c.step_time(first)  # priced whole; its parts remembered
    for shape in (
        BatchShape((512,), (100,), num_decode_seqs=7, decode_context_tokens=7 * 90, num_sampled_tokens=8),
        BatchShape((512,), (5000,), num_decode_seqs=7, decode_context_tokens=7 * 6000, num_sampled_tokens=8),
        BatchShape((300, 212), (0, 64), num_decode_seqs=7, decode_context_tokens=7 * 129, num_sampled_tokens=9),
    ):
        assert c._step_parts(shape) == SiliconCostModel(SiliconParams(), GPT_OSS, H200, tp=2).breakdown(shape).total_s


def test_sliding_window_fields_are_checked():
    with pytest.raises(ValueError, match="go together"):
        LLAMA.model_validate(LLAMA.model_dump() | {"sliding_window": 128})
    with pytest.raises(ValueError, match="exceeds num_layers"):
        LLAMA.model_validate(LLAMA.model_dump() | {"sliding_window": 128, "num_sliding_layers": 81})
