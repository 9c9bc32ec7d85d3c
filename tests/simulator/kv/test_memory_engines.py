"""The KV capacity each engine gives, checked against its formula written out by hand.

Llama-3.1-70B with FP8 weights and FP8 KV on B200 at tp=2 throughout (two GPUs of one replica):
device memory 183,359 MiB (nvidia-smi's total, the b200 preset), 80 layers x 8 KV heads x 128 x (K, V)
x 1 byte / 2 GPUs = 81,920 bytes of KV per token per GPU.
"""

import pytest

from simulator.build import build, deployed_model
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.kv.memory import (
    plan_memory,
    plan_sglang_memory,
    plan_trtllm_memory,
    sglang_mem_fraction_static,
    sglang_prefill_graph_count,
)

MIB = 2**20
B200_MIB = 183_359
B200 = B200_MIB * MIB
TP = 2
BLOCK = 16


@pytest.fixture(scope="module")
def llama70b_fp8():
    return deployed_model(resolve_model("meta-llama/Meta-Llama-3.1-70B"), "fp8", "fp8")


def weights_per_gpu(model) -> float:
    return model.weight_bytes_total() / TP


def reserve(model, tokens: int = 8192) -> float:
    """servesim's activation and runtime reserve (default_reserve_bytes) for 70B at tp=2, written out: 1 GiB,
    bf16 activations of a ``tokens`` step (4 x hidden 8192 + 3 x intermediate 28672 / 2 per token), fp32 logits
    of 256 rows of the 128,256-token vocabulary / 2."""
    assert (model.hidden_size, model.intermediate_size, model.vocab_size) == (8192, 28672, 128256)
    return 2**30 + tokens * (4 * 8192 + 3 * 28672 / 2) * 2 + 256 * 128256 / 2 * 4


def test_the_model_and_device_figures(llama70b_fp8):
    assert resolve_hardware("b200").memory_bytes == B200
    assert llama70b_fp8.kv_bytes_per_token_per_gpu(TP) == 80 * 8 * 128 * 2 * 1 / 2 == 81920


