"""Attention data parallelism (parallelism.dp_attention): config, KV capacity, lockstep steps, conservation."""

import numpy as np
import pandas as pd
import pytest

from simulator.build import build, make_cost_model, resolve_cost_model, setup_group
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.cost.dp_attention import ATTENTION_OPS, EMPTY, gathered_shape
from simulator.cost.roofline import RooflineParams
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams
from simulator.kv.memory import plan_memory
from tests.conftest import make_config, make_stream, run_checked

R1 = "deepseek-ai/DeepSeek-R1"


def r1_scenario(dp: int, **fields):
    base = {
        "model": R1,
        "hardware": "h200",
        "parallelism": {"tp": 8, "ep": 8, "dp_attention": dp},
        "policy": {"kind": "sglang"},
    }
    return validate_scenario(base | fields)


# (a) config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parallelism", "message"),
    [
        ({"tp": 8, "dp_attention": 3}, "parallelism: dp_attention (3) must divide tp (8)"),
        ({"tp": 4, "pp": 2, "dp_attention": 2}, "parallelism: dp_attention (2) is modelled without pipeline"),
        ({"tp": 8, "dp_attention": 0}, "parallelism.dp_attention: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_dp_attention_is_refused_in_one_line_naming_the_field(parallelism, message):
    with pytest.raises(ValueError) as exc:
        validate_scenario({"parallelism": parallelism})
    text = str(exc.value)
    assert "\n" not in text and text.startswith(message)


def test_dp_attention_defaults_to_one_and_speculation_is_refused_with_it():
    assert validate_scenario({}).parallelism.dp_attention == 1
    cfg = make_config(
        parallelism={"tp": 2, "dp_attention": 2},
        speculative={"method": "draft", "draft_model": "llama-3.2-1b", "num_tokens": 2, "acceptance_rate": 0.7},
    )
    with pytest.raises(ValueError, match=r"^parallelism.dp_attention=2: speculative decoding"):
        build(cfg)


def test_the_planners_capacity_bound_declines_attention_dp():
    from simulator.planning.search.bound import capacity_bound
    from simulator.planning.search.steady import SloTargets
    from workloads import generate

    cfg = make_config(parallelism={"tp": 2, "dp_attention": 2}, workload={"num_requests": 20})
    slo = SloTargets(ttft_p99_ms=1e7, tpot_p99_ms=None, attainment=0.5)
    bound = capacity_bound(cfg, None, generate(cfg.workload, cfg.seed, None), slo, 0.05)
    assert bound.upper_rate_per_s is None and "dp_attention" in bound.reason


# (b) KV capacity ------------------------------------------------------------------------------------


def test_r1_on_8_h200_dp_attention_8_holds_its_mla_kv_once_per_request():
    """DeepSeek-R1 (FP8, MLA) on 8 x H200, tp 8, vLLM's sizing (gpu_memory_utilization 0.9).

    Every GPU stores 61 layers x (512 + 64) latent elements x 2 bytes = 70,272 bytes per token whatever the
    layout (MLA's latent is not split by tp). Without DP attention the 8 GPUs all hold every request's latent:
    the replica holds one GPU's worth of tokens. With dp_attention 8 each GPU holds only its own rank's requests:
    8 pools. Each GPU pays for it with the attention projections and the embedding kept whole instead of split 8
    ways: + 7/8 x 12.36 GiB. So blocks per GPU (16 tokens, 1,124,352 bytes) are floor((U - W - R) / B) with
    U = 0.9 x 140.40 GiB, R = 1.465 GiB and W = 78.33 GiB (dp 1) or 89.14 GiB (dp 8): 44,467 and 34,142; the
    replica holds 44,467 x 16 = 711,472 tokens at dp 1 and 8 x 34,142 x 16 = 4,370,176 at dp 8, 6.14 times as
    many (8 x 34,142 / 44,467); at equal weights per GPU, exactly 8 times. vLLM's DP ranks are engines of their own
    that hold every part but the routed experts (the local layout): the shared experts and router, the dense layers
    and the LM head too, 17.67 GiB a group, W = 93.79 GiB: 29,704 blocks a GPU, 8 x 29,704 x 16 = 3,802,112 tokens,
    5.34 times."""
    model, hardware = resolve_model(R1), resolve_hardware("h200")
    assert model.kv_bytes_per_token_per_gpu(8) == model.kv_bytes_per_token_per_gpu(8, 1, 8) == 61 * 576 * 2
    replicated = model.attention_group_weight_bytes()
    assert model.weight_bytes_per_gpu(8, 1, 8) - model.weight_bytes_per_gpu(8) == pytest.approx(replicated * 7 / 8)
    dp1, dp8 = (plan_memory(model, hardware, 8, 16, 0.9, dp_attention=dp) for dp in (1, 8))
    assert dp1.block_bytes == dp8.block_bytes == 70_272 * 16
    for plan in (dp1, dp8):
        assert plan.num_blocks == int((plan.usable_bytes - plan.weight_bytes - plan.reserve_bytes) // plan.block_bytes)
    assert (dp1.num_blocks, dp8.num_blocks) == (44_467, 34_142)
    setups = {
        dp: setup_group(cfg, cfg.replica_groups()[0], 0, None)
        for dp in (1, 8)
        for cfg in [r1_scenario(dp, policy={"kind": "vllm"})]
    }
    local = plan_memory(model, hardware, 8, 16, 0.9, dp_attention=8, per_rank=frozenset({"moe", "dense", "lm_head"}))
    assert local.num_blocks == 29_704
    assert setups[1].num_blocks * 16 == 711_472 and setups[8].num_blocks * 16 == 3_802_112
    assert setups[8].num_blocks / setups[1].num_blocks == pytest.approx(5.344, abs=1e-3)
    # the same weights per GPU (a measured figure): the MLA KV tokens are exactly 8 times
    same = [plan_memory(model, hardware, 8, 16, 0.9, weight_bytes=640e9, dp_attention=dp) for dp in (1, 8)]
    assert same[0].num_blocks == same[1].num_blocks


def test_gqa_kv_per_gpu_is_split_by_the_attention_tp_only():
    model = resolve_model("llama-3.1-70b")  # 8 KV heads
    assert model.kv_bytes_per_token_per_gpu(8, 1, 2) == model.kv_bytes_per_token_per_gpu(4)
    assert model.kv_bytes_per_token_per_gpu(8, 1, 8) == model.kv_bytes_per_token_per_gpu(1)


def test_sglang_ranks_divide_its_chunk_and_running_limit_and_reserve_dp_graph_memory():
    """SGLang under --enable-dp-attention: each rank runs chunked_prefill_size // dp and max_running_requests // dp,
    schedule_conservativeness x 0.3; mem_fraction_static reserves max_bs x dp x (3 + 1.5) MiB more (max_bs 512 > 300
    on an H200 at tp 8): 18,432 MiB."""
    s1, s8 = (
        setup_group(cfg, cfg.replica_groups()[0], 0, None)
        for cfg in (r1_scenario(dp, policy={"kind": "sglang", "max_running_requests": 1024}) for dp in (1, 8))
    )
    assert (s8.policy.chunked_prefill_size, s8.policy.max_running_requests) == (8192 // 8, 1024 // 8)
    assert s8.policy.schedule_conservativeness == pytest.approx(0.3)
    assert s1.memory.usable_bytes - s8.memory.usable_bytes == pytest.approx(512 * 8 * 4.5 * 2**20, rel=2e-3)


# (c) lockstep -----------------------------------------------------------------------------------


def test_ranks_step_together_and_a_step_takes_the_slowest_ranks_time():
    # constant model: 1 s a step plus 0.01 s per token of a rank, so a step lasts the busiest rank's time
    cfg = make_config(
        parallelism={"tp": 2, "dp_attention": 2},
        cost_model={"kind": "constant", "step_time_s": 1.0, "per_token_s": 0.01},
    )
    stream = make_stream([0.0, 0.5, 0.6, 3.2, 3.3], [100, 30, 50, 200, 10], [4, 6, 3, 5, 2])
    result = run_checked(cfg, stream)
    steps = result.steps
    assert set(steps["engine_id"]) == {0, 1}
    tokens = steps["num_prefill_tokens"] + steps["num_decode_tokens"]
    for _, rows in steps.assign(tokens=tokens).groupby("start_s"):
        assert rows["duration_s"].nunique() == 1  # both ranks' rows of one step: same start, same length
        assert rows["duration_s"].iloc[0] == pytest.approx(1.0 + 0.01 * rows["tokens"].max())
    starts = steps.drop_duplicates("start_s").sort_values("start_s")
    ends = (starts["start_s"] + starts["duration_s"]).to_numpy()
    assert np.all(starts["start_s"].to_numpy()[1:] >= ends[:-1] - 1e-12)  # one step at a time per replica
    # request 0 runs alone on rank 0 from 0 to 2 s (100 tokens); request 1 reaches the idle rank 1 at 0.5 s (the
    # vLLM rule: least 4 x waiting + running) and waits for that step to end; request 2 (0.6 s) goes to rank 0
    # (score 1 against rank 1's 4). At 2 s both ranks prefill, 50 and 30 tokens: the step lasts 1.5 s
    first = steps[steps["start_s"] == 0.0]
    assert first["engine_id"].tolist() == [0] and first["duration_s"].iloc[0] == pytest.approx(2.0)
    second = steps[steps["start_s"] == 2.0].set_index("engine_id")
    assert second["num_prefill_tokens"].to_dict() == {0: 50, 1: 30}
    assert second["duration_s"].tolist() == pytest.approx([1.5, 1.5])
    assert result.requests.set_index("request_id").loc[1, "first_scheduled_s"] == 2.0


BUSY, LIGHT = BatchShape((), (), 64, 64 * 4000, 64), BatchShape((), (), 8, 8 * 500, 8)
RANKS = [BUSY, LIGHT, *[EMPTY] * 6]
"""8 attention-DP ranks: one of 64 decodes at 4,000 tokens of context, one of 8 at 500, six idle."""


def _lockstep_models(params, model, hardware):
    """The 8-rank lockstep model over tp 8 x ep 8, and the two it composes: one rank's attention (tp 1) and the
    shared layers (tp 8, ep 8)."""
    return (
        make_cost_model(params, model, hardware, 8, 1, None, 8, 8),
        make_cost_model(params, model, hardware, 1, 1),
        make_cost_model(params, model, hardware, 8, 1, None, 8),
    )


def test_the_cost_of_a_lockstep_step_on_the_roofline():
    """max over ranks of the attention side (tp/N GPUs) + the shared side at the gathered rows (tp GPUs)."""
    model, hardware = resolve_model(R1), resolve_hardware("h200")
    params = resolve_cost_model(RooflineParams(), "sglang")
    cost, attention, shared = _lockstep_models(params, model, hardware)
    busy, light, ranks = BUSY, LIGHT, RANKS
    step = cost.breakdown_ranks(ranks)
    slowest = attention.breakdown(busy).ops
    attention_s = sum(op.seconds for name, op in slowest.items() if name in ATTENTION_OPS)
    # decode-only and unbalanced (2 x 72 < 8 x 64): the gather takes the sum of the ranks' rows (SUM_LEN)
    assert gathered_shape(ranks) == BatchShape((), (), 72, 72, 72)
    shared_ops = shared.breakdown(BatchShape((), (), 72, 72, 72)).ops
    shared_s = sum(op.seconds for name, op in shared_ops.items() if name not in ATTENTION_OPS | {"cpu_overhead"})
    cpu_s = slowest["cpu_overhead"].seconds
    assert step.total_s == pytest.approx(max(attention_s + shared_s, cpu_s))  # SGLang overlaps its CPU time
    assert step.ops["attn_decode"].seconds == slowest["attn_decode"].seconds
    assert cost.step_time_ranks(ranks).total_s == step.total_s
    # the light rank adds nothing to the attention time; balanced ranks gather the padded maximum (MAX_LEN)
    assert cost.step_time_ranks([busy, *[EMPTY] * 7]).total_s < step.total_s  # fewer gathered rows
    assert gathered_shape([busy] * 7 + [light]) == BatchShape((), (), 512, 512, 7 * 64 + 8)


def _sum(ops) -> float:
    return sum(op.seconds for op in ops.values())


@pytest.mark.parametrize("kind", ["roofline", "silicon"])
def test_tensorrt_llm_runs_all_but_the_routed_experts_on_each_ranks_own_tokens(kind):
    """TensorRT-LLM's attention-DP layout (modeling_deepseekv3.py: MLP and shared-expert TP 1 with attention DP, the
    router on the rank's tokens, no all-reduce; the fused MoE all-gathers the quantized tokens and reduce-scatters
    the output): each rank's side is its attention, router, LM head, shared experts and dense layers at TP 1 on its
    own rows; the shared side is the routed experts at the ranks' summed rows (no padding) over EP 8 plus the
    exchange, and no all-reduce anywhere."""
    model, hardware = resolve_model(R1), resolve_hardware("b200")
    base = RooflineParams() if kind == "roofline" else validate_scenario({"cost_model": {"kind": "silicon"}}).cost_model
    params = resolve_cost_model(base, "trtllm", 8, 8, model)
    assert (params if kind == "roofline" else params.roofline).dp_attention_mlp == "local"
    cost, attention, shared = _lockstep_models(params, model, hardware)
    busy, ranks = BUSY, RANKS
    step = cost.breakdown_ranks(ranks)
    assert "all_reduce" not in step.ops
    own = attention.breakdown(busy).ops
    parts = attention.mlp_by_part(busy)
    local = {n: op for n, op in own.items() if n in ATTENTION_OPS | {"moe_router", "lm_head"}}
    local_s = _sum(local) + _sum(parts["shared"]) + _sum(parts["dense"])
    assert gathered_shape(ranks, "none") == BatchShape((), (), 72, 72, 72)  # TensorRT-LLM: the sum, no padding
    assert gathered_shape(ranks, "largest") == BatchShape((), (), 512, 512, 72)  # vLLM: every rank to the largest
    gathered = BatchShape((), (), 72, 72, 72)
    routed = shared.mlp_by_part(gathered)["routed"]
    assert model.quantization == "fp8_block"  # the checkpoint's: DeepSeek's FP8 block scales all-gather bf16
    gather_row, scatter_row = 7168 * 2 + 8 * 8, 7168 * 2  # bf16 state, top-k ids and weights; bf16 output
    exchange = shared.moe_exchange(72, gather_row, scatter_row)
    assert step.ops["all_to_all"] == exchange and exchange.seconds > 0
    assert step.total_s == pytest.approx(max(local_s + _sum(routed) + exchange.seconds, own["cpu_overhead"].seconds))
    assert step.ops["lm_head"] == own["lm_head"] and step.ops["moe_router"] == own["moe_router"]
    assert cost.step_time_ranks(ranks).total_s == step.total_s
    # SGLang's layout of the same ranks: every MLP on the padded gathered rows over tp, two all-reduces a layer
    sglang = make_cost_model(resolve_cost_model(base, "sglang", 8, 8, model), model, hardware, 8, 1, None, 8, 8)
    assert "all_reduce" in sglang.breakdown_ranks(ranks).ops


@pytest.mark.parametrize(
    ("flags", "scattered"),
    [({}, ("moe",)), ({"moe_dense_tp_size": 1, "enable_dp_lm_head": True}, ("moe", "dense", "lm_head"))],
)
def test_sglang_under_deepep_runs_its_moe_layers_on_each_ranks_own_tokens(flags, scattered):
    """SGLang's LayerCommunicator scatters an MoE layer's MLP where DeepEP moves the routed experts' tokens
    (``_compute_mlp_mode``): its router and shared experts (built at TP 1 under DeepEP) run on each rank's own rows
    and its gather and all-reduce go; the dense layers stay on the gathered rows over tp, with their two all-reduces,
    unless --moe-dense-tp-size 1; the LM head too, unless --enable-dp-lm-head. The routed experts and DeepEP's
    dispatch and combine run on the gathered rows."""
    from policies.batching.sglang import SglangParams

    model, hardware = resolve_model(R1), resolve_hardware("b200")
    base = RooflineParams(expert_all_to_all=True)
    params = resolve_cost_model(base, "sglang", 8, 8, model, policy=SglangParams(**flags))
    assert params.dp_attention_mlp == "gathered" and params.dp_attention_scattered == scattered
    cost, attention, shared = _lockstep_models(params, model, hardware)
    busy, ranks = BUSY, RANKS
    step = cost.breakdown_ranks(ranks)
    own, parts = attention.breakdown(busy).ops, attention.mlp_by_part(busy)
    local = ATTENTION_OPS | {"moe_router"} | ({"lm_head"} if "lm_head" in scattered else set())
    local_s = _sum({n: op for n, op in own.items() if n in local}) + _sum(parts["shared"])
    gathered = gathered_shape(ranks)
    rows, by_part = shared.breakdown(gathered).ops, shared.mlp_by_part(gathered)
    shared_s = _sum(by_part["routed"]) + rows["all_to_all"].seconds
    dense_share = model.num_dense_layers / model.num_layers
    if "dense" in scattered:
        local_s += _sum(parts["dense"])
        assert "all_reduce" not in step.ops  # nothing left gathered: no all-reduce
    else:
        shared_s += _sum(by_part["dense"]) + rows["all_reduce"].seconds * dense_share
        assert step.ops["all_reduce"].seconds == pytest.approx(rows["all_reduce"].seconds * dense_share)
    if "lm_head" not in scattered:
        shared_s += rows["lm_head"].seconds
    assert step.ops["moe_router"] == own["moe_router"]  # on the rank's 64 rows, not the gathered ones
    assert step.total_s == pytest.approx(max(local_s + shared_s, own["cpu_overhead"].seconds))
    assert cost.step_time_ranks(ranks).total_s == step.total_s
    # the shared experts at TP 1 on the busy rank's 64 rows, not split over 8 GPUs on the gathered rows; the dense
    # layers on whichever side their flag puts them
    for name in ("mlp_gate_up", "mlp_down"):
        expected = parts["shared"][name].seconds + by_part["routed"][name].seconds
        expected += (parts if "dense" in scattered else by_part)["dense"][name].seconds
        assert step.ops[name].seconds == pytest.approx(expected)
    assert parts["shared"]["mlp_gate_up"].seconds != shared.mlp_by_part(gathered)["shared"]["mlp_gate_up"].seconds


def test_each_rank_holds_the_weights_its_layout_runs_on_its_own_tokens():
    """A part run on each rank's own tokens (the shared experts and router, the dense layers, the LM head) is held
    whole by every attention group instead of split over all tp: dp_attention - 1 more tp-ths of it a GPU.
    TensorRT-LLM's local layout holds all three; SGLang's gathered one those its flags scatter."""
    model = resolve_model(R1)
    wb, eb = model.dense_weight_bytes, model.embedding_weight_bytes
    moe = model.num_moe_layers * (model.shared_expert_params() + model.hidden_size * model.num_experts) * wb
    dense = model.num_dense_layers * model.dense_mlp_params() * wb
    lm_head = model.vocab_size * model.hidden_size * eb
    plain = model.weight_bytes_per_gpu(8, 1, 8)
    for parts, extra in (({"moe"}, moe), ({"moe", "dense", "lm_head"}, moe + dense + lm_head)):
        held = model.weight_bytes_per_gpu(8, 1, 8, frozenset(parts))
        assert held - plain == pytest.approx(extra * 7 / 8)
    assert model.weight_bytes_per_gpu(8, 1, 1, frozenset({"moe"})) == model.weight_bytes_per_gpu(8, 1, 1)
    # the groups' KV pools shrink by it: TensorRT-LLM's and SGLang-under-DeepEP's below SGLang's gathered layout
    blocks = {
        name: build(r1_scenario(8, **fields)).replicas[0].engines[0].kv.num_total_blocks
        for name, fields in (("gathered", {}), ("deepep", SGLANG_DEEPEP))
    }
    assert blocks["deepep"] < blocks["gathered"]


def test_scattered_settings_that_cannot_apply_are_refused_in_one_line():
    from policies.batching.sglang import SglangParams

    model = resolve_model(R1)
    with pytest.raises(ValueError, match=r"^policy.enable_dp_lm_head needs attention data parallelism"):
        resolve_cost_model(RooflineParams(), "sglang", 1, 8, model, policy=SglangParams(enable_dp_lm_head=True))
    for dp, kind in ((1, "sglang"), (8, "trtllm")):
        # the roofline is the cost model itself: its own field is named; nested in another, the nested one
        with pytest.raises(ValueError, match=r"^cost_model.dp_attention_scattered: SGLang's scattered"):
            resolve_cost_model(RooflineParams(dp_attention_scattered=("moe",)), kind, dp, 8, model)
    for field, value in (("dp_attention_mlp", "local"), ("dp_attention_padding", "none")):
        with pytest.raises(ValueError, match=rf"^cost_model.{field}: it sets the attention-DP layout"):
            resolve_cost_model(RooflineParams(**{field: value}), "sglang", 1, 8, model)
    nested = SiliconParams(roofline=RooflineParams(dp_attention_scattered=("moe",)))
    with pytest.raises(ValueError, match=r"^cost_model.roofline.dp_attention_scattered: SGLang's scattered"):
        resolve_cost_model(nested, "sglang", 1, 8, model)


def test_sglangs_flashinfer_cutlass_fp4_experts_all_gather_each_ranks_quantized_tokens():
    """SGLang's should_use_flashinfer_cutlass_moe_fp4_allgather: with the flashinfer_cutlass runner, NVFP4 experts,
    attention DP and ep equal to the DP size, each rank's MoE layers run on its own tokens (router and shared
    experts at TP 1), its tokens quantized to FP4 and all-gathered before the routed experts and their output
    reduce-scattered after (TensorRT-LLM's exchange), with no all-reduce but the dense layers'."""
    from policies.batching.sglang import SglangParams

    model = resolve_model(R1).model_copy(update={"quantization": "nvfp4"})
    hardware = resolve_hardware("b200")
    cutlass = SglangParams(moe_runner_backend="flashinfer_cutlass")
    params = resolve_cost_model(RooflineParams(), "sglang", 4, 4, model, policy=cutlass)
    assert params.dp_attention_scattered == ("moe",) and params.expert_all_to_all is False
    cost = make_cost_model(params, model, hardware, 4, 1, None, 4, 4)
    shared = make_cost_model(params, model, hardware, 4, 1, None, 4)
    ranks = [BatchShape((3000,), (0,), 0, 0, 1), BatchShape((1000,), (0,), 0, 0, 1), EMPTY, EMPTY]
    step = cost.breakdown_ranks(ranks)
    assert step.ops["all_to_all"] == shared.moe_exchange(4000, 7168 * 0.5625 + 64, 7168 * 2)
    dense_share = model.num_dense_layers / model.num_layers
    reduce = shared.breakdown(gathered_shape(ranks)).ops["all_reduce"].seconds
    assert step.ops["all_reduce"].seconds == pytest.approx(reduce * dense_share)
    # the router and shared experts at TP 1 on the busiest rank's 3,000 tokens, the routed experts and the dense
    # layers on the 4,000 gathered
    attention = make_cost_model(params, model, hardware, 1, 1)
    assert step.ops["moe_router"] == attention.breakdown(ranks[0]).ops["moe_router"]
    own, rows = attention.mlp_by_part(ranks[0]), shared.mlp_by_part(gathered_shape(ranks))
    expected = own["shared"]["mlp_gate_up"].seconds + rows["routed"]["mlp_gate_up"].seconds
    assert step.ops["mlp_gate_up"].seconds == pytest.approx(expected + rows["dense"]["mlp_gate_up"].seconds)
    # not where ep differs from the DP size, nor with the default runner or FP8 experts
    assert resolve_cost_model(RooflineParams(), "sglang", 4, 1, model, policy=cutlass).dp_attention_scattered == ()
    assert (
        resolve_cost_model(RooflineParams(), "sglang", 4, 4, model, policy=SglangParams()).dp_attention_scattered == ()
    )
    fp8 = resolve_model(R1)
    assert resolve_cost_model(RooflineParams(), "sglang", 4, 4, fp8, policy=cutlass).dp_attention_scattered == ()


def test_sglangs_scattered_layers_follow_its_flags_and_need_a_split_mlp():
    from policies.batching.sglang import SglangParams
    from simulator.build import scattered_layers
    from simulator.cost.dp_attention import DpAttentionCostModel

    flags = SglangParams(moe_dense_tp_size=1, enable_dp_lm_head=True)
    assert scattered_layers(False, True, flags) == ()  # no attention DP (or not the gathered layout)
    assert scattered_layers(True, False, SglangParams()) == ()  # tokens gathered for the experts: nothing scattered
    assert scattered_layers(True, False, flags) == ("dense", "lm_head")
    assert scattered_layers(True, True, None) == ("moe",)
    model = resolve_model(R1)
    assert (
        resolve_cost_model(RooflineParams(expert_all_to_all=True), "sglang", 8, 1, model).dp_attention_scattered == ()
    )
    assert resolve_cost_model(RooflineParams(), "trtllm", 8, 8, model).dp_attention_scattered == ()  # local

    class Whole:
        def breakdown(self, shape):  # pragma: no cover - never priced
            raise AssertionError

    with pytest.raises(ValueError, match="cannot split its MLP by part, which SGLang's scattered"):
        DpAttentionCostModel(
            Whole(), Whole(), 8, attention_tp=1, dense_layer_share=0.0, cpu_overlap=True, scattered=frozenset({"moe"})
        )
    # the LM head alone needs no split
    DpAttentionCostModel(
        Whole(), Whole(), 8, attention_tp=1, dense_layer_share=0.0, cpu_overlap=True, scattered=frozenset({"lm_head"})
    )


def test_the_profiled_model_splits_its_mlp_in_the_rooflines_proportions():
    """A calibration profile times an op whole: under the local layout its MLP ops are split over the parts as the
    roofline splits them, the parts summing to the op."""
    from simulator.cost.profiled import ProfiledParams

    model, hardware = resolve_model(R1), resolve_hardware("h200")
    params = resolve_cost_model(ProfiledParams(), "trtllm", 8, 1, model)  # (the profiled model takes no ep)
    cost = make_cost_model(params, model, hardware, 8, 1, None, 1, 8)
    ranks = [BatchShape((), (), 16, 16 * 2000, 16)] * 8
    assert cost.breakdown_ranks(ranks).total_s == cost.step_time_ranks(ranks).total_s > 0
    single = make_cost_model(params, model, hardware, 8, 1)
    shape = BatchShape((), (), 64, 64 * 2000, 64)
    whole, parts = single.breakdown(shape).ops, single.mlp_by_part(shape)
    for name in ("mlp_gate_up", "mlp_down"):
        assert sum(p[name].seconds for p in parts.values() if name in p) == pytest.approx(whole[name].seconds)


def test_the_exchange_carries_each_tokens_quantized_state_and_the_bf16_output():
    """NVFP4 experts take their tokens quantized before the all-gather (4-bit values, one FP8 scale per 16) with the
    top-k ids (int32) and weights (fp32); DeepSeek's FP8 block scales and weight-only experts take bf16."""
    from simulator.cost.dp_attention import exchange_bytes_per_row

    assert exchange_bytes_per_row(7168, 8, "nvfp4", 2.0) == (4096.0, 14336.0)
    assert exchange_bytes_per_row(7168, 8, "fp8", 2.0) == (7168 + 64, 14336.0)
    assert exchange_bytes_per_row(7168, 8, "fp8_block", 2.0) == (14336 + 64, 14336.0)
    assert exchange_bytes_per_row(7168, 8, None, 2.0) == (14336 + 64, 14336.0)


def test_mlp_by_part_sums_to_the_steps_mlp_ops():
    """The parts a model gives are the ones its breakdown sums (routed, then shared, then dense)."""
    model, hardware = resolve_model(R1), resolve_hardware("b200")
    for params in (RooflineParams(), validate_scenario({"cost_model": {"kind": "silicon"}}).cost_model):
        cost = make_cost_model(params, model, hardware, 8, 1, None, 8)
        for shape in (BatchShape((), (), 64, 64 * 4000, 64), BatchShape((3000,), (0,), 10, 10 * 900, 11)):
            ops, parts = cost.breakdown(shape).ops, cost.mlp_by_part(shape)
            assert list(parts) == ["routed", "shared", "dense"]
            for name in ("mlp_gate_up", "mlp_act", "mlp_down"):
                total = parts["routed"][name].seconds
                for part in ("shared", "dense"):
                    total += parts[part][name].seconds
                assert total == ops[name].seconds


def test_a_cost_model_that_cannot_split_its_mlp_is_refused_for_the_local_layout():
    from simulator.cost.dp_attention import DpAttentionCostModel

    class Whole:
        def breakdown(self, shape):  # pragma: no cover - never priced
            raise AssertionError

    with pytest.raises(ValueError, match="cannot split its MLP by part"):
        DpAttentionCostModel(
            Whole(),
            Whole(),
            8,
            attention_tp=1,
            dense_layer_share=0.0,
            cpu_overlap=True,
            local_mlp=True,
            exchange_bytes_per_row=(4096.0, 14336.0),
        )
    # a dense model's MLP is whole on each rank: no split needed
    DpAttentionCostModel(Whole(), Whole(), 8, attention_tp=1, dense_layer_share=0.0, cpu_overlap=True, local_mlp=True)


# (d) conservation and determinism -------------------------------------------------------------------


def _small_r1_run(dp: int, **workload):
    lengths = {
        "kind": "independent",
        "prompt": {"kind": "uniform", "min_tokens": 200, "max_tokens": 3000},
        "output": {"kind": "uniform", "min_tokens": 20, "max_tokens": 400},
    }
    cfg = r1_scenario(
        dp,
        workload={"num_requests": 400, "arrival": {"kind": "poisson", "rate_per_s": 40}, "lengths": lengths} | workload,
        kv_cache={"num_blocks": 8 * 1500, "block_size": 16},  # 24,000 tokens a rank: the KV fills
        seed=3,
    )
    return build(cfg, check_invariants=True).run()


def test_requests_and_tokens_are_conserved_and_no_rank_exceeds_its_pool():
    result = _small_r1_run(8)
    req = result.requests
    assert len(req) == 400 and set(req["status"]) <= {"finished", "rejected"}
    done = req[req["status"] == "finished"]
    assert (done["num_generated_tokens"] == done["num_output_tokens"]).all()
    assert result.summary["completed"] + result.summary["failed"] == 400
    steps = result.steps
    assert set(steps["engine_id"]) == set(range(8))
    assert steps["num_kv_blocks_used"].max() <= 1500  # each rank's own pool
    assert steps["num_kv_blocks_used"].max() > 1000  # and it was used
    assert steps.groupby("engine_id")["num_prefill_tokens"].sum().min() > 0  # every rank served requests


def test_same_seed_same_result():
    first, second = _small_r1_run(4), _small_r1_run(4)
    pd.testing.assert_frame_equal(first.requests, second.requests)
    pd.testing.assert_frame_equal(first.steps, second.steps)


# (e) throughput -----------------------------------------------------------------------------------


def test_dp_attention_serves_more_when_the_mla_kv_binds():
    """All 600 requests at once, 5,000 prompt and 1,000 output tokens each (vLLM's sizing, the roofline): at dp 1
    the replica's 711,472 tokens of MLA KV hold 118 whole requests (about 140 run while outputs are short, the
    rest wait or are preempted); at dp 8 its 8 pools of 546,272 tokens hold 91 each, 728 in all: every request
    runs at once, 75 a rank, and the MoE layers see 600 tokens a step instead of about 140."""
    lengths = {
        "kind": "independent",
        "prompt": {"kind": "fixed", "tokens": 5000},
        "output": {"kind": "fixed", "tokens": 1000},
    }
    out = {}
    for dp in (1, 8):
        cfg = r1_scenario(
            dp,
            policy={"kind": "vllm"},
            cost_model={"kind": "roofline"},
            workload={"num_requests": 600, "arrival": {"kind": "offline"}, "lengths": lengths},
        )
        result = build(cfg).run()
        running = result.steps.groupby("start_s")["num_running"].sum().max()  # over the ranks of one step
        out[dp] = (result.summary, running)
    (dp1, running1), (dp8, running8) = out[1], out[8]
    assert dp1["completed"] == dp8["completed"] == 600
    assert running1 < 150 and running8 == 600 and dp1["preemptions"] > 0 == dp8["preemptions"]
    assert dp8["output_throughput"] > 2 * dp1["output_throughput"]


# (f) TensorRT-LLM's context balancing ---------------------------------------------------------------


def test_the_balance_rule_is_tensorrt_llms_adp_balance():
    """``_balance_adp_requests`` (py_executor.py): counts are each rank's (contexts, generation requests)."""
    from simulator.cluster.dp_attention import AttentionDpBalance

    rule = AttentionDpBalance(timeout_iters=3, batching_wait_iters=2, max_batch_size=4)
    # every rank has a context and generation: held batching_wait_iters steps to gather more, then run
    assert [rule.hold_contexts([(1, 2), (1, 3)]) for _ in range(3)] == [True, True, False]
    # a rank without a context: held, and the wait counts every step until the timeout releases them
    assert [rule.hold_contexts([(1, 2), (0, 3)]) for _ in range(4)] == [True, True, False, True]
    # a rank with no generation request to run releases them at once (and restarts the count)
    assert rule.hold_contexts([(1, 2), (0, 0)]) is False and rule.waiting_iters == 0
    # a rank at max_batch_size generation requests has no room: the contexts wait as if a rank had none
    assert rule.hold_contexts([(1, 4), (1, 1)]) is True and rule.waiting_iters == 1
    # every rank with a context but some rank with no generation: run at once, no batching wait
    fresh = AttentionDpBalance(timeout_iters=60, batching_wait_iters=10, max_batch_size=8)
    assert fresh.hold_contexts([(2, 0), (1, 3)]) is False


def _balanced_run(balance: bool, arrivals: list[float]):
    cfg = make_config(
        parallelism={"tp": 2, "dp_attention": 2},
        policy={
            "kind": "trtllm",
            "attention_dp_config": {"enable_balance": balance, "timeout_iters": 5, "batching_wait_iters": 0},
        },
    )
    n = len(arrivals)
    return run_checked(cfg, make_stream(arrivals, [100] * n, [30] * n))


@pytest.mark.parametrize(
    ("balance", "arrivals", "first_scheduled"),
    [
        # request 2 reaches rank 0 at 2.5 s: without balancing it is prefilled in the next step (3 s)
        (False, [0.0, 0.0, 2.5], [0.0, 0.0, 3.0]),
        # with it the step counter had reached 3 at 3 s (1 and 2 s: no rank had a context); it waits for rank 1 to
        # have one too, or the fifth step (5 s)
        (True, [0.0, 0.0, 2.5], [0.0, 0.0, 5.0]),
        # request 3 reaches rank 1 at 3.5 s: at 4 s both ranks have a context, and both run in that step
        (True, [0.0, 0.0, 2.5, 3.5], [0.0, 0.0, 4.0, 4.0]),
    ],
)
def test_tensorrt_llm_ranks_run_their_contexts_together_under_balancing(balance, arrivals, first_scheduled):
    result = _balanced_run(balance, arrivals)
    req = result.requests.set_index("request_id")
    assert req["first_scheduled_s"].tolist() == first_scheduled
    assert (req["num_generated_tokens"] == 30).all()
    if len(arrivals) == 4:  # one context on each rank, in one step
        step = result.steps[result.steps["start_s"] == 4.0].set_index("engine_id")
        assert step["num_prefill_tokens"].to_dict() == {0: 100, 1: 100}


def test_balancing_is_tensorrt_llms_and_needs_attention_dp():
    from simulator.cluster.dp_attention import context_balance
    from simulator.config.scenario import validate_scenario as validate

    params = validate({"policy": {"kind": "trtllm", "attention_dp_config": {"enable_balance": True}}}).policy
    assert params.attention_dp_config.timeout_iters == 50 and params.attention_dp_config.batching_wait_iters == 10
    assert context_balance(params, "trtllm", 1) is None
    assert context_balance(params, "trtllm", 4).max_batch_size == params.max_batch_size == 2048
    with pytest.raises(ValueError, match=r"attention_dp_config\.timeout_iters"):
        validate({"policy": {"kind": "trtllm", "attention_dp_config": {"timeout_iters": -1}}})


SGLANG_DEEPEP = {
    "policy": {"kind": "sglang", "moe_dense_tp_size": 1, "enable_dp_lm_head": True},
    "cost_model": {"kind": "silicon", "roofline": {"expert_all_to_all": True}},
}


@pytest.mark.parametrize(
    ("fields", "scattered"),
    [({"policy": {"kind": "trtllm"}}, None), (SGLANG_DEEPEP, ("moe", "dense", "lm_head")), ({}, ())],
)
def test_decode_ranks_priced_from_their_parts_equal_the_whole_pricing(fields, scattered):
    """DpAttentionCostModel prices a decode-only rank's attention side from the ops of its sequence count and the
    decode tables at its context: the same floats as pricing every op (breakdown_ranks), and the same run, in
    TensorRT-LLM's local layout, SGLang's scattered one under DeepEP and its gathered one."""
    cfg = r1_scenario(4, kv_cache={"dtype": "fp8"}, **({"policy": {"kind": "sglang"}} | fields))
    cost = build(cfg).replicas[0].engines[0].cost_model
    if scattered is not None:
        assert cost._scattered_parts == ({"shared", "dense"} if scattered else set())
    rng = np.random.default_rng(7)
    for _ in range(200):
        shapes = []
        for _ in range(4):
            nd = int(rng.integers(0, 40))
            ctx = nd * int(rng.integers(100, 9000))
            prefill = rng.random() < 0.2
            if prefill:
                shapes.append(BatchShape((int(rng.integers(1, 4000)),), (0,), nd, ctx, nd + 1))
            else:
                shapes.append(BatchShape((), (), nd, ctx, nd) if nd else EMPTY)
        assert cost.step_time_ranks(shapes).total_s == cost.breakdown_ranks(shapes).total_s
    assert cost._decode_rest and all(rest is not None for rest in cost._decode_rest.values())

    def run(fast: bool):
        fields_2 = {"policy": {"kind": "sglang"}} | fields
        sim = build(r1_scenario(2, workload={"num_requests": 60}, seed=5, **fields_2))
        sim.replicas[0].engines[0].cost_model.fast = fast
        return sim.run()

    fast, plain = run(True), run(False)
    pd.testing.assert_frame_equal(fast.steps, plain.steps)
    pd.testing.assert_frame_equal(fast.requests, plain.requests)


@pytest.mark.parametrize(
    "policy",
    [
        {"kind": "trtllm"},
        {
            "kind": "trtllm",
            "attention_dp_config": {"enable_balance": True, "timeout_iters": 10, "batching_wait_iters": 2},
        },
        {"kind": "vllm"},
        {"kind": "sglang"},
    ],
)
def test_ranks_keeping_their_decode_batch_equal_the_plain_path(policy, monkeypatch):
    """Attention-DP ranks plan no fast-forward window but keep their decoding requests as a batch (their plain steps
    schedule and step them at once): the same steps and requests as the plain path, preemptions included."""
    lengths = {
        "kind": "independent",
        "prompt": {"kind": "uniform", "min_tokens": 200, "max_tokens": 3000},
        "output": {"kind": "uniform", "min_tokens": 20, "max_tokens": 400},
    }
    cfg = r1_scenario(
        4,
        policy=policy,
        kv_cache={"num_blocks": 4 * 1200, "block_size": 16},
        workload={"num_requests": 200, "arrival": {"kind": "poisson", "rate_per_s": 30}, "lengths": lengths},
        seed=3,
    )
    from simulator.engine.fast_forward import FastForward

    stepped = []
    step_members = FastForward.step_members
    monkeypatch.setattr(FastForward, "step_members", lambda ff, now: stepped.append(now) or step_members(ff, now))
    batched = build(cfg, check_invariants=True)
    assert all(e.fast_forward is not None for e in batched.replicas[0].engines)
    kept = batched.run()
    assert len(stepped) > 100  # steps that stepped the batch
    plain = build(cfg, check_invariants=True, fast_forward=False).run()
    pd.testing.assert_frame_equal(kept.steps, plain.steps)
    pd.testing.assert_frame_equal(kept.requests, plain.requests)
