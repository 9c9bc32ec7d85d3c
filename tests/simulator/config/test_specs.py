import json

import pytest

from simulator.config.hf_config import model_spec_from_hf_config
from simulator.config.presets import hardware_presets, model_presets, resolve_hardware, resolve_model
from simulator.config.specs import HardwareSpec
from simulator.cost.silicon import database
from tests.conftest import DATA_DIR

# Published parameter counts (model cards) and KV bytes per token in bf16.
PUBLISHED = {
    "llama-2-7b": (6.74e9, 524_288),
    "llama-2-70b": (68.98e9, 327_680),
    "llama-3.1-8b": (8.03e9, 131_072),
    "llama-3.1-70b": (70.55e9, 327_680),
    "mistral-7b": (7.25e9, 131_072),
    "qwen2.5-7b": (7.62e9, 57_344),
    "qwen2.5-72b": (72.7e9, 327_680),
    "mixtral-8x7b": (46.7e9, 131_072),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_and_kv_bytes_match_published_figures(name):
    spec = model_presets()[name]
    params, kv = PUBLISHED[name]
    assert spec.num_params() == pytest.approx(params, rel=0.005)
    assert spec.kv_bytes_per_token() == kv


def test_mixtral_active_parameters():
    assert model_presets()["mixtral-8x7b"].num_active_params() == pytest.approx(12.9e9, rel=0.01)


def test_required_hardware_presets_exist_with_datasheet_figures():
    hw = hardware_presets()
    for name in ("a100-40gb", "a100-80gb", "h100-sxm", "h200", "l40s", "b200", "mi300x"):
        assert name in hw
    assert hw["h100-sxm"].flops_per_s == pytest.approx(989.4e12)
    assert hw["h100-sxm"].memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert hw["h200"].memory_bandwidth_bytes_per_s == pytest.approx(4.8e12)
    assert hw["a100-80gb"].flops_per_s == pytest.approx(312e12)


def test_every_hardware_preset_validates_and_its_rates_keep_the_datasheet_order():
    for key, hw in hardware_presets().items():
        again = HardwareSpec(**hw.model_dump())
        assert again == hw, key
        assert ("fp4_flops_per_s" in hw.model_dump()) == (hw.fp4_flops_per_s is not None), key
        rates = [r for r in (hw.flops_per_s, hw.fp8_flops_per_s, hw.fp4_flops_per_s) if r is not None]
        assert rates == sorted(rates), key  # each narrower format at least as fast as the wider one
        if hw.fp4_flops_per_s is not None:
            assert hw.fp8_flops_per_s is not None, key  # every FP4 tensor core does FP8 too


def test_every_measured_gpu_is_a_preset_and_every_preset_names_a_measured_gpu():
    named = {hw.silicon_tables for hw in hardware_presets().values() if hw.silicon_tables is not None}
    measured = set(database.systems())
    assert measured, "aiconfigurator-core ships no tables (is it installed?)"
    assert named <= measured  # each preset's tables exist in the dependency
    assert measured <= named  # each GPU the dependency measures has a preset


def test_new_presets_carry_their_datasheet_figures():
    hw = hardware_presets()
    assert hw["b300"].fp4_flops_per_s == pytest.approx(13.5e15)  # HGX B300: 108 PF dense FP4 over 8 GPUs
    assert hw["gb200"].flops_per_s == pytest.approx(2.5e15)
    assert hw["h100-pcie"].memory_bandwidth_bytes_per_s == pytest.approx(2.0e12)
    assert hw["a100-pcie"].fp8_flops_per_s is None and hw["a30"].fp8_flops_per_s is None  # Ampere: no FP8
    assert hw["l4"].silicon_tables is None and hw["b60"].silicon_tables == "b60"


def test_hf_config_loader_reads_llama_fields(tmp_path):
    cfg = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = model_spec_from_hf_config(path)
    assert spec.num_params() == model_presets()["llama-3.1-8b"].num_params()
    assert spec.kv_bytes_per_token() == 131_072
    assert resolve_model(str(path)).num_layers == 32


def test_hf_config_loader_names_missing_field(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}))
    with pytest.raises(ValueError, match=r"config.json: missing field 'num_hidden_layers'"):
        model_spec_from_hf_config(path)


