"""DeepSeek sparse attention (DSA: GLM-5, DeepSeek-V3.2): the indexer's fields read from config.json, its key cache
counted in KV memory, the top-k in the roofline, and the measured DSA module tables read by the silicon model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from simulator.config.hf_config import model_spec_from_hf_config
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.specs import ModelSpec
from simulator.cost.roofline import RooflineCostModel, RooflineParams, _top_k_pairs
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams
from simulator.cost.silicon.database import dependency_root
from simulator.cost.silicon.model import SiliconCostModel, dsa_architecture, is_deepseek_v3_mla

B200 = resolve_hardware("b200")
DATA = dependency_root()  # aiconfigurator-core's systems/data (a dependency the tests install)
assert DATA is not None
# By Hugging Face id: the local Hugging Face cache's config.json, else the one aiconfigurator-core ships.
GLM5 = resolve_model("zai-org/GLM-5")
DSV32 = resolve_model("deepseek-ai/DeepSeek-V3.2")
DSV3 = resolve_model("deepseek-ai/DeepSeek-V3")


def decode(n: int, ctx_per_seq: int) -> BatchShape:
    return BatchShape(num_decode_seqs=n, decode_context_tokens=n * ctx_per_seq, num_sampled_tokens=n)


def test_the_indexer_is_read_from_config_json_and_its_keys_take_kv_memory():
    assert (GLM5.index_n_heads, GLM5.index_head_dim, GLM5.index_topk) == (32, 128, 2048)
    assert GLM5.is_dsa and DSV32.is_dsa and not DSV3.is_dsa
    # per token and layer: the MLA latent (512 + 64 elements) and the indexer's FP8 key with a float32 scale per 128
    assert GLM5.indexer_key_bytes == 128 + 4
    kvb = GLM5.kv_cache_bytes
    assert GLM5.kv_bytes_per_token() == 78 * ((512 + 64) * kvb + 132)
    assert GLM5.kv_bytes_per_token_per_gpu(tp=8) == GLM5.kv_bytes_per_token()  # MLA: whole on every rank
    assert DSV3.kv_bytes_per_token() == 61 * (512 + 64) * DSV3.kv_cache_bytes


def test_a_partial_or_unmodelled_indexer_is_refused(tmp_path):
    cfg = json.loads((DATA.parent.parent / "model_configs/zai-org--GLM-5_config.json").read_text())
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(cfg | {"index_topk_freq": 4}))
    with pytest.raises(ValueError, match="index_topk_freq"):
        model_spec_from_hf_config(bad)
    bad.write_text(json.dumps({k: v for k, v in cfg.items() if k != "index_head_dim"}))
    with pytest.raises(ValueError, match="index_head_dim"):
        model_spec_from_hf_config(bad)
    llama = resolve_model("llama-3.1-8b").model_dump()
    with pytest.raises(ValueError, match="need MLA"):
        ModelSpec.model_validate(llama | {"index_n_heads": 8, "index_head_dim": 128, "index_topk": 8})
    with pytest.raises(ValueError, match="needs index_n_heads"):
        ModelSpec.model_validate(GLM5.model_dump() | {"index_n_heads": None})


def test_top_k_pairs():
    assert _top_k_pairs(100, 50, None) == 100 * 50 + 100 * 101 // 2
    assert _top_k_pairs(100, 50, 2048) == 100 * 50 + 100 * 101 // 2  # shorter than the top-k: every causal pair
    assert _top_k_pairs(10, 5000, 2048) == 10 * 2048  # a chunk past the top-k: top_k keys per query
    brute = sum(min(1000 + j, 2048) for j in range(1, 3001))
    assert _top_k_pairs(3000, 1000, 2048) == brute


def test_roofline_decode_reads_the_top_k_and_the_indexer_scores_every_key():
    c = RooflineCostModel(RooflineParams(), GLM5, B200, tp=8)
    dense = RooflineCostModel(
        RooflineParams(),
        GLM5.model_copy(update=dict.fromkeys(("index_n_heads", "index_head_dim", "index_topk"))),
        B200,
        tp=8,
    )
    short, long = decode(4, 1000), decode(4, 64000)
    # below the top-k the sparse read is the dense one, plus the indexer
    assert c.breakdown(short).ops["attn_decode"].bytes > dense.breakdown(short).ops["attn_decode"].bytes
    # far past it: 2048 latents a sequence instead of 64,000, plus 132 indexer bytes a key
    op = c.breakdown(long).ops["attn_decode"]
    latents = 4 * 2048 * 576 * GLM5.kv_cache_bytes * 78
    indexer = 4 * 64000 * 132 * 78
    assert latents + indexer < op.bytes < 1.2 * (latents + indexer)
    assert op.bytes < dense.breakdown(long).ops["attn_decode"].bytes


def test_glm5_attention_is_priced_by_the_measured_dsa_module():
    """GLM-5 on 8 x B200 under SGLang: attention (the indexer, its top-k, sparse MLA, the projections and o_proj)
    from SGLang 0.5.14's GLM-5 DSA module table, per layer as measured; DeepSeek-V3 keeps the MLA module."""
    assert dsa_architecture(GLM5) == "GlmMoeDsaForCausalLM" and not is_deepseek_v3_mla(GLM5)
    assert dsa_architecture(DSV32) == "DeepseekV32ForCausalLM" and not is_deepseek_v3_mla(DSV32)
    assert dsa_architecture(DSV3) is None and is_deepseek_v3_mla(DSV3)
    fp8 = GLM5.model_copy(update={"quantization": "fp8_block", "weight_bytes": 1.0, "kv_cache_bytes": 1.0})
    c = SiliconCostModel(SiliconParams(tables="b200_sxm", framework="sglang"), fp8, B200, tp=8)
    shape = decode(4, 1024)
    sources = c.sources(shape)
    assert sources["qkv_proj"] == sources["o_proj"] == "in the measured DSA module (attn_prefill, attn_decode)"
    assert sources["attn_decode"] == "measured"
    frame = pd.read_parquet(DATA / "b200_sxm/sparse_attention/sglang/0.5.14/dsa_generation_module_perf.parquet")
    row = frame[
        (frame.architecture == "GlmMoeDsaForCausalLM")
        & (frame.op_name == "dsa_generation_module")
        & (frame.kv_cache_dtype == "fp8")
        & (frame.gemm_type == "fp8_block")
        & (frame.num_heads == 8)
        & (frame.batch_size == 4)
        & (frame.step == 1024)
    ]
    assert len(row) == 1
    ms = float(row.latency.iloc[0])
    assert c.breakdown(shape).ops["attn_decode"].seconds == pytest.approx(ms * 1e-3 * 78, rel=1e-6)
    # the measured module is slower than the roofline's MLA without the indexer's kernels, and grows past the top-k
    # only by the indexer
    assert c.breakdown(decode(4, 65536)).ops["attn_decode"].seconds < 4 * c.breakdown(shape).ops["attn_decode"].seconds
    assert np.isfinite(c.step_time(BatchShape((8192,), (0,), num_sampled_tokens=1)).total_s)


