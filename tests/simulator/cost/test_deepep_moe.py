"""SGLang's MoE experts under DeepEP: its collector's wide-EP tables, the normal-mode one in a step holding a prefill,
the low-latency one in a decode-only step."""

from __future__ import annotations

import math

import pytest

from simulator.config.presets import resolve_hardware, resolve_model
from simulator.cost.roofline import RooflineParams
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams
from simulator.cost.silicon.model import MLP_OPS, SiliconCostModel
from simulator.cost.silicon.tables import load_tables

GB300 = resolve_hardware("gb300")
DSV3 = resolve_model("deepseek-ai/DeepSeek-V3")
STEM = "fp8_block/power_law_1.01/7168/2048/8/256/1"  # DeepSeek-V3's experts at moe_tp 1, aiconfigurator's alpha
DECODE = BatchShape(num_decode_seqs=1024, decode_context_tokens=1024 * 2000, num_sampled_tokens=1024)
PREFILL = BatchShape((8192,) * 2, (0,) * 2, num_sampled_tokens=2)


def _cost(framework: str = "sglang", all_to_all: bool = True, ep: int = 32) -> SiliconCostModel:
    params = SiliconParams(framework=framework, roofline=RooflineParams(expert_all_to_all=all_to_all))
    return SiliconCostModel(params, DSV3, GB300, tp=ep, ep=ep)


def _mlp_s(cost: SiliconCostModel, shape: BatchShape) -> float:
    return sum(op.seconds for name, op in cost.breakdown(shape).ops.items() if name in MLP_OPS)


def test_an_ep_size_not_measured_lies_log_linearly_between_its_neighbours():
    t = load_tables("gb300", "sglang")
    measured = t.moe(f"moew/context/{STEM}/16")
    assert measured is not None and t.deepep_moe("context", STEM, 16).times_s == measured.times_s
    four, eight, sixteen = (t.deepep_moe("context", STEM, ep) for ep in (4, 8, 16))
    assert t.moe(f"moew/context/{STEM}/8") is None  # the collector ran 2, 4, 16, 32, ... GPUs
    assert eight.xs == sorted(set(four.xs) & set(sixteen.xs))
    for x in eight.xs:  # each GPU's share halves from 4 to 8 and again to 16: the geometric mean
        assert eight(x) == pytest.approx(math.sqrt(four(x) * sixteen(x)), rel=1e-9)
    assert t.deepep_moe("context", STEM, 1024) is None  # beyond the largest measured: no table
    assert t.deepep_moe("context", "bf16/balanced/7168/2048/8/256/1", 16) is None


def test_sglang_deepep_reads_the_normal_mode_table_in_prefill_and_the_low_latency_one_in_decode():
    t = load_tables("gb300", "sglang")
    cost = _cost()
    fused = _cost()
    fused._moe_deepep = {}  # the fused-MoE table, as before DeepEP was read
    layers = DSV3.num_moe_layers
    generation, context = t.moe(f"moew/generation/{STEM}/32"), t.moe(f"moew/context/{STEM}/32")
    assert cost._moe_deepep[False].times_s == generation.times_s and cost._moe_deepep[True].times_s == context.times_s
    # the routed experts' time is the table's at the step's tokens, the shared experts and dense layers as before
    for shape, curve in ((DECODE, generation), (PREFILL, context)):
        rows = cost.roofline.linear_rows(shape)
        assert curve.lo <= rows <= curve.hi
        assert fused._moe.lo <= rows <= fused._moe.hi
        assert _mlp_s(cost, shape) - _mlp_s(fused, shape) == pytest.approx((curve(rows) - fused._moe(rows)) * layers)
    assert cost.sources(DECODE)["mlp_gate_up"].startswith("measured")
    # DeepEP's grouped GEMMs at 1,024 decode tokens over 32 GPUs take less than the fused kernel's
    assert _mlp_s(cost, DECODE) < _mlp_s(fused, DECODE)


def test_only_sglang_with_deepep_reads_them():
    assert not _cost("vllm")._moe_deepep  # vLLM's all-to-all MoE is not SGLang's DeepEP runner
    assert not _cost("sglang", all_to_all=False)._moe_deepep  # tokens gathered: the fused MoE
    assert not _cost("sglang", ep=1)._moe_deepep


def test_the_step_pricing_fast_paths_equal_the_breakdown_with_deepep():
    cost = _cost()
    for shape in (DECODE, PREFILL, BatchShape((512,), (0,), 64, 64 * 3000, 65)):
        assert cost.step_time(shape).total_s == cost.breakdown(shape).total_s
        assert cost.step_time(shape).total_s == _cost().step_time(shape).total_s  # a fresh model's memo alike
    assert cost.decode_step_times(1024, [1024 * 2000, 1024 * 2100]) == [
        cost.step_time(BatchShape(num_decode_seqs=1024, decode_context_tokens=c, num_sampled_tokens=1024)).total_s
        for c in (1024 * 2000, 1024 * 2100)
    ]


def test_nvfp4_experts_under_deepep_take_the_lower_of_two_measured_upper_bounds():
    """No NVFP4 DeepEP MoE was measured (SGLang's flashinfer_cutedsl grouped GEMM on the dispatched tokens). Two
    measured curves bound it from above: the FP8 block-scaled DeepEP table (the same tokens per expert on 8-bit
    weights) and the NVFP4 fused-MoE table (the same 4-bit weights, and work on every rank's gathered tokens: a path
    DeepEP does not take). The lower of the two is read at each token count; a 16-bit model keeps the fused table."""
    t = load_tables("gb300", "sglang")
    params = SiliconParams(framework="sglang", roofline=RooflineParams(expert_all_to_all=True))
    fp4 = SiliconCostModel(params, DSV3.model_copy(update={"quantization": "nvfp4"}), GB300, tp=32, ep=32)
    fp8, fused = t.moe(f"moew/generation/{STEM}/32"), fp4._moe
    read = fp4._moe_deepep[False]
    assert fused is not None and set(read.xs) == set(fp8.xs) | {x for x in fused.xs if fp8.lo <= x <= fp8.hi}
    assert fused(256) < fp8(256) and fp8(4096) < fused(4096)  # each the lower somewhere
    for x in read.xs:
        assert read(x) == min(t for t in (fp8(x), fused(x)) if t is not None)
    # beyond DeepEP's measured tokens the lower curve is anchored at its edge, as a measured DeepEP curve is; the
    # fused table measured further does not stand in for it there
    wide = BatchShape(num_decode_seqs=8192, decode_context_tokens=8192 * 2000, num_sampled_tokens=8192)
    assert fp4.roofline.linear_rows(wide) > read.hi
    assert "roofline anchored at tokens=4096" in fp4.sources(wide)["mlp_gate_up"]
    routed_wide = sum(op.seconds for op in fp4.mlp_by_part(wide)["routed"].values())
    assert routed_wide < fused(fp4.roofline.linear_rows(wide)) * DSV3.num_moe_layers
    source = fp4.sources(DECODE)["mlp_gate_up"]
    assert "the lower of fp8_block under DeepEP and nvfp4 fused (no nvfp4 DeepEP measurement)" in source
    rows = fp4.roofline.linear_rows(DECODE)
    routed = fp4.mlp_by_part(DECODE)["routed"]
    assert sum(op.seconds for op in routed.values()) == pytest.approx(read(rows) * DSV3.num_moe_layers)
    bf16 = SiliconCostModel(params, DSV3.model_copy(update={"quantization": None}), GB300, tp=32, ep=32)
    assert not bf16._moe_deepep
