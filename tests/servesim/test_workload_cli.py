"""`servesim workload describe|list`, and `servesim run` replaying every named trace end to end."""

import json
import subprocess
import sys

import pytest

from servesim.cli import main
from tests.conftest import require_trace
from workloads.traces import TRACE_CATALOG


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_a_named_trace_as_json(capsys):
    require_trace("mooncake-conversation")
    code, out, _ = _cli(capsys, "workload", "describe", "mooncake-conversation", "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["num_requests"] == 12031
    assert stats["arrivals"]["span_s"] == pytest.approx(3536.999)
    assert stats["prompt_tokens"]["p50"] == 6909 and stats["output_tokens"]["max"] == 2000
    assert stats["prefix_blocks"]["repeat_fraction"] == pytest.approx(0.366, abs=0.0005)


def test_describe_table_names_the_figures(capsys):
    require_trace("azure-conv")
    require_trace("sharegpt-8k-multiturn")
    code, out, _ = _cli(capsys, "workload", "describe", "azure-conv")
    assert code == 0
    for text in ("19,366", "mean rate", "5.53", "burstiness", "prompt tokens", "14,050"):
        assert text in out
    code, out, _ = _cli(capsys, "workload", "describe", "sharegpt-8k-multiturn")
    assert code == 0 and "none (lengths only)" in out


def test_describe_a_file_with_skipped_rows(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text(
        "arrival_s,prompt_tokens,output_tokens,session_id,think_s\n0,5,2,a,\n,9,2,a,1.5\n1,x,2,,\n2,7,1,,\n"
    )
    code, _, err = _cli(capsys, "workload", "describe", path)
    assert (
        code == 2
        and err.strip() == f"servesim workload: error: {path}: line 4: prompt_tokens: expected an integer, found 'x'"
    )
    code, out, _ = _cli(capsys, "workload", "describe", path, "--skip-bad-rows")
    assert code == 0 and "bad rows skipped" in out and "sessions" in out
    code, out, _ = _cli(capsys, "workload", "describe", path, "--skip-bad-rows", "--json")
    stats = json.loads(out)
    assert stats["meta"]["num_skipped_rows"] == 1 and stats["num_dependent_requests"] == 1
    assert stats["sessions"]["num_sessions"] == 1 and stats["think_s"]["mean"] == 1.5


def test_describe_a_scenario(tmp_path, capsys):
    scenario = tmp_path / "chat.yaml"
    scenario.write_text(
        "seed: 3\n"
        "workload:\n"
        "  kind: sessions\n"
        "  num_sessions: 40\n"
        "  turns: {kind: fixed, count: 3}\n"
        "  user_tokens: {kind: fixed, tokens: 64}\n"
        "  output_tokens: {kind: fixed, tokens: 32}\n"
        "  system_prompt_tokens: 256\n"
        "  hash_block_tokens: 32\n"
    )
    code, out, _ = _cli(capsys, "workload", "describe", scenario, "--json")
    stats = json.loads(out)
    assert code == 0 and stats["num_requests"] == 120 and stats["sessions"]["num_sessions"] == 40
    # Per session, prompts of 320, 416 and 512 tokens: 10, 13 and 16 full blocks of 32. Blocks 0-7
    # are the system prompt, the same in every session; turn 1 adds blocks 8-9, turn 2 blocks
    # 10-12 (8-9 repeat turn 1's), turn 3 blocks 13-15.
    total = 40 * (10 + 13 + 16)
    distinct = 8 + 40 * (2 + 3 + 3)
    assert stats["prefix_blocks"]["num_blocks"] == total
    assert stats["prefix_blocks"]["num_distinct_blocks"] == distinct
    code, out, _ = _cli(capsys, "workload", "describe", scenario)
    assert code == 0 and "sessions" in out and "repeating an earlier block" in out


def test_workload_list(capsys):
    code, out, _ = _cli(capsys, "workload", "list", "--json")
    assert code == 0 and set(json.loads(out)) == set(TRACE_CATALOG)


def _replay_scenario(tmp_path, name: str) -> str:
    workload = {"kind": "trace", "source": name}
    if TRACE_CATALOG[name].format == "vidur":  # lengths only
        workload |= {"arrival": {"kind": "poisson", "rate_per_s": 4}, "num_requests": 30}
    elif name != "agent-rounds":
        workload |= {"num_requests": 30}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({"workload": workload}))  # JSON is YAML
    return str(path)


@pytest.mark.parametrize("name", list(TRACE_CATALOG))
def test_run_replays_each_named_trace(tmp_path, capsys, name):
    require_trace(name)
    expected = 19 if name == "agent-rounds" else 30
    code, out, err = _cli(
        capsys, "run", _replay_scenario(tmp_path, name), "--quiet", "--json", "--out", tmp_path / "run"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["completed"] + summary["rejected"] == expected
    assert summary["completed"] > 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["workload"]["kind"] == "trace" and config["workload"]["source"] == name


def test_run_names_a_trace_on_the_command_line(tmp_path, capsys, monkeypatch):
    require_trace("azure-code")
    code, out, err = _cli(
        capsys, "run", "--trace", "azure-code", "--num-requests", "25", "--quiet", "--json", "--out", tmp_path / "a"
    )
    assert code == 0, err
    assert json.loads(out)["completed"] == 25
    config = json.loads((tmp_path / "a" / "config.json").read_text())["workload"]
    assert config["kind"] == "trace" and config["source"] == "azure-code" and config["num_requests"] == 25
    # a file path is relative to the working directory, even with a scenario elsewhere
    (tmp_path / "mine.csv").write_text("prompt_tokens,output_tokens\n100,10\n200,20\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "s.yaml").write_text("workload: {kind: trace, source: x.csv, max_output_tokens: 15}\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(
        capsys, "run", "conf/s.yaml", "--trace", "mine.csv", "--rate", "2", "--quiet", "--json", "--out", tmp_path / "b"
    )
    assert code == 0, err
    assert json.loads(out)["completed"] == 2 and json.loads(out)["total_output_tokens"] == 25


def test_run_with_a_bad_trace_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "bad.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,5,1\n1,-3,1\n")
    (tmp_path / "s.yaml").write_text("workload: {kind: trace, source: bad.csv}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "servesim", "run", "s.yaml", "--quiet"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["servesim run: error: bad.csv: line 3: prompt_tokens: negative (-3)"]


def test_run_rejects_a_misspelt_trace_field(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text("workload: {kind: trace, source: azure-conv, time_scal: 2}\n")
    code, _, err = _cli(capsys, "run", tmp_path / "s.yaml", "--quiet")
    assert code == 2 and f"{tmp_path / 's.yaml'}: workload.time_scal: unknown field" in err


def test_workload_list_says_each_datasets_lengths(capsys):
    code, out, _ = _cli(capsys, "workload", "list", "--json")
    listed = json.loads(out)
    share = listed["sharegpt-8k-multiturn"]
    assert share["num_rows"] == 30731 and share["aliases"] == ["sharegpt"]
    assert round(share["mean_prompt_tokens"]) == 2340 and share["median_prompt_tokens"] == 1730
    assert round(share["mean_output_tokens"]) == 439 and share["median_output_tokens"] == 415
    assert all({"num_rows", "mean_prompt_tokens", "median_output_tokens"} <= set(v) for v in listed.values())
    assert share["licence"].startswith("Apache-2.0") and share["repository"] == "project-etalon/etalon"
    assert listed["azure-conv"]["licence"] == "CC-BY-4.0" and listed["arxiv"]["licence"] == "MIT"
    assert all(v["url"].startswith("https://raw.githubusercontent.com/") and v["citation"] for v in listed.values())
    code, out, _ = _cli(capsys, "workload", "list")
    assert code == 0
    for text in (
        "sharegpt-8k-multiturn",
        "30,731",
        "2,340 / 1,730",
        "439 / 415",
        "12,035 / 6,909",
        "old name 'sharegpt'",
        "CC-BY-4.0",
        "MIT",
        "Azure/AzurePublicDataset",
    ):
        assert text in out


def test_old_sharegpt_name_still_works_with_one_warning_line(capsys, monkeypatch):
    require_trace("sharegpt-8k-multiturn")
    from workloads.traces import catalog

    monkeypatch.setattr(catalog, "_warned", set())
    code, out, err = _cli(capsys, "workload", "describe", "sharegpt", "--json")
    assert code == 0 and json.loads(out)["num_requests"] == 30731
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servesim: warning: dataset name 'sharegpt' is")
    assert "'sharegpt-8k-multiturn'" in lines[0] and "vllm bench serve" in lines[0]
    from workloads import WorkloadConfig, generate

    s = generate(
        WorkloadConfig.model_validate({"num_requests": 5, "lengths": {"kind": "dataset", "name": "sharegpt"}}), 0
    )
    assert len(s) == 5 and capsys.readouterr().err == ""  # once per process
