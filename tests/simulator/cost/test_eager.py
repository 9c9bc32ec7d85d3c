"""A step holding a prefill, launched without a CUDA graph: the longer of its GPU time and the host's launches."""

import pytest

from simulator.build import make_cost_model, resolve_cost_model
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.cost.dp_attention import EMPTY
from simulator.cost.eager import (
    GQA_MOE_EAGER_HOST_S_PER_LAYER,
    HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER,
    MLA_MOE_EAGER_HOST_S_PER_LAYER,
    REQUEST_PATH_S,
    SGLANG_DEEPSEEK_V3_EAGER_FORWARD_S,
    SGLANG_GRANITE_MOE_EAGER_PREFILL_S,
    SGLANG_QWEN3_NEXT_EAGER_TTFT_S,
    measured_eager_host_s_per_layer,
)
from simulator.cost.roofline import RooflineParams
from simulator.cost.shape import BatchShape
from simulator.cost.silicon.model import SiliconParams

R1 = "deepseek-ai/DeepSeek-R1"


def prefill(n: int, decodes: int = 0) -> BatchShape:
    return BatchShape((n,), (0,), decodes, decodes * 1000, 1 + decodes)


def decode(n: int) -> BatchShape:
    return BatchShape((), (), n, n * 1000, n)


def r1_cost(policy: str, params=None, tp: int = 8, pp: int = 1):
    model = resolve_model(R1)
    resolved = resolve_cost_model(params or RooflineParams(), policy, model=model)
    return make_cost_model(resolved, model, resolve_hardware("h200"), tp, pp), model


def r1_simulation(policy: dict, rate_per_s: float):
    """DeepSeek-R1 on 8 x H200 under ``policy``, 20 Poisson requests at ``rate_per_s``, built (not run)."""
    from simulator.build import build

    scenario = {
        "model": R1,
        "hardware": "h200",
        "parallelism": {"tp": 8},
        "policy": policy,
        "workload": {"num_requests": 20, "arrival": {"kind": "poisson", "rate_per_s": rate_per_s}},
    }
    return build(validate_scenario(scenario))


def test_the_measured_figure_is_sglangs_eager_deepseek_forward_per_layer():
    model = resolve_model(R1)
    assert model.is_mla and model.is_moe and model.num_layers == 61
    assert measured_eager_host_s_per_layer(model) == MLA_MOE_EAGER_HOST_S_PER_LAYER
    assert pytest.approx(SGLANG_DEEPSEEK_V3_EAGER_FORWARD_S) == MLA_MOE_EAGER_HOST_S_PER_LAYER * 61
    assert measured_eager_host_s_per_layer(resolve_model("llama-3.1-70b")) == 0.0  # none measured


def test_a_hybrid_gated_deltanet_moe_layer_takes_sglangs_eager_qwen3_next_launches():
    """sgl-project/sglang#13081: Qwen3-Next-80B-A3B's TTFT at one user and one output token without piecewise graphs,
    99.17 ms, less the request path servesim's client prices, over its 48 layers. Qwen3.5 has its layer mix (three
    Gated DeltaNet layers to one full-attention layer, routed and shared experts) and takes the figure."""
    from simulator.config.schema import ClientConfig

    client = ClientConfig()
    assert pytest.approx(client.ingest_delay_s + 1024 * client.tokenize_s_per_token) == REQUEST_PATH_S
    assert pytest.approx(SGLANG_QWEN3_NEXT_EAGER_TTFT_S) == HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER * 48 + REQUEST_PATH_S
    assert pytest.approx(1.959e-3, abs=1e-6) == HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER
    qwen = resolve_model("Qwen/Qwen3.5-397B-A17B")
    assert qwen.num_linear_layers == 45 and qwen.num_full_attention_layers == 15 and qwen.is_moe
    assert measured_eager_host_s_per_layer(qwen) == HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER
    # SGLang launches a short Qwen3.5 prefill eagerly: the launches, not its kernels, set the step
    resolved = resolve_cost_model(SiliconParams(), "sglang", model=qwen)
    cost = make_cost_model(resolved, qwen, resolve_hardware("b200"), 4, 1)
    step = cost.breakdown(prefill(1024))
    assert step.ops["eager_host"].seconds == pytest.approx(HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER * 60)
    assert step.total_s == pytest.approx(HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER * 60)