def _served(model: str, hardware: str, policy: str, kv_dtype: str = "auto"):
    """The first group's deployed model spec and KV blocks for ``model`` at TP 8 (FP8 weights)."""
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    cfg = validate_scenario(
        {
            "model": model,
            "hardware": hardware,
            "parallelism": {"tp": 8},
            "policy": policy,
            "quantization": "fp8",
            "kv_cache": {"dtype": kv_dtype},
            "workload": {"num_requests": 4},
        }
    )
    group = build(cfg).resolved_config["resolved_groups"][0]
    return ModelSpec.model_validate(group["model"]), group["num_blocks_per_replica"]


def test_sglang_resolves_auto_for_a_dsa_model_by_the_gpus_compute_capability():
    # ServerArgs._set_default_nsa_kv_cache_dtype: fp8_e4m3 at SM >= 10, bfloat16 below, before the checkpoint is read
    assert B200.compute_major == 10 and resolve_hardware("h200").compute_major == 9
    on_b200, _ = _served("zai-org/GLM-5", "b200", "sglang")
    on_h200, _ = _served("zai-org/GLM-5", "h200", "sglang")
    assert on_b200.kv_cache_bytes == 1 and on_h200.kv_cache_bytes == 2
    # the other engines keep the checkpoint's bf16 under auto; a dense-attention MLA model is not touched
    assert _served("zai-org/GLM-5", "b200", "vllm")[0].kv_cache_bytes == 2
    assert _served("zai-org/GLM-5", "b200", "trtllm")[0].kv_cache_bytes == 2
    assert _served("deepseek-ai/DeepSeek-V3", "b200", "sglang")[0].kv_cache_bytes == 2
    # an explicit dtype is the user's
    assert _served("zai-org/GLM-5", "b200", "sglang", "bfloat16")[0].kv_cache_bytes == 2


