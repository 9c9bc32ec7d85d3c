import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from simulator.config.scenario import validate_scenario
from simulator.planning.sweeps.compare import expand_variants, parse_sets, run_comparison

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")


def test_variants_expand_over_set_values():
    v = expand_variants(["vllm", "sarathi"], ["sarathi.token_budget=512,2048", "sarathi.max_num_seqs=64"])
    assert [x.label for x in v] == [
        "vllm",
        "sarathi-token_budget=512-max_num_seqs=64",
        "sarathi-token_budget=2048-max_num_seqs=64",
    ]
    assert v[2].policy == {"kind": "sarathi", "token_budget": 2048, "max_num_seqs": 64}


def test_variant_starts_from_the_scenarios_policy_parameters():
    (v,) = expand_variants(["vllm"], [], {"kind": "vllm", "max_num_seqs": 8})
    assert v.policy == {"kind": "vllm", "max_num_seqs": 8}


@pytest.mark.parametrize("bad", ["sarathi", "sarathi.token_budget", "=5", "sarathi.=3"])
def test_malformed_set_is_refused(bad):
    with pytest.raises(ValueError, match=r"expected POLICY\.PARAM=VALUE"):
        parse_sets([bad])


def test_set_for_a_policy_not_compared_is_refused():
    with pytest.raises(ValueError, match="not among --policies"):
        expand_variants(["vllm"], ["sarathi.token_budget=5"])


def _base():
    cfg = validate_scenario({"workload": {"num_requests": 60, "arrival": {"kind": "poisson", "rate_per_s": 6}}})
    return cfg.model_dump(mode="json")


def test_every_variant_sees_identical_requests_and_parallel_equals_serial(tmp_path):
    variants = expand_variants(["vllm", "static", "sarathi"], ["sarathi.token_budget=256,1024"])
    serial = run_comparison(_base(), variants, tmp_path / "a", workers=1)
    parallel = run_comparison(_base(), variants, tmp_path / "b", workers=2)
    assert [r["summary"] for r in serial] == [r["summary"] for r in parallel]
    tables = [pd.read_parquet(Path(r["run_dir"]) / "requests.parquet") for r in serial]
    for t in tables[1:]:
        pd.testing.assert_series_equal(t["arrival_s"], tables[0]["arrival_s"])
        pd.testing.assert_series_equal(t["num_prompt_tokens"], tables[0]["num_prompt_tokens"])
    assert {Path(r["run_dir"]).name for r in serial} == {
        "vllm",
        "static",
        "sarathi-token_budget=256",
        "sarathi-token_budget=1024",
    }


def test_compare_cli_with_rates(tmp_path):
    out = tmp_path / "cmp"
    proc = subprocess.run(
        [
            SERVESIM,
            "compare",
            "--policies",
            "vllm,sarathi",
            "--set",
            "sarathi.token_budget=512,2048",
            "--rates",
            "2,6",
            "--num-requests",
            "40",
            "--out",
            str(out),
            "--json",
            "--quiet",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["rates_per_s"] == [2.0, 6.0]
    assert len(doc["rows"]) == 6
    assert (out / "comparison.json").is_file()
    assert (out / "sarathi-token_budget=512" / "rate-6" / "summary.json").is_file()
    report = (out / "report.html").read_text()
    assert "request rate (req" in report  # latency-versus-load curves (plotly escapes the slash)
    assert "sarathi-token_budget=2048" in report
    by = {(r["variant"], r["rate_per_s"]): r["summary"] for r in doc["rows"]}
    assert by[("vllm", 6.0)]["mean_ttft_ms"] > 0


def test_compare_table_output(tmp_path):
    proc = subprocess.run(
        [
            SERVESIM,
            "compare",
            "--policies",
            "vllm,continuous",
            "--num-requests",
            "30",
            "--out",
            str(tmp_path / "c"),
            "--quiet",
            "--slo-ttft-ms",
            "500",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "continuous" in proc.stdout and "goodput req/s" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "vllm,orca"], "unknown batch policy 'orca'; known:"),
        (
            ["--policies", "vllm", "--set", "vllm.token_budget=512"],
            "variant vllm-token_budget=512: policy: token_budget: unknown field",
        ),
        (["--rates", "2,x"], "--rates '2,x': expected comma-separated numbers"),
    ],
)
def test_compare_bad_input(args, message, tmp_path):
    proc = subprocess.run(
        [SERVESIM, "compare", *args, "--num-requests", "5", "--out", str(tmp_path), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
