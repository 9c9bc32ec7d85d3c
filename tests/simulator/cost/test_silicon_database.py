"""Where the silicon model's tables come from: the aiconfigurator-core dependency's database, or a folder in its
layout; which framework and version are read; the derived arrays' cache; formats only some GPUs measured."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from simulator.build import deployed_model, setup_group
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.cost import BatchShape
from simulator.cost.silicon import SiliconCostModel, SiliconParams, database
from simulator.cost.silicon.tables import META_KEY, load_tables

LLAMA_8B = resolve_model("llama-3.1-8b")
DECODE = BatchShape(num_decode_seqs=32, decode_context_tokens=32 * 1000, num_sampled_tokens=32)
PREFILL = BatchShape((4096,), (0,), num_sampled_tokens=1)


def silicon(model=LLAMA_8B, hardware="h200", tp=1, **params) -> SiliconCostModel:
    return SiliconCostModel(SiliconParams(**params), model, resolve_hardware(hardware), tp)


def test_the_newest_version_of_the_engine_is_read_and_each_table_is_filled_back_to_it():
    sel = database.select(database.table_set("b200_sxm"), "vllm")
    assert sel.version == database.newest(database.table_set("b200_sxm").frameworks()["vllm"])
    attention = sel.table("attention", "generation_attention_perf.parquet")
    assert (attention.framework, attention.version, attention.note) == ("vllm", sel.version, "")
    # b200's vLLM MoE tables were collected at 0.19.0, 0.22.0 and 0.24.0: the newest not after the version
    moe = sel.table("moe", "moe_perf.parquet")
    assert moe.version == sel.version
    nccl = sel.library()
    assert nccl.framework == "nccl" and nccl.path.name == "nccl_perf.parquet"


def test_an_engine_not_measured_on_a_gpu_reads_vllms_tables_and_says_so():
    sel = database.select(database.table_set("b60"), "sglang")
    gemm = sel.table("gemm", "gemm_perf.parquet")
    assert gemm.framework == "vllm" and gemm.note == "sglang not measured on b60"
    with pytest.raises(ValueError, match=r"cost_model.framework: sglang was not measured on b60 \(measured: vllm"):
        database.select(database.table_set("b60"), "sglang", "0.5.14")


def test_a_version_not_measured_is_one_line_naming_those_measured():
    with pytest.raises(ValueError) as err:
        silicon(framework="vllm", version="0.1.0")
    text = str(err.value)
    assert text.startswith("hardware H200-SXM-141GB: silicon_tables: cost_model.version: vllm 0.1.0 was not measured")
    assert "0.24.0" in text and "\n" not in text


def test_each_engine_reads_its_own_kernels():
    """vLLM, SGLang and TensorRT-LLM measured the same GEMM with their own kernels: the tables differ."""
    times = {}
    for framework in ("vllm", "sglang", "trtllm"):
        model = silicon(framework=framework)
        times[framework] = model.step_time(PREFILL).total_s
        assert model.tables.selection.framework == framework
        assert model.tables.sources["gemm/bf16"].startswith(f"{framework} ")
    assert len(set(times.values())) == 3


def test_the_policys_engine_chooses_the_framework():
    for policy, engine in (("vllm", "vllm"), ("vllm_v0", "vllm"), ("sglang", "sglang"), ("trtllm", "trtllm")):
        cfg = validate_scenario({"hardware": "h200", "policy": policy, "workload": {"num_requests": 2}})
        setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
        assert setup.cost_model.framework == engine
    cfg = validate_scenario({"policy": "sglang", "cost_model": {"kind": "silicon", "framework": "vllm"}})
    assert setup_group(cfg, cfg.replica_groups()[0], 0, None).cost_model.framework == "vllm"  # the user's choice stands


def test_nvfp4_gemms_are_measured_only_where_the_gpu_has_fp4_tensor_cores():
    fp4 = deployed_model(LLAMA_8B, "nvfp4")
    blackwell = silicon(fp4, "b200")
    assert blackwell.sources(PREFILL)["o_proj"] in ("measured", "interpolated")
    assert "NvFp4" in blackwell.tables_of(PREFILL)["o_proj"]
    assert blackwell.step_time(PREFILL).total_s < silicon(LLAMA_8B, "b200").step_time(PREFILL).total_s
    # Hopper has no FP4 tensor cores: vLLM runs NVFP4 weight-only; the bf16 table anchored at 0.5625-byte weights
    hopper = silicon(fp4, "h200")
    assert hopper.sources(DECODE)["o_proj"].endswith("bf16 table, 0.5625-byte weights by roofline")
    assert hopper.fallbacks["o_proj"] == 0  # sources() leaves the run's counts alone
    bf16_decode = silicon(LLAMA_8B, "h200").breakdown(DECODE).ops["mlp_down"].seconds
    assert hopper.breakdown(DECODE).ops["mlp_down"].seconds < bf16_decode  # fewer weight bytes to read


def test_block_fp8_reads_the_block_scaled_kernels():
    model = silicon(deployed_model(LLAMA_8B, "fp8_block"), "h200")
    # vLLM's own block-FP8 table times the host (next test): DeepGEMM as SGLang's collector timed it stands in
    assert "sglang_deepgemm_gemm_nt_f8f8bf16" in model.tables_of(PREFILL)["o_proj"]
    assert "DeepGemmFp8BlockScaledMMKernel host-bound" in model.tables_of(PREFILL)["o_proj"]
    per_tensor = silicon(deployed_model(LLAMA_8B, "fp8"), "h200")
    assert "CutlassFP8ScaledMMLinearKernel" in per_tensor.tables_of(PREFILL)["o_proj"]


def test_derived_arrays_are_cached_by_dependency_version_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path))
    load_tables.cache_clear()
    try:
        first = load_tables("l40s")
        files = list((tmp_path / "silicon").rglob("*.npz"))
        assert len(files) == 1 and f"aiconfigurator-core-{database.dependency_version()}" in str(files[0])
        load_tables.cache_clear()
        again = load_tables("l40s")  # read from the cache file
        assert again.keys == first.keys and again.sources == first.sources
        for key in list(first.keys)[:50]:
            np.testing.assert_array_equal(again.array(key), first.array(key))
        files[0].write_bytes(b"not an npz")  # a damaged cache file is derived again
        load_tables.cache_clear()
        assert load_tables("l40s").keys == first.keys
        whole = files[0].read_bytes()
        files[0].write_bytes(whole[: len(whole) // 2])  # so is a truncated one (zipfile.BadZipFile)
        load_tables.cache_clear()
        assert load_tables("l40s").keys == first.keys
    finally:
        load_tables.cache_clear()


def test_the_cache_packs_each_dtype_in_one_block_and_takes_the_layout_before_without_deriving(tmp_path, monkeypatch):
    """The cache file holds one flat block per dtype and a JSON index (a few entries for ~20,000 arrays); arrays read
    back as read-only views, equal to the derived ones; a file of the layout before (one entry per array) is repacked,
    not derived again."""
    from simulator.cost.silicon import tables as tables_module

    arrays = {"a/ms": np.arange(6, dtype=np.float32).reshape(2, 3), "b/m": np.array([1.0, 2.5]), "c": np.eye(2) > 0}
    stored = tables_module.pack(arrays)
    assert set(stored) == {"f4", "f8", "i8", "b1", "index"}
    back = tables_module.unpack(stored)
    assert set(back) == set(arrays) and "a/ms" in back and len(back) == 3
    for key, array in arrays.items():
        np.testing.assert_array_equal(back[key], array)
        assert back[key].dtype == array.dtype and back[key].shape == array.shape
    with pytest.raises(ValueError):
        back["a/ms"][0, 0] = 1.0  # shared views: never changed in place
    with pytest.raises(ValueError, match="cannot be packed"):
        tables_module.pack({"s": np.array(["x"])})

    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path))
    load_tables.cache_clear()
    try:
        derived = load_tables("l40s")
        (packed,) = (tmp_path / "silicon").rglob("*.npz")
        assert packed.name.endswith(f".{tables_module.LAYOUT}.npz")
        with np.load(packed) as f:
            assert len(f.files) == 6  # 4 blocks, the index and the sources
        legacy = packed.with_name(packed.name.replace(f".{tables_module.LAYOUT}", ""))
        np.savez(
            legacy, **{k: derived.array(k) for k in derived.keys}, **{META_KEY: np.array(json.dumps(derived.sources))}
        )
        packed.unlink()
        load_tables.cache_clear()

        def no_derivation(sel):
            raise AssertionError("derived again")

        monkeypatch.setattr("simulator.cost.silicon.convert.convert", no_derivation)
        again = load_tables("l40s")  # from the layout before, repacked
        assert packed.is_file() and again.keys == derived.keys and again.sources == derived.sources
        for key in sorted(derived.keys)[:200]:
            np.testing.assert_array_equal(again.array(key), derived.array(key))
    finally:
        load_tables.cache_clear()


def test_a_folder_in_the_database_layout_is_read_by_the_same_code(tmp_path):
    """One cost model, two sources: the dependency's H200 GEMM and attention tables copied into a folder price a
    step exactly as the dependency's own do."""
    source = database.table_set("h200_sxm").root
    for family, name in (("gemm", "gemm_perf.parquet"), ("attention", "generation_attention_perf.parquet")):
        src = source / family / "vllm" / "0.24.0" / name
        dst = tmp_path / "tables" / family / "vllm" / "0.24.0" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    folder = silicon(tables=str(tmp_path / "tables"))
    ours = folder.breakdown(DECODE).ops
    theirs = silicon().breakdown(DECODE).ops
    for op in ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "attn_decode", "lm_head"):
        assert ours[op].seconds == theirs[op].seconds, op
    assert folder.tables.selection.tables.source == f"folder {tmp_path / 'tables'}"
    with pytest.raises(ValueError, match=r"no gemm/<framework>/<version>/gemm_perf\.parquet"):
        silicon(tables=str(tmp_path))
    with pytest.raises(ValueError, match="no such folder of measured tables"):
        silicon(tables=str(tmp_path / "absent" / "x"))