def test_custom_hardware_yaml(tmp_path):
    path = tmp_path / "gpu.yaml"
    path.write_text(
        "name: MyGPU\nflops_per_s: 100e12\nmemory_bytes: 24e9\nmemory_bandwidth_bytes_per_s: 1e12\n"
        "interconnect_bandwidth_bytes_per_s: 32e9\ninterconnect_latency_s: 1e-5\n"
        "host_link_bandwidth_bytes_per_s: 32e9\nhost_link_latency_s: 1e-5\n"
    )
    hw = resolve_hardware(str(path))
    assert hw.name == "MyGPU" and hw.flops_per_s == 100e12


def test_compute_capability_of_the_presets_and_of_a_spec_file(tmp_path):
    # what torch.cuda.get_device_capability() reports (NVIDIA's CUDA GPUs list; ROCm's gfx942 for the MI300X)
    majors = {name: spec.compute_major for name, spec in hardware_presets().items()}
    assert majors["a100-80gb"] == 8 and majors["h100-sxm"] == majors["h200"] == 9 and majors["mi300x"] == 9
    assert majors["b200"] == majors["gb200"] == majors["b300"] == majors["gb300"] == 10
    assert majors["rtx-pro-6000"] == 12 and majors["b60"] is None  # an Intel XPU has none
    assert resolve_hardware("b300").compute_capability == "10.3"
    path = tmp_path / "gpu.yaml"
    base = (
        "name: MyGPU\nflops_per_s: 100e12\nmemory_bytes: 24e9\nmemory_bandwidth_bytes_per_s: 1e12\n"
        "interconnect_bandwidth_bytes_per_s: 32e9\ninterconnect_latency_s: 1e-5\n"
        "host_link_bandwidth_bytes_per_s: 32e9\nhost_link_latency_s: 1e-5\n"
    )
    path.write_text(base)
    # left out, it is not known, and the dump (a stored point's key) is what it was before the field
    assert resolve_hardware(str(path)).compute_major is None
    assert "compute_capability" not in resolve_hardware(str(path)).model_dump()
    path.write_text(base + 'compute_capability: "10.0"\n')
    assert resolve_hardware(str(path)).compute_major == 10
    path.write_text(base + "compute_capability: 9\n")  # a YAML number reads as the capability it writes
    assert resolve_hardware(str(path)).compute_capability == "9.0"
    path.write_text(base + "compute_capability: blackwell\n")
    with pytest.raises(ValueError, match="compute_capability"):
        resolve_hardware(str(path))


def test_custom_hardware_yaml_misspelt_field_is_named(tmp_path):
    path = tmp_path / "gpu.yaml"
    path.write_text("name: X\nflop_per_s: 1\n")
    with pytest.raises(ValueError, match=r"gpu.yaml: flop_per_s: unknown field"):
        resolve_hardware(str(path))


def test_unknown_preset_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown model 'llama-9'.*llama-3.1-8b"):
        resolve_model("llama-9")
    with pytest.raises(ValueError, match=r"unknown hardware 'h900'.*h100-sxm"):
        resolve_hardware("h900")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden_size", "abc"),
        ("num_attention_heads", 0),
        ("num_local_experts", "8"),
        ("head_dim", -1),
        ("num_key_value_heads", 0),  # an optional count of 0 is an error, not "absent"
    ],
)
def test_a_bad_count_in_a_config_json_names_the_field(tmp_path, field, value):
    cfg = json.loads((DATA_DIR / "tiny_llama_config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg | {field: value}))
    with pytest.raises(ValueError, match=f"config.json: field '{field}' must be a positive integer, got {value!r}"):
        model_spec_from_hf_config(path)
