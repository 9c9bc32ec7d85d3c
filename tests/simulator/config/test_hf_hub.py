"""Models by Hugging Face id, offline: the local HF cache first, then aiconfigurator-core's model_configs, else
one line naming both places and the presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.build import deployed_model
from simulator.config.hf_hub import (
    dependency_model_configs,
    dependency_model_ids,
    find_hf_model,
    hf_hub_cache_dir,
    looks_like_hf_id,
)
from simulator.config.presets import model_presets, resolve_model
from tests.simulator.config.test_bad_numbers import run_refused


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path, monkeypatch) -> Path:
    """An HF cache of our own (empty until a test fills it), whatever this machine holds."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def dependency_config(hf_id: str) -> dict:
    return json.loads((dependency_model_configs() / f"{hf_id.replace('/', '--')}_config.json").read_text())


def cache_model(cache: Path, hf_id: str, config: dict, revision: str = "0123abcd", ref: bool = True) -> Path:
    """Lay ``config`` out as huggingface_hub caches a snapshot: models--org--name/{refs/main, snapshots/REV/}."""
    repo = cache / ("models--" + hf_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)
    return snapshot


def test_the_cache_is_read_first(empty_hf_cache):
    cfg = dependency_config("Qwen/Qwen3-30B-A3B") | {"num_hidden_layers": 24}  # not what the dependency has
    cache_model(empty_hf_cache, "Qwen/Qwen3-30B-A3B", cfg, revision="feedbeef")
    cache_model(empty_hf_cache, "Qwen/Qwen3-30B-A3B", cfg | {"num_hidden_layers": 12}, revision="oldrev", ref=False)
    m = resolve_model("Qwen/Qwen3-30B-A3B")
    assert m.num_layers == 24  # the revision refs/main names, not the other snapshot
    assert m.name == "Qwen/Qwen3-30B-A3B"
    assert m.source == "Hugging Face cache, Qwen/Qwen3-30B-A3B revision feedbeef"
    assert m.model_dump(mode="json")["source"] == m.source  # recorded in the resolved config


def test_a_cached_model_the_dependency_lacks(empty_hf_cache):
    cfg = json.loads((Path(__file__).resolve().parents[2] / "data" / "tiny_llama_config.json").read_text())
    cache_model(empty_hf_cache, "someone/tiny-llama", cfg, revision="c0ffee", ref=False)  # no refs/main: the one
    assert find_hf_model("someone/tiny-llama").config.parent.name == "c0ffee"
    assert resolve_model("someone/tiny-llama").num_layers == cfg["num_hidden_layers"]


def test_a_cached_modelopt_fp8_checkpoint_is_fp8(empty_hf_cache):
    snapshot = cache_model(empty_hf_cache, "someone/qwen3-fp8", dependency_config("Qwen/Qwen3-8B"))
    (snapshot / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    m = resolve_model("someone/qwen3-fp8")
    assert (m.quantization, m.weight_bytes, m.kv_cache_bytes) == ("fp8", 1.0, 2.0)
    (snapshot / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4"}}))
    m = resolve_model("someone/qwen3-fp8")
    assert (m.quantization, m.weight_bytes) == ("nvfp4", 0.5625)
    (snapshot / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "MIXED_PRECISION"}}))
    with pytest.raises(ValueError, match=r"hf_quant_config\.json: quantization\.quant_algo 'MIXED_PRECISION' is not"):
        resolve_model("someone/qwen3-fp8")


def test_a_modelopt_checkpoint_declaring_an_fp8_kv_cache_gets_one(empty_hf_cache):
    """vLLM, SGLang and TensorRT-LLM allocate the KV cache a ModelOpt checkpoint declares when --kv-cache-dtype is
    auto (their default): ``kv_cache_quant_algo`` in hf_quant_config.json, ``kv_cache_scheme`` inline."""
    snapshot = cache_model(empty_hf_cache, "someone/qwen3-fp8", dependency_config("Qwen/Qwen3-8B"))
    quant = snapshot / "hf_quant_config.json"
    quant.write_text(json.dumps({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}))
    m = resolve_model("someone/qwen3-fp8")
    assert (m.quantization, m.kv_cache_bytes) == ("nvfp4", 1.0)
    assert deployed_model(m, None).kv_cache_bytes == 1.0  # auto keeps the checkpoint's
    assert deployed_model(m, None, "bfloat16").kv_cache_bytes == 2.0  # an explicit dtype wins
    quant.write_text(json.dumps({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None}}))
    assert resolve_model("someone/qwen3-fp8").kv_cache_bytes == 2.0
    quant.write_text(json.dumps({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}}))
    assert resolve_model("someone/qwen3-fp8").kv_cache_bytes == 2.0  # no NVFP4 cache in servesim: the weights' dtype


def _inline_modelopt(algo: str, scheme: dict | None) -> dict:
    qc = {"quant_method": "modelopt", "quant_algo": algo, "kv_cache_quant_algo": None, "kv_cache_scheme": scheme}
    return dependency_config("Qwen/Qwen3-8B") | {"quantization_config": qc}