def test_a_folder_table_without_the_columns_read_is_one_line_naming_it(tmp_path):
    import pandas as pd

    path = tmp_path / "tables" / "gemm" / "torch" / "2.0" / "gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame({"m": [1], "latency": [0.1]}).to_parquet(path)
    with pytest.raises(ValueError) as err:
        silicon(tables=str(tmp_path / "tables"))
    text = str(err.value)
    assert f"{path}: no column kernel_source, gemm_dtype, n, k" in text and "\n" not in text


def test_without_the_dependency_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(database, "dependency_root", lambda: None)
    with pytest.raises(ValueError, match=r"measured tables need the aiconfigurator-core package"):
        database.table_set("h200_sxm")


def test_a_gemm_table_that_times_the_host_is_replaced_by_one_that_times_the_kernel():
    """vLLM 0.24.0's block-FP8 GEMMs take 85-180 us on h200 from m = 1 to 4096 at n x k = 1024 x 3072 (the Python
    wrapper timed outside a CUDA graph); SGLang's collector times the same DeepGEMM kernel at 7-15 us there. A
    CUDA-graph decode step pays the kernel: every GEMM table read has a floor of one launch, not of the host."""
    from simulator.cost.silicon import convert

    for system in ("h200_sxm", "b200_sxm", "h100_sxm"):
        arrays, meta = convert.convert(database.select(database.table_set(system), "vllm"))
        assert "host-bound" in meta["gemm/fp8_block"] and meta["gemm/fp8_block"].startswith("sglang ")
        for key in ("bf16", "fp8", "fp8_block"):
            smallest = np.nanmin(arrays[f"gemm/{key}/ms"])
            assert smallest < convert.HOST_BOUND_FLOOR_MS, (system, key, smallest)
    # one decode step of a block-FP8 model at batch 4: the projections cost microseconds, not 60 us each
    model = silicon(deployed_model(LLAMA_8B, "fp8_block"), "h200")
    o_proj = model.breakdown(BatchShape(num_decode_seqs=4, decode_context_tokens=4000, num_sampled_tokens=4))
    assert o_proj.ops["o_proj"].seconds / LLAMA_8B.num_layers < 20e-6


