"""config.json readers for DeepSeek-V3, Qwen3-MoE and Mixtral; model folders; parameter counts; MLA KV.

The configs are the Hugging Face ones aiconfigurator-core ships (by id), not copies kept here.
"""

from __future__ import annotations

import json
import shutil

import pytest

from simulator.config.hf_config import model_spec_from_hf_config
from simulator.config.hf_hub import find_hf_model
from simulator.config.presets import model_presets, resolve_model

# The Hugging Face ids of the models read here.
IDS = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
}


@pytest.fixture(autouse=True)
def no_hf_cache(tmp_path, monkeypatch):
    """Read from aiconfigurator-core's model_configs whatever this machine's HF cache holds."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def config_path(name: str):
    return find_hf_model(IDS[name]).config


def spec(name: str):
    return resolve_model(IDS[name])


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("deepseek-v3", 671.0, 37.0),  # DeepSeek-V3 report: 671B total, 37B activated per token
        ("qwen3-30b-a3b", 30.5, 3.3),  # Qwen3 model card: 30.5B total, 3.3B activated
        ("qwen3-235b-a22b", 235.0, 22.0),  # 235B total, 22B activated
        ("mixtral-8x7b", 46.7, 12.9),  # Mixtral paper: 47B total, 13B active
    ],
)
def test_parameter_counts(name, total_b, active_b):
    m = spec(name)
    assert m.num_params() / 1e9 == pytest.approx(total_b, rel=0.01)
    assert m.num_active_params() / 1e9 == pytest.approx(active_b, rel=0.03)


def test_deepseek_v3_fields():
    m = spec("deepseek-v3")
    assert (m.num_experts, m.num_experts_per_token, m.intermediate_size) == (256, 8, 2048)
    assert (m.num_shared_experts, m.num_dense_layers, m.dense_intermediate_size) == (1, 3, 18432)
    assert (m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim) == (
        512,
        1536,
        64,
        128,
        128,
    )
    assert m.quantization == "fp8_block" and m.weight_bytes == 1  # 128 x 128 block scales
    # vLLM's MLA cache: (kv_lora_rank + qk_rope_head_dim) x layers x bytes, whole on every TP rank
    assert m.kv_bytes_per_token() == (512 + 64) * 61 * 2
    assert m.kv_bytes_per_token_per_gpu(8) == m.kv_bytes_per_token()
    assert m.kv_bytes_per_token_per_gpu(8, pp=2) == (512 + 64) * 31 * 2


def test_mixtral_matches_the_preset():
    m, preset = spec("mixtral-8x7b"), model_presets()["mixtral-8x7b"]
    assert m.num_params() == preset.num_params()
    assert m.kv_bytes_per_token() == preset.kv_bytes_per_token()


def test_qwen_dense_layers(tmp_path):
    cfg = json.loads(config_path("qwen3-30b-a3b").read_text())
    cfg |= {"decoder_sparse_step": 2, "mlp_only_layers": [1]}  # layers 1, 3, 5, ... sparse; 1 forced dense
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    m = model_spec_from_hf_config(path)
    assert m.num_dense_layers == 48 - 23
    assert m.dense_intermediate_size == 6144


def test_qwen2_moe_shared_expert(tmp_path):
    cfg = json.loads(config_path("qwen3-30b-a3b").read_text())
    cfg |= {"model_type": "qwen2_moe", "shared_expert_intermediate_size": 5632}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    m = model_spec_from_hf_config(path)
    assert (m.num_shared_experts, m.shared_intermediate_size) == (1, 5632)
    assert m.num_params() - spec("qwen3-30b-a3b").num_params() == 48 * 3 * 2048 * 5632


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("n_routed_experts", "number of routed experts is missing: expected 'n_routed_experts'"),
        ("moe_intermediate_size", "missing field 'moe_intermediate_size'"),
        ("qk_rope_head_dim", "missing field 'qk_rope_head_dim'"),
    ],
)
def test_errors_name_the_missing_field(tmp_path, drop, message):
    cfg = json.loads(config_path("deepseek-v3").read_text())
    del cfg[drop]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=message) as err:
        model_spec_from_hf_config(path)
    assert str(path) in str(err.value)
    assert "exceeds num_experts (1)" not in str(err.value)


def test_a_model_folder_reads_its_config_json(tmp_path):
    folder = tmp_path / "deepseek-v3"
    folder.mkdir()
    shutil.copy(config_path("deepseek-v3"), folder / "config.json")
    from_folder = resolve_model(str(folder))
    assert from_folder == spec("deepseek-v3").model_copy(update={"name": "deepseek-v3", "source": None})
    assert resolve_model("deepseek-v3", base_dir=tmp_path).num_experts == 256  # a bare folder name
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: a folder without a config\.json"):
        resolve_model(str(tmp_path / "empty"))


def test_existing_presets_unchanged():
    for m in model_presets().values():
        assert not m.is_mla and m.num_dense_layers == 0 and m.num_shared_experts == 0


def test_expert_parallel_rules():
    m = spec("qwen3-30b-a3b")
    m.check_expert_parallel(4, 8)
    with pytest.raises(ValueError, match="must divide tp"):
        m.check_expert_parallel(4, 2)
    with pytest.raises(ValueError, match="does not divide the 128 routed experts"):
        m.check_expert_parallel(3, 3)
    with pytest.raises(ValueError, match="not an MoE model"):
        model_presets()["llama-3.1-8b"].check_expert_parallel(2, 2)
    # per GPU: E/ep whole experts split tp/ep ways; 1/tp of all routed expert weights at any ep
    assert m.expert_weight_bytes_per_gpu(8, ep=8) == m.routed_expert_params() * 2 / 8
    assert m.expert_weight_bytes_per_gpu(8, ep=8) < m.expert_weight_bytes_per_gpu(1)


def test_a_vision_language_config_reads_its_text_model(tmp_path):
    """Kimi-K2.5's config.json nests the language model under text_config (beside vision_config)."""
    text = json.loads(config_path("deepseek-v3").read_text())
    text.pop("quantization_config", None)
    wrapped = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": text}
    wrapped["vision_config"] = {"vt_num_hidden_layers": 27}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(wrapped))
    nested = model_spec_from_hf_config(path, name="wrapped")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(text))
    assert nested == model_spec_from_hf_config(plain, name="wrapped")
    assert nested.num_layers == 61 and nested.is_mla