def test_an_inline_modelopt_config_is_read(empty_hf_cache):
    """Newer NVIDIA checkpoints (nvidia/Kimi-K2.5-NVFP4...) carry ModelOpt's export in config.json."""
    fp8_static = {"dynamic": False, "num_bits": 8, "type": "float"}
    cache_model(empty_hf_cache, "someone/a", _inline_modelopt("NVFP4", fp8_static))
    assert (lambda m: (m.quantization, m.kv_cache_bytes))(resolve_model("someone/a")) == ("nvfp4", 1.0)
    cache_model(empty_hf_cache, "someone/b", _inline_modelopt("FP8", None))
    assert (lambda m: (m.quantization, m.kv_cache_bytes))(resolve_model("someone/b")) == ("fp8", 2.0)
    cache_model(empty_hf_cache, "someone/c", _inline_modelopt("NVFP4", fp8_static | {"dynamic": True}))
    assert resolve_model("someone/c").kv_cache_bytes == 2.0  # vLLM maps only static-scale 8-bit floats to fp8
    cache_model(empty_hf_cache, "someone/d", _inline_modelopt("MIXED_PRECISION", fp8_static))
    with pytest.raises(ValueError, match=r"config\.json: quantization_config\.quant_algo 'MIXED_PRECISION' is not"):
        resolve_model("someone/d")


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    assert hf_hub_cache_dir() == tmp_path / "hf-cache"
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hf_hub_cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hf_hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"


@pytest.mark.parametrize(
    ("hf_id", "layers", "experts", "quantization"),
    [
        ("Qwen/Qwen3-30B-A3B", 48, 128, None),
        ("deepseek-ai/DeepSeek-V3", 61, 256, "fp8_block"),  # weight_block_size [128, 128]
        ("deepseek-ai/DeepSeek-R1", 61, 256, "fp8_block"),
        ("Qwen/Qwen3-32B", 64, 1, None),
        ("nvidia/Llama-3.1-70B-Instruct-FP8", 80, 1, "fp8"),  # FP8 from its hf_quant_config.json
        ("nvidia/Kimi-K2.5-NVFP4", 61, 384, "nvfp4"),  # NVFP4 from its config.json's ModelOpt quantization_config
    ],
)
def test_the_dependency_answers_when_the_cache_does_not(hf_id, layers, experts, quantization):
    m = resolve_model(hf_id)
    assert (m.name, m.num_layers, m.num_experts, m.quantization) == (hf_id, layers, experts, quantization)
    # both NVIDIA checkpoints declare an FP8 KV cache (kv_cache_quant_algo, kv_cache_scheme); the others do not
    assert m.kv_cache_bytes == (1.0 if hf_id.startswith("nvidia/") else 2.0)
    assert m.source.startswith("aiconfigurator-core 0.12.")
    assert m.source.endswith(f"model_configs/{hf_id.replace('/', '--')}_config.json")


def test_the_dependency_lists_its_ids():
    ids = dependency_model_ids()
    assert {"Qwen/Qwen3-32B", "deepseek-ai/DeepSeek-V3", "mistralai/Mixtral-8x7B-v0.1"} <= set(ids)
    assert not any(i.endswith("_hf_quant") for i in ids)


def test_a_model_in_neither_place_is_one_line(empty_hf_cache):
    with pytest.raises(ValueError) as err:
        resolve_model("Qwen/Qwen3-33B")
    message = str(err.value)
    assert "\n" not in message
    assert "'Qwen/Qwen3-33B'" in message
    assert f"not in the Hugging Face cache {empty_hf_cache} (models--Qwen--Qwen3-33B)" in message
    assert "not among aiconfigurator-core's model_configs (close: Qwen/Qwen3-32B" in message
    assert "presets (servesim presets): " + ", ".join(model_presets()) in message


def test_a_file_or_folder_of_the_name_comes_first(tmp_path):
    folder = tmp_path / "Qwen" / "Qwen3-32B"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(dependency_config("Qwen/Qwen3-8B")))
    m = resolve_model("Qwen/Qwen3-32B", base_dir=tmp_path)
    assert m.num_layers == 36 and m.source is None  # Qwen3-8B's layers, from the folder


def test_what_looks_like_an_id():
    assert looks_like_hf_id("Qwen/Qwen3-32B") and looks_like_hf_id("meta-llama/Meta-Llama-3.1-8B")
    for ref in ("llama-3.1-8b", "models/spec.yaml", "a/b/c", "hf/config.json", "../x", "org/a--b", "./x"):
        assert not looks_like_hf_id(ref), ref


def test_presets_dump_as_before():
    assert all("source" not in m.model_dump() for m in model_presets().values())


