"""`servesim calibrate --tables-out`: this CPU's measurements as a table set the silicon model reads.

One calibration of the tiny Llama-style model (bf16, the dtype the silicon model reads for an
unquantized model; about 25 s on one thread) serves every test of the module.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from calibration import HARNESS_VERSION
from calibration.tables import (
    ATTENTION_KERNEL,
    ENGINE,
    GEMM_KERNEL,
    GEMM_OPS,
    GemmSeries,
    gemm_shapes,
    write_table_set,
)
from servesim.cli import main
from simulator.build import make_cost_model
from simulator.cost.profile import load_profile
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import database
from simulator.cost.silicon.convert import isotonic_median
from simulator.cost.silicon.model import SiliconParams
from tests.conftest import DATA_DIR

TINY = DATA_DIR / "tiny_llama_config.json"
SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")
FLOAT32_REL = 1e-6  # the reader keeps milliseconds as float32 (24-bit mantissa: 6e-8), then logs and exps them


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    profile, folder = root / "tiny.json", root / "tiny-tables"
    args = ["calibrate", "--model", str(TINY), "--device", "cpu", "--dtype", "bf16", "--threads", "1"]
    code = main([*args, "--out", str(profile), "--tables-out", str(folder), "--quiet"])
    assert code == 0
    return load_profile(profile), folder


def _torch_folder(folder: Path, family: str) -> Path:
    (found,) = (folder / family / "torch").iterdir()
    return found


def test_the_folder_is_a_table_set_named_for_device_engine_and_torch(calibrated):
    profile, folder = calibrated
    version = profile.device.torch_version.split("+")[0]
    tables = database.folder_set(folder)
    assert tables.versions() == {"gemm": {"torch": [version]}, "attention": {"torch": [version]}}
    # a deployment on any engine reads these tables, noted as torch's (its engine was not measured here)
    sel = database.select(tables, "vllm")
    assert (sel.base, sel.version) == ("torch", version)
    assert (
        sel.table("attention", "context_attention_perf.parquet").describe()
        == f"torch {version} (vllm not measured on {folder})"
    )
    for family, names in (
        ("gemm", ["gemm_perf"]),
        ("attention", ["context_attention_perf", "generation_attention_perf"]),
    ):
        meta = yaml.safe_load((_torch_folder(folder, family) / "collection_meta.yaml").read_text())
        assert meta["provenance"] == "servesim-calibrate" and meta["schema_version"] == 1
        assert meta["runtime"] == {"framework": "torch", "version": version}
        assert meta["device"]["name"] == profile.device.name and meta["device"]["kind"] == "cpu"
        assert meta["engine"] == ENGINE and meta["torch_version"] == profile.device.torch_version
        assert meta["harness_version"] == HARNESS_VERSION and meta["date"] == profile.created_utc
        assert meta["dtypes"] == ["bfloat16"] and meta["models"] == ["tiny-llama"]
        assert meta["tables"] == {name: {"status": "complete"} for name in names}


def test_the_silicon_model_prices_each_measured_point_at_its_measured_time(calibrated):
    profile, folder = calibrated
    spec, L = profile.model, profile.model.num_layers
    cost = make_cost_model(SiliconParams(tables=str(folder)), spec, profile.hardware)
    assert cost.tables.describe().startswith(f"{folder}, torch")
    gemm = pd.read_parquet(_torch_folder(folder, "gemm") / "gemm_perf.parquet")
    assert set(gemm.kernel_source) == {GEMM_KERNEL} and set(gemm.gemm_dtype) == {"bfloat16"}
    shapes = gemm_shapes(spec)
    assert len(gemm) == len(GEMM_OPS) * len(profile.grid.num_tokens)
    # every GEMM row comes back, through the rectilinear grid the reader fills between the ops' (n, k), as the
    # non-decreasing curve in m nearest the column's times (a glitch only makes a kernel slower: convert.monotone_in_m)
    for op in GEMM_OPS:
        rows = gemm[(gemm.n == shapes[op][0]) & (gemm.k == shapes[op][1])].sort_values("m")
        assert list(rows.m) == list(profile.grid.num_tokens)
        read_ms = isotonic_median(rows.latency.to_numpy(np.float64))
        for m, ms in zip(rows.m, read_ms, strict=True):
            seconds, source = cost._gemm_lookup(op, int(m))
            assert source == "measured" and seconds == pytest.approx(ms * 1e-3, rel=FLOAT32_REL), (op, m)
    # the GEMM ops the profile times bare are the very same measurements in both cost models (the silicon model's
    # read as the non-decreasing curve nearest them)
    for op in ("o_proj", "mlp_gate_up", "mlp_down"):
        points = sorted(profile.ops[op].points, key=lambda p: p.at[0])
        read_s = isotonic_median(np.array([p.median_s for p in points]))
        for p, least_s in zip(points, read_s, strict=True):
            (m,) = p.at
            shape = BatchShape(prefill_new_tokens=(m,), prefill_cached_tokens=(0,), num_sampled_tokens=1)
            assert cost.sources(shape)[op] == "measured"
            assert cost.breakdown(shape).ops[op].seconds == pytest.approx(least_s * L, rel=FLOAT32_REL)
    # attention: prefill of one prompt with no cached prefix, decode of b sequences of ctx tokens each
    prefill = [p for p in profile.ops["attn_prefill"].points if p.at[1] == 0]
    assert len(prefill) == len(profile.grid.prefill_new_tokens)
    for p in prefill:
        n = p.at[0]
        shape = BatchShape(prefill_new_tokens=(n,), prefill_cached_tokens=(0,), num_sampled_tokens=1)
        assert cost.sources(shape)["attn_prefill"] == "measured"
        assert cost.breakdown(shape).ops["attn_prefill"].seconds == pytest.approx(p.median_s * L, rel=FLOAT32_REL)
    for p in profile.ops["attn_decode"].points:
        b, ctx = p.at
        shape = BatchShape(num_decode_seqs=b, decode_context_tokens=b * ctx, num_sampled_tokens=b)
        assert cost.sources(shape)["attn_decode"] == "measured", p.at
        assert cost.breakdown(shape).ops["attn_decode"].seconds == pytest.approx(p.median_s * L, rel=FLOAT32_REL)
    context = pd.read_parquet(_torch_folder(folder, "attention") / "context_attention_perf.parquet")
    assert set(context.kernel_source) == {ATTENTION_KERNEL} and set(context.batch_size) == {1}
    assert (context.num_heads == spec.num_attention_heads).all() and (context.head_dim == spec.head_dim).all()


def test_a_scenario_runs_end_to_end_on_the_table_set(calibrated, tmp_path):
    profile, folder = calibrated
    results = {}
    # the model as measured (bf16 weights and KV), on the device's measured figures (the roofline's hardware)
    for name, cost in (("tables", f"{{kind: silicon, tables: {folder}}}"), ("roofline", "{kind: silicon}")):
        scenario = tmp_path / f"{name}.yaml"
        scenario.write_text(
            f"model: {json.dumps(profile.model.model_dump())}\nhardware: {json.dumps(profile.hardware.model_dump())}\n"
            f"cost_model: {cost}\n"
            "policy: {kind: vllm_v0, max_num_seqs: 16, max_num_batched_tokens: 512}\n"
            "kv_cache: {block_size: 16, num_blocks: 400}\n"
            "workload:\n  num_requests: 20\n  arrival: {kind: poisson, rate_per_s: 5}\n"
            "  lengths: {kind: independent, prompt: {kind: fixed, tokens: 200}, output: {kind: fixed, tokens: 20}}\n"
        )
        out = tmp_path / name
        proc = subprocess.run(
            [SERVESIM, "run", str(scenario), "--out", str(out), "--quiet", "--no-report"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        results[name] = json.loads((out / "summary.json").read_text())
        assert results[name]["completed"] == 20
    config = json.loads((tmp_path / "tables" / "config.json").read_text())
    assert config["cost_model"]["kind"] == "silicon" and config["cost_model"]["tables"] == str(folder)
    # without tables (the hardware names none) every op is the roofline's: the tables changed the run
    # (on this CPU the prefills differ most: 15 ms against 58 ms of mean TTFT)
    assert results["tables"]["mean_ttft_ms"] != pytest.approx(results["roofline"]["mean_ttft_ms"], rel=0.2)


def test_another_model_merges_and_another_device_is_refused(calibrated, tmp_path):
    profile, folder = calibrated
    copy = tmp_path / "tables"
    shutil.copytree(folder, copy)
    gemm_path = _torch_folder(copy, "gemm") / "gemm_perf.parquet"
    before = pd.read_parquet(gemm_path)
    wider = profile.model.model_copy(update={"name": "wider"})
    other = profile.model_copy(update={"model": wider})
    points = profile.ops["o_proj"].points
    n_qkv, k_qkv = gemm_shapes(profile.model)["qkv_proj"]
    again = GemmSeries("qkv_proj", n_qkv, k_qkv, points[:2])  # measured again: replaces two rows
    new = GemmSeries("mlp_down", 1024, 3072, points[:3])  # a shape the tiny model has not: three rows more
    write_table_set(copy, other, [again, new])
    after = pd.read_parquet(gemm_path)
    assert len(after) == len(before) + 3
    replaced = after[(after.n == n_qkv) & (after.k == k_qkv) & after.m.isin([1, 2])].sort_values("m")
    assert replaced.latency.tolist() == [p.median_s * 1e3 for p in points[:2]]
    meta = yaml.safe_load((gemm_path.parent / "collection_meta.yaml").read_text())
    assert meta["models"] == ["tiny-llama", "wider"]
    elsewhere = profile.model_copy(update={"device": profile.device.model_copy(update={"name": "Other GPU"})})
    with pytest.raises(ValueError, match=r"--tables-out .*: holds tables measured on .*, not Other GPU"):
        write_table_set(copy, elsewhere, [new])
    assert pd.read_parquet(gemm_path).equals(after)


def test_a_file_for_tables_out_is_one_clear_line(tmp_path, capsys):
    file = tmp_path / "f"
    file.write_text("x")
    code = main(
        [
            "calibrate",
            "--model",
            str(TINY),
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "p.json"),
            "--tables-out",
            str(file),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and f"--tables-out {file}: is a file, not a folder" in err and len(err.strip().splitlines()) == 1