def test_a_grouped_query_attention_moe_layer_takes_sglangs_eager_granite_moe_launches():
    """sgl-project/sglang#33293: SGLang's bench_one_batch of granite-3.1-3b-a800m-instruct (32 layers of grouped-query
    attention and routed experts) launched eagerly prefills 128 tokens in 23.55 ms, about what one decode token takes
    so (26.49 ms), where a graph replays that decode step in 2.67 ms: the launches set the time. gpt-oss and MiniMax-M2
    are built so (no MLA, no linear attention) and take the figure; a dense model has none measured."""
    assert pytest.approx(0.736e-3, abs=1e-6) == GQA_MOE_EAGER_HOST_S_PER_LAYER
    assert pytest.approx(SGLANG_GRANITE_MOE_EAGER_PREFILL_S) == GQA_MOE_EAGER_HOST_S_PER_LAYER * 32
    gpt_oss = resolve_model("openai/gpt-oss-120b")
    assert gpt_oss.is_moe and not gpt_oss.is_mla and not gpt_oss.num_linear_layers
    assert measured_eager_host_s_per_layer(gpt_oss) == GQA_MOE_EAGER_HOST_S_PER_LAYER
    assert measured_eager_host_s_per_layer(resolve_model("llama-3.1-8b")) == 0.0
    # TensorRT-LLM launches a context step of gpt-oss without its graphs: a 1k prompt on 8 x B200 waits for the host
    resolved = resolve_cost_model(SiliconParams(), "trtllm", model=gpt_oss)
    cost = make_cost_model(resolved, gpt_oss, resolve_hardware("b200"), 8, 1)
    graphed = make_cost_model(
        resolved.model_copy(update={"roofline": resolved.roofline.model_copy(update={"eager_host_s_per_layer": 0.0})}),
        gpt_oss,
        resolve_hardware("b200"),
        8,
        1,
    )
    host_s = GQA_MOE_EAGER_HOST_S_PER_LAYER * gpt_oss.num_layers
    assert graphed.step_time(prefill(1024)).total_s < host_s
    assert cost.breakdown(prefill(1024)).ops["eager_host"].seconds == pytest.approx(host_s)
    assert cost.step_time(prefill(1024)).total_s == pytest.approx(host_s)
    assert cost.step_time(decode(8)).total_s == graphed.step_time(decode(8)).total_s  # decode replays a graph


@pytest.mark.parametrize("policy", ["sglang", "trtllm", "vllm_v0"])
def test_a_short_prefill_waits_for_the_hosts_launches(policy):
    cost, model = r1_cost(policy)
    graphed, _ = r1_cost(policy, RooflineParams(eager_host_s_per_layer=0.0))
    host_s = MLA_MOE_EAGER_HOST_S_PER_LAYER * model.num_layers
    short = cost.breakdown(prefill(16))
    assert short.ops["eager_host"].seconds == pytest.approx(host_s)
    assert graphed.step_time(prefill(16)).total_s < host_s  # its kernels alone take less than the launches
    gpu_s = sum(op.seconds for name, op in short.ops.items() if name not in ("eager_host", "cpu_overhead"))
    assert short.total_s == pytest.approx(max(gpu_s, host_s, short.ops["cpu_overhead"].seconds))
    assert short.total_s == pytest.approx(host_s)
    # a long prefill's kernels outlast the launches: unchanged
    long = prefill(32768)
    assert graphed.step_time(long).total_s > host_s
    assert cost.step_time(long).total_s == graphed.step_time(long).total_s
    # decode-only steps replay a CUDA graph: no launches priced, the same floats on the fast path
    assert "eager_host" not in cost.breakdown(decode(8)).ops
    assert cost.step_time(decode(8)).total_s == graphed.step_time(decode(8)).total_s
    assert cost.decode_step_times(8, [8000, 16000]) == graphed.decode_step_times(8, [8000, 16000])