def test_sglang_on_hopper_serves_a_declared_fp8_dsa_cache_in_bf16():
    from simulator.config.precision import served_kv_cache_dtype

    # SGLang turns auto into bfloat16 on SM 9 before ModelRunner reads a checkpoint's kv_cache_quant_algo
    assert served_kv_cache_dtype("auto", "sglang", sparse_mla=True, compute_major=9) == "bfloat16"
    assert served_kv_cache_dtype("auto", "sglang", sparse_mla=True, compute_major=12) == "fp8"
    assert served_kv_cache_dtype("auto", "sglang", sparse_mla=False, compute_major=10) == "auto"
    assert served_kv_cache_dtype("auto", "vllm", sparse_mla=True, compute_major=10) == "auto"
    # a GPU whose capability is not known keeps the scenario's (and so the checkpoint's) choice
    assert served_kv_cache_dtype("auto", "sglang", sparse_mla=True, compute_major=None) == "auto"
    assert served_kv_cache_dtype("fp8", "sglang", sparse_mla=True, compute_major=9) == "fp8"


def test_a_dsa_models_fp8_cache_takes_deepseeks_scaled_format_under_vllm_and_sglang():
    # FP8 latent (512 B), a float32 scale per 128 elements (16 B), the rotary key in bf16 (128 B): 656 B a token and
    # layer, plus the indexer's 132; TensorRT-LLM stores the latent and rope plainly in FP8 (576 B)
    for policy in ("vllm", "sglang"):
        spec, _ = _served("zai-org/GLM-5", "h200", policy, "fp8")
        assert spec.mla_scaled_fp8_cache and spec.mla_entry_bytes == 656
        assert spec.kv_bytes_per_token() == 78 * (656 + 132)
    spec, _ = _served("zai-org/GLM-5", "h200", "trtllm", "fp8")
    assert not spec.mla_scaled_fp8_cache and spec.kv_bytes_per_token() == 78 * (576 + 132)
    # DeepSeek-V3's dense MLA keeps the plain FP8 cache everywhere
    spec, _ = _served("deepseek-ai/DeepSeek-V3", "h200", "vllm", "fp8")
    assert not spec.mla_scaled_fp8_cache and spec.kv_bytes_per_token() == 61 * 576
    # the wider entry leaves fewer blocks in the same memory: 708 / 788 of them
    plain = GLM5.model_copy(update={"kv_cache_bytes": 1.0})
    scaled = plain.model_copy(update={"mla_scaled_fp8_cache": True})
    assert scaled.kv_bytes_per_token() / plain.kv_bytes_per_token() == pytest.approx(788 / 708)
    # bf16 has no scaled format, and the dump leaves the flag out unless it is set
    with pytest.raises(ValueError, match="mla_scaled_fp8_cache"):
        ModelSpec.model_validate(GLM5.model_dump() | {"kv_cache_bytes": 2.0, "mla_scaled_fp8_cache": True})
    assert "mla_scaled_fp8_cache" not in plain.model_dump() and scaled.model_dump()["mla_scaled_fp8_cache"]


def test_the_roofline_reads_the_scaled_entry():
    plain = GLM5.model_copy(update={"kv_cache_bytes": 1.0})
    scaled = plain.model_copy(update={"mla_scaled_fp8_cache": True})
    shape = decode(32, 8000)
    a = RooflineCostModel(RooflineParams(), plain, B200, tp=8).breakdown(shape).ops["attn_decode"]
    b = RooflineCostModel(RooflineParams(), scaled, B200, tp=8).breakdown(shape).ops["attn_decode"]
    # the top-k keys' entries and the new ones: 80 bytes more each
    assert b.bytes - a.bytes == pytest.approx(80 * (min(32 * 8000, 32 * 2048) + 32) * 78)
