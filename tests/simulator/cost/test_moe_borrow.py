"""A named MoE kernel timed at the model's shape on other GPUs only, carried over (cost/silicon/borrow.py)."""

import itertools
import math
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from simulator.config.precision import MOE_KERNELS, MoeKernelName
from simulator.config.presets import hardware_presets, resolve_model
from simulator.cost import BatchShape
from simulator.cost.roofline import RooflineParams
from simulator.cost.silicon import SiliconCostModel, SiliconParams
from simulator.cost.silicon.borrow import borrowed_moe, family_curves, transfer
from simulator.cost.silicon.convert import MOE_KERNEL_FAMILIES
from simulator.cost.silicon.database import Selection, TableSet
from simulator.cost.silicon.tables import load_tables

HW = hardware_presets()
GPT_OSS = resolve_model("openai/gpt-oss-120b")
MLP = ("mlp_gate_up", "mlp_act", "mlp_down")


def moe_ms(model: SiliconCostModel, shape: BatchShape) -> float:
    ops = model.breakdown(shape).ops
    assert ops is not None
    return sum(ops[n].seconds for n in MLP) * 1e3


def test_marlin_on_hopper_is_carried_over_from_the_gpus_that_timed_gpt_oss_shape():
    """InferenceX's gpt-oss scripts for H100 and H200 export VLLM_MXFP4_USE_MARLIN=1. The dependency times Marlin at
    gpt-oss's shape on RTX PRO 6000 and L40S only; on H200 the curve comes from theirs, scaled by H200's time over
    theirs at Kimi-K2's INT4 shape, which all three timed. Marlin's W4A16 MMA runs a long prefill slower than the
    Triton MXFP4 kernel the H200 table times, and a small decode batch faster."""
    triton = SiliconCostModel(SiliconParams(), GPT_OSS, HW["h200"], 8)
    marlin = SiliconCostModel(SiliconParams(moe_kernel="marlin"), GPT_OSS, HW["h200"], 8)
    assert triton._moe_source is None
    note = marlin._moe_source
    assert note is not None and "l40s, rtx_pro_6000_server" in note and "vllm 0.24.0" in note
    prefill = BatchShape(prefill_new_tokens=(8192,), prefill_cached_tokens=(0,), num_sampled_tokens=1)
    decode = BatchShape(num_decode_seqs=16, decode_context_tokens=16 * 2000, num_sampled_tokens=16)
    assert moe_ms(marlin, prefill) > 1.5 * moe_ms(triton, prefill)
    assert moe_ms(marlin, decode) < 0.7 * moe_ms(triton, decode)
    # the step's other ops are the same tables
    others = [n for n in marlin.breakdown(prefill).ops if n not in MLP]
    assert all(marlin.breakdown(prefill).ops[n] == triton.breakdown(prefill).ops[n] for n in others)
    # the estimate's table column says where the MoE time comes from
    assert all(marlin.tables_of(prefill)[n] == note for n in MLP)


def test_the_carried_curve_is_the_donors_scaled_point_for_point():
    """At a token count both donors timed, the curve is the geometric mean of each donor's time times H200's time
    over that donor's on the shapes both timed (Kimi-K2's INT4 experts at the same layout and distribution)."""
    sel = load_tables("h200_sxm", "vllm").selection
    layout = ("power_law_1.2", 8, 1)
    curve, _ = borrowed_moe(sel, "marlin", ("mxfp4",), (2880, 2880, 4, 128), layout)
    here = family_curves("h200_sxm", "vllm", "marlin", "0.24.0")
    logs = []
    for donor in ("l40s", "rtx_pro_6000_server"):
        there = family_curves(donor, "vllm", "marlin", "0.24.0")
        own = there[(("mxfp4", 2880, 2880, 4, 128), layout)][1024]
        refs = [k for k in here.keys() & there.keys() if k[1] == layout]
        assert [k[0] for k in refs] == [("int4_wo", 7168, 2048, 8, 384)]
        logs.append(math.log(own * here[refs[0]][1024] / there[refs[0]][1024]))
    assert curve(1024.0) == pytest.approx(math.exp(sum(logs) / 2) * 1e-3, rel=1e-9)


def test_the_carry_over_on_a_gpu_that_timed_the_shape_itself():
    """Held out: L40S's own Marlin curves at gpt-oss-120b's shape against the carry-over from RTX PRO 6000's (through
    the Marlin shapes both timed: Kimi-K2's INT4 experts and gpt-oss-20b's), on every tensor-parallel layout, at 16
    tokens and more: within 10 % on average (9.7 %), the median 6.5 %."""
    l40s = family_curves("l40s", "vllm", "marlin", "0.24.0")
    rtx = family_curves("rtx_pro_6000_server", "vllm", "marlin", "0.24.0")
    errors = []
    for key, truth in l40s.items():
        shape, layout = key
        if shape != ("mxfp4", 2880, 2880, 4, 128) or layout[0] != "power_law_1.2" or layout[2] != 1:
            continue
        refs = sorted(k for k in l40s.keys() & rtx.keys() if k[1] == layout and k[0][1:] != shape[1:])
        assert refs
        for tokens, log_ms in transfer(rtx[key], [(l40s[k], rtx[k]) for k in refs]).items():
            if tokens >= 16 and tokens in truth.index:
                errors.append(math.exp(log_ms) / truth[tokens] - 1)
    errors = np.abs(errors)
    assert len(errors) > 100
    assert errors.mean() < 0.10 and np.median(errors) < 0.07