def test_tensorrt_llms_untuned_nvfp4_gemms_are_read_from_a_tuned_engines_table():
    """TensorRT-LLM's NVFP4 GEMM picks its tactic by the autotuner its PyExecutor runs at startup; aiconfigurator's
    collector times it outside ``autotune()`` (the fallback tactic: 22.3 us at m = 8, n x k = 7168 x 8192 on B200,
    against SGLang's 12.5 us and vLLM's 13.3). Its NVFP4 GEMMs are read from SGLang's table of the same GPU, named in
    the source; its other GEMM dtypes stay its own."""
    import pandas as pd

    from simulator.cost.silicon import convert

    trt = database.select(database.table_set("b200_sxm"), "trtllm")
    frame = pd.read_parquet(trt.table("gemm", "gemm_perf.parquet").path)
    rows = frame[(frame.gemm_dtype == "nvfp4") & (frame.m == 8) & (frame.n == 7168) & (frame.k == 8192)]
    assert rows.latency.min() == pytest.approx(0.0223, abs=5e-4)
    arrays, meta = convert.convert(trt)
    assert meta["gemm/nvfp4"].startswith("sglang 0.5.14, sglang_flashinfer_cutedsl_nvfp4 (trtllm 1.3.0rc20 ")
    assert meta["gemm/nvfp4"].endswith("untuned)")
    assert all(meta[f"gemm/{key}"].startswith("trtllm ") for key in ("bf16", "fp8", "fp8_block"))
    m, n, k = (arrays[f"gemm/nvfp4/{axis}"] for axis in "mnk")
    ms = arrays["gemm/nvfp4/ms"][list(m).index(8), list(n).index(7168), list(k).index(8192)]
    assert ms == pytest.approx(0.0125, abs=5e-4)


