"""The engine's CPU time per step, CUDA-graph padding, and the client's front-end delay in TTFT."""

import pytest

from simulator.build import build, make_cost_model
from simulator.config.presets import hardware_presets, model_presets
from simulator.config.scenario import validate_scenario
from simulator.cost import BatchShape
from simulator.cost.overhead import (
    DEFAULT_MAX_REL_ERROR,
    VLLM_CAPTURE_SIZES,
    EngineOverheadParams,
    engine_overhead_s,
    padded_batch_size,
    vllm_capture_sizes,
)
from simulator.cost.roofline import RooflineParams

M = model_presets()["llama-3.1-8b"]
H = hardware_presets()["h100-sxm"]

# Rows of vidur/profiling/cpu_overheads/a100/cpu_overheads.csv (medians, ms): model, batch_size,
# tensor_parallel_degree, then schedule, prepare_inputs_e2e, sampler_e2e, process_model_outputs,
# and the LM-head GEMM benchmarks/fit_overheads.py takes out of sampler_e2e (aiconfigurator's A100
# gemm_perf at m = batch, n = vocab / tp, k = hidden).
ROWS = [
    ("meta-llama/Llama-2-7b-hf", 8, 1, 0.1555, 0.3366, 0.5092, 0.1719, 0.1751),
    ("meta-llama/Llama-2-7b-hf", 128, 1, 2.0483, 1.0253, 1.0997, 2.0483, 0.1991),
    ("meta-llama/Llama-2-70b-hf", 32, 4, 0.5247, 0.8878, 0.6499, 0.6750, 0.1066),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r[0]}-{r[1]}-tp{r[2]}")
def test_default_overhead_matches_the_measured_rows_within_its_fit_error(row):
    _, batch, tp, schedule, prepare, sampler, process, lm_head = row
    measured_s = (schedule + prepare + (sampler - lm_head) + process) * 1e-3
    fitted_s = engine_overhead_s(EngineOverheadParams(), batch, tp)
    assert fitted_s == pytest.approx(measured_s, rel=DEFAULT_MAX_REL_ERROR)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_overhead_grows_with_the_batch_as_the_data_does(tp):
    p = EngineOverheadParams()
    times = [engine_overhead_s(p, n, tp) for n in (1, 8, 16, 32, 64, 128, 256)]
    assert times == sorted(times) and len(set(times)) == len(times)
    # the data: 8 -> 128 sequences is about 6x at tp 1 (1.0 -> 6.0 ms), less with the tp > 1 step
    assert 4 < engine_overhead_s(p, 128, 1) / engine_overhead_s(p, 8, 1) < 8
    if tp > 1:  # the same extra at tp 2 and 4, as measured
        assert engine_overhead_s(p, 8, tp) - engine_overhead_s(p, 8, 1) == pytest.approx(p.tp_step_s)


def test_padded_batch_size_edges():
    assert VLLM_CAPTURE_SIZES[:5] == (1, 2, 4, 8, 16)
    assert VLLM_CAPTURE_SIZES[-1] == 512 and 248 in VLLM_CAPTURE_SIZES and 264 not in VLLM_CAPTURE_SIZES
    cases = {1: 1, 2: 2, 3: 4, 5: 8, 9: 16, 13: 16, 16: 16, 249: 256, 257: 272, 512: 512, 513: 513, 4000: 4000}
    assert {n: padded_batch_size(n) for n in cases} == cases
    assert padded_batch_size(65, vllm_capture_sizes(64)) == 65  # beyond a smaller max: eager
    assert padded_batch_size(63, vllm_capture_sizes(64)) == 64


def decode(n: int, ctx: int = 1000) -> BatchShape:
    return BatchShape(num_decode_seqs=n, decode_context_tokens=n * ctx, num_sampled_tokens=n)