def test_a_mixed_step_is_eager_too():
    """TensorRT-LLM's in-flight batch with a context request runs without a graph (can_run_cuda_graph)."""
    cost, model = r1_cost("trtllm")
    step = cost.breakdown(prefill(8, decodes=4))
    assert step.total_s >= MLA_MOE_EAGER_HOST_S_PER_LAYER * model.num_layers


def test_vllm_v1_launches_a_prompt_step_above_its_largest_cudagraph_capture_from_the_host():
    """vLLM V1 captures CUDA graphs for steps of up to min(2 x max_num_seqs, 512) tokens (1, 2, 4, multiples of 8 below
    256, then of 16; none above max_num_batched_tokens); a larger step holding a prompt runs without a graph."""
    from policies.batching.vllm import VllmParams

    def largest(**kw):
        return VllmParams(**({"max_num_batched_tokens": 8192} | kw)).piecewise_graph_max_tokens

    assert [largest(max_num_seqs=n) for n in (1, 3, 4, 12, 129, 255, 1024)] == [2, 4, 8, 24, 256, 496, 512]
    assert largest(max_num_seqs=200, max_num_batched_tokens=256) == 256
    assert largest(max_num_seqs=4, max_cudagraph_capture_size=2048) == 2048
    assert largest(max_num_seqs=4, enforce_eager=True) == 0
    model = resolve_model(R1)
    params = resolve_cost_model(RooflineParams(), "vllm", model=model, piecewise_graph_max_tokens=8)
    assert params.eager_host_s_per_layer == MLA_MOE_EAGER_HOST_S_PER_LAYER and params.piecewise_graph_max_tokens == 8
    cost = make_cost_model(params, model, resolve_hardware("h200"), 8, 1)
    host_s = MLA_MOE_EAGER_HOST_S_PER_LAYER * model.num_layers
    for captured in (prefill(8), prefill(4, decodes=4), decode(600)):
        assert "eager_host" not in cost.breakdown(captured).ops
    for launched in (prefill(9), prefill(1000, decodes=3)):
        assert cost.breakdown(launched).ops["eager_host"].seconds == pytest.approx(host_s)
        assert cost.step_time(launched).total_s == pytest.approx(cost.breakdown(launched).total_s)
        assert cost.step_time(launched).total_s >= host_s
    llama = resolve_model("llama-3.1-70b")  # no measured figure: unchanged
    assert resolve_cost_model(RooflineParams(), "vllm", model=llama).eager_host_s_per_layer == 0.0
    params = resolve_cost_model(RooflineParams(), "sglang", model=llama)
    assert params.eager_host_s_per_layer == 0.0
    assert resolve_cost_model(RooflineParams(), "sglang").eager_host_s_per_layer == 0.0  # no model given


def test_a_vllm_scenarios_capture_size_reaches_its_cost_model():
    """With --max-num-seqs 4 a 1k-token prompt step runs without a graph; captured up to 2,048 tokens it does not."""
    default = r1_simulation({"kind": "vllm", "max_num_seqs": 4}, rate_per_s=1.0)
    captured = r1_simulation({"kind": "vllm", "max_num_seqs": 4, "max_cudagraph_capture_size": 2048}, rate_per_s=1.0)
    roof = [sim.resolved_config["resolved_groups"][0]["cost_model"]["roofline"] for sim in (default, captured)]
    assert [r["piecewise_graph_max_tokens"] for r in roof] == [8, 2048]
    assert roof[0]["eager_host_s_per_layer"] == MLA_MOE_EAGER_HOST_S_PER_LAYER
    assert captured.run().summary["mean_ttft_ms"] < default.run().summary["mean_ttft_ms"]
    with pytest.raises(ValueError, match="max_cudagraph_capture_size"):
        validate_scenario({"policy": {"kind": "vllm", "max_cudagraph_capture_size": 0}})


