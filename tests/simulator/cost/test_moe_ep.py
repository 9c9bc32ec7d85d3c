"""MLA, shared experts, dense layers and expert parallelism in the cost models; DeepSeek-V3 and Qwen3-MoE
run end to end on H200."""

from __future__ import annotations

import pytest

from simulator.build import build, setup_group
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.schema import ParallelismConfig, ScenarioConfig
from simulator.cost.moe_load import busiest_group_share
from simulator.cost.roofline import RooflineCostModel, RooflineParams
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams
from simulator.cost.silicon.model import SiliconCostModel

H200 = resolve_hardware("h200")
# By Hugging Face id: the local Hugging Face cache's config.json, else the one aiconfigurator-core ships.
DSV3 = resolve_model("deepseek-ai/DeepSeek-V3")
QWEN = resolve_model("Qwen/Qwen3-30B-A3B")
DECODE = BatchShape(num_decode_seqs=32, decode_context_tokens=32 * 4000, num_sampled_tokens=32)
PREFILL = BatchShape((2048,), (0,), num_sampled_tokens=1)


def test_mla_decode_reads_the_latent_per_key():
    c = RooflineCostModel(RooflineParams(), DSV3, H200, tp=8)
    op = c.breakdown(DECODE).ops["attn_decode"]
    latent_read = 32 * 4000 * (512 + 64) * 2 * 61
    assert latent_read < op.bytes < 1.5 * latent_read
    assert c.decode_step_times(32, [32 * 4000]) == [c.step_time(DECODE).total_s]


def test_shared_experts_and_dense_layers_are_priced():
    c = RooflineCostModel(RooflineParams(), DSV3, H200, tp=8)
    parts = c.mlp_parts(64)
    assert set(parts) == {"routed", "shared", "dense"}
    assert parts["dense"]["mlp_gate_up"].flops == pytest.approx(2 * 64 * 7168 * 2 * 18432 / 8 * 3)
    assert parts["shared"]["mlp_down"].flops == pytest.approx(2 * 64 * 2048 / 8 * 7168 * 58)


def test_silicon_prices_mla_by_the_measured_module_and_ep_by_the_measured_all_to_all():
    """DeepSeek-V3 on 8 x H200 (TP 8, EP 8): the MLA attention module (projections, attention, o_proj) and, where
    the deployment dispatches over EP (expert_all_to_all), DeepEP's dispatch and combine come from aiconfigurator's
    vLLM tables; nothing of a decode step falls back."""
    c = SiliconCostModel(SiliconParams(roofline=RooflineParams(expert_all_to_all=True)), DSV3, H200, tp=8, ep=8)
    sources = c.sources(DECODE)
    assert sources["attn_decode"] in ("measured", "interpolated")
    assert sources["qkv_proj"] == sources["o_proj"] == "in the measured MLA module (attn_prefill, attn_decode)"
    assert sources["all_to_all"] == "interpolated (DeepEP)"
    assert sources["mlp_gate_up"].startswith(("measured", "interpolated"))  # fused-MoE table, fp8_block
    ops = c.breakdown(DECODE).ops
    assert ops["qkv_proj"].seconds == ops["o_proj"].seconds == 0.0
    c.step_time(DECODE)
    assert not c.fallbacks
    # the module at 16 heads per GPU (128 / tp 8), one layer, read back from the table
    table, how = c.tables.mla("mla_decode", "bf16", "fp8_block", 16)
    assert how == "measured"
    row = table.rows[table.batch.index(32)]
    assert ops["attn_decode"].seconds == pytest.approx(row(4000) * DSV3.num_layers, rel=1e-9)
    # a head layout the module was not measured at falls back to the roofline, counted
    assert (
        "no MLA table"
        in SiliconCostModel(SiliconParams(), DSV3.model_copy(update={"kv_lora_rank": 256}), H200, tp=8, ep=8).sources(
            DECODE
        )["attn_decode"]
    )


def test_tensor_times_expert_parallelism_has_no_all_to_all():
    """Without attention data parallelism every GPU holds the step's tokens: the experts' partial outputs are
    combined by the tensor-parallel all-reduce (vLLM runs its all-to-all kernels only when dp > 1)."""
    for cost in (
        RooflineCostModel(RooflineParams(), QWEN, H200, tp=4, ep=4),
        SiliconCostModel(SiliconParams(), QWEN, H200, tp=4, ep=4),
    ):
        ops = cost.breakdown(PREFILL).ops
        assert "all_to_all" not in ops and "all_reduce" in ops