def test_vllm_27523_bench_latency_with_marlin():
    """vllm-project/vllm#27523: ``vllm bench latency`` of gpt-oss-120b on one SM90 GPU (batch 8, 32 prompt and 128
    output tokens) took 1.17 s with VLLM_MXFP4_USE_MARLIN=1 and 1.58 s with the Triton kernel. That vLLM ran its
    scheduler between the steps (async scheduling came on by default later, vllm-project/vllm#27614): the CPU time
    is serial here. On an H100 the carried-over Marlin curve gives it within 5 % (1.135 s), and faster than the
    measured Triton table (1.304 s)."""

    def latency_s(**params) -> float:
        serial = RooflineParams(cpu_overlap=False)
        model = SiliconCostModel(SiliconParams(roofline=serial, **params), GPT_OSS, HW["h100-sxm"], 1)
        prefill = BatchShape(prefill_new_tokens=(32,) * 8, prefill_cached_tokens=(0,) * 8, num_sampled_tokens=8)
        steps = [model.step_time(prefill).total_s]
        for i in range(1, 128):
            shape = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * (32 + i), num_sampled_tokens=8)
            steps.append(model.step_time(shape).total_s)
        return sum(steps)

    marlin = latency_s(moe_kernel="marlin")
    assert marlin == pytest.approx(1.17, rel=0.05)
    assert marlin < latency_s() < 1.58


def test_no_carry_over_for_a_folder_or_a_kernel_timed_nowhere(tmp_path: Path):
    """A folder of tables (``servesim calibrate``'s) is one GPU's own: nothing is carried into it. A family no GPU
    timed at the shape leaves the fastest kernel of this GPU, as without the setting."""
    folder = Selection(TableSet(tmp_path, str(tmp_path), f"folder {tmp_path}"), "vllm", "0.24.0", "vllm")
    assert borrowed_moe(folder, "marlin", ("mxfp4",), (2880, 2880, 4, 128), ("power_law_1.2", 8, 1)) is None
    sel = load_tables("h200_sxm", "vllm").selection
    assert borrowed_moe(sel, "deepgemm", ("mxfp4",), (2880, 2880, 4, 128), ("power_law_1.2", 8, 1)) is None
    fastest = SiliconCostModel(SiliconParams(), GPT_OSS, HW["h200"], 8)
    named = SiliconCostModel(SiliconParams(moe_kernel="deepgemm"), GPT_OSS, HW["h200"], 8)
    shape = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 1000, num_sampled_tokens=8)
    assert named._moe_source is None and moe_ms(named, shape) == moe_ms(fastest, shape)


def test_the_kernel_families_a_deployment_names_are_the_tables_families():
    """``cost_model.moe_kernel`` and ``servesim estimate --moe-kernel`` offer the names simulator/config/precision.py
    lists, each a family convert.py recognises in the measured tables (and no other)."""
    assert tuple(family for family, _ in MOE_KERNEL_FAMILIES) == MOE_KERNELS
    assert get_args(SiliconParams.model_fields["moe_kernel"].annotation) == (MoeKernelName, type(None))


def test_the_carried_curve_never_falls_with_more_tokens():
    """The raw carry-over to H200 at gpt-oss's TP 8 layout falls from 2 to 8 tokens (Kimi-K2's reference experts
    leave the donors' L2 there, gpt-oss's do not): the curve keeps the largest time at fewer tokens, so it never
    falls, and where the raw estimate rises it is unchanged."""
    sel = load_tables("h200_sxm", "vllm").selection
    curve, _ = borrowed_moe(sel, "marlin", ("mxfp4",), (2880, 2880, 4, 128), ("power_law_1.2", 8, 1))
    assert all(a <= b for a, b in itertools.pairwise(curve.times_s))
    assert curve(4.0) == curve(8.0) == curve(2.0) > curve(1.0)
    assert curve(32.0) > curve(16.0)
    here = family_curves("h200_sxm", "vllm", "marlin", "0.24.0")
    raw = []
    for donor in ("l40s", "rtx_pro_6000_server"):
        there = family_curves(donor, "vllm", "marlin", "0.24.0")
        key = (("int4_wo", 7168, 2048, 8, 384), ("power_law_1.2", 8, 1))
        own = there[(("mxfp4", 2880, 2880, 4, 128), ("power_law_1.2", 8, 1))]
        raw.append(transfer(own, [(here[key], there[key])]))
    raw_8 = math.exp((raw[0][8.0] + raw[1][8.0]) / 2) * 1e-3
    assert raw_8 < 0.7 * curve(8.0)  # the dip the running maximum removes
    top = max(curve.xs)
    assert curve(top) == pytest.approx(math.exp((raw[0][top] + raw[1][top]) / 2) * 1e-3, rel=1e-9)