def test_vllms_enforce_eager_prices_a_prefill_groups_launches_and_is_refused_where_it_decodes():
    """vLLM's --enforce-eager runs every step without a CUDA graph: a prefill group's steps take the measured launches;
    a group that decodes is refused, its eager decode steps not being priced."""
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    assert resolve_cost_model(RooflineParams(), "vllm", model=resolve_model(R1), enforce_eager=True) == (
        resolve_cost_model(RooflineParams(), "sglang", model=resolve_model(R1)).model_copy(
            # vLLM's DP ranks keep their MLPs and pad to the largest rank (its traits)
            update={"framework": "vllm", "dp_attention_mlp": "local", "dp_attention_padding": "largest"}
        )
    )
    eager = {"kind": "vllm", "max_num_seqs": 8, "enforce_eager": True}
    base = {"model": R1, "hardware": "h200", "parallelism": {"tp": 8}, "workload": {"num_requests": 4}}
    cfg = validate_scenario(base | {"groups": [{"role": "prefill", "policy": eager}, {"role": "decode"}]})
    prefill_group, decode_group = build(cfg).resolved_config["resolved_groups"]
    assert prefill_group["cost_model"]["roofline"]["eager_host_s_per_layer"] == MLA_MOE_EAGER_HOST_S_PER_LAYER
    # vLLM V1 decodes from graphs: only a step holding more prompt tokens than its largest capture is launched
    roof = decode_group["cost_model"]["roofline"]
    assert roof["eager_host_s_per_layer"] == MLA_MOE_EAGER_HOST_S_PER_LAYER
    assert roof["piecewise_graph_max_tokens"] == 512
    assert prefill_group["cost_model"]["roofline"]["piecewise_graph_max_tokens"] == 0
    for groups in ([{"policy": eager}], [{"role": "prefill"}, {"role": "decode", "policy": eager}]):
        with pytest.raises(ValueError, match="enforce_eager launches decode steps without CUDA graphs"):
            build(validate_scenario(base | {"groups": groups}))


def test_a_users_figure_wins_and_reaches_the_silicon_models_roofline():
    mine = RooflineParams(eager_host_s_per_layer=2e-3)
    assert resolve_cost_model(mine, "vllm", model=resolve_model(R1)).eager_host_s_per_layer == 2e-3
    silicon = resolve_cost_model(SiliconParams(), "sglang", model=resolve_model(R1))
    assert silicon.roofline.eager_host_s_per_layer == MLA_MOE_EAGER_HOST_S_PER_LAYER


def test_each_pipeline_stage_launches_its_own_layers():
    cost, _ = r1_cost("sglang", tp=4, pp=2)
    step = cost.step_time(prefill(16))
    assert step.stage_s is not None
    layers = cost._stage_layers
    for stage_s, n in zip(step.stage_s, layers, strict=True):
        assert stage_s >= MLA_MOE_EAGER_HOST_S_PER_LAYER * n * (1 - 1e-12)


def test_one_ranks_prefill_makes_every_attention_dp_rank_eager():
    model = resolve_model(R1)
    params = resolve_cost_model(RooflineParams(), "sglang", dp_attention=8, ep=8, model=model)
    cost = make_cost_model(params, model, resolve_hardware("h200"), 8, 1, None, 8, 8)
    host_s = MLA_MOE_EAGER_HOST_S_PER_LAYER * model.num_layers
    ranks = [prefill(16), *[decode(4)] * 7]
    step = cost.breakdown_ranks(ranks)
    assert step.ops["eager_host"].seconds == pytest.approx(host_s)
    assert step.total_s == pytest.approx(host_s)
    assert cost.step_time_ranks([decode(4)] * 8).total_s < host_s
    assert "eager_host" not in cost.breakdown_ranks([decode(4), *[EMPTY] * 7]).ops


