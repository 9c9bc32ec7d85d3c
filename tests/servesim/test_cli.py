"""The real console script, run as a user runs it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")


def servesim(*args, cwd=None):
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


VLLM_KEYS = {
    "completed",
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
}


def test_run_without_arguments_runs_the_default(tmp_path):
    proc = servesim("run", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Llama-3.1-8B on H100-SXM5-80GB" in proc.stdout and "Successful requests" in proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary) >= VLLM_KEYS
    assert summary["completed"] == 1000 and summary["rejected"] == 0
    for name in ("config.json", "requests.parquet", "steps.parquet", "itl.parquet"):
        assert (run_dir / name).is_file()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["model"]["name"] == "Llama-3.1-8B" and config["kv_cache"]["num_blocks"] > 0


def test_run_with_scenario_file_and_overrides(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "model: llama-2-7b\nhardware: a100-80gb\npolicy: {kind: vllm_v0, max_num_seqs: 64}\n"
        "workload:\n  num_requests: 50\n  arrival: {kind: gamma, rate_per_s: 2, burstiness: 0.5}\n"
        "  lengths: {kind: independent, prompt: {kind: fixed, tokens: 300}, output: {kind: fixed, tokens: 50}}\n"
    )
    out = tmp_path / "out"
    proc = servesim(
        "run",
        scenario,
        "--num-requests",
        30,
        "--seed",
        3,
        "--slo-ttft-ms",
        500,
        "--slo-tpot-ms",
        50,
        "--out",
        out,
        "--format",
        "csv",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["completed"] == 30 and "request_goodput" in summary
    assert (out / "requests.csv").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["seed"] == 3 and config["model"]["name"] == "Llama-2-7B"
    assert config["policy"]["max_num_seqs"] == 64


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "--model", "llama-9"), "unknown model 'llama-9'"),
        (("run", "--hardware", "h900"), "unknown hardware 'h900'"),
        (("run", "--rate", "-2"), "workload.arrival.poisson.rate_per_s: Input should be greater than 0"),
        (("run", "--policy", "fancy"), "unknown batch policy 'fancy'; known:"),
        (("run", "missing.yaml"), "missing.yaml: no such file"),
        (("run", "--model", "llama-3.1-70b"), "does not fit on H100-SXM5-80GB with tp=1"),
        (("run", "--tp", "3"), "tp=3 does not divide"),
        (("run", "--policy", "hf_fifo", "--prefix-caching"), "policy hf_fifo does not reuse cached prefixes"),
        (("estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm"), "give at least one --prefill"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(args, message, tmp_path):
    proc = servesim(*args, "--quiet" if args[0] == "run" else "--json", cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_misspelt_yaml_field_names_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("modle: llama-3.1-8b\nworkload:\n  num_requests: 5\n  arival: {kind: poisson, rate_per_s: 1}\n")
    proc = servesim("run", bad, "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    # one line: the outermost unknown field, and a count of the other problems
    assert proc.stderr.strip().endswith("bad.yaml: modle: unknown field (misspelt?) (and 1 more problem)")


def test_invalid_yaml_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nworkload: [unclosed\n")
    proc = servesim("run", bad, "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "bad.yaml: line 3" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_flag_exits_2():
    proc = servesim("run", "--no-such-flag")
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr


def test_estimate_names_the_framework_and_version_it_reads():
    proc = servesim(
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h200",
        "--decode",
        "32:1000",
        "--framework",
        "sglang",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    tables = json.loads(proc.stdout)["tables"]
    assert tables["o_proj"].startswith("sglang 0.5.") and tables["o_proj"].endswith("sglang_torch_linear")
    assert tables["attn_decode"].endswith(", fa3")  # SGLang's default backend on Hopper
    proc = servesim(
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h200",
        "--decode",
        "32:1000",
        "--framework",
        "vllm",
        "--version",
        "0.1.0",
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "cost_model.version: vllm 0.1.0 was not measured on h200_sxm" in proc.stderr


def test_estimate_reads_a_named_moe_kernel_and_says_where_it_comes_from():
    """``--moe-kernel marlin`` for gpt-oss on H200: Marlin was timed at gpt-oss's shape on other GPUs only, so the
    MLP ops say they are carried over, and name the GPUs; the roofline takes no kernel, in one line."""
    args = ("estimate", "--model", "openai/gpt-oss-120b", "--hardware", "h200", "--tp", "8", "--prefill", "8192")
    default = json.loads(servesim(*args, "--json").stdout)
    proc = servesim(*args, "--moe-kernel", "marlin", "--json")
    assert proc.returncode == 0, proc.stderr
    marlin = json.loads(proc.stdout)
    assert marlin["sources"]["mlp_gate_up"].startswith("carried over from other GPUs")
    assert "l40s, rtx_pro_6000_server" in marlin["tables"]["mlp_gate_up"]
    assert (
        marlin["ops"]["mlp_gate_up"] > default["ops"]["mlp_gate_up"]
        and marlin["ops"]["o_proj"] == default["ops"]["o_proj"]
    )
    proc = servesim(*args, "--moe-kernel", "marlin", "--cost-model", "roofline")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--moe-kernel" in proc.stderr


def test_estimate_json():
    proc = servesim(
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--prefill",
        "512:128",
        "--decode",
        "32:1000",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"step_time_s", "ops", "flops", "bytes", "cost_model", "sources", "tables"}
    assert out["cost_model"] == "silicon" and set(out["sources"]) == set(out["ops"]) == set(out["tables"])
    assert out["sources"]["o_proj"] in ("measured", "interpolated")
    # each measured op names the engine, version and kernel of its table; the unmeasured ones none
    assert out["tables"]["o_proj"].startswith("vllm ") and "torch.nn.functional.linear" in out["tables"]["o_proj"]
    assert out["tables"]["attn_decode"].endswith("vllm_flash_attn_fa3")
    assert out["tables"]["norm"] == ""
    assert out["step_time_s"] == pytest.approx(sum(out["ops"].values()))
    assert {
        "embed",
        "qkv_proj",
        "attn_prefill",
        "attn_decode",
        "o_proj",
        "mlp_gate_up",
        "mlp_act",
        "mlp_down",
        "norm",
        "lm_head",
        "cpu_overhead",
    } == set(out["ops"])
    proc = servesim(
        "estimate", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--tp", "4", "--decode", "8:100", "--json"
    )
    assert "all_reduce" in json.loads(proc.stdout)["ops"]


def test_estimate_table():
    proc = servesim("estimate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--prefill", "100")
    assert proc.returncode == 0 and "attn_prefill" in proc.stdout and "total" in proc.stdout


def test_explain_reproduces_the_course_arithmetic():
    proc = servesim("explain")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for figure in (
        "320,000",
        "1,280,000",
        "5,120,000",
        "20,480,000",
        "81,920,000",
        "4.0x",
        "102,134,400",
        "803,200",
        "127.2x",
        "131,072 bytes per token",
    ):
        assert figure in out
    assert "with KV cache (vllm)" in out and "no_kv_cache" in out


def test_presets_json():
    proc = servesim("presets", "--json")
    data = json.loads(proc.stdout)
    assert data["models"]["llama-3.1-8b"]["kv_bytes_per_token"] == 131072
    assert data["models"]["llama-3.1-8b"]["num_params"] == pytest.approx(8.03e9, rel=0.001)
    assert {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "l40s", "b200", "mi300x"} <= set(data["hardware"])
    h200 = data["hardware"]["h200"]["measured_tables"]
    assert h200["system"] == "h200_sxm" and {"vllm", "sglang", "trtllm"} <= set(h200["frameworks"])
    assert data["hardware"]["mi300x"]["measured_tables"] is None
    assert data["hardware"]["b200"]["fp4_flops_per_s"] == 9.0e15 and data["hardware"]["h200"]["fp4_flops_per_s"] is None
    source = data["measured_tables_source"]
    assert source["package"] == "aiconfigurator-core" and source["licence"] == "Apache-2.0"
    proc = servesim("presets")
    assert proc.returncode == 0
    row = next(line for line in proc.stdout.splitlines() if "h200_sxm" in line)  # the measured-tables table
    for fw, versions in h200["frameworks"].items():
        assert f"{fw} {'/'.join(versions)}" in row
    assert f"measured tables: aiconfigurator-core {source['version']} (NVIDIA Inc., Apache-2.0)" in proc.stdout


def test_python_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "servesim", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "servesim" in proc.stdout


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (b"workload: 5\n", ("--num-requests", "10"), "s.yaml: cannot set workload.num_requests: workload is 5"),
        (b"parallelism: 2\n", ("--tp", "2"), "s.yaml: cannot set parallelism.tp: parallelism is 2"),
        (b"\xff\xfeseed: 1\n", (), "s.yaml: not a text file (byte 0 is not UTF-8)"),
        (b"- 1\n- 2\n", (), "s.yaml: expected a mapping of scenario fields, got list"),
    ],
)
def test_a_scenario_the_overrides_cannot_apply_to_is_one_clear_line(content, args, message, tmp_path):
    (tmp_path / "s.yaml").write_bytes(content)
    proc = servesim("run", "s.yaml", *args, "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_router_named_bare_keeps_its_parameters_under_the_same_kind(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "router: {kind: session_affinity, max_kv_usage: 0.5}\nreplicas: 2\nworkload: {num_requests: 20}\n"
    )
    out = tmp_path / "out"
    proc = servesim(
        "run", "s.yaml", "--router", "session_affinity", "--quiet", "--no-report", "--out", out, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "config.json").read_text())["router"]["max_kv_usage"] == 0.5


def test_calibrate_checks_out_before_measuring(tmp_path):
    (tmp_path / "afile").touch()
    tiny = DATA_DIR / "tiny_llama_config.json"
    proc = servesim("calibrate", "--model", tiny, "--device", "cpu", "--out", "afile/p.json", "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "--out afile/p.json: cannot create afile" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_calibrate_refuses_a_context_too_short_to_time_steps_before_measuring(tmp_path):
    import json

    cfg = json.loads((DATA_DIR / "tiny_llama_config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg | {"max_position_embeddings": 7}))
    proc = servesim(
        "calibrate", "--model", "config.json", "--device", "cpu", "--out", "p.json", "--quiet", cwd=tmp_path
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "maximum context (7 tokens, config.json max_position_embeddings) is too short" in proc.stderr


def test_calibrate_refuses_a_model_it_cannot_build_before_measuring(tmp_path):
    # Qwen3.5-27B: dense, but 48 of its 64 layers are Gated DeltaNet, which the torch harness does not build
    proc = servesim("calibrate", "--model", "Qwen/Qwen3.5-27B", "--device", "cpu", "--out", "p.json", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().endswith(
        "calibration times full-attention layers; Gated DeltaNet layers are not implemented"
    )


def test_explain_counts_a_hybrid_models_kv_on_its_full_attention_layers():
    proc = servesim("explain", "--model", "Qwen/Qwen3.5-35B-A3B", "--hardware", "b200")
    assert proc.returncode == 0, proc.stderr
    # 2 x 10 full-attention layers x 2 KV heads x 256 x 2 bytes (30 of its 40 layers are Gated DeltaNet)
    assert "stores 2 x 10 full-attention layers x kv_heads x head_dim x bytes = 20,480 bytes per token" in proc.stdout


def test_explain_counts_a_sliding_window_models_kv_on_its_full_layers_and_a_window_per_sequence():
    proc = servesim("explain", "--model", "openai/gpt-oss-120b", "--hardware", "h100-sxm")
    assert proc.returncode == 0, proc.stderr
    # vLLM V1 (the explained policy) keeps gpt-oss's 18 sliding layers' keys for the newest 128 tokens only
    text = " ".join(proc.stdout.split())
    assert "stores 2 x 18 full-attention layers x kv_heads x head_dim x bytes = 36,864 bytes per token" in text
    assert "its 18 sliding-window layers' newest 128 tokens (9 blocks)" in text