def test_the_cli_refuses_an_unknown_id_in_one_line(tmp_path, capsys):
    stderr = run_refused(
        tmp_path,
        None,
        "--model",
        "nobody/no-such-model",
        needles=("servesim run: error: unknown model 'nobody/no-such-model'", "Hugging Face cache", "model_configs"),
        capsys=capsys,
    )
    assert stderr.count("\n") == 1 and "Traceback" not in stderr  # run_refused checked exit 2 and no output folder


def test_a_hybrid_mamba_model_is_refused_not_misread():
    # read as attention + MLP layers it came out at 115 B parameters (its name says 56 B)
    with pytest.raises(ValueError, match="'hybrid_override_pattern' makes this a hybrid Mamba model, not modelled"):
        resolve_model("nvidia/Nemotron-H-56B-Base-8K")


@pytest.mark.parametrize(
    ("hf_id", "field"),
    [
        # each was read before, into a spec of another architecture: DeepSeek-V4 as 43 layers of one 512-wide KV head
        # with neither its compressed attention nor its FP4 experts, Nemotron-3.5 (Mamba) as attention + MoE,
        # Llama-4 Maverick with experts on all 48 layers (773 B of expert weights where it has 24 MoE layers)
        ("deepseek-ai/DeepSeek-V4-Flash", "compress_ratios"),
        ("nvidia/DeepSeek-V4-Pro-NVFP4", "compress_ratios"),
        ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4", "layers_block_type"),
        ("MiniMaxAI/MiniMax-M3", "sparse_attention_config"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "attention_chunk_size"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "attention_chunk_size"),
        ("google/gemma-4-26B-A4B", "global_head_dim"),
        ("nvidia/Gemma-4-31B-IT-NVFP4", "global_head_dim"),
        ("stepfun-ai/Step-3.7-Flash", "share_expert_dim"),
        ("XiaomiMiMo/MiMo-V2-Flash", "hybrid_layer_pattern"),
    ],
)
def test_an_architecture_servesim_does_not_model_is_refused_naming_its_field(hf_id, field):
    with pytest.raises(ValueError, match=rf"field '{field}' \(.*\) is not modelled by servesim"):
        resolve_model(hf_id)


def test_a_field_at_its_plain_value_is_read(tmp_path):
    # Gemma-style fields that leave the layers as they are, and one KV stream (hc_mult 1), are not refused
    plain = {"num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0, "hc_mult": 1, "attention_k_eq_v": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dependency_config("Qwen/Qwen3-8B") | plain))
    assert resolve_model(str(path)).num_layers == 36
    path.write_text(json.dumps(dependency_config("Qwen/Qwen3-8B") | {"hc_mult": 4}))
    with pytest.raises(ValueError, match="'hc_mult'"):
        resolve_model(str(path))


def test_a_gated_deltanet_model_is_read_and_kimi_delta_attention_refused():
    # Qwen3.5's config nests its language model under text_config; three layers in four are Gated DeltaNet
    qwen = resolve_model("Qwen/Qwen3.5-397B-A17B")
    assert (qwen.num_linear_layers, qwen.num_full_attention_layers) == (45, 15)
    with pytest.raises(ValueError, match="'linear_attn_config' makes this a Kimi Delta Attention model, not modelled"):
        resolve_model("moonshotai/Kimi-K3")


def test_presets_lists_the_ids_servesim_reads(capsys):
    from servesim.cli import main

    assert main(["presets", "--hf-models", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["models"]["deepseek-ai/DeepSeek-R1"]["source"].startswith("aiconfigurator-core ")
    assert "Qwen/Qwen3-30B-A3B" in data["models"] and "XiaomiMiMo/MiMo-V2-Flash" in data["not_read"]
    assert data["models"]["Qwen/Qwen3-VL-2B-Instruct"]["num_layers"] == 28  # its text_config's language model
    assert set(data["models"]) | set(data["not_read"]) == set(dependency_model_ids())


def test_run_by_id_with_expert_parallelism(tmp_path, capsys):
    from servesim.cli import main

    out = tmp_path / "run"
    args = ["run", "--model", "Qwen/Qwen3-30B-A3B", "--hardware", "h200", "--tp", "2", "--ep", "2"]
    assert main([*args, "--num-requests", "10", "--no-report", "--quiet", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["parallelism"]["ep"] == 2 and config["resolved_groups"][0]["ep"] == 2
    assert config["model"]["name"] == "Qwen/Qwen3-30B-A3B"
    assert config["model"]["source"].endswith("model_configs/Qwen--Qwen3-30B-A3B_config.json")


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (("--tp", "8", "--ep", "3"), "ep (3) must divide tp (8)"),
        (("--ep", "0"), "--ep: parallelism.ep: Input should be greater than or equal to 1"),
    ],
)
def test_the_cli_refuses_a_bad_ep_in_one_line(tmp_path, capsys, flags, needle):
    stderr = run_refused(tmp_path, None, "--model", "Qwen/Qwen3-30B-A3B", *flags, needles=(needle,), capsys=capsys)
    assert stderr.count("\n") == 1 and needle in stderr  # run_refused checked exit 2 and no output folder