def test_speculations_gpu_time_and_the_plans_lower_bounds_treat_the_launches_as_beside_the_gpu():
    """A speculative step sums its parts' GPU times, each the longer of its ops and its launches; the planner's
    lower bounds leave the launches out (adding them to the GPU's sum would overshoot a step's true time)."""
    from simulator.cost.shape import OpCost, StepTime
    from simulator.cost.speculative import _gpu_s
    from simulator.planning.search.bound import _without

    ops = {"mlp_gate_up": OpCost(0.010), "eager_host": OpCost(0.050), "cpu_overhead": OpCost(0.002)}
    assert _gpu_s(StepTime(0.050, ops)) == 0.050
    assert _gpu_s(StepTime(0.010, {"mlp_gate_up": OpCost(0.010), "cpu_overhead": OpCost(0.002)})) == 0.010
    assert _without(ops, ("cpu_overhead",)) == 0.010
    cost, _ = r1_cost("sglang")
    step = cost.breakdown(prefill(16))
    assert _without(dict(step.ops), ()) <= step.total_s


@pytest.mark.parametrize("kind", ["roofline", "silicon"])
def test_trtllms_piecewise_graphs_take_a_context_step_of_at_most_their_largest_capture_off_the_host(kind):
    """TensorRT-LLM's torch_compile_config.enable_piecewise_cuda_graph replays a context or mixed step of at most the
    largest capture_num_tokens from its graphs (no eager launches); a larger step is still launched eagerly."""
    from policies.batching.trtllm import TrtllmParams

    model = resolve_model(R1)
    params = {"roofline": RooflineParams(), "silicon": SiliconParams()}[kind]
    policy = TrtllmParams(max_num_tokens=8192, piecewise_cuda_graph_max_tokens=9000)
    assert policy.piecewise_graph_max_tokens == 8192  # the engine drops capture sizes above max_num_tokens
    assert TrtllmParams().piecewise_graph_max_tokens == 0  # off by default
    resolved = resolve_cost_model(params, "trtllm", model=model, piecewise_graph_max_tokens=1024)
    eager = resolve_cost_model(params, "trtllm", model=model)
    roof = resolved if kind == "roofline" else resolved.roofline
    assert roof.piecewise_graph_max_tokens == 1024 and roof.eager_host_s_per_layer == MLA_MOE_EAGER_HOST_S_PER_LAYER
    hardware = resolve_hardware("b200") if kind == "silicon" else resolve_hardware("h200")
    graphed, launched = (make_cost_model(p, model, hardware, 8, 1) for p in (resolved, eager))
    host_s = MLA_MOE_EAGER_HOST_S_PER_LAYER * model.num_layers
    for shape in (prefill(16), prefill(1000, decodes=24)):  # 16 and 1,024 tokens: captured
        assert "eager_host" not in graphed.breakdown(shape).ops
        assert graphed.step_time(shape).total_s < host_s <= launched.step_time(shape).total_s
        assert graphed.step_time(shape).total_s == pytest.approx(graphed.breakdown(shape).total_s)
    above = prefill(1000, decodes=25)  # 1,025 tokens: launched eagerly
    assert graphed.breakdown(above).ops["eager_host"].seconds == pytest.approx(host_s)
    assert graphed.step_time(above).total_s == launched.step_time(above).total_s >= host_s


def test_a_trtllm_scenarios_piecewise_graphs_reach_its_cost_model_and_shorten_short_prefills():
    trtllm = {"kind": "trtllm", "max_num_tokens": 4096}
    piecewise = r1_simulation(trtllm | {"piecewise_cuda_graph_max_tokens": 8192}, rate_per_s=2.0)
    eager = r1_simulation(trtllm, rate_per_s=2.0)
    (group,) = piecewise.resolved_config["resolved_groups"]
    assert group["cost_model"]["roofline"]["piecewise_graph_max_tokens"] == 4096  # capped at max_num_tokens
    assert eager.resolved_config["resolved_groups"][0]["cost_model"]["roofline"]["piecewise_graph_max_tokens"] == 0
    assert piecewise.run().summary["mean_ttft_ms"] < eager.run().summary["mean_ttft_ms"]
    with pytest.raises(ValueError, match="piecewise_cuda_graph_max_tokens"):
        validate_scenario({"policy": {"kind": "trtllm", "piecewise_cuda_graph_max_tokens": -1}})