def test_an_mla_decode_module_table_that_times_the_host_is_replaced_by_one_that_times_the_kernels():
    """vLLM 0.24.0's MLA generation module takes 87 us at batch 1 on b300 (a flat floor over heads and lengths) where
    TensorRT-LLM's measurement of the same module on that GPU takes 46 us, as vLLM's own on b200 does: a CUDA-graph
    decode step pays the kernels, so b300 reads TensorRT-LLM's table, named so; b200 keeps vLLM's own."""
    from simulator.cost.silicon import convert

    meta = load_tables("b300_sxm", "vllm").sources
    assert meta["mla_decode"].startswith("trtllm 1.3.0rc20 (vllm 0.24.0 host-bound: 87 us"), meta["mla_decode"]
    assert meta["mla_prefill"].startswith("vllm 0.24.0")  # prefill is not replayed from a CUDA graph: kept
    assert load_tables("b200_sxm", "vllm").sources["mla_decode"] == "vllm 0.24.0, FLASHINFER_MLA"
    frame = convert._read(
        database.select(database.table_set("b300_sxm"), "vllm").table("mla", "mla_generation_module_perf.parquet")
    )
    assert convert.module_floor_ms(frame, "step") > convert.HOST_BOUND_MODULE_RATIO * 0.046
    # Kimi-K2.5-shaped (DeepSeek-V3's MLA, 64 heads) decode on 8 x B300: about TensorRT-LLM's 50 us a layer
    kimi = resolve_model("deepseek-ai/DeepSeek-V3").model_copy(update={"num_attention_heads": 64})
    model = SiliconCostModel(SiliconParams(tables="b300_sxm", framework="vllm"), kimi, resolve_hardware("b300"), tp=8)
    shape = BatchShape(num_decode_seqs=4, decode_context_tokens=4 * 1000, num_sampled_tokens=4)
    assert model.breakdown(shape).ops["attn_decode"].seconds / kimi.num_layers < 60e-6