def test_each_engine_sizes_the_kv_cache_by_its_own_formula(llama70b_fp8):
    m, hw = llama70b_fp8, resolve_hardware("b200")
    w = weights_per_gpu(m)
    # vLLM (vllm/v1/worker/gpu_worker.py determine_available_memory): total x gpu_memory_utilization (0.9)
    # less weights and the profiled peak (servesim's reserve for a max_num_batched_tokens = 8192 step)
    vllm = plan_memory(m, hw, TP, BLOCK, 0.9)
    assert vllm.kv_bytes == pytest.approx(B200 * 0.9 - w - reserve(m))
    # SGLang (arg_groups/memory_hook.py handle_gpu_memory_settings): B200's defaults, chunked_prefill_size 16384,
    # decode CUDA graphs to batch 512; reserved MiB = 512 + 1.5 x 16384 + tp 2 / 8 x 1024 + 2 x 512
    # + 8 x 74 prefill graph sizes (4..16384); mem_fraction_static = round((183359 - reserved) / 183359, 3);
    # KV = fraction x memory - weights (kv_cache_configurator.py _profile_available_bytes)
    reserved_mib = 512 + 1.5 * 16384 + 2 / 8 * 1024 + 2 * 512 + 8 * 74
    assert reserved_mib == 26960
    fraction = round((B200_MIB - reserved_mib) / B200_MIB, 3)
    assert fraction == 0.853
    sglang = plan_sglang_memory(m, hw, TP, BLOCK, chunked_prefill_size=16384)
    assert sglang.kv_bytes == pytest.approx(0.853 * B200 - w)
    # TensorRT-LLM (_torch/pyexecutor/_util.py KvCacheCreator._cal_max_memory): free_gpu_memory_fraction (0.9)
    # of what the weights and a profiling step of max_num_tokens = 8192 leave
    trtllm = plan_trtllm_memory(m, hw, TP, BLOCK)
    assert trtllm.kv_bytes == pytest.approx(0.9 * (B200 - w - reserve(m)))
    for plan in (vllm, sglang, trtllm):
        assert plan.num_blocks == int(plan.kv_bytes // (81920 * BLOCK))
        assert plan.kv_bytes == pytest.approx(plan.usable_bytes - plan.weight_bytes - plan.reserve_bytes)
    # SGLang keeps 14.7% of the GPU out of its pool, more than vLLM's 10% less the reserve; TensorRT-LLM's
    # 10% is of the memory left after the weights, so it gives the most
    assert sglang.kv_bytes < vllm.kv_bytes < trtllm.kv_bytes
    assert len({sglang.num_blocks, vllm.num_blocks, trtllm.num_blocks}) == 3


def test_tensorrt_llm_reserves_for_its_own_max_num_tokens(llama70b_fp8):
    m, hw = llama70b_fp8, resolve_hardware("b200")
    plan = plan_trtllm_memory(m, hw, TP, BLOCK, max_num_tokens=16384)
    assert plan.reserve_bytes == pytest.approx(reserve(m, 16384))
    assert plan.kv_bytes == pytest.approx(0.9 * (B200 - weights_per_gpu(m) - reserve(m, 16384)))


def test_prefill_graph_sizes_as_sglang_generates_them():
    # 4..32 by 4 (8), 48..256 by 16 (14), 288..512 by 32 (8), 576..1024 by 64 (8), 1280..4096 by 256 (12),
    # then 4608.. by 512: 8 up to 8192, 24 up to 16384
    assert sglang_prefill_graph_count(8192) == 8 + 14 + 8 + 8 + 12 + 8 == 58
    assert sglang_prefill_graph_count(16384) == 74
    assert sglang_prefill_graph_count(2048) == 8 + 14 + 8 + 8 + 4
    assert sglang_prefill_graph_count(0) == 0


@pytest.mark.parametrize(
    ("hardware", "gpu_mib", "decode_bs", "expected"),
    [
        ("h100-sxm", 81_559, 256, 0.830),  # (81559 - 13904) / 81559 = 0.8295
        ("h200", 143_771, 256, 0.903),  # (143771 - 13904) / 143771 = 0.9033
        ("b200", 183_359, 512, 0.921),  # (183359 - 14416) / 183359 = 0.9214
    ],
)
def test_sglang_default_fraction_at_a_chunked_prefill_size_of_8192(hardware, gpu_mib, decode_bs, expected):
    memory = resolve_hardware(hardware).memory_bytes
    assert memory == gpu_mib * MIB
    # reserved MiB at tp 1: 512 + 1.5 x 8192 + 1 / 8 x 1024 + 2 x decode batch + 8 x 58 prefill graph sizes
    reserved = 512 + 1.5 * 8192 + 1 / 8 * 1024 + 2 * decode_bs + 8 * 58
    assert round((gpu_mib - reserved) / gpu_mib, 3) == expected
    assert sglang_mem_fraction_static(memory, 8192, tp=1) == expected


def test_sglang_default_fraction_floor_mla_and_running_cap():
    h100, h200, b200 = (resolve_hardware(n).memory_bytes for n in ("h100-sxm", "h200", "b200"))
    # a 2048-token chunk reserves 512 + 3072 + 128 + 512 + 8 x 42 = 4560 MiB: the 10 GiB floor of a > 60 GiB GPU
    assert sglang_mem_fraction_static(h100, 2048, tp=1) == round((81_559 - 10_240) / 81_559, 3) == 0.874
    # MLA (DeepSeek) at tp 8 on H200: 512 + 12288 + 1024 + 2 x 512 + 1.5 GiB of prefill graphs = 16384 MiB
    assert sglang_mem_fraction_static(h200, 8192, tp=8, mla=True) == round((143_771 - 16_384) / 143_771, 3) == 0.886
    # max_running_requests 64 caps the decode graphs' batch: 2 x 64 instead of 2 x 512 MiB
    reserved = 512 + 1.5 * 16384 + 256 + 2 * 64 + 8 * 74
    assert sglang_mem_fraction_static(b200, 16384, tp=2, max_running_requests=64) == round(
        (B200_MIB - reserved) / B200_MIB, 3
    )


def scenario(kind: str, **kv) -> dict:
    return {
        "model": "meta-llama/Meta-Llama-3.1-70B",
        "hardware": "b200",
        "parallelism": {"tp": TP},
        "quantization": "fp8",
        "policy": {"kind": kind},
        "kv_cache": {"dtype": "fp8", **kv},
        "workload": {"num_requests": 10},
    }


def built_blocks(data: dict) -> int:
    return build(validate_scenario(data)).resolved_config["resolved_groups"][0]["num_blocks_per_replica"]


def test_explicit_fractions_are_honoured_end_to_end(llama70b_fp8):
    w, block = weights_per_gpu(llama70b_fp8), 81920 * BLOCK
    assert built_blocks(scenario("sglang", mem_fraction_static=0.82)) == int((0.82 * B200 - w) // block)
    assert built_blocks(scenario("trtllm", free_gpu_memory_fraction=0.8)) == int(
        (0.8 * (B200 - w - reserve(llama70b_fp8))) // block
    )
    # the policy's own settings reach the formula: TensorRT-LLM's max_num_tokens, SGLang's chunked prefill size
    trt = scenario("trtllm", free_gpu_memory_fraction=0.85) | {"policy": {"kind": "trtllm", "max_num_tokens": 16384}}
    assert built_blocks(trt) == int((0.85 * (B200 - w - reserve(llama70b_fp8, 16384))) // block)
    sgl = scenario("sglang") | {"policy": {"kind": "sglang", "chunked_prefill_size": 8192}}
    # reserved MiB = 512 + 1.5 x 8192 + 2 / 8 x 1024 + 2 x 512 + 8 x 58 = 14544: round(168815 / 183359, 3) = 0.921
    assert round((B200_MIB - (512 + 1.5 * 8192 + 256 + 1024 + 8 * 58)) / B200_MIB, 3) == 0.921
    assert built_blocks(sgl) == int((0.921 * B200 - w) // block)
    # and the defaults: vLLM's numbers are what they were
    assert built_blocks(scenario("vllm")) == int((0.9 * B200 - w - reserve(llama70b_fp8)) // block)


@pytest.mark.parametrize(
    ("kind", "kv", "message"),
    [
        ("vllm", {"mem_fraction_static": 0.85}, "kv_cache.mem_fraction_static is SGLang's flag; policy vllm reads "),
        ("trtllm", {"mem_fraction_static": 0.85}, "policy trtllm reads free_gpu_memory_fraction"),
        ("sglang", {"free_gpu_memory_fraction": 0.8}, "kv_cache.free_gpu_memory_fraction is TensorRT-LLM's flag"),
        ("sglang", {"gpu_memory_utilization": 0.95}, "gpu_memory_utilization is vLLM's flag; policy sglang reads "),
        ("trtllm", {"gpu_memory_utilization": 0.8}, "policy trtllm reads free_gpu_memory_fraction"),
        ("sglang", {"reserve_bytes": 2**30}, "kv_cache.reserve_bytes is not read by policy sglang"),
    ],
)
def test_a_flag_the_engine_does_not_read_is_refused_in_one_line(kind, kv, message):
    with pytest.raises(ValueError, match=message) as err:
        validate_scenario(scenario(kind, **kv))
    assert "\n" not in str(err.value)


def test_out_of_range_fractions_are_refused():
    for kv in ({"mem_fraction_static": 0}, {"mem_fraction_static": 1.5}, {"free_gpu_memory_fraction": -0.1}):
        with pytest.raises(ValueError, match=next(iter(kv))):
            validate_scenario(scenario("sglang" if "mem" in next(iter(kv)) else "trtllm", **kv))
    assert validate_scenario(scenario("sglang", mem_fraction_static=1)).kv_cache.mem_fraction_static == 1


def test_a_full_dump_of_a_vllm_config_still_validates_for_another_engine():
    # servesim compare re-validates the scenario's full dump (gpu_memory_utilization 0.9 written out) per policy
    dumped = validate_scenario(scenario("vllm")).model_dump(mode="json")
    assert validate_scenario(dumped | {"policy": {"kind": "sglang"}}).policy.kind == "sglang"


def test_the_error_names_the_engine_figures(llama70b_fp8):
    m, hw = resolve_model("meta-llama/Meta-Llama-3.1-70B"), resolve_hardware("h100-sxm")  # bf16: 131 GiB
    with pytest.raises(ValueError, match=r"does not fit .* of the .* GiB static pool \(memory x mem_fraction_static"):
        plan_sglang_memory(m, hw, 1, BLOCK, chunked_prefill_size=8192)
    with pytest.raises(ValueError, match=r"does not fit .* leaving -.* GiB free \(KV: free_gpu_memory_fraction 0.9"):
        plan_trtllm_memory(m, hw, 1, BLOCK)