def test_decode_step_runs_its_linear_layers_at_the_cuda_graph_batch():
    cost = make_cost_model(RooflineParams(), M, H, 1)
    ops13, ops16 = cost.breakdown(decode(13)).ops, cost.breakdown(decode(16)).ops
    for name in ("embed", "qkv_proj", "o_proj", "mlp_gate_up", "mlp_act", "mlp_down", "norm"):
        assert ops13[name] == ops16[name], name
    # attention reads 13 sequences' KV, the LM head samples 13 rows, the engine handles 13
    for name in ("attn_decode", "lm_head", "cpu_overhead"):
        assert ops13[name].seconds < ops16[name].seconds, name
    assert ops13["cpu_overhead"].seconds == engine_overhead_s(EngineOverheadParams(), 13)
    eager = make_cost_model(RooflineParams(cuda_graph_padding=False), M, H, 1).breakdown(decode(13)).ops
    assert eager["qkv_proj"].flops == pytest.approx(ops13["qkv_proj"].flops * 13 / 16)


def test_tensor_parallel_decode_pads_the_all_reduce_too():
    cost = make_cost_model(RooflineParams(), M, H, 2)
    assert cost.breakdown(decode(13)).ops["all_reduce"] == cost.breakdown(decode(16)).ops["all_reduce"]


def test_a_mixed_step_is_not_padded():
    cost = make_cost_model(RooflineParams(), M, H, 1)
    mixed13 = cost.breakdown(BatchShape((1,), (0,), 12, 12000, 13)).ops  # 12 decodes + a 1-token chunk
    mixed16 = cost.breakdown(BatchShape((4,), (0,), 12, 12000, 13)).ops  # 16 tokens
    assert mixed13["qkv_proj"].flops == pytest.approx(mixed16["qkv_proj"].flops * 13 / 16)


def test_decode_step_times_agree_with_step_time_across_padding():
    cost = make_cost_model(RooflineParams(), M, H, 1)
    for n in (3, 13, 200, 257, 600):
        contexts = [n * c for c in (10, 100, 1000)]
        assert cost.decode_step_times(n, contexts) == [
            cost.step_time(BatchShape((), (), n, c, n)).total_s for c in contexts
        ]


def test_backwards_compatible_overhead_fields():
    p = RooflineParams(step_overhead_s=1e-3, per_seq_overhead_s=1e-5)
    ops = make_cost_model(p, M, H, 1).breakdown(decode(8)).ops
    assert ops["cpu_overhead"].seconds == pytest.approx(1e-3 + 8e-5)


def _one_request(prompt: int, **client: float):
    cfg = validate_scenario(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "cost_model": {"kind": "roofline"},
            "workload": {
                "num_requests": 1,
                "lengths": {
                    "kind": "independent",
                    "prompt": {"kind": "fixed", "tokens": prompt},
                    "output": {"kind": "fixed", "tokens": 4},
                },
            },
        }
        | ({"client": client} if client else {})
    )
    sim = build(cfg)
    return sim, sim.run()


def test_ttft_at_zero_load_is_the_front_end_plus_the_prefill_step():
    prompt = 1000
    sim, result = _one_request(prompt)
    client = validate_scenario({}).client
    assert client.ingest_delay_s > 0 and client.tokenize_s_per_token > 0
    front_end = client.ingest_delay_s + client.tokenize_s_per_token * prompt + client.stream_delay_s
    cost = sim.replicas[0].engines[0].cost_model
    prefill = cost.step_time(BatchShape((prompt,), (0,), num_sampled_tokens=1)).total_s
    ttft = float(result.requests["ttft_s"].iloc[0])
    assert ttft == pytest.approx(front_end + prefill, rel=1e-9)
    # and without the client's delays, the prefill step alone
    _, bare = _one_request(prompt, ingest_delay_s=0.0, tokenize_s_per_token=0.0, stream_delay_s=0.0)
    assert float(bare.requests["ttft_s"].iloc[0]) == pytest.approx(prefill, rel=1e-9)


# -- the engine's CPU time beside the GPU's (async scheduling, overlap schedulers) -----------------