def test_nvfp4_mla_models_read_the_bf16_mla_module():
    """NVIDIA's NVFP4 checkpoints of MLA models keep MLA's projections in bf16 (their exclude_modules): DeepSeek-V3
    at NVFP4 on 8 x B200 under TensorRT-LLM reads the bf16 module, not the one with NVFP4 projections."""
    dsv3 = deployed_model(resolve_model("deepseek-ai/DeepSeek-V3"), "nvfp4").model_copy(update={"kv_cache_bytes": 1.0})
    model = SiliconCostModel(SiliconParams(tables="b200_sxm", framework="trtllm"), dsv3, resolve_hardware("b200"), tp=8)
    shape = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 1024, num_sampled_tokens=8)
    tables = load_tables("b200_sxm", "trtllm")
    bf16, how = tables.mla("mla_decode", "fp8", "bf16", 16)
    fp4, _ = tables.mla("mla_decode", "fp8", "nvfp4", 16)
    assert how == "measured"
    per_layer = model.breakdown(shape).ops["attn_decode"].seconds / dsv3.num_layers
    assert per_layer == pytest.approx(bf16.rows[bf16.batch.index(8)](1024), rel=1e-9)
    assert per_layer < fp4.rows[fp4.batch.index(8)](1024)


def test_tensorrt_llm_per_tensor_fp8_gemms_quantize_with_the_checkpoints_static_scale():
    """aiconfigurator's TensorRT-LLM FP8 GEMM rows time a dynamic activation scale (no input_scale loaded); the
    ModelOpt FP8 checkpoints TensorRT-LLM serves carry static ones. The engine's own measurement of the difference
    (computescale_perf: about 8 us at decode sizes) is subtracted per (m, k); other engines' rows are kept."""

    from simulator.cost.silicon import convert

    sel = database.select(database.table_set("h200_sxm"), "trtllm")
    tables = load_tables("h200_sxm", "trtllm")
    assert "static activation scale: trtllm 1.3.0rc20 compute_scale subtracted" in tables.sources["gemm/fp8"]
    raw = convert._read(sel.table("gemm", "gemm_perf.parquet"))
    scale = convert._read(sel.table("quantize", "computescale_perf.parquet"))
    row = raw[(raw.gemm_dtype == "fp8") & (raw.m == 4) & (raw.n == 8192) & (raw.k == 8192)].latency.iloc[0]
    less = scale[(scale.m == 4) & (scale.k == 8192)].latency.median()
    assert 0.005 < less < 0.012  # the amax pass and its cast: microseconds
    m, n, k = (list(tables.array(f"gemm/fp8/{axis}")) for axis in "mnk")
    got = tables.array("gemm/fp8/ms")[m.index(4), n.index(8192), k.index(8192)]
    # the scale's time off each row, then the column read as its nearest non-decreasing curve in m
    # (convert.monotone_in_m), which moves this point by 0.6 %
    column = raw[(raw.gemm_dtype == "fp8") & (raw.n == 8192) & (raw.k == 8192)].groupby("m").latency.mean()
    scales = scale[scale.k == 8192].groupby("m").latency.median().reindex(column.index).fillna(0.0)
    static = (column - scales).where(column - scales > 0, column)
    fitted = dict(zip(static.index, convert.isotonic_median(static.to_numpy()), strict=True))
    assert got == pytest.approx(fitted[4], rel=1e-6)
    assert got == pytest.approx(row - less, rel=0.01)
    assert "compute_scale" not in load_tables("h200_sxm", "vllm").sources["gemm/fp8"]


