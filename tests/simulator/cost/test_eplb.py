"""TensorRT-LLM's expert load balancer (``eplb_slots``): the MoE layer read from aiconfigurator's measurement of its
wide-EP MoE under the balancer at the recipe's slots; one line where it cannot be priced."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchmarks.inferencex_points import read_points, scenario_for
from benchmarks.inferencex_trt_disagg import EXPERT_SLOTS
from benchmarks.inferencex_trt_disagg_derive import expert_slots
from simulator.build import build
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams, database
from simulator.cost.silicon.model import SiliconCostModel

GB200 = resolve_hardware("gb200")
DSV3_FP4 = resolve_model("deepseek-ai/DeepSeek-V3").model_copy(update={"quantization": "nvfp4"})
ROWS = 8192  # 256 tokens on each of 32 ranks, gathered


def _table() -> pd.DataFrame:
    root = database.dependency_root()
    assert root is not None
    paths = sorted(
        (root / "gb200" / "moe" / "trtllm").glob("*/wideep_moe_perf.parquet"),
        key=lambda p: database.version_key(p.parent.name),
    )
    assert paths, "aiconfigurator-core ships GB200's TensorRT-LLM wide-EP MoE table"
    frame = pd.read_parquet(paths[-1])
    return frame[
        (frame.moe_dtype == "nvfp4")
        & (frame.hidden_size == 7168)
        & (frame.inter_size == 2048)
        & (frame.num_experts == 256)
        & (frame.moe_ep_size == 32)
    ]


def _cost(slots: int | None) -> SiliconCostModel:
    return SiliconCostModel(SiliconParams(framework="trtllm", eplb_slots=slots), DSV3_FP4, GB200, tp=32, ep=32)


def _routed_s(cost: SiliconCostModel, rows: int) -> float:
    shape = BatchShape(num_decode_seqs=rows, decode_context_tokens=rows * 4000, num_sampled_tokens=rows)
    return sum(op.seconds for op in cost.mlp_by_part(shape)["routed"].values())


def test_the_balancer_places_the_hot_experts_so_the_slowest_rank_gets_about_an_even_share():
    """What the measurement is: the collector times the slowest rank (laid out as rank 0). At 8,192 tokens over 32
    ranks, with 288 slots that rank receives about the tokens routing spread evenly over the experts would send it
    (each token picks 8 of 256 experts, 8 of them on the rank), where the same power law without the balancer sends
    it more than twice that."""
    frame = _table()
    at = frame[frame.num_tokens == ROWS].set_index(["distribution", "num_slots"]).rank0_num_tokens
    even = ROWS * (1 - math.comb(256 - 8, 8) / math.comb(256, 8))  # about 1,837 tokens
    assert at[("power_law_1.01_eplb", 288)] <= 1.1 * even
    assert at[("power_law_1.01", 256)] >= 2 * even


def test_the_moe_layer_is_the_measured_one_under_the_balancer():
    frame = _table()
    rows = frame[(frame.distribution == "power_law_1.01_eplb") & (frame.num_slots == 288)]
    cost = _cost(288)
    for tokens in (1024, ROWS):
        ms = float(rows[rows.num_tokens == tokens].latency.min())
        assert _routed_s(cost, tokens) == pytest.approx(ms * 1e-3 * DSV3_FP4.num_moe_layers)
    shape = BatchShape(num_decode_seqs=ROWS, decode_context_tokens=ROWS * 4000, num_sampled_tokens=ROWS)
    assert "under EPLB, 288 slots" in cost.sources(shape)["mlp_gate_up"]
    # balanced, the slowest rank's 8,192-token layer is shorter than the power law's slowest without the balancer
    assert _routed_s(cost, ROWS) < 0.75 * _routed_s(_cost(None), ROWS)


@pytest.mark.parametrize(
    ("scenario", "match"),
    [
        ({"policy": {"kind": "sglang"}, "parallelism": {"tp": 8, "ep": 8}}, r"eplb_slots: TensorRT-LLM's .* sglang's"),
        ({"policy": {"kind": "trtllm"}, "parallelism": {"tp": 8}}, r"eplb_slots: .* parallelism\.ep above 1"),
        ({"policy": {"kind": "trtllm"}, "parallelism": {"tp": 8, "ep": 8}, "slots": 128}, r"fewer than the 256"),
        ({"policy": {"kind": "trtllm"}, "parallelism": {"tp": 8, "ep": 8}, "slots": 260}, r"do not divide over the 8"),
        ({"policy": {"kind": "trtllm"}, "parallelism": {"tp": 8, "ep": 8}, "slots": 264}, r"no measurement .* 264"),
        ({"policy": {"kind": "trtllm"}, "parallelism": {"tp": 8, "ep": 8}, "kernel": "cutlass"}, r"leave .*moe_kernel"),
        ({"policy": {"kind": "trtllm"}, "parallelism": {"tp": 8, "ep": 8}, "hardware": "mi300x"}, r"MI300X-192GB has"),
    ],
)
def test_a_balancer_that_cannot_be_priced_is_one_line(scenario, match):
    slots = scenario.pop("slots", 288)
    kernel = {"moe_kernel": scenario.pop("kernel")} if "kernel" in scenario else {}
    cfg = validate_scenario(
        {
            "model": "deepseek-ai/DeepSeek-V3",
            "hardware": "gb200",
            "quantization": "nvfp4",
            "cost_model": {"kind": "silicon", "eplb_slots": slots} | kernel,
            "workload": {"num_requests": 10},
        }
        | scenario
    )
    with pytest.raises(ValueError, match=match):
        build(cfg)


def test_the_recipes_balancer_reaches_the_generation_servers_that_run_it():
    recipe = """
backend:
  trtllm_config:
    prefill:
      moe_config:
        backend: TRTLLM
    decode:
      moe_config:
        backend: CUTEDSL
        load_balancer:
          layer_updates_per_iter: 1
          num_slots: 288
"""
    assert expert_slots(recipe) == (None, 288)
    assert expert_slots("backend: {}") == (None, None)
    points = read_points().set_index("id", drop=False)
    balanced = "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c8192_cfg239"
    assert EXPERT_SLOTS[balanced] == (None, 288)
    groups = {g["role"]: g for g in scenario_for(points.loc[balanced])["groups"]}
    assert groups["decode"]["cost_model"]["eplb_slots"] == 288
    assert "eplb_slots" not in groups["prefill"].get("cost_model", {})
    # the same configuration's 1,024-user point ran another recipe (batch 32), without a balancer
    other = scenario_for(points.loc["dsr1_gb300_trtllm_fp4_disagg_1024x8192_c1024_cfg373"])
    assert all("eplb_slots" not in g.get("cost_model", {}) for g in other["groups"])