@pytest.mark.parametrize("kind", ["roofline", "silicon"])
def test_overlapped_cpu_time_hides_behind_the_gpu_and_shows_when_longer(kind):
    """With async scheduling a step takes the longer of its GPU and CPU times: the CPU work of a 70B decode step
    (4.2 ms at 64 sequences, tp 4) hides behind its GPU time; an 8B decode of 512 short sequences is CPU-bound."""
    serial = {"kind": kind, "cpu_overlap": False} if kind == "roofline" else {"kind": kind}
    overlapped = {"kind": kind, "cpu_overlap": True} if kind == "roofline" else {"kind": kind}
    if kind == "silicon":
        serial["roofline"] = {"cpu_overlap": False}
        overlapped["roofline"] = {"cpu_overlap": True}
    cfg = validate_scenario({"cost_model": serial})
    par = validate_scenario({"cost_model": overlapped})
    for model, tp, n, context in ((model_presets()["llama-3.1-70b"], 4, 64, 1000), (M, 1, 512, 100)):
        shape = BatchShape(num_decode_seqs=n, decode_context_tokens=n * context, num_sampled_tokens=n)
        a = make_cost_model(cfg.cost_model, model, H, tp).breakdown(shape)
        b = make_cost_model(par.cost_model, model, H, tp).breakdown(shape)
        cpu = a.ops["cpu_overhead"].seconds
        gpu = a.total_s - cpu
        assert a.total_s == pytest.approx(gpu + cpu)
        assert b.total_s == pytest.approx(max(gpu, cpu))
    assert cpu > gpu  # the last case: 512 sequences of 8B at 100 tokens, CPU-bound even overlapped


@pytest.mark.parametrize("kind", ["roofline", "silicon"])
def test_overlapped_decode_step_times_equal_step_time_bit_for_bit(kind):
    params = (
        {"kind": kind, "cpu_overlap": True} if kind == "roofline" else {"kind": kind, "roofline": {"cpu_overlap": True}}
    )
    cost = make_cost_model(validate_scenario({"cost_model": params}).cost_model, M, H)
    for n in (1, 8, 200, 512):
        contexts = [n * c for c in range(1, 80, 3)]  # long enough for the numpy path too
        plain = [
            cost.step_time(BatchShape(num_decode_seqs=n, decode_context_tokens=c, num_sampled_tokens=n)).total_s
            for c in contexts
        ]
        assert cost.decode_step_times(n, contexts) == plain
        assert cost.decode_step_times(n, contexts[:5]) == plain[:5]


@pytest.mark.parametrize(
    ("policy", "overlaps"),
    [("vllm", True), ("sglang", True), ("trtllm", True), ("vllm_v0", False), ("sarathi", False), ("static", False)],
)
def test_the_policys_engine_decides_whether_cpu_time_overlaps(policy, overlaps):
    from simulator.build import setup_group

    cfg = validate_scenario({"policy": policy, "hardware": "h200"})
    assert setup_group(cfg, cfg.replica_groups()[0], 0, None).cost_model.roofline.cpu_overlap is overlaps
    cfg = validate_scenario({"policy": policy, "cost_model": {"kind": "roofline", "cpu_overlap": False}})
    assert setup_group(cfg, cfg.replica_groups()[0], 0, None).cost_model.cpu_overlap is False  # the user's stands


def test_a_pipeline_overlaps_the_cpu_time_with_its_first_stage():
    shape = BatchShape(num_decode_seqs=64, decode_context_tokens=64 * 1000, num_sampled_tokens=64)
    serial = make_cost_model(RooflineParams(cpu_overlap=False), M, H, 1, 2).step_time(shape).stage_s
    overlapped = make_cost_model(RooflineParams(cpu_overlap=True), M, H, 1, 2).step_time(shape).stage_s
    cpu = engine_overhead_s(EngineOverheadParams(), 64, 1)
    assert overlapped[1] == serial[1]
    assert overlapped[0] == pytest.approx(max(serial[0] - cpu, cpu))
