"""FP8 quantization and the KV-cache dtype as deployment settings (vLLM's names)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import servesim
from simulator.build import build, deployed_model, setup_group
from simulator.config.hf_config import model_spec_from_hf_config
from simulator.config.presets import hardware_presets, model_presets
from simulator.config.scenario import validate_scenario
from simulator.config.specs import ModelSpec
from simulator.cost import BatchShape
from simulator.cost.profile import parse_profile
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams
from simulator.cost.roofline import RooflineCostModel, RooflineParams
from tests.simulator.cost.test_profiled import make_profile

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")
M = model_presets()["llama-3.1-8b"]
FP8 = deployed_model(M, "fp8")
HW = hardware_presets()


def setup(**fields):
    cfg = validate_scenario(fields)
    return setup_group(cfg, cfg.replica_groups()[0], 0, None)


# -- the model spec -----------------------------------------------------------------------------


def test_fp8_needs_one_byte_weights():
    with pytest.raises(ValueError, match=r"quantization 'fp8' stores weights in 1 bytes: weight_bytes must be 1"):
        ModelSpec(**(M.model_dump() | {"quantization": "fp8"}))
    assert FP8.quantization == "fp8" and FP8.weight_bytes == 1 and FP8.kv_cache_bytes == 2


def test_fp8_halves_the_linear_weights_and_keeps_embedding_and_lm_head_16_bit():
    embedding = 2 * M.vocab_size * M.hidden_size  # embedding and untied LM head
    assert FP8.weight_bytes_total() == (M.num_params() - embedding) * 1 + embedding * 2
    assert 0.5 < FP8.weight_bytes_total() / M.weight_bytes_total() < 0.6
    # without quantization, weight_bytes is the plain low-level override of every weight
    one_byte = M.model_copy(update={"weight_bytes": 1.0})
    assert one_byte.weight_bytes_total() == M.num_params()


def test_deployed_model_applies_kv_cache_dtype():
    assert deployed_model(M, None) is M
    assert deployed_model(M, None, "fp8").kv_cache_bytes == 1
    assert deployed_model(M, None, "fp8").kv_bytes_per_token() == M.kv_bytes_per_token() / 2
    fp32_kv = M.model_copy(update={"kv_cache_bytes": 4.0})
    assert deployed_model(fp32_kv, None, "bfloat16").kv_cache_bytes == 2
    assert deployed_model(fp32_kv, None, "float16").kv_cache_bytes == 2
    assert deployed_model(fp32_kv, None, "auto").kv_cache_bytes == 4


# -- KV capacity --------------------------------------------------------------------------------


def test_fp8_weights_free_memory_for_kv_and_fp8_kv_doubles_the_blocks():
    base = setup(model="llama-3.1-8b", hardware="h100-sxm")
    quant = setup(model="llama-3.1-8b", hardware="h100-sxm", quantization="fp8")
    kv8 = setup(model="llama-3.1-8b", hardware="h100-sxm", kv_cache={"dtype": "fp8"})
    both = setup(model="llama-3.1-8b", hardware="h100-sxm", quantization="fp8", kv_cache={"dtype": "fp8"})
    assert quant.model.weight_bytes == 1 and quant.model.quantization == "fp8"
    # the weights saved become KV memory, block for block
    saved = M.weight_bytes_total() - FP8.weight_bytes_total()
    assert quant.memory.kv_bytes - base.memory.kv_bytes == pytest.approx(saved)
    assert quant.num_blocks == int(quant.memory.kv_bytes // base.memory.block_bytes) > base.num_blocks
    # 1-byte KV: half the block bytes, twice the blocks in the same memory
    assert kv8.memory.block_bytes == base.memory.block_bytes / 2
    assert kv8.num_blocks in (2 * base.num_blocks, 2 * base.num_blocks + 1)
    assert both.num_blocks in (2 * quant.num_blocks, 2 * quant.num_blocks + 1)


def test_a_run_reports_the_blocks_and_the_applied_model():
    workload = {"num_requests": 20}
    base = servesim.run(servesim.scenario(workload=workload))
    fp8 = servesim.run(servesim.scenario(workload=workload, quantization="fp8", kv_cache={"dtype": "fp8"}))
    assert fp8.summary["num_kv_blocks"] > 2 * base.summary["num_kv_blocks"]
    assert fp8.summary["completed"] == 20
    assert fp8.config["model"]["quantization"] == "fp8" and fp8.config["model"]["weight_bytes"] == 1
    assert fp8.config["model"]["kv_cache_bytes"] == 1
    assert fp8.config["resolved_groups"][0]["model"]["weight_bytes"] == 1
    # prefill-heavy: FP8 GEMMs on an H100 shorten the steps
    assert fp8.summary["mean_ttft_ms"] < base.summary["mean_ttft_ms"]


def test_a_group_quantization_overrides_the_scenarios():
    cfg = validate_scenario(
        {
            "quantization": "fp8",
            "groups": [{"name": "a", "count": 1}, {"name": "b", "count": 1, "hardware": "a100-80gb"}],
        }
    )
    a, b = (setup_group(cfg, g, i, None) for i, g in enumerate(cfg.replica_groups()))
    assert a.model.quantization == b.model.quantization == "fp8"
    cfg = validate_scenario({"groups": [{"count": 1}, {"count": 1, "quantization": "fp8"}]})
    a, b = (setup_group(cfg, g, i, None) for i, g in enumerate(cfg.replica_groups()))
    assert a.model.quantization is None and a.model.weight_bytes == 2
    assert b.model.quantization == "fp8" and b.model.weight_bytes == 1


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match=r"kv_cache.dtype"):
        validate_scenario({"kv_cache": {"dtype": "int4"}})
    with pytest.raises(ValueError, match=r"quantization"):
        validate_scenario({"quantization": "awq"})


# -- calibration profiles -----------------------------------------------------------------------


def test_a_bf16_profile_is_refused_for_an_fp8_model():
    profile = make_profile()
    fp8 = deployed_model(profile.model, "fp8")
    with pytest.raises(ValueError, match=r"weight_bytes 2.0 != 1.0; quantization None != fp8"):
        ProfiledCostModel(ProfiledParams(), fp8, profile.hardware, 1, profile=profile)


def test_a_profile_written_before_quantization_still_loads():
    data = json.loads(make_profile().model_dump_json())
    del data["model"]["quantization"]
    assert parse_profile(data).model.quantization is None


# -- Hugging Face config.json -------------------------------------------------------------------

LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def hf(tmp_path, **fields) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA | fields))
    return path


@pytest.mark.parametrize(
    "qc",
    [
        {"quant_method": "fp8", "activation_scheme": "dynamic"},
        {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "activation_scheme": "dynamic"},
        {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
                    "input_activations": {"num_bits": 8, "type": "float", "dynamic": True, "strategy": "token"},
                }
            },
            "ignore": ["lm_head"],
        },
    ],
    ids=["fp8", "deepseek-block-fp8", "compressed-tensors-fp8"],
)
def test_an_fp8_quantization_config_gives_an_fp8_spec(tmp_path, qc):
    spec = model_spec_from_hf_config(hf(tmp_path, quantization_config=qc))
    # DeepSeek-V3's checkpoints scale 128 x 128 blocks (weight_block_size): block-wise FP8, read with its own kernels
    expected = "fp8_block" if "weight_block_size" in qc else "fp8"
    assert spec.quantization == expected and spec.weight_bytes == 1 and spec.kv_cache_bytes == 2
    assert spec.num_params() == M.num_params()


def test_no_quantization_config_leaves_the_spec_unquantized(tmp_path):
    spec = model_spec_from_hf_config(hf(tmp_path))
    assert spec.quantization is None and spec.weight_bytes == 2


@pytest.mark.parametrize(
    ("qc", "method"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "'awq'"),
        ({"quant_method": "gptq", "bits": 4}, "'gptq'"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "'bitsandbytes'"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}},
            },
            "'compressed-tensors' with weights other than 8-bit or NVFP4 float, or INT4 experts",
        ),
    ],
)
def test_other_quantization_methods_are_refused_naming_method_and_file(tmp_path, qc, method):
    path = hf(tmp_path, quantization_config=qc)
    with pytest.raises(ValueError) as exc:
        model_spec_from_hf_config(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: quantization_config.quant_method {method} is not modelled by servesim")
    assert "(it models fp8, fp8_block, nvfp4, mxfp4, int4_wo)" in text and "\n" not in text


@pytest.mark.parametrize(
    ("qc", "expected", "weight_bytes"),
    [
        ({"quant_method": "mxfp4"}, "mxfp4", 0.53125),  # gpt-oss: 4 bits + an E8M0 scale per 32
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            },
            "nvfp4",
            0.5625,  # 4 bits + an E4M3 scale per 16
        ),
    ],
    ids=["mxfp4", "compressed-tensors-nvfp4"],
)
def test_four_bit_float_checkpoints_read_as_their_format(tmp_path, qc, expected, weight_bytes):
    spec = model_spec_from_hf_config(hf(tmp_path, quantization_config=qc))
    assert spec.quantization == expected and spec.weight_bytes == weight_bytes


# -- the roofline -------------------------------------------------------------------------------

PREFILL = BatchShape((8192,), (0,), num_sampled_tokens=1)
DECODE = BatchShape(num_decode_seqs=1, decode_context_tokens=1000, num_sampled_tokens=1)


def ops(model, hardware, shape=PREFILL):
    return RooflineCostModel(RooflineParams(), model, HW[hardware]).breakdown(shape).ops


def test_fp8_gemms_run_at_the_fp8_rate_on_h100():
    bf16, fp8 = ops(M, "h100-sxm"), ops(FP8, "h100-sxm")
    ratio = fp8["qkv_proj"].seconds / bf16["qkv_proj"].seconds
    assert ratio == pytest.approx(HW["h100-sxm"].flops_per_s / HW["h100-sxm"].fp8_flops_per_s, rel=0.02)
    for op in ("o_proj", "mlp_gate_up", "mlp_down"):
        assert fp8[op].seconds < 0.52 * bf16[op].seconds
    # attention and the (unquantized) LM head keep their bf16 time
    assert fp8["attn_prefill"].seconds == bf16["attn_prefill"].seconds
    assert fp8["lm_head"].seconds == bf16["lm_head"].seconds
    assert fp8["qkv_proj"].flops == bf16["qkv_proj"].flops


def test_without_fp8_tensor_cores_only_the_weight_bytes_change():
    assert HW["a100-80gb"].fp8_flops_per_s is None
    bf16, fp8 = ops(M, "a100-80gb"), ops(FP8, "a100-80gb")
    assert fp8["qkv_proj"].seconds == bf16["qkv_proj"].seconds  # compute-bound at the bf16 rate
    qkv_weights = M.hidden_size * (M.q_size + 2 * M.kv_size) * M.num_layers
    assert bf16["qkv_proj"].bytes - fp8["qkv_proj"].bytes == qkv_weights
    # decode reads the weights: weight-only FP8 (Marlin) is faster there
    dec_bf16, dec_fp8 = ops(M, "a100-80gb", DECODE), ops(FP8, "a100-80gb", DECODE)
    assert dec_fp8["mlp_down"].seconds < 0.55 * dec_bf16["mlp_down"].seconds


@pytest.mark.parametrize("cost_model", ["roofline", None])
def test_the_cost_model_of_a_run_receives_the_deployed_spec(cost_model):
    fields = {"quantization": "fp8", "kv_cache": {"dtype": "fp8"}, "workload": {"num_requests": 5}}
    if cost_model is not None:  # None: the scenario's default cost model
        fields["cost_model"] = cost_model
    sim = build(validate_scenario(fields))
    model = sim.replicas[0].engines[0].cost_model.model
    assert model.quantization == "fp8" and model.weight_bytes == 1 and model.kv_cache_bytes == 1


# -- the command line ---------------------------------------------------------------------------


def cli(*args, cwd=None):
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cli_runs_fp8_and_config_json_shows_the_applied_spec(tmp_path):
    out = tmp_path / "out"
    proc = cli(
        "run", "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--num-requests", 20, "--no-report", "--quiet",
        "--out", out,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"] == "fp8" and config["kv_cache"]["dtype"] == "fp8"
    assert config["model"]["weight_bytes"] == 1 and config["model"]["quantization"] == "fp8"
    assert config["model"]["kv_cache_bytes"] == 1
    assert json.loads((out / "summary.json").read_text())["completed"] == 20


@pytest.mark.parametrize(("flag", "value"), [("--kv-cache-dtype", "bogus"), ("--quantization", "int4")])
def test_cli_bad_value_is_one_line_and_exit_2(tmp_path, flag, value):
    proc = cli("run", flag, value, "--num-requests", 5, "--no-report", "--quiet", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and repr(value) in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists()


def test_mxfp4_quantizes_the_routed_experts_only():
    """gpt-oss's config keeps self_attn, the router, the embedding and the LM head in bf16
    (quantization_config.modules_to_not_convert): only the routed experts are 4.25-bit."""
    from simulator.config.presets import resolve_model

    gptoss = resolve_model("openai/gpt-oss-120b")
    assert gptoss.quantization == "mxfp4" and gptoss.dense_weight_bytes == 2.0
    experts = gptoss.routed_expert_params()
    embedding = gptoss.vocab_size * gptoss.hidden_size * 2
    rest = gptoss.num_params() - experts - embedding
    assert gptoss.weight_bytes_total() == experts * 0.53125 + rest * 2.0 + embedding * 2.0
    # the attention projections read bf16 weights in a decode step: the same bytes as the unquantized model's
    bf16 = ModelSpec.model_validate(gptoss.model_dump() | {"quantization": None, "weight_bytes": 2.0})
    decode = BatchShape(num_decode_seqs=4, decode_context_tokens=4000, num_sampled_tokens=4)
    ops = RooflineCostModel(RooflineParams(), gptoss, HW["h200"], 1).breakdown(decode).ops
    ref = RooflineCostModel(RooflineParams(), bf16, HW["h200"], 1).breakdown(decode).ops
    assert ops["qkv_proj"].bytes == ref["qkv_proj"].bytes and ops["o_proj"].bytes == ref["o_proj"].bytes
    assert ops["mlp_gate_up"].bytes < 0.3 * ref["mlp_gate_up"].bytes
    # fp8 covers every linear: its dense bytes are the format's
    assert FP8.dense_weight_bytes == 1.0


def test_each_engine_reads_its_own_mxfp4_moe_kernel_on_blackwell():
    """TensorRT-LLM's TRTLLM MoE backend runs gpt-oss's experts W4A8 (MXFP8 activations) on Blackwell, vLLM's
    default FlashInfer kernel W4A16; vLLM with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 is quantization mxfp4_mxfp8."""
    from simulator.config.presets import resolve_model
    from simulator.cost.silicon import SiliconCostModel, SiliconParams

    gptoss = resolve_model("openai/gpt-oss-120b")
    decode = BatchShape(num_decode_seqs=64, decode_context_tokens=64 * 1500, num_sampled_tokens=64)

    def moe_s(framework, model=gptoss):
        cost = SiliconCostModel(SiliconParams(framework=framework), model, HW["b200"], 1)
        return cost.breakdown(decode).ops["mlp_gate_up"].seconds, cost.tables_of(decode)["mlp_gate_up"]

    trtllm, _ = moe_s("trtllm")
    vllm_w4a16, _ = moe_s("vllm")
    vllm_w4a8, _ = moe_s("vllm", deployed_model(gptoss, "mxfp4_mxfp8"))
    assert vllm_w4a8 < vllm_w4a16 and trtllm < vllm_w4a16


def test_kimis_int4_experts_are_read_and_priced_by_the_int4_kernels(tmp_path):
    """Kimi-K2.5's config nests its language model under text_config; its compressed-tensors quantization stores the
    routed experts in INT4 (groups of 32, bf16 scales: 4.5 bits) and ignores attention and the shared experts."""
    from simulator.config.presets import resolve_model
    from simulator.cost.silicon import SiliconCostModel, SiliconParams

    kimi = resolve_model("moonshotai/Kimi-K2.5")
    assert kimi.quantization == "int4_wo" and kimi.dense_weight_bytes == 2.0 and kimi.num_layers == 61
    experts = kimi.routed_expert_params()
    assert experts / 1e12 == pytest.approx(1.0, rel=0.06)  # Kimi K2: 1T parameters, nearly all in the experts
    assert kimi.weight_bytes_total() < 0.6 * experts + 2.0 * (kimi.num_params() - experts)
    decode = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 1500, num_sampled_tokens=8)
    cost = SiliconCostModel(SiliconParams(framework="vllm"), kimi, HW["h200"], 8)
    assert cost.sources(decode)["mlp_gate_up"].startswith("measured")  # the int4_wo MoE rows, not the roofline
    bf16 = ModelSpec.model_validate(kimi.model_dump() | {"quantization": None})
    unquantized = SiliconCostModel(SiliconParams(framework="vllm"), bf16, HW["h200"], 8)
    # a decode step's experts read a quarter of the bytes: the measured W4A16 kernel beats the bf16 one
    assert cost.step_time(decode).total_s < unquantized.step_time(decode).total_s
    moe = cost.breakdown(decode).ops["mlp_gate_up"].seconds
    assert moe < 0.6 * unquantized.breakdown(decode).ops["mlp_gate_up"].seconds


def test_an_experts_only_format_on_a_model_without_experts_is_one_line():
    for quantization in ("mxfp4", "mxfp4_mxfp8", "int4_wo"):
        with pytest.raises(ValueError, match=rf"^quantization {quantization} quantizes the routed experts only"):
            deployed_model(M, quantization)


def test_a_named_moe_kernel_reads_that_kernels_measurement_from_any_engine():
    """TensorRT-LLM's DeepSeek FP8 scripts on B200 run moe_config.backend TRTLLM: the TRT-LLM-gen kernels that SGLang's
    and vLLM's collectors measured (flashinfer_trtllm), where TensorRT-LLM's own table has DeepGEMM's only. At 8
    decode tokens the named kernel is the measured 0.06 ms a layer against DeepGEMM's 0.18 ms."""
    import pandas as pd

    from simulator.cost.silicon import SiliconCostModel, SiliconParams
    from simulator.cost.silicon.convert import moe_kernel_family
    from simulator.cost.silicon.tables import load_tables

    assert moe_kernel_family("sglang_flashinfer_trtllm_moe") == "trtllm_gen"
    assert moe_kernel_family("vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic") == "trtllm_gen"
    assert moe_kernel_family("deepgemm") == "deepgemm" and moe_kernel_family("vllm_fused_moe") == "triton"
    assert moe_kernel_family("moe_torch_flow_cutlass") == "cutlass" and moe_kernel_family("unknown") is None
    # OpenAI's triton_kernels (TensorRT-LLM's TRITON backend) apart from the engines' own fused-MoE Triton kernel
    assert moe_kernel_family("vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic") == "triton_kernels"
    assert moe_kernel_family("sglang_fused_moe_triton") == "triton"

    from simulator.config.presets import resolve_model

    deepseek = resolve_model("deepseek-ai/DeepSeek-R1")
    decode = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 2000, num_sampled_tokens=8)

    def moe_ms(**params):
        cost = SiliconCostModel(SiliconParams(framework="trtllm", **params), deepseek, HW["b200"], 8)
        ops = cost.breakdown(decode).ops
        return sum(ops[n].seconds for n in ("mlp_gate_up", "mlp_act", "mlp_down")) * 1e3

    fastest, named, deepgemm = moe_ms(), moe_ms(moe_kernel="trtllm_gen"), moe_ms(moe_kernel="deepgemm")
    assert named < 0.5 * fastest and deepgemm == fastest  # TensorRT-LLM's table measured DeepGEMM only
    # the named curve is SGLang's flashinfer_trtllm measurement of the shape, point for point
    tables = load_tables("b200_sxm", "trtllm")
    curve = tables.moe("moek_other/trtllm_gen/fp8_block/balanced/7168/2048/8/256/8/1")
    assert curve is not None
    root = tables.selection.tables.root / "moe" / "sglang"
    frame = pd.concat(pd.read_parquet(p) for p in sorted(root.glob("*/moe_perf.parquet")))
    row = frame[
        (frame.kernel_source == "sglang_flashinfer_trtllm_moe")
        & (frame.moe_dtype == "fp8_block")
        & (frame.distribution == "balanced")
        & (frame.hidden_size == 7168)
        & (frame.num_experts == 256)
        & (frame.moe_tp_size == 8)
        & (frame.moe_ep_size == 1)
        & (frame.num_tokens == 8)
    ]
    assert curve(8.0) == pytest.approx(row.latency.min() * 1e-3, rel=1e-6)
    # a family nobody measured for the shape: the fastest kernel, as without the setting
    assert moe_ms(moe_kernel="marlin") == fastest