def test_expert_parallelism_all_to_all_and_imbalance():
    all_to_all = RooflineParams(expert_all_to_all=True, moe_token_distribution="balanced")
    balanced = RooflineCostModel(all_to_all, QWEN, H200, tp=4, ep=4)
    # the default: aiconfigurator's power law for the model, 1.2 for Qwen3-MoE, 1.01 for DeepSeek-V3
    assert RooflineParams().distribution_for(QWEN) == "power_law_1.2"
    assert RooflineParams().distribution_for(DSV3) == "power_law_1.01"
    skewed = RooflineCostModel(
        RooflineParams(moe_token_distribution="power_law_1.2", expert_all_to_all=True), QWEN, H200, tp=4, ep=4
    )
    ops = balanced.breakdown(PREFILL).ops
    sent = 2048 / 4 * 8 * 2048 * 2 * 3 / 4
    assert ops["all_to_all"].bytes == pytest.approx(2 * 48 * sent)
    assert "all_to_all" not in RooflineCostModel(RooflineParams(), QWEN, H200, tp=4).breakdown(PREFILL).ops
    assert skewed.expert_rows(2048) > balanced.expert_rows(2048) == 2048 * 8 / 4
    assert skewed.step_time(PREFILL).total_s > balanced.step_time(PREFILL).total_s
    assert busiest_group_share(2048, 128, 8, 1, 1.2) == 1.0
    assert 1 / 8 < busiest_group_share(2048, 256, 8, 8, 1.01) < busiest_group_share(2048, 256, 8, 8, 1.2) < 1


def test_ep_must_divide_tp():
    with pytest.raises(ValueError, match="must divide tp"):
        ParallelismConfig(tp=2, ep=4)


def _scenario(hf_id: str, tp: int, ep: int) -> ScenarioConfig:
    return ScenarioConfig.model_validate(
        {
            "model": hf_id,
            "hardware": "h200",
            "parallelism": {"tp": tp, "ep": ep},
            "max_model_len": 8192,
            "workload": {
                "num_requests": 20,
                "arrival": {"kind": "poisson", "rate_per_s": 4},
                "lengths": {
                    "kind": "independent",
                    "prompt": {"kind": "uniform", "min_tokens": 200, "max_tokens": 800},
                    "output": {"kind": "uniform", "min_tokens": 20, "max_tokens": 100},
                },
            },
        }
    )


@pytest.mark.parametrize(("hf_id", "tp", "ep"), [("deepseek-ai/DeepSeek-V3", 8, 8), ("Qwen/Qwen3-30B-A3B", 2, 2)])
def test_moe_models_run_end_to_end_on_h200(hf_id, tp, ep):
    cfg = _scenario(hf_id, tp, ep)
    setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert setup.ep == ep and setup.num_blocks > 0
    assert setup.memory is not None and setup.memory.weight_bytes < setup.memory.usable_bytes  # weights fit per GPU
    result = build(cfg).run()
    assert result.summary["completed"] == 20
    assert result.summary["num_requests"] == 20
    model = setup.model
    # EP: each GPU holds E/ep of the experts, so far less expert weight than one GPU holding them all
    assert model.expert_weight_bytes_per_gpu(tp, ep=ep) == pytest.approx(model.expert_weight_bytes_per_gpu(1) / tp)


def test_vllm_dispatches_all_to_all_with_attention_dp_and_ep_only():
    """vLLM's FusedMoEParallelConfig.use_all2all_kernels is dp_size > 1 and use_ep; SGLang's and TensorRT-LLM's
    default attention-DP layout gathers the tokens; an explicit setting stands."""
    from simulator.build import setup_group
    from simulator.config.scenario import validate_scenario

    def all_to_all(policy: str, parallelism: dict, cost_model: dict | None = None) -> bool:
        fields = {"model": "deepseek-ai/DeepSeek-R1", "hardware": "h200", "parallelism": parallelism}
        fields |= {"policy": policy, "workload": {"num_requests": 2}}
        if cost_model is not None:
            fields["cost_model"] = cost_model
        cfg = validate_scenario(fields)
        return setup_group(cfg, cfg.replica_groups()[0], 0, None).cost_model.roofline.expert_all_to_all

    assert all_to_all("vllm", {"tp": 8, "ep": 8, "dp_attention": 8})
    assert not all_to_all("vllm", {"tp": 8, "ep": 8})
    assert not all_to_all("vllm", {"tp": 8, "dp_attention": 8})
    assert not all_to_all("sglang", {"tp": 8, "ep": 8, "dp_attention": 8})
    explicit = {"kind": "silicon", "roofline": {"expert_all_to_all": False}}
    assert not all_to_all("vllm", {"tp": 8, "ep": 8, "dp_attention": 8}, explicit)