def test_a_moe_shape_missing_from_the_newest_table_is_read_from_an_older_version_of_the_same_engine():
    """h200's vLLM 0.24.0 MoE table has no MiniMax-M2.5 shape (hidden 3072, 1536 per expert, 256 experts, top 8);
    0.19.0 measured it: the roofline is not used where the engine's own kernel was measured."""
    model = deployed_model(resolve_model("MiniMaxAI/MiniMax-M2.5"), None)
    step = silicon(model, "h200", tp=8)
    decode = BatchShape(num_decode_seqs=4, decode_context_tokens=4 * 1500, num_sampled_tokens=4)
    assert step.sources(decode)["mlp_gate_up"] == "measured"
    assert "shapes it lacks from vllm 0.19.0" in step.tables_of(decode)["mlp_gate_up"]


def test_a_gemm_column_is_read_as_the_nearest_non_decreasing_curve_in_m():
    from simulator.cost.silicon.convert import isotonic_median, monotone_in_m

    # glitches at m = 1 and 2 (timed first) and at m = 4, outvoted by the flat run they sit in
    times = np.array([27.2, 32.5, 12.9, 32.4, 12.8, 12.6, 13.0, 13.1, 13.4, 20.0, 41.0])
    np.testing.assert_allclose(isotonic_median(times), [12.9] * 6 + [13.0, 13.1, 13.4, 20.0, 41.0])
    # ordinary noise is read at its median, not at its luckiest timing
    np.testing.assert_allclose(isotonic_median(np.array([10.0, 10.4, 9.8, 10.2, 9.9])), [10.0] * 5)
    rising = np.array([[1.0, 2.0], [2.0, 3.0], [4.0, np.nan], [5.0, 6.0]])  # already rising: kept; NaN stays NaN
    np.testing.assert_array_equal(monotone_in_m(rising), rising)
    fitted = monotone_in_m(np.array([[np.nan], [3.0], [1.0], [1.0]]))
    assert np.isnan(fitted[0, 0]) and np.allclose(fitted[1:, 0], [1.0, 1.0, 1.0])


def test_a_gemm_timing_glitch_is_not_read_as_the_kernels_time():
    """vLLM 0.24.0's CUTLASS FP8 table on B200 times Llama-3.1-70B's TP-4 QKV projection (n x k = 2560 x 8192) at
    12.9, 32.4 and 12.8 us at m = 3, 4 and 5, where one CUTLASS configuration serves m up to 16: a decode step of 4
    requests reads the flat run's time, not the glitch. Every GEMM grid read is non-decreasing along m."""
    from simulator.cost.silicon import convert

    sel = database.select(database.table_set("b200_sxm"), "vllm")
    raw = convert._read(sel.table("gemm", "gemm_perf.parquet"))
    cutlass = raw[raw.kernel_source == "CutlassFP8ScaledMMLinearKernel"]
    column = cutlass[(cutlass.n == 2560) & (cutlass.k == 8192)].groupby("m").latency.mean()
    assert column[4] > 2 * max(column[3], column[5])  # the glitch, as the dependency ships it
    flat_run = column[(column.index >= 3) & (column.index <= 16) & (column.index != 4)]
    tables = load_tables("b200_sxm", "vllm")
    m, n, k = (list(tables.array(f"gemm/fp8/{axis}")) for axis in "mnk")
    grid = tables.array("gemm/fp8/ms")
    got_ms = grid[m.index(4), n.index(2560), k.index(8192)]
    assert flat_run.min() <= got_ms <= flat_run.max() < column[4] / 2
    assert np.all(np.diff(grid, axis=0) >= 0)
    llama_70b = resolve_model("meta-llama/Meta-Llama-3.1-70B")
    model = silicon(deployed_model(llama_70b, "fp8"), "b200", tp=4, framework="vllm")
    seconds, source = model._gemm_lookup("qkv_proj", 4)
    assert source == "measured" and seconds == pytest.approx(got_ms * 1e-3, rel=1e-6)
