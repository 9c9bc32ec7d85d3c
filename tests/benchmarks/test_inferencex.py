"""The InferenceX benchmark: points read from the dependency's file, written as scenarios, run end to end."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchmarks import inferencex_points
from benchmarks.inferencex import report_html, run_benchmark, summary_markdown
from benchmarks.inferencex_points import (
    GAP_ANALYSIS,
    INFERENCEX,
    LAYOUT_COLUMNS,
    MEASURED_DAY,
    RECIPES,
    PointRefused,
    check_not_mtp,
    check_not_mtp_sweep,
    drop_repeated_measurements,
    kept_copy,
    read_points,
    recipe_label,
    sample_path,
    scenario_for,
    select_points,
    source_of,
)
from simulator.config.presets import resolve_model
from simulator.config.scenario import validate_scenario


@pytest.fixture(scope="module")
def points() -> pd.DataFrame:
    return read_points()


def first(points: pd.DataFrame, **where) -> pd.Series:
    """The first row (by id) with ``where`` that is not refused as an MTP run (``check_not_mtp``, ``_sweep``)."""
    rows = points
    for column, value in where.items():
        rows = rows[rows[column] == value]
    for _, row in rows.sort_values("id").iterrows():
        try:
            check_not_mtp(str(row["silicon_data_source"]))
            check_not_mtp_sweep(row)
        except PointRefused:
            continue
        return row
    raise AssertionError(f"no row of silicon_sample.csv with {where} that is not an MTP run")


def test_sources_split_as_documented(points):
    # 4,065 distinct runs of the file's 5,221 rows: 2,489 InferenceX's own (2,897 rows), the rest NVIDIA's
    # gap-analysis runs (2,324 rows)
    assert len(points) == 4065
    assert points["source"].value_counts().to_dict() == {INFERENCEX: 2489, GAP_ANALYSIS: 1576}
    assert source_of("db-dump/2026-04-27; config_id=733") == INFERENCEX
    assert source_of("source_file=2026-03-25.csv; model=DeepSeek-R1") == GAP_ANALYSIS


def test_a_run_the_file_repeats_is_read_once():
    """The file holds some runs twice or three times (InferenceX's database dump and its exports overlap): read
    once, as the database dump's row where it has one, else the 2026-04-06 export's; two runs of one load whose
    figures differ are both kept."""
    raw = pd.read_csv(sample_path())
    assert len(raw) == 5221
    kept = drop_repeated_measurements(raw)
    assert len(kept) == 4065 and kept["id"].is_unique
    ids = set(kept["id"])
    # the same MiniMax-M2.5 run in the database dump and in the 2026-04-06 export: the dump's row is read
    assert "minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690" in ids
    assert "2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp2_ep2_1389" not in ids
    # a Qwen3.5 run of a nightly image: the export names its version "nightly-dev", the dump its date and commit
    assert "qwen3_5_b200_sglang_bf16_agg_8192x1024_c32_cfg587" in ids
    assert "2026_04_06_qwen3_5_397b_b200_sxm_sglang_bf16_agg_8192x1024_c32_tp8_ep1_1830" not in ids
    # a gpt-oss run in the 2026-03-25 and 2026-04-06 exports: the latter's (InferenceX's source) is read
    assert "2026_04_06_gpt_oss_120b_gb200_trtllm_fp4_disagg_8192x1024_c384_tp1_ep1_1216" in ids
    assert "2026_03_25_gpt_oss_120b_gb200_trtllm_fp4_disagg_8192x1024_c384_tp1_0_ep1_0_1263" not in ids
    # DeepSeek-R1 SGLang FP8 on B200, 1k/1k at 4 users, run twice on 2026-03-25 with different figures: both kept
    # (the first, 206.7 ms TTFT, is in the 2026-04-06 export too, and the second, 183.2 ms, in the database dump
    # as DeepSeek-V3: those rows are read)
    assert "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_284" not in ids
    assert "dsr1_b200_sglang_fp8_agg_1024x1024_c4_cfg87" in ids
    assert "2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_ep1_102" in ids
    assert "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_265" not in ids
    # the database dump names DeepSeek-R1's runs DeepSeek-V3: an SGLang FP8 run on 8 x H200, 1k/1k at 4 users, in the
    # dump (as DeepSeek-V3) and the 2026-04-06 export (as DeepSeek-R1), the same figures to the last digit: the dump's
    # row is read, under its own name
    dump, export = (
        "dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81",
        "2026_04_06_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_ep1_37",
    )
    both = raw.set_index("id").loc[[dump, export]]
    assert list(both["model_path"]) == ["deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1"]
    assert both["silicon_ttft_ms"].nunique() == 1 and both["silicon_tpot_ms"].nunique() == 1
    assert dump in ids and export not in ids
    assert kept_copy(export) == dump
    # one run whose layout two files record differently: DeepSeek-R1 FP4 on B200 under SGLang, 1k/1k at 128 users,
    # tp_size 16 in the database dump and 4 (with ep 4) in the 2026-03-25 export, the same figures to the last digit;
    # a disaggregated run with worker counts in the dump and none in the 2026-04-06 export: the dump's rows are read
    for dump, copy in (
        (
            "dsr1_b200_sglang_fp4_agg_1024x1024_c128_cfg202",
            "2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c128_tp4_0_ep4_0_291",
        ),
        (
            "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375",
            "2026_04_06_deepseek_r1_gb200_trtllm_fp8_disagg_1024x8192_c2048_tp8_ep8_1601",
        ),
    ):
        both = raw.set_index("id").loc[[dump, copy]]
        assert both["silicon_ttft_ms"].nunique() == 1 and both["silicon_tpot_ms"].nunique() == 1
        assert not both[list(LAYOUT_COLUMNS)].fillna(-1).nunique().eq(1).all()  # the layouts as recorded differ
        assert dump in ids and copy not in ids
        assert kept_copy(copy) == dump
    # each of the dump's rows so named is a dsr1 configuration's run
    assert set(raw.loc[raw["model_path"] == "deepseek-ai/DeepSeek-V3", "id"].str.split("_").str[0]) == {"dsr1"}
    # kept in the file's order; a frame without repeats comes back as it was
    assert list(kept.index) == list(range(len(kept)))
    assert (kept["id"].map(dict(zip(raw["id"], raw.index, strict=True))).diff().dropna() > 0).all()
    pd.testing.assert_frame_equal(drop_repeated_measurements(kept), kept)
    # a dropped row names the row kept for its run; a kept row, or no row, names none
    assert (
        kept_copy("2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp2_ep2_1389")
        == "minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690"
    )
    assert kept_copy("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690") is None
    assert kept_copy("no-such-point") is None


def test_explain_of_a_repeated_row_explains_the_run_read(capsys):
    from benchmarks.inferencex import main

    main(["--explain", "2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp2_ep2_1389"])
    out = capsys.readouterr().out
    assert out.startswith(
        "point 2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp2_ep2_1389 repeats the run of "
        "minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690"
    )
    assert "\npoint minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690 (vllm, b200_sxm, fp8, agg" in out


def test_vllm_llama_70b_fp8_on_h200_is_written_as_inferencex_runs_it(points):
    row = first(
        points, source=INFERENCEX, model="meta-llama/Llama-3.1-70B", system="h200_sxm", engine="vllm", mode="agg"
    )
    assert row["gemm_quant_mode"] == "fp8"
    conc, isl, osl = int(row["batch_size"]), int(row["isl"]), int(row["osl"])
    scenario = scenario_for(row)
    assert scenario["model"] == "meta-llama/Meta-Llama-3.1-70B"  # the dependency's name for the same model
    assert scenario["hardware"] == "h200"
    assert scenario["parallelism"] == {"tp": int(row["tp_size"])}
    assert scenario["quantization"] == "fp8"
    # benchmarks/70b_fp8_h200_slurm.sh: kv-cache-dtype fp8, --gpu-memory-utilization 0.9, --max-num-seqs $CONC,
    # max-num-batched-tokens 8192
    assert scenario["kv_cache"] == {"prefix_caching": False, "dtype": "fp8", "gpu_memory_utilization": 0.9}
    assert scenario["policy"] == {"kind": "vllm", "max_num_seqs": conc, "max_num_batched_tokens": 8192}
    assert recipe_label(row).startswith("benchmarks/70b_fp8_h200_slurm.sh@9596d23d74")
    workload = scenario["workload"]
    assert workload["kind"] == "closed_loop"
    assert (workload["concurrency"], workload["num_requests"]) == (conc, 10 * conc)
    assert workload["think_s"] == {"kind": "fixed", "seconds": 0.0}
    prompt, output = workload["lengths"]["prompt"], workload["lengths"]["output"]
    assert (prompt["min_tokens"], prompt["max_tokens"]) == (math.ceil(0.8 * isl), isl)
    assert (output["min_tokens"], output["max_tokens"]) == (math.ceil(0.8 * osl), osl)
    validate_scenario(scenario)  # servesim accepts it as written


def same_as(rows: pd.DataFrame, column: str, value) -> pd.Series:
    """Rows whose ``column`` is ``value``; a model asked for as deepseek-ai/DeepSeek-V3 is the file's name of the row
    (``model_path``: the database dump's rows of DeepSeek-R1's runs, which keep RECIPES' DeepSeek-V3 entries), where
    ``model`` reads them as the DeepSeek-R1 runs they are (``SAME_RUN_MODELS``)."""
    if column == "model" and value in inferencex_points.SAME_RUN_MODELS:
        return rows["model_path"] == value
    return rows[column] == value


def own_agg(points: pd.DataFrame, engine: str, model: str, precision: str, system: str, **where) -> pd.Series:
    """The first agg point of InferenceX's group (by id) that servesim can express (no attention DP)."""
    rows = points
    for column, value in dict(
        source=INFERENCEX, mode="agg", engine=engine, model=model, precision=precision, system=system, **where
    ).items():
        rows = rows[same_as(rows, column, value)]
    for _, row in rows.sort_values("id").iterrows():
        try:
            scenario_for(row)
        except PointRefused:
            continue
        return row
    raise AssertionError(f"no expressible point of {engine} / {model} / {precision} / {system} with {where}")


def test_trtllm_deepseek_r1_takes_max_num_tokens_from_the_script(points):
    # dsr1_fp8_b200_trt.sh: MAX_NUM_TOKENS = round_up(CONC + ISL + 64, 64), at least 8192; kv fp8; no
    # --max_batch_size (TensorRT-LLM's default); chunked context not enabled; kv_cache_config
    # free_gpu_memory_fraction 0.8
    long = own_agg(points, "trtllm", "deepseek-ai/DeepSeek-R1", "fp8", "b200_sxm", isl=8192)
    scenario = scenario_for(long)
    conc = scenario["workload"]["concurrency"]
    expected = max(math.ceil((conc + 8192 + 64) / 64) * 64, 8192)
    piecewise = {"piecewise_cuda_graph_max_tokens": expected} if conc >= 64 else {}  # PIECEWISE_CUDA_GRAPHS at 8k/1k
    assert scenario["policy"] == {
        "kind": "trtllm",
        "max_num_tokens": expected,
        "enable_chunked_prefill": False,
        **piecewise,
    }
    fraction = 0.75 if int(long["moe_tp_size"]) == 4 else 0.8  # KV_CACHE_FREE_MEM_FRACTION, 0.75 at 8k/1k on TP 4
    assert scenario["kv_cache"] == {"prefix_caching": False, "dtype": "fp8", "free_gpu_memory_fraction": fraction}
    short = scenario_for(own_agg(points, "trtllm", "deepseek-ai/DeepSeek-R1", "fp8", "b200_sxm", isl=1024))
    assert short["policy"]["max_num_tokens"] == 8192  # the floor
    # the H200 script has no floor
    h200 = scenario_for(own_agg(points, "trtllm", "deepseek-ai/DeepSeek-R1", "fp8", "h200_sxm", isl=1024))
    conc = h200["workload"]["concurrency"]
    assert h200["policy"]["max_num_tokens"] == math.ceil((conc + 1024 + 64) / 64) * 64
    validate_scenario(scenario)


def test_trtllm_deepseek_r1_b200_piecewise_cuda_graphs_as_the_scripts_turn_them_on(points):
    """dsr1_fp4_b200_trt.sh captures piecewise graphs at 1k/1k on TP 8 with EP_SIZE 8 (up to the last multiple of 256
    of MAX_NUM_TOKENS); dsr1_fp8_b200_trt.sh at 1k/1k and 8k/1k with CONC >= 64 and 1k/8k with 128 <= CONC < 256 (up
    to MAX_NUM_TOKENS)."""

    def captured(row_id: str) -> int | None:
        row = points[points["id"] == row_id].iloc[0]
        return scenario_for(row)["policy"].get("piecewise_cuda_graph_max_tokens")

    assert captured("dsr1_b200_trtllm_fp4_agg_1024x1024_c256_cfg191") == 8192
    assert captured("dsr1_b200_trtllm_fp8_agg_8192x1024_c64_cfg75") == 8192 + 64 + 64  # MAX_NUM_TOKENS 8320
    assert captured("dsr1_b200_trtllm_fp8_agg_1024x8192_c128_cfg75") == 8192
    off = points[
        (points["engine"] == "trtllm")
        & (points["model"] == "deepseek-ai/DeepSeek-R1")
        & (points["system"] == "b200_sxm")
        & (points["precision"] == "fp4")
        & (points["mode"] == "agg")
        & (points["isl"] == 8192)
        & ~points["silicon_data_source"].str.contains("1.2.0rc6.post3", regex=False)  # MTP runs: refused
    ]
    assert len(off) and all(captured(i) is None for i in off["id"].head(3))
    validate_scenario(scenario_for(points[points["id"] == "dsr1_b200_trtllm_fp8_agg_8192x1024_c64_cfg75"].iloc[0]))


def test_sglang_glm5_and_vllm_gptoss_recipes(points, monkeypatch):
    # glm5_fp8_b200.sh: --max-running-requests $CONC --chunked-prefill-size 32768 --max-prefill-tokens 32768, kv fp8,
    # --mem-fraction-static 0.85
    glm = own_agg(points, "sglang", "zhipuai/GLM-5", "fp8", "b200_sxm")
    scenario = scenario_for(glm)
    conc = scenario["workload"]["concurrency"]
    assert scenario["policy"] == {
        "kind": "sglang",
        "max_running_requests": conc,
        "chunked_prefill_size": 32768,
        "max_prefill_tokens": 32768,
    }
    assert scenario["kv_cache"] == {"prefix_caching": False, "dtype": "fp8", "mem_fraction_static": 0.85}
    validate_scenario(scenario)
    # dsr1_fp8_b200.sh: --mem-fraction-static 0.82, 0.95 at TP 4 (every TP 4 point is of a day InferenceX ran the
    # MTP configuration too, refused: the recipe is read with that rule off)
    monkeypatch.setattr(inferencex_points, "check_not_mtp_sweep", lambda row: None)
    for tp, fraction in ((4, 0.95), (8, 0.82)):
        dsr1 = scenario_for(own_agg(points, "sglang", "deepseek-ai/DeepSeek-R1", "fp8", "b200_sxm", tp_size=tp))
        assert dsr1["kv_cache"]["mem_fraction_static"] == fraction
    monkeypatch.undo()
    # gptoss_fp4_h200.sh: --max-num-seqs $CONC, max-num-batched-tokens 8192, max-cudagraph-capture-size 2048,
    # --gpu-memory-utilization 0.9 and no --kv-cache-dtype (auto: the checkpoint's KV dtype, not the generic FP8)
    oss = scenario_for(own_agg(points, "vllm", "openai/gpt-oss-120b", "fp4", "h200_sxm"))
    conc = oss["workload"]["concurrency"]
    assert oss["policy"] == {
        "kind": "vllm",
        "max_num_seqs": conc,
        "max_num_batched_tokens": 8192,
        "max_cudagraph_capture_size": 2048,
    }
    assert oss["kv_cache"] == {"prefix_caching": False, "gpu_memory_utilization": 0.9}
    # minimaxm2.5_fp8_h200.sh: only --gpu-memory-utilization 0.95: vLLM's defaults for the batch; its
    # `[ "$EP_SIZE" -ge 1 ]` passes --enable-expert-parallel for every point: EP = TP
    minimax = scenario_for(own_agg(points, "vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "h200_sxm"))
    assert minimax["policy"] == {"kind": "vllm"}
    assert minimax["parallelism"]["ep"] == minimax["parallelism"]["tp"]
    assert minimax["kv_cache"] == {"prefix_caching": False, "gpu_memory_utilization": 0.95}
    validate_scenario(minimax)


def day_rows(
    points: pd.DataFrame, engine: str, model: str, precision: str, system: str, day: str, **where
) -> pd.DataFrame:
    """The agg points of InferenceX's group measured on ``day`` (and with each column of ``where`` equal)."""
    rows = points[points["silicon_data_source"].str.extract(MEASURED_DAY, expand=False) == day]
    for column, value in dict(
        source=INFERENCEX, mode="agg", engine=engine, model=model, precision=precision, system=system, **where
    ).items():
        rows = rows[same_as(rows, column, value)]
    assert len(rows), f"no {engine} / {model} / {precision} / {system} point of {day} with {where}"
    return rows


def on_day(points: pd.DataFrame, engine: str, model: str, precision: str, system: str, day: str) -> pd.Series:
    """The first agg point of InferenceX's group (by id) measured on ``day``."""
    return day_rows(points, engine, model, precision, system, day).sort_values("id").iloc[0]


def test_a_point_runs_the_script_as_it_stood_on_its_day(points):
    # minimaxm2.5_fp8_h200.sh gained --enable-expert-parallel and --no-enable-prefix-caching on 2026-03-13: the points
    # of 2026-03-01 (vLLM 0.16.0) ran TP alone, prefix caching on, and FlashInfer's CUTLASS experts (0.16.0's FP8 MoE
    # oracle), those of 2026-03-28 EP = TP
    minimax = ("vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "h200_sxm")
    before = scenario_for(on_day(points, *minimax, "2026-03-01"))
    assert before["parallelism"] == {"tp": 4}
    assert before["kv_cache"] == {"prefix_caching": True, "gpu_memory_utilization": 0.95}
    assert before["cost_model"] == {"kind": "silicon", "moe_kernel": "cutlass"}
    after = scenario_for(on_day(points, *minimax, "2026-03-28"))
    assert after["parallelism"]["ep"] == after["parallelism"]["tp"] == 8
    assert after["kv_cache"]["prefix_caching"] is False and "cost_model" not in after
    # gptoss_fp4_h100: VLLM_MXFP4_USE_MARLIN=1 from 2026-01-02; vLLM 0.11.2 ran the experts on triton_kernels before
    oss = ("vllm", "openai/gpt-oss-120b", "fp4", "h100_sxm")
    assert scenario_for(on_day(points, *oss, "2025-12-08"))["cost_model"]["moe_kernel"] == "triton_kernels"
    assert scenario_for(on_day(points, *oss, "2026-03-27"))["cost_model"]["moe_kernel"] == "marlin"
    assert recipe_label(on_day(points, *oss, "2025-12-08")) == "benchmarks/gptoss_fp4_h100_docker.sh@4e135fd3f0"
    # gptoss_fp4_b200: kv-cache-dtype fp8 from 2025-12-05
    b200 = ("vllm", "openai/gpt-oss-120b", "fp4", "b200_sxm")
    assert "dtype" not in scenario_for(on_day(points, *b200, "2025-11-02"))["kv_cache"]
    assert scenario_for(on_day(points, *b200, "2026-02-25"))["kv_cache"]["dtype"] == "fp8"
    for scenario in (before, after):
        validate_scenario(scenario)
    # minimaxm2.5_fp8_b200.sh before bddbf4031 (2026-04-03): EP on for every point, 0.95, KV auto, vLLM's budget, and
    # FlashInfer's and DeepGEMM's experts turned off (Triton's)
    b200 = scenario_for(on_day(points, "vllm", "MiniMaxAI/MiniMax-M2.5", "fp8", "b200_sxm", "2026-03-28"))
    assert b200["parallelism"]["ep"] == b200["parallelism"]["tp"] and b200["policy"] == {"kind": "vllm"}
    assert b200["kv_cache"] == {"prefix_caching": False, "gpu_memory_utilization": 0.95, "block_size": 32}
    assert b200["cost_model"] == {"kind": "silicon", "moe_kernel": "triton"}
    # kimik2.5_fp4_b200.sh never passes --enable-expert-parallel (the file records the configuration's ep 4 of
    # 2026-03-27); from 2026-04-20 --kv-cache-dtype fp8, 2 x ISL tokens a step and CUDA graphs to 2048. Before, no
    # --kv-cache-dtype: vLLM's auto, the FP8 cache that the served nvidia/Kimi-K2.5-NVFP4 declares
    kimi = ("vllm", "moonshotai/Kimi-K2.5", "fp4", "b200_sxm")
    march_rows = day_rows(points, *kimi, "2026-03-27")
    march = march_rows[march_rows["moe_ep_size"] > 1].sort_values("id").iloc[0]
    assert scenario_for(march)["parallelism"] == {"tp": int(march["tp_size"])}
    assert scenario_for(march)["kv_cache"] == {"prefix_caching": False, "gpu_memory_utilization": 0.9, "dtype": "fp8"}
    glm = scenario_for(on_day(points, "sglang", "zhipuai/GLM-5", "fp4", "b200_sxm", "2026-03-29"))["kv_cache"]
    assert glm["dtype"] == "fp8"  # nvidia/GLM-5-NVFP4's hf_quant_config.json: kv_cache_quant_algo FP8
    glm_fp8 = scenario_for(on_day(points, "sglang", "zhipuai/GLM-5", "fp8", "h200_sxm", "2026-03-19"))["kv_cache"]
    assert "dtype" not in glm_fp8  # zai-org's FP8 release declares no KV quantization: auto is bf16
    april = on_day(points, *kimi, "2026-04-20")
    policy = scenario_for(april)["policy"]
    assert policy["max_num_batched_tokens"] == 2 * int(april["isl"]) and policy["max_cudagraph_capture_size"] == 2048
    validate_scenario(scenario_for(april))
    # a change takes effect on its day; a point without a recorded day runs the latest script
    recipe = RECIPES[oss]
    assert recipe.on("2026-01-01") is recipe.earlier[-1][1] and recipe.on("2025-11-02") is recipe.earlier[0][1]
    assert recipe.on("2026-01-02") is recipe.on(None) is recipe
    assert recipe_label(on_day(points, *oss, "2025-11-02")) == "benchmarks/gptoss_fp4_h100_docker.sh@e06929c701"


def test_the_2025_11_02_deepseek_trtllm_points_run_the_layout_their_scripts_chose(points, monkeypatch):
    # e06929c70's dsr1_*_trt_slurm.sh set EP_SIZE, DP_ATTENTION and MOE_BACKEND from ISL, OSL and CONC and the file
    # records none of them; MAX_NUM_TOKENS had no 8192 floor before 64af5a771 (2026-01-21)
    rows = day_rows(points, "trtllm", "deepseek-ai/DeepSeek-R1", "fp4", "b200_sxm", "2025-11-02")
    seen = set()
    for _, row in rows.iterrows():
        isl, osl, tp = int(row["isl"]), int(row["osl"]), int(row["tp_size"])
        conc = inferencex_points.concurrency_of(row)
        scenario = scenario_for(row)
        dp = conc > 32 if (isl, osl) == (8192, 1024) else conc >= 256
        if dp:  # attention DP on every GPU, experts over all of them, the CUTLASS experts
            assert scenario["parallelism"] == {"tp": tp, "ep": tp, "dp_attention": tp}
            assert scenario["cost_model"]["moe_kernel"] == "cutlass"
            assert scenario["policy"]["attention_dp_config"]["enable_balance"] is True
        else:
            assert scenario["cost_model"]["moe_kernel"] == "trtllm_gen"
            assert "dp_attention" not in scenario["parallelism"]
        assert scenario["policy"]["max_num_tokens"] == -(-(conc + isl + 64) // 64) * 64  # no floor
        assert "piecewise_cuda_graph_max_tokens" not in scenario["policy"]
        seen.add((dp, scenario["parallelism"].get("ep", 1) == tp))
    assert seen == {(True, True), (False, True)}  # both layouts; every point of the day was above the EP threshold
    assert inferencex_points._trt_dsr1_fp4_b200_layout(1024, 1024, 8, 8) == (1, False)  # TP 8, 1k/1k: EP above 8
    # dsr1_fp8_b200_trt_slurm.sh of 2025-12-15 (f6a9d0b6): DEEPGEMM experts for every point, the recorded layout, and
    # no floor yet (1k prompts at CONC + ISL + 64 rounded up to 64)
    v3_1215 = day_rows(points, "trtllm", "deepseek-ai/DeepSeek-V3", "fp8", "b200_sxm", "2025-12-15", isl=1024)
    for _, row in v3_1215.iterrows():
        scenario = scenario_for(row)
        conc = scenario["workload"]["concurrency"]
        assert scenario["cost_model"]["moe_kernel"] == "deepgemm" and scenario["parallelism"]["ep"] == 8
        assert scenario["policy"]["max_num_tokens"] == -(-(conc + 1024 + 64) // 64) * 64 < 8192
        assert "piecewise_cuda_graph_max_tokens" not in scenario["policy"]
    # e06929c70's FP8 scripts: EP = TP at every load, attention DP above 32 users at 1k/1k on B200 (64 otherwise) and
    # above 32 at 8k/1k on H200 (64 otherwise)
    layouts = {
        ("b200_sxm", 1024, 1024, 64): (8, True),
        ("b200_sxm", 1024, 1024, 32): (8, False),
        ("b200_sxm", 8192, 1024, 64): (8, False),
        ("h200_sxm", 8192, 1024, 64): (8, True),
        ("h200_sxm", 8192, 1024, 32): (8, False),
        ("h200_sxm", 1024, 1024, 64): (8, False),
    }
    rules = {
        "b200_sxm": inferencex_points._trt_dsr1_fp8_b200_layout,
        "h200_sxm": inferencex_points._trt_dsr1_fp8_h200_layout,
    }
    for (system, isl, osl, conc), layout in layouts.items():
        assert rules[system](isl, osl, conc, 8) == layout, (system, isl, osl, conc)
    h200 = on_day(points, "trtllm", "deepseek-ai/DeepSeek-R1", "fp8", "h200_sxm", "2025-11-02")
    assert int(h200["moe_ep_size"]) == 1 and scenario_for(h200)["parallelism"]["ep"] == int(h200["tp_size"])
    # gptoss_fp4_h200_trt_slurm.sh at e06929c70 launched --ep_size=$TP
    oss = on_day(points, "trtllm", "openai/gpt-oss-120b", "fp4", "h200_sxm", "2025-11-02")
    tp = int(oss["tp_size"])
    assert int(oss["moe_ep_size"]) == 1 and tp > 1
    assert scenario_for(oss)["parallelism"] == {"tp": tp, "ep": tp}
    # dsr1_fp4_b200_docker.sh of 2025-11-02 and -10 (SGLang): --enable-ep-moe, EP = TP where the file says 1 (the
    # points are refused as measured cold, check_warmed_up: the recipe is read with that rule off)
    sglang = on_day(points, "sglang", "deepseek-ai/DeepSeek-R1", "fp4", "b200_sxm", "2025-11-10")
    assert int(sglang["moe_ep_size"]) == 1
    monkeypatch.setattr(inferencex_points, "check_warmed_up", lambda row: None)
    layout = scenario_for(sglang)["parallelism"]
    assert layout["ep"] == layout["tp"] == int(sglang["tp_size"])


def test_gptoss_trtllm_b200_points_with_attention_dp_balance_their_contexts(points):
    # gptoss_fp4_b200_trt.sh appends attention_dp_config {enable_balance: true} when DP_ATTENTION is true
    rows = points[
        (points["source"] == INFERENCEX)
        & (points["engine"] == "trtllm")
        & (points["model"] == "openai/gpt-oss-120b")
        & (points["system"] == "b200_sxm")
        & (points["mode"] == "agg")
        & (points["attention_dp_size"] > 1)
    ]
    scenarios = []
    for _, row in rows.iterrows():
        try:
            scenarios.append(scenario_for(row))
        except PointRefused:
            continue
    assert scenarios
    for scenario in scenarios:
        assert scenario["parallelism"]["dp_attention"] > 1
        assert scenario["policy"]["attention_dp_config"] == {"enable_balance": True}
    validate_scenario(scenarios[0])


def test_the_qwen35_fp8_b200_points_of_the_mtp_configurations_day_are_refused(points):
    row = on_day(points, "sglang", "Qwen/Qwen3.5-397B-A17B", "fp8", "b200_sxm", "2026-03-20")
    with pytest.raises(PointRefused, match=r"qwen3\.5-fp8-b200-sglang-mtp"):
        scenario_for(row)
    later = on_day(points, "sglang", "Qwen/Qwen3.5-397B-A17B", "fp8", "b200_sxm", "2026-03-24")
    validate_scenario(scenario_for(later))


def test_every_recipe_names_a_script_and_a_commit():
    for key, latest in RECIPES.items():
        days = [day for day, _ in latest.earlier]
        assert days == sorted(days) and all(MEASURED_DAY.fullmatch(f"measured={day}") for day in days), key
        for recipe in (latest, *(earlier for _, earlier in latest.earlier)):
            assert recipe.script.startswith("benchmarks/") and recipe.script.endswith(".sh"), key
            assert len(recipe.commit) == 40 and int(recipe.commit, 16) >= 0, key
            assert not recipe.earlier or recipe is latest, key


def test_points_without_a_recipe_keep_the_generic_settings(points):
    # gap-analysis points are NVIDIA's runs, not InferenceX's scripts
    sglang_row = first(points, engine="sglang", mode="agg", attention_dp_size=1.0, gemm_quant_mode="fp8")
    assert sglang_row["source"] == GAP_ANALYSIS and recipe_label(sglang_row) == "generic (gap-analysis)"
    sglang = scenario_for(sglang_row)
    assert sglang["policy"] == {"kind": "sglang", "max_running_requests": sglang["workload"]["concurrency"]}
    trtllm_rows = points[
        (points["engine"] == "trtllm")
        & (points["mode"] == "agg")
        & (points["attention_dp_size"] == 1.0)
        & (points["gemm_quant_mode"] == "nvfp4")
        & (points["source"] == GAP_ANALYSIS)
        & ~points["silicon_data_source"].str.contains("1.2.0rc6.post3", regex=False)  # MTP runs: refused
        & ~points["silicon_data_source"].str.contains("measured=2026-01-14", regex=False)  # MTP_SWEEP_DAYS's
    ]
    trtllm = scenario_for(trtllm_rows.sort_values("id").iloc[0])
    assert trtllm["policy"] == {"kind": "trtllm", "max_batch_size": trtllm["workload"]["concurrency"]}
    assert trtllm["quantization"] == "nvfp4" and trtllm["kv_cache"]["dtype"] == "fp8"
    # an InferenceX group with no recipe encoded (Kimi-K2.5 FP4 on B300 under vLLM): the generic settings, labelled
    # unknown
    kimi = own_agg(points, "vllm", "moonshotai/Kimi-K2.5", "fp4", "b300_sxm")
    assert recipe_label(kimi) == "recipe unknown"
    scenario = scenario_for(kimi)
    concurrency = scenario["workload"]["concurrency"]
    assert scenario["policy"] == {"kind": "vllm", "max_num_seqs": concurrency, "max_num_batched_tokens": 8192}
    assert scenario["kv_cache"] == {"prefix_caching": False, "dtype": "fp8"}


def test_qwen35_points_take_their_sglang_scripts_settings(points):
    """The hybrid Gated DeltaNet model's SGLang scripts: --mamba-ssm-dtype bfloat16 beside the FP8 KV cache, the
    running requests, chunk and receive interval by CONC (benchmarks/single_node/qwen3.5_fp8_b200.sh@6a5dad463)."""
    qwen = own_agg(points, "sglang", "Qwen/Qwen3.5-397B-A17B", "fp8", "b200_sxm")
    assert recipe_label(qwen).startswith("benchmarks/single_node/qwen3.5_fp8_b200.sh@6a5dad463")
    scenario = scenario_for(qwen)
    assert scenario["kv_cache"] == {
        "prefix_caching": False,
        "dtype": "fp8",
        "mamba_ssm_dtype": "bfloat16",
        "mem_fraction_static": 0.82,
    }
    recv = 30 if scenario["workload"]["concurrency"] >= 16 else 10
    assert scenario["policy"] == {
        "kind": "sglang",
        "max_running_requests": 128,
        "chunked_prefill_size": 32768,
        "max_prefill_tokens": 32768,
        "scheduler_recv_interval": recv,
    }
    bf16 = own_agg(points, "sglang", "Qwen/Qwen3.5-397B-A17B", "bf16", "b300_sxm")
    assert scenario_for(bf16)["kv_cache"] == {"prefix_caching": False, "mem_fraction_static": 0.82}


def test_bf16_point_keeps_the_checkpoint_weights_and_kv_cache(points):
    scenario = scenario_for(first(points, mode="agg", precision="bf16", attention_dp_size=1.0))
    assert "quantization" not in scenario
    assert scenario["kv_cache"] == {"prefix_caching": False}


def test_a_checkpoint_published_quantized_is_served_as_published(points):
    """InferenceX serves ``vllm serve $MODEL`` with no --quantization: gpt-oss-120b's fp4 runs are its own MXFP4
    checkpoint (the file says nvfp4, aiconfigurator's modelling choice), MiniMax-M2.5's fp8 runs its own block-FP8
    release; a precision the checkpoint is not published in (DeepSeek-R1 at fp4: NVIDIA's NVFP4 release) is set."""
    gptoss = first(points, model="openai/gpt-oss-120b", precision="fp4", mode="agg", attention_dp_size=1.0)
    assert gptoss["gemm_quant_mode"] == "nvfp4"
    assert "quantization" not in scenario_for(gptoss)
    assert resolve_model(scenario_for(gptoss)["model"]).quantization == "mxfp4"
    minimax = first(points, model="MiniMaxAI/MiniMax-M2.5", precision="fp8", mode="agg")
    scenario = scenario_for(minimax)
    assert "quantization" not in scenario and resolve_model(scenario["model"]).quantization == "fp8_block"
    assert scenario["kv_cache"].get("dtype") == "fp8"
    deepseek = first(points, model="deepseek-ai/DeepSeek-R1", precision="fp4", mode="agg", attention_dp_size=1.0)
    assert scenario_for(deepseek)["quantization"] == "nvfp4"


def test_attention_dp_point_is_written_as_dp_attention_ranks(points):
    """The file records an attention-DP point's tp_size as one rank's attention TP: TensorRT-LLM's DeepSeek-R1 at
    tp 1, attention DP 8, EP 8 is 8 GPUs, parallelism {tp: 8, ep: 8, dp_attention: 8}."""
    row = first(points, mode="agg", engine="trtllm", attention_dp_size=8.0, tp_size=1.0, moe_ep_size=8.0)
    scenario = scenario_for(row)
    assert scenario["parallelism"] == {"tp": 8, "ep": 8, "dp_attention": 8}
    validate_scenario(scenario)


def test_expert_parallel_points_run_on_the_scripts_tp(points):
    """InferenceX records SGLang's and TensorRT-LLM's ``{tp: T, ep: E}`` as tp_size T x E (moe_tp T, moe_ep E): the
    scripts run T GPUs."""
    sglang = first(points, mode="agg", engine="sglang", source=INFERENCEX, tp_size=64.0, moe_ep_size=8.0)
    assert scenario_for(sglang)["parallelism"] == {"tp": 8, "ep": 8}
    trtllm = first(points, mode="agg", engine="trtllm", source=INFERENCEX, tp_size=16.0, moe_ep_size=4.0)
    assert scenario_for(trtllm)["parallelism"] == {"tp": 4, "ep": 4}
    # gap-analysis points record the GPUs as tp_size (moe_tp 1, moe_ep tp): read as recorded
    gap = first(points, mode="agg", engine="sglang", source=GAP_ANALYSIS, tp_size=8.0, moe_ep_size=8.0)
    assert scenario_for(gap)["parallelism"] == {"tp": 8, "ep": 8}


def test_trtllm_attention_dp_points_run_on_the_scripts_tp(points):
    """InferenceX records TensorRT-LLM's ``{tp: T, ep: E, dp-attn: true}`` as attention DP T x E: the script's
    ``--tp_size=$TP --ep_size=$EP_SIZE`` with ``enable_attention_dp`` runs T GPUs, one attention rank each."""
    row = points[points["id"] == "2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp2_ep2_1741"].iloc[0]
    assert (row.attention_dp_size, row.moe_tp_size, row.moe_ep_size) == (4.0, 2.0, 2.0)
    assert scenario_for(row)["parallelism"] == {"tp": 2, "ep": 2, "dp_attention": 2}
    deepseek = first(points, mode="agg", engine="trtllm", source=INFERENCEX, attention_dp_size=64.0, moe_ep_size=8.0)
    assert scenario_for(deepseek)["parallelism"] == {"tp": 8, "ep": 8, "dp_attention": 8}
    validate_scenario(scenario_for(deepseek))


def test_vllm_expert_parallel_points_take_the_scripts_layout(points):
    """vLLM's scripts run TP GPUs (``--tensor-parallel-size=$TP --enable-expert-parallel``, or ``tp 1, dp TP`` with
    DP_ATTENTION): the file's attention_dp_size TP and moe_ep_size TP x TP on those points are not read."""
    # MiniMax-M2.5 on H100, InferenceX's {tp: 4, ep: 4}: 4 GPUs, recorded as tp 4, attention DP 4, EP 16
    h100 = first(
        points,
        mode="agg",
        engine="vllm",
        system="h100_sxm",
        model_path="MiniMaxAI/MiniMax-M2.5",
        attention_dp_size=4.0,
        moe_ep_size=16.0,
    )
    assert scenario_for(h100)["parallelism"] == {"tp": 4, "ep": 4}
    # B300 FP4 cfg727 ran {tp: 2, ep: 2, dp-attn: true}: two ranks of attention TP 1, experts over both GPUs
    dp = points[points["id"] == "minimaxm2_5_b300_vllm_fp4_agg_1024x1024_c512_cfg727"].iloc[0]
    assert scenario_for(dp)["parallelism"] == {"tp": 2, "ep": 2, "dp_attention": 2}
    validate_scenario(scenario_for(dp))
    # cfg726 on the same GPU ran {tp: 2, ep: 2} without attention DP
    plain = points[points["id"] == "minimaxm2_5_b300_vllm_fp4_agg_8192x1024_c512_cfg726"].iloc[0]
    assert scenario_for(plain)["parallelism"] == {"tp": 2, "ep": 2}


def test_attention_dp_implied_but_not_recorded_is_refused(points):
    rows = points[(points["mode"] == "agg") & points.attention_dp_size.isna() & points.batch_size.notna()]
    rows = rows[rows.apply(lambda r: "silicon_concurrency=" in str(r.silicon_data_source), axis=1)]
    for _, row in rows.iterrows():
        if int(row["batch_size"]) != int(str(row.silicon_data_source).split("silicon_concurrency=")[1].split(";")[0]):
            with pytest.raises(PointRefused, match=r"^attention data parallelism size not recorded"):
                scenario_for(row)
            return
    pytest.fail("no point with an implied, unrecorded attention-DP size")


def test_an_int4_point_serves_kimis_own_int4_checkpoint(points):
    """Kimi-K2.5's INT4 points run its published checkpoint (INT4 routed experts): no quantization override."""
    scenario = scenario_for(first(points, gemm_quant_mode="int4_wo"))
    assert scenario["model"] == "moonshotai/Kimi-K2.5" and "quantization" not in scenario
    validate_scenario(scenario)


def test_disaggregated_point_becomes_prefill_and_decode_groups(points):
    disagg = points[(points["mode"] == "disagg") & points["prefill_num_workers"].notna()]
    row = first(disagg, prefill_attention_dp_size=1.0, decode_attention_dp_size=1.0)
    groups = scenario_for(row)["groups"]
    assert [(g["role"], g["count"], g["parallelism"]["tp"]) for g in groups] == [
        ("prefill", int(row["prefill_num_workers"]), int(row["prefill_tp_size"])),
        ("decode", int(row["decode_num_workers"]), int(row["decode_tp_size"])),
    ]
    with pytest.raises(PointRefused, match="without worker counts"):
        scenario_for(_no_workers(points))


def test_sglang_wide_ep_workers_on_gb200_and_gb300_run_deepep(points):
    """SGLang's GB200/GB300 srt-slurm recipes give every decode worker with attention DP ``moe-a2a-backend:
    deepep``, and the FP8 recipes' prefill workers with attention DP too: those groups dispatch tokens to their
    experts (all-to-all); FP4 prefill groups and B200's do not."""
    row = points[points["id"] == "dsr1_gb200_sglang_fp4_disagg_1024x1024_c4096_cfg483"].iloc[0]
    prefill, decode = scenario_for(row)["groups"]
    assert decode["parallelism"] == {"tp": 32, "ep": 32, "dp_attention": 32}
    assert decode["cost_model"] == {"kind": "silicon", "roofline": {"expert_all_to_all": True}}
    assert "cost_model" not in prefill
    # every DeepEP worker of the recipes sets --moe-dense-tp-size 1 and --enable-dp-lm-head
    assert decode["policy"]["moe_dense_tp_size"] == 1 and decode["policy"]["enable_dp_lm_head"] is True
    assert "moe_dense_tp_size" not in prefill.get("policy", {})
    cfg = validate_scenario(scenario_for(row))
    assert cfg.groups[1].cost_model.roofline.expert_all_to_all is True
    assert cfg.groups[1].policy.moe_dense_tp_size == 1 and cfg.groups[0].policy.moe_dense_tp_size is None
    fp8 = points[points["id"] == "dsr1_gb300_sglang_fp8_disagg_8192x1024_c1024_cfg505"].iloc[0]
    prefill, decode = scenario_for(fp8)["groups"]
    assert prefill["parallelism"] == {"tp": 8, "ep": 8, "dp_attention": 8}
    assert prefill["cost_model"] == decode["cost_model"] == {"kind": "silicon", "roofline": {"expert_all_to_all": True}}
    # measured in 2025 with the experts recorded as moe_tp: DeepEP sets ep to the workers' tp (SGLang's
    # _handle_a2a_moe); their 4-GPU workers ran no DeepEP
    old = points[points["id"] == "dsr1_gb200_sglang_fp8_disagg_1024x1024_c4096_cfg236"].iloc[0]
    assert old["decode_moe_ep_size"] == 1 and old["decode_moe_tp_size"] == 32
    prefill, decode = scenario_for(old)["groups"]
    assert (prefill["parallelism"]["ep"], decode["parallelism"]["ep"]) == (8, 32)
    four = points[points["id"] == "dsr1_gb200_sglang_fp4_disagg_1024x1024_c32_cfg252"].iloc[0]
    assert all("cost_model" not in g and "ep" not in g["parallelism"] for g in scenario_for(four)["groups"])
    b200 = points[points["id"] == "dsr1_b200_sglang_fp4_disagg_8192x1024_c2048_cfg538"].iloc[0]
    assert all("cost_model" not in g for g in scenario_for(b200)["groups"])


def test_vllm_disaggregated_prefill_workers_run_eagerly(points):
    """Every vLLM srt-slurm recipe of InferenceX's disaggregated points gives the prefill worker ``enforce-eager``,
    the decode worker CUDA graphs."""
    row = points[points["id"] == "kimik2_5_gb200_vllm_fp4_disagg_1024x1024_c8_cfg698"].iloc[0]
    scenario = scenario_for(row)
    prefill, decode = scenario["groups"]
    assert prefill["policy"] == scenario["policy"] | {"enforce_eager": True}
    # recorded tp 4 x ep 4; the recipes' prefill worker is "dep4": 4 attention-DP ranks of tp 1 over EP 4
    assert (row["prefill_tp_size"], row["prefill_attention_dp_size"], row["prefill_moe_ep_size"]) == (4, 1, 4)
    assert prefill["parallelism"] == {"tp": 4, "ep": 4, "dp_attention": 4}
    assert decode["parallelism"] == {"tp": 4, "ep": 4}
    assert "policy" not in decode
    cfg = validate_scenario(scenario)
    assert cfg.groups[0].policy.enforce_eager is True and cfg.policy.enforce_eager is False
    sglang = points[points["id"] == "dsr1_gb200_sglang_fp4_disagg_1024x1024_c4_cfg486"].iloc[0]
    assert all("enforce_eager" not in g.get("policy", {}) for g in scenario_for(sglang)["groups"])


def _no_workers(points: pd.DataFrame) -> pd.Series:
    rows = points[(points["mode"] == "disagg") & points["prefill_num_workers"].isna()]
    return rows.sort_values("id").iloc[0]


def test_sample_is_seeded_and_capped_per_group(points):
    a = select_points(points, 3, seed=0, filters={"system": "h200_sxm"})
    b = select_points(points, 3, seed=0, filters={"system": "h200_sxm"})
    assert a["id"].tolist() == b["id"].tolist()
    assert a.groupby("group").size().max() == 3
    assert set(a["system"]) == {"h200_sxm"}
    assert select_points(points, 3, seed=1, filters={"system": "h200_sxm"})["id"].tolist() != a["id"].tolist()
    # each group draws on its own: a group that loses rows leaves every other group's draw as it was
    first_group = sorted(a["group"].unique())[0]
    fewer = points.drop(points.index[(points["group"] == first_group)][:10])
    c = select_points(fewer, 3, seed=0, filters={"system": "h200_sxm"})
    assert c[c["group"] != first_group]["id"].tolist() == a[a["group"] != first_group]["id"].tolist()


def _llama_70b_h200_vllm_1k(points: pd.DataFrame) -> pd.DataFrame:
    """Llama-3.1-70B agg points of vLLM on H200 at 1k/1k and at most 4 users, by id: quick to simulate."""
    return points[
        (points["model"] == "meta-llama/Llama-3.1-70B")
        & (points["system"] == "h200_sxm")
        & (points["engine"] == "vllm")
        & (points["mode"] == "agg")
        & (points["batch_size"] <= 4)
        & (points["isl"] == 1024)
        & (points["osl"] == 1024)
    ].sort_values("id")


def test_end_to_end_two_points_through_the_benchmark_path(points, tmp_path):
    llama = _llama_70b_h200_vllm_1k(points)
    chosen = pd.concat([llama.iloc[:1], _no_workers(points).to_frame().T])
    table, runtime_s = run_benchmark(chosen, seed=0, workers=1)
    simulated, refused = table.iloc[0], table.iloc[1]
    assert pd.isna(simulated["refused"])
    for m in ("ttft", "tpot"):
        assert simulated[f"pred_{m}_ms"] > 0
        assert simulated[f"rel_err_{m}"] == pytest.approx(simulated[f"pred_{m}_ms"] / simulated[f"measured_{m}_ms"] - 1)
    assert refused["refused"] == "disaggregated point without worker counts"
    # a closed loop of at most 4 users: its first wave is their first requests, a share of the TTFTs' sum
    assert simulated["pred_ttft_first_wave_ms"] > 0 and 0 < simulated["first_wave_ttft_share"] < 1
    summary = summary_markdown(table, runtime_s, "test")
    assert "## The first wave's share of the predicted mean TTFT" in summary
    assert "## The TTFT gap by prompt length" in summary
    assert "| inferencex | meta-llama/Llama-3.1-70B | h200_sxm | vllm | fp8 | 1 |" in summary
    assert "disaggregated point without worker counts | 1 |" in summary
    assert (
        "| meta-llama/Llama-3.1-70B | h200_sxm | vllm | fp8 | benchmarks/70b_fp8_h200_slurm.sh@9596d23d74 | 1 |"
        in summary
    )
    assert "| inferencex | vllm | 1 |" in summary  # per source and engine
    report_html(table, tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert "plotly" in html and 'src="https://cdn' not in html  # plotly.js embedded: opens offline


def test_the_ttft_gap_is_split_into_the_prompts_cost_and_a_fixed_part():
    """prompt_length_table: per group, at the fewest users measured with both 1k and 8k prompts, the measured 8k-1k
    TTFT difference over the predicted one, and the 1k gap; groups without both lengths at one load are left out."""
    import pandas as pd

    from benchmarks.inferencex import prompt_length_table

    def point(model, isl, users, measured, pred, osl=1024, mode="agg", refused=None):
        return {
            "source": "inferencex", "model": model, "system": "b200_sxm", "engine": "sglang", "precision": "fp8",
            "recipe": "s.sh@c", "mode": mode, "isl": isl, "osl": osl, "concurrency": float(users),
            "measured_ttft_ms": measured, "pred_ttft_ms": pred, "refused": refused,
        }  # fmt: skip

    table = pd.DataFrame(
        [
            # fixed: every prediction 50 ms short, at 4 users (and at 8, which is not the fewest)
            point("fixed", 1024, 4, 150.0, 100.0),
            point("fixed", 8192, 4, 450.0, 400.0),
            point("fixed", 1024, 8, 900.0, 100.0),
            point("fixed", 8192, 8, 900.0, 100.0),
            # per token: the prompt's work predicted at half its cost; two runs at 1k (the median read)
            point("slope", 1024, 16, 200.0, 200.0),
            point("slope", 1024, 16, 220.0, 200.0),
            point("slope", 8192, 16, 610.0, 400.0),
            point("slope", 8192, 2, 999.0, 1.0),  # no 1k run at 2 users
            point("slope", 1024, 2, 999.0, 1.0, osl=8192),  # 8k outputs: not read
            # no 8k run simulated: refused, disaggregated
            point("alone", 1024, 4, 100.0, 90.0),
            point("alone", 8192, 4, 100.0, 90.0, refused="why"),
            point("alone", 8192, 4, 100.0, 90.0, mode="disagg"),
        ]
    )
    out = prompt_length_table(table).set_index("model")
    assert list(out.index) == ["fixed", "slope"]
    fixed, slope = out.loc["fixed"], out.loc["slope"]
    assert fixed["users"] == 4 and fixed["gap_1k_ms"] == 50 and fixed["slope_ratio"] == 1.0
    assert (fixed["measured_1k_ms"], fixed["pred_1k_ms"], fixed["measured_8k_ms"], fixed["pred_8k_ms"]) == (
        150,
        100,
        450,
        400,
    )
    assert slope["users"] == 16 and slope["gap_1k_ms"] == 10 and slope["slope_ratio"] == 2.0  # (610-210)/(400-200)


def test_intervals_calibrate_on_half_and_report_coverage_on_the_other(tmp_path):
    """benchmarks/inferencex_intervals.py on a made-up points table: bounds per engine with enough points, the
    pooled ones otherwise, and each metric's held-out coverage in the file."""
    import json

    import numpy as np
    import pandas as pd

    from benchmarks import inferencex_intervals

    rng = np.random.default_rng(0)
    n = 120
    engines = np.array(["vllm"] * 80 + ["sglang"] * 40)
    pred = rng.uniform(5, 500, size=n)
    table = pd.DataFrame(
        {
            "source": ["inferencex"] * (n - 5) + ["gap-analysis"] * 5,
            "engine": engines,
            "refused": [None] * n,
            "pred_ttft_ms": pred,
            "measured_ttft_ms": pred * np.exp(rng.normal(0.3, 0.4, size=n)),
            "pred_tpot_ms": pred / 20,
            "measured_tpot_ms": pred / 20 * np.exp(rng.normal(0.0, 0.1, size=n)),
        }
    )
    points = tmp_path / "points.csv"
    table.to_csv(points, index=False)
    out = tmp_path / "error.json"
    assert inferencex_intervals.main([str(points), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["meta"]["calibration_points"] + data["meta"]["held_out_points"] == n - 5  # gap-analysis left out
    for metric in ("mean_ttft_ms", "mean_tpot_ms"):
        assert "pooled" in data["bounds"][metric] and "vllm" in data["bounds"][metric]
        assert 0.6 < data["meta"]["coverage_held_out"][metric]["pooled"] <= 1.0
    ttft, tpot = data["bounds"]["mean_ttft_ms"]["pooled"], data["bounds"]["mean_tpot_ms"]["pooled"]
    assert ttft["hi"] - ttft["lo"] > 2 * (tpot["hi"] - tpot["lo"])  # the noisier metric gets the wider interval
    assert "coverage_over_splits" not in data["meta"]  # only with --splits

    # --splits: the same bounds (the --seed split's), and the held-out coverage over that many seeded splits
    again = tmp_path / "again.json"
    assert inferencex_intervals.main([str(points), "--out", str(again), "--splits", "30"]) == 0
    spread = json.loads(again.read_text())
    assert spread["bounds"] == data["bounds"]
    for metric in ("mean_ttft_ms", "mean_tpot_ms"):
        c = spread["meta"]["coverage_over_splits"][metric]
        assert c["splits"] == 30 and 0.0 <= c["within_5_points"] <= 1.0
        assert c["p5"] <= c["mean"] <= c["p95"] and 0.6 < c["mean"] <= 1.0
    # the spread is the splits' own: seed 0's coverage is one of them
    alone = inferencex_intervals.coverage_over_splits(
        table[table.source == "inferencex"].reset_index(drop=True), range(0, 1), 0.8
    )
    assert alone["mean_tpot_ms"]["mean"] == data["meta"]["coverage_held_out"]["mean_tpot_ms"]["pooled"]
    with pytest.raises(SystemExit) as exc:
        inferencex_intervals.main([str(points), "--out", str(again), "--splits", "-1"])
    assert exc.value.code == 2


def test_a_point_past_its_wall_time_limit_is_recorded_as_timed_out():
    from benchmarks.inferencex_points import run_point

    long_run = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "workload": {"num_requests": 500_000}}
    result = run_point(("long", long_run, 0.5))
    # the whole run takes minutes: stopped near the limit (a loaded machine delays the alarm by seconds)
    assert result["refused"] == "not simulated within the 0.5 s wall-time limit" and result["wall_s"] < 60
    short = run_point(("short", {"model": "llama-3.1-8b", "workload": {"num_requests": 5}}, 30.0))
    assert "refused" not in short and short["pred_tpot_ms"] > 0


def test_a_swallowed_alarm_is_repeated(monkeypatch):
    """An exception raised inside a gc callback is swallowed by Python (hypothesis installs one): the alarm repeats
    until the point stops."""
    import gc

    from benchmarks import inferencex_points
    from benchmarks.inferencex_points import run_point

    calls = {"n": 0}
    original = inferencex_points._on_alarm

    def first_one_lost(signum, frame):
        calls["n"] += 1
        if calls["n"] == 1:  # as if raised in a gc callback: the interpreter reports it and carries on
            return None
        return original(signum, frame)

    monkeypatch.setattr(inferencex_points, "_on_alarm", first_one_lost)
    gc.collect()
    long_run = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "workload": {"num_requests": 500_000}}
    result = run_point(("long", long_run, 0.3))
    assert result["refused"] == "not simulated within the 0.3 s wall-time limit" and calls["n"] >= 2


def test_points_measured_in_an_image_only_mtp_configurations_ran_are_refused(points):
    """InferenceX ran TensorRT-LLM 1.2.0rc6.post3 only in its dsr1-fp{4,8}-b200-trt-mtp configurations: such a point
    is a multi-token-prediction run the file does not label (nor its acceptance rate), refused with the reason."""
    mtp = "source_file=2026-04-06.csv; image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3"
    for source in (mtp, mtp.replace("#", "/"), mtp.replace("image=", 'image="') + '"'):
        with pytest.raises(PointRefused, match=r"MTP speculative decoding.*dsr1-fp8-b200-trt-mtp"):
            check_not_mtp(source)
    check_not_mtp("source_file=2026-04-06.csv; image=nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2")  # plain
    check_not_mtp("db-dump/2026-04-27; config_id=483")  # no image recorded
    row = points[points["id"] == "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c64_tp8_ep1_80"].iloc[0]
    with pytest.raises(PointRefused, match="MTP"):
        scenario_for(row)
    mtp_rows = points["silicon_data_source"].str.contains("1.2.0rc6.post3", regex=False)
    assert mtp_rows.sum() == 56 and set(points[mtp_rows]["system"]) == {"b200_sxm"}  # 88 rows, 56 runs


def test_points_recorded_as_aggregated_on_a_day_their_gpu_ran_only_disaggregated_are_refused(points):
    """InferenceX's GB200 workflow of November 2025 ran DeepSeek-R1 only through Dynamo's submit_disagg.sh; the file
    records those runs as aggregated with the job's GPUs as tp_size: each is refused with the reason, where two (tp 32
    and 64, which divide the heads) had run as one 64-GPU tensor-parallel server, their TTFT predicted 82 and 103
    times the measured."""
    agg = points[(points["source"] == INFERENCEX) & (points["mode"] == "agg") & (points["system"] == "gb200")]
    assert len(agg) == 55
    for _, row in agg.iterrows():
        with pytest.raises(PointRefused, match=r"recorded as aggregated on 2025-11-1[67], when .*submit_disagg"):
            scenario_for(row)
    wide = points[points["id"] == "2026_04_06_deepseek_r1_gb200_trtllm_fp4_agg_8192x1024_c538_tp64_ep1_113"].iloc[0]
    with pytest.raises(PointRefused, match=r"tp_size \(64\) is its GPUs"):
        scenario_for(wide)
    # the same row recorded as disaggregated, on another day or on another GPU passes the check (every GB200 point
    # those days is one of the 55)
    as_disagg = wide.copy()
    as_disagg["mode"] = "disagg"
    inferencex_points.check_not_disaggregated(as_disagg)
    other_day = wide.copy()
    other_day["silicon_data_source"] = str(wide["silicon_data_source"]).replace("2025-11-17", "2025-12-17")
    inferencex_points.check_not_disaggregated(other_day)
    other_gpu = wide.copy()
    other_gpu["system"] = "gb300"
    inferencex_points.check_not_disaggregated(other_gpu)


def test_points_of_a_day_inferencex_also_ran_the_mtp_configuration_are_refused(points):
    """On 2026-01-14 InferenceX measured DeepSeek-R1 FP8 on H200 under TensorRT-LLM at 1k/8k with 128 users, a load
    only dsr1-fp8-h200-trt-mtp's search space held, in the image the plain configuration ran too: every point of that
    day is refused (the file cannot tell the two runs apart), a point of a day that fits the plain space is not."""
    from benchmarks.inferencex_points import MTP_SWEEP_DAYS, check_not_mtp_sweep

    day = points["silicon_data_source"].str.extract(MEASURED_DAY.pattern)[0]
    h200 = (
        (points["model_path"] == "deepseek-ai/DeepSeek-R1")
        & (points["system"] == "h200_sxm")
        & (points["backend"] == "trtllm")
        & (points["mode"] == "agg")
    )
    that_day = points[h200 & (day == "2026-01-14")]
    assert len(that_day) == 28  # the day's runs, read once (the 2026-04-06 export and the 2026-03-25 file hold them)
    for _, row in that_day.iterrows():
        with pytest.raises(PointRefused, match=r"possibly measured with MTP.*2026-01-14.*dsr1-fp8-h200-trt-mtp"):
            scenario_for(row)
    for _, row in points[h200 & (day == "2025-11-02")].iterrows():
        check_not_mtp_sweep(row)  # before the configurations were kept: no evidence, not refused
    plain_day = points[
        (points["model_path"] == "deepseek-ai/DeepSeek-R1")
        & (points["system"] == "b200_sxm")
        & (points["backend"] == "trtllm")
        & (points["precision"] == "fp8")
        & (day == "2026-01-29")
    ]
    assert len(plain_day) > 0
    for _, row in plain_day.iterrows():
        check_not_mtp_sweep(row)
    refused = [key for key in MTP_SWEEP_DAYS if ((day == key[-1]) & (points["model_path"] == key[0])).any()]
    assert len(refused) == len(MTP_SWEEP_DAYS)  # every listed day has points in the file


def test_the_database_dumps_points_of_a_plain_configuration_are_kept_on_an_mtp_day(points):
    """On 2026-03-25 InferenceX ran dsr1-fp8-b200-sglang-mtp beside the plain configuration: the 2026-04-06 export's
    points of that day cannot be told apart and are refused, but the database dump's name their configuration
    (cfg87, cfg271, numbered before the first MTP configuration), so theirs are kept, whatever name the dump gives
    the model (deepseek-ai/DeepSeek-V3, read as DeepSeek-R1's run)."""
    from benchmarks.inferencex_points import check_not_mtp_sweep, runs_a_plain_configuration

    day = points["silicon_data_source"].str.extract(MEASURED_DAY.pattern)[0]
    sglang_fp8_b200 = (
        points["model_path"].isin(["deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"])
        & (points["system"] == "b200_sxm")
        & (points["backend"] == "sglang")
        & (points["precision"] == "fp8")
        & (day == "2026-03-25")
    )
    that_day = points[sglang_fp8_b200]
    dump = that_day[that_day["id"].astype(str).str.contains(r"_cfg\d+$")]
    assert sorted(set(dump["id"].astype(str).str.extract(r"_(cfg\d+)$")[0])) == ["cfg271", "cfg87"]
    assert len(dump) == 13
    for _, row in dump.iterrows():
        assert runs_a_plain_configuration(row)
        check_not_mtp_sweep(row)
    export = that_day.drop(dump.index)
    assert len(export) > 0
    for _, row in export.iterrows():
        assert not runs_a_plain_configuration(row)
        with pytest.raises(PointRefused, match=r"possibly measured with MTP.*2026-03-25"):
            check_not_mtp_sweep(row)
    late = dump.iloc[0].copy()
    late["id"] = str(late["id"]).replace("_cfg87", "_cfg453").replace("_cfg271", "_cfg453")
    with pytest.raises(PointRefused, match=r"possibly measured with MTP"):  # numbered as MTP configurations were
        check_not_mtp_sweep(late)


def test_a_configurations_search_space_doubles_its_concurrency_from_start_to_end():
    """How benchmarks/inferencex_mtp_sweeps.py reads an nvidia-master.yaml configuration (the days it found are
    MTP_SWEEP_DAYS; it needs a checkout of InferenceX, so only this part runs here)."""
    from benchmarks.inferencex_mtp_sweeps import search_space

    config = {
        "seq-len-configs": [
            {"isl": 1024, "osl": 1024, "search-space": [{"tp": 8, "conc-start": 4, "conc-end": 32}]},
            {"isl": 8192, "osl": 1024, "search-space": [{"tp": 8, "dp-attn": True, "conc-start": 64, "conc-end": 64}]},
        ]
    }
    assert search_space(config) == {
        (1024, 1024, 4, False),
        (1024, 1024, 8, False),
        (1024, 1024, 16, False),
        (1024, 1024, 32, False),
        (8192, 1024, 64, True),
    }
    assert search_space(None) is None


def test_deepseek_points_whose_client_tokenized_under_transformers_5_are_refused(points):
    """SGLang 0.5.10.post1's image pins transformers 5.3.0, under which InferenceX's client left DeepSeek's tokenizer
    unpatched for a hub model id until 2026-05-15: the server saw about 5x the prompt tokens. Its DeepSeek-V3 B300
    points are refused; the same model's points on SGLang 0.5.9 (transformers 4.57.1) are not."""
    from benchmarks.inferencex_points import check_client_tokenizer

    deepseek = points["model_path"].str.startswith("deepseek-ai/")
    v5 = points["silicon_data_source"].str.contains("sglang:v0.5.10.post1", regex=False) & deepseek
    assert v5.sum() == 31 and set(points[v5]["system"]) == {"b300_sxm"}
    for _, row in points[v5].iterrows():
        with pytest.raises(PointRefused, match=r"transformers 5\.3\.0.*#1381"):
            scenario_for(row)
    v4 = points["silicon_data_source"].str.contains("sglang:v0.5.9", regex=False) & (
        points["model_path"] == "deepseek-ai/DeepSeek-V3"
    )
    assert v4.any()
    for _, row in points[v4].iterrows():
        check_client_tokenizer(row)


def test_sglang_deepseek_b200_days_measured_cold_with_a_stall_are_refused(points):
    """InferenceX's client warms the server up only since 2026-01-21. SGLang's DeepSeek-R1 points on B200 of
    2025-11-10 (FP4: 8.6 s mean TTFT at TP 8, 1k/1k, 32 users, against 0.38-0.51 s warm) and 2025-11-18 (FP8: 2.95 s
    at 1k/8k, 64 users, against at most 1.04 s warm) hold a start-up stall: refused. The warm points, and the FP4
    group's cold day without one (2025-11-02), are not."""
    from benchmarks.inferencex_points import check_warmed_up

    group = (
        (points["engine"] == "sglang")
        & points["model"].isin(inferencex_points.DEEPSEEK_PATHS)
        & (points["system"] == "b200_sxm")
        & (points["mode"] == "agg")
        & (points["source"] == INFERENCEX)
    )
    day = points.apply(inferencex_points.measured_day, axis=1)
    fp4, fp8 = points["precision"] == "fp4", points["precision"] == "fp8"
    cold = group & ((fp4 & (day == "2025-11-10")) | (fp8 & (day == "2025-11-18")))
    assert (group & fp4 & (day == "2025-11-10")).sum() == 33 and (group & fp8 & (day == "2025-11-18")).sum() == 15
    for point_id, floor_ms in (
        ("dsr1_b200_sglang_fp4_agg_1024x1024_c32_cfg99", 8000),
        ("dsr1_b200_sglang_fp8_agg_1024x8192_c64_cfg199", 2900),
    ):
        stalled = points[points["id"] == point_id].iloc[0]
        assert cold[stalled.name] and stalled["silicon_ttft_ms"] > floor_ms
    for _, row in points[cold].iterrows():
        with pytest.raises(PointRefused, match=r"measured cold on 2025-11-1[08], .*2026-01-21.*warm runs"):
            check_warmed_up(row)
    warm = group & (day >= "2026-01-21")
    earlier = group & fp4 & (day == "2025-11-02")
    assert warm.any() and earlier.sum() == 3
    for _, row in points[warm | earlier].iterrows():
        check_warmed_up(row)
    # the scenario is refused for it
    assert all("measured cold" in str(_refusal(row).value) for _, row in points[cold].iterrows())


def _refusal(row: pd.Series):
    with pytest.raises(PointRefused) as exc:
        scenario_for(row)
    return exc


def test_the_image_is_read_from_either_kind_of_source(points):
    from benchmarks.inferencex_points import image_of

    assert image_of("db-dump/2026-04-27; config_id=717; workflow_run_id=748; lmsysorg/sglang:v0.5.10.post1-cu130") == (
        "lmsysorg/sglang:v0.5.10.post1-cu130"
    )
    assert image_of("source_file=x.csv; image=nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3") == (
        "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3"
    )
    assert image_of("db-dump/2026-04-27; config_id=483") is None
    assert image_of("source_file=2026-03-25.csv; model=DeepSeek-R1; wip=False") is None
    refused = 0
    for source in points["silicon_data_source"]:
        try:
            check_not_mtp(source)
        except PointRefused:
            refused += 1
    assert refused == 56  # 56 runs (88 rows); the database dump holds no run of the MTP-only images


def test_trtllm_generation_servers_take_the_seats_of_the_recipe_the_point_ran(points):
    """H100, 1k/1k at 6 users: InferenceX ran recipe ctx1_gen3_tep16_batch1_eplb0_mtp0 (3 generation servers of
    max_batch_size 1), not the file's decode_batch_size of 2 (6 users over 3 servers)."""
    from benchmarks.inferencex_trt_disagg import DECODE_SEATS

    point = "dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494"
    row = points[points["id"] == point].iloc[0]
    assert row["decode_batch_size"] == 2 and DECODE_SEATS[point] == 1
    scenario = scenario_for(row)
    prefill, decode = scenario["groups"]
    assert scenario["policy"] == {"kind": "trtllm", "max_batch_size": 6}
    assert decode["policy"] == {"kind": "trtllm", "max_batch_size": 1, "max_num_tokens": 256}
    # its context servers: 2 requests of 2,048 tokens a step, chunked, 60 % of the free memory for KV, no overlap
    # scheduler (disable_overlap_scheduler: true); its generation servers 90 %
    assert prefill["policy"] == {
        "kind": "trtllm",
        "max_batch_size": 2,
        "max_num_tokens": 2048,
        "enable_chunked_prefill": True,
    }
    assert prefill["kv_cache"] == scenario["kv_cache"] | {"free_gpu_memory_fraction": 0.6}
    assert decode["kv_cache"] == scenario["kv_cache"] | {"free_gpu_memory_fraction": 0.9}
    # its context servers set no moe_config.backend (the fastest kernel measured), its generation servers CUTLASS
    assert prefill["cost_model"] == {"kind": "silicon", "roofline": {"cpu_overlap": False}}
    assert decode["cost_model"] == {"kind": "silicon", "moe_kernel": "cutlass"}
    validate_scenario(scenario)
    # every point of the table is a TensorRT-LLM disaggregated point of the file
    table = points[points["id"].isin(DECODE_SEATS)]
    assert len(table) == len(DECODE_SEATS)
    assert set(table["engine"]) == {"trtllm"} and set(table["mode"]) == {"disagg"}


def test_the_seats_are_read_from_the_recipe_nvidia_master_names():
    """How benchmarks/inferencex_trt_disagg_derive.py finds a point's recipe and reads its seats (it needs checkouts of
    InferenceX and srt-slurm, so only these parts run here)."""
    from benchmarks.inferencex_trt_disagg_derive import (
        config_file_for,
        decode_max_batch_size,
        moe_kernels,
        recipe_name_batch,
    )

    recipe = "recipes/trtllm/h100-fp8/1k1k/stp/ctx1_gen3_tep16_batch1_eplb0_mtp0.yaml"

    def entry(conc, decode_workers, spec=None, config_file=recipe):
        found = {
            "conc-list": conc,
            "prefill": {"num-worker": 1, "additional-settings": [f"CONFIG_FILE={config_file}"]},
            "decode": {"num-worker": decode_workers},
        }
        return found | ({"spec-decoding": spec} if spec else {})

    config = {
        "seq-len-configs": [
            {"isl": 8192, "osl": 1024, "search-space": [entry([6], 3, config_file="other.yaml")]},
            {
                "isl": 1024,
                "osl": 1024,
                "search-space": [
                    entry([6], 3, "mtp", "mtp.yaml"),
                    entry([6, 9], 2, config_file="two.yaml"),
                    entry([6], 3),
                ],
            },
        ]
    }
    source = "db-dump/x; silicon_concurrency=6"
    row = pd.Series({"isl": 1024, "osl": 1024, "prefill_num_workers": 1, "decode_num_workers": 3}, dtype=object)
    row["silicon_data_source"] = source
    assert config_file_for(config, row) == recipe
    assert config_file_for(None, row) is None
    assert recipe_name_batch(recipe) == 1 and recipe_name_batch("ctx1_gen4_dep8.yaml") is None
    text = "backend:\n  trtllm_config:\n    prefill:\n      max_batch_size: 16\n    decode:\n      max_batch_size: 2\n"
    assert decode_max_batch_size(text) == 2
    assert decode_max_batch_size("backend:\n  type: trtllm\n") is None
    moe = "backend:\n  trtllm_config:\n    prefill:\n      moe_config:\n        backend: {}\n"
    moe += "    decode:\n      moe_config:\n"
    assert moe_kernels(moe.format("DEEPGEMM") + "        backend: TRTLLM\n") == ("deepgemm", "trtllm_gen")
    assert moe_kernels(moe.format("WIDEEP") + "        backend: CUTLASS\n") == (None, "cutlass")
    assert moe_kernels("backend:\n  type: trtllm\n") == (None, None)


def test_a_trtllm_recipes_server_settings_are_read_by_role():
    from benchmarks.inferencex_trt_disagg import TRT_SERVERS, TrtServers
    from benchmarks.inferencex_trt_disagg_derive import server_flags

    text = (
        "backend:\n  trtllm_config:\n    prefill:\n      max_batch_size: 2\n      max_num_tokens: 16640\n"
        "      disable_overlap_scheduler: true\n      kv_cache_config:\n        free_gpu_memory_fraction: 0.6\n"
        "    decode:\n      max_batch_size: 16\n      max_num_tokens: 16\n      stream_interval: 100\n"
    )
    servers = server_flags(text)
    assert servers == TrtServers(2, 16640, None, 0.6, False, 16, None, True)
    assert servers.role("prefill") == (
        {"max_batch_size": 2, "max_num_tokens": 16640},
        {"free_gpu_memory_fraction": 0.6},
        False,
    )
    assert servers.role("decode") == ({"max_num_tokens": 16}, {}, True)  # its max_batch_size is DECODE_SEATS
    assert server_flags("backend:\n  type: trtllm\n") == TrtServers(None, None, None, None, True, None, None, True)
    # every context server of the recipes the points ran turned its overlap scheduler off
    assert not any(s.prefill_overlap for s in TRT_SERVERS.values())


def test_trtllm_generation_servers_exchange_by_the_nvlink_all_to_all_configurable_moe_picks(points):
    """Every GB200 and GB300 FP8 generation server of the recipes sets ENABLE_CONFIGURABLE_MOE "1" and
    TRTLLM_FORCE_COMM_METHOD NVLINK_TWO_SIDED; ConfigurableMoE runs it with attention DP over more than one rank and
    the experts' TP 1. The 32-rank GB300 decode server takes it; a TP 8 one (no attention DP) keeps its
    tensor-parallel MoE. A CUTEDSL server of 1.2.0rc6 takes the factory's first choice, NVLinkOneSided."""
    from benchmarks.inferencex_trt_disagg import ALL_TO_ALL
    from benchmarks.inferencex_trt_disagg_derive import all_to_all

    env = (
        'backend:\n  decode_environment:\n    ENABLE_CONFIGURABLE_MOE: "1"\n'
        '    TRTLLM_FORCE_COMM_METHOD: "NVLINK_TWO_SIDED"\n  prefill_environment:\n    TRTLLM_ENABLE_PDL: "1"\n'
    )
    assert all_to_all(env) == (None, "nvlink_two_sided")
    assert all_to_all(env.replace('ENABLE_CONFIGURABLE_MOE: "1"', 'ENABLE_CONFIGURABLE_MOE: "0"')) == (None, None)
    assert all_to_all("backend:\n  type: trtllm\n") == (None, None)
    # a CUTEDSL server of TensorRT-LLM 1.2.0rc6's image runs ConfigurableMoE whatever its environment: the factory's
    # first choice, NVLinkOneSided; an older image's, or another backend's, gathers
    cutedsl = "backend:\n  trtllm_config:\n    decode:\n      moe_config:\n        backend: CUTEDSL\n"
    rc6 = "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2"
    assert all_to_all(cutedsl, rc6) == (None, "nvlink_one_sided")
    assert all_to_all(cutedsl, "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.7.0.post2") == (None, None)
    assert all_to_all(cutedsl.replace("CUTEDSL", "CUTLASS"), rc6) == (None, None)
    assert set(ALL_TO_ALL.values()) == {(None, "nvlink_two_sided"), (None, "nvlink_one_sided")}

    def decode_group(point: str) -> dict:
        scenario = scenario_for(points[points["id"] == point].iloc[0])
        validate_scenario(scenario)
        return next(g for g in scenario["groups"] if g["role"] == "decode")

    wide = decode_group("dsr1_gb300_trtllm_fp8_disagg_1024x8192_c1024_cfg462")
    assert wide["parallelism"]["dp_attention"] == 32
    assert wide["cost_model"]["roofline"] == {"expert_all_to_all": True, "all_to_all_kernel": "nvlink_two_sided"}
    cutedsl = decode_group("dsr1_gb300_trtllm_fp4_disagg_1024x8192_c1024_cfg373")
    assert cutedsl["cost_model"]["roofline"] == {"expert_all_to_all": True, "all_to_all_kernel": "nvlink_one_sided"}
    tensor = decode_group("dsr1_gb300_trtllm_fp8_disagg_8192x1024_c4_cfg392")
    assert "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c4_cfg392" in ALL_TO_ALL
    assert tensor["parallelism"].get("dp_attention", 1) == 1
    assert "expert_all_to_all" not in tensor.get("cost_model", {}).get("roofline", {})


def test_sglang_disaggregated_servers_take_their_recipes_limits_and_memory(points):
    """GB200 FP8 8k/1k at 1,024 users ran recipe gb200-fp8/8k1k/mid-curve.yaml: prefill servers of chunked-prefill-size
    131072 and mem-fraction-static 0.8, a decode server of max-running-requests 8192 and 0.82."""
    from benchmarks.inferencex_sglang_disagg import SGLANG_SERVERS

    point = "dsr1_gb200_sglang_fp8_disagg_8192x1024_c1024_cfg533"
    row = points[points["id"] == point].iloc[0]
    scenario = scenario_for(row)
    prefill, decode = scenario["groups"]
    assert prefill["policy"]["chunked_prefill_size"] == 131072 and prefill["policy"]["kind"] == "sglang"
    assert decode["policy"]["max_running_requests"] == 8192
    # a group's kv_cache replaces the scenario's: the FP8 cache and prefix caching off carry over
    assert prefill["kv_cache"] == scenario["kv_cache"] | {"mem_fraction_static": 0.8}
    assert decode["kv_cache"] == scenario["kv_cache"] | {"mem_fraction_static": 0.82}
    validate_scenario(scenario)
    table = points[points["id"].isin(SGLANG_SERVERS)]
    assert len(table) == len(SGLANG_SERVERS)
    assert set(table["engine"]) == {"sglang"} and set(table["mode"]) == {"disagg"}


def test_an_sglang_recipes_server_flags_are_read_by_role():
    from benchmarks.inferencex_sglang_disagg_derive import server_settings

    text = (
        "backend:\n  sglang_config:\n    prefill:\n      chunked-prefill-size: 131072\n      mem-fraction-static: 0.8\n"
        "      stream-interval: 50\n    decode:\n      max-running-requests: 8192\n      max-prefill-tokens: 4096\n"
    )
    assert server_settings(text) == {
        "prefill": {"policy": {"chunked_prefill_size": 131072}, "kv_cache": {"mem_fraction_static": 0.8}},
        "decode": {"policy": {"max_running_requests": 8192, "max_prefill_tokens": 4096}, "kv_cache": {}},
    }
    assert server_settings("backend:\n  type: sglang\n") == {
        "prefill": {"policy": {}, "kv_cache": {}},
        "decode": {"policy": {}, "kv_cache": {}},
    }


def test_sglang_images_before_the_gdn_fusion_run_the_input_projections_unfused(points):
    """sgl-project/sglang#21019 (merged 2026-03-20, released in v0.5.10) fused a Gated DeltaNet layer's four input
    projections: Qwen3.5 points of v0.5.9 images and of nightlies built before that day are priced unfused, later
    ones (and other models, other engines) as before."""
    assert inferencex_points.sglang_gdn_unfused("lmsysorg/sglang:v0.5.9-cu130-amd64")
    assert inferencex_points.sglang_gdn_unfused("lmsysorg/sglang:nightly-dev-20260216-d3bae71e")
    assert not inferencex_points.sglang_gdn_unfused("lmsysorg/sglang:nightly-dev-20260402-d7256eb6")
    assert not inferencex_points.sglang_gdn_unfused("lmsysorg/sglang:v0.5.10.post1-cu130")
    assert not inferencex_points.sglang_gdn_unfused("vllm/vllm-openai:v0.15.1")
    assert not inferencex_points.sglang_gdn_unfused(None)
    qwen = points[
        points.model_path.str.contains("Qwen3.5") & (points.backend == "sglang") & (points.source == "inferencex")
    ]
    seen = set()
    for _, row in qwen.iterrows():
        image = inferencex_points.image_of(str(row["silicon_data_source"]))
        try:
            scenario = scenario_for(row)
        except inferencex_points.PointRefused:
            continue
        unfused = scenario.get("cost_model", {}).get("roofline", {}).get("gdn_input_projections") == "separate"
        assert unfused == ("v0.5.9" in image or "20260216" in image), image
        seen.add(unfused)
    assert seen == {True, False}


def test_the_first_wave_is_the_requests_no_other_waits_for():
    """A closed loop's first requests (no parent): their mean TTFT and their share of all TTFTs; NaN where no request
    waits on another (an open loop) or none of the first got a first token."""
    from benchmarks.inferencex_points import first_wave_ttft

    loop = pd.DataFrame({"parent": [-1, -1, 0, 1], "ttft_s": [1.0, 3.0, 0.5, 0.5]})
    first_ms, share = first_wave_ttft(loop)
    assert first_ms == pytest.approx(2000.0) and share == pytest.approx(4.0 / 5.0)
    # the mean TTFT is the first wave's share of the sum over the count
    assert loop["ttft_s"].mean() * share * len(loop) == pytest.approx(first_ms / 1e3 * 2)
    open_loop = pd.DataFrame({"parent": [-1, -1], "ttft_s": [1.0, 2.0]})
    assert all(math.isnan(v) for v in first_wave_ttft(open_loop))
    rejected = pd.DataFrame({"parent": [-1, 0], "ttft_s": [float("nan"), 1.0]})
    assert all(math.isnan(v) for v in first_wave_ttft(rejected))


def test_explain_takes_one_point_apart(points, capsys):
    """``--explain ID``: the scenario, the errors, the TTFT's parts (which sum to the TTFT of the requests after the
    first wave) and the prompt step op by op; an unknown id is one line and exit status 2."""
    from benchmarks.inferencex import main
    from benchmarks.inferencex_explain import decode_step_ops, step_split, ttft_parts
    from simulator.cost.shape import BatchShape, OpCost, StepTime

    llama = _llama_70b_h200_vllm_1k(points)
    point_id = str(llama.iloc[0]["id"])
    assert main(["--explain", point_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"point {point_id} (vllm, h200_sxm, fp8, agg, ISL 1024, OSL 1024)")
    assert '"kind": "closed_loop"' in out and "| mean TTFT, ms |" in out and "| mean TPOT, ms |" in out
    assert "first wave: mean TTFT" in out and "= way in" in out
    assert "mixed engine, a step of one" in out and "attn_prefill" in out and "interpolated" in out
    assert "mixed engine's steps: " in out and " decode-only, mean " in out and " holding a prompt, mean " in out
    decode = out[out.index("a decode-only step of") :]
    assert "attn_decode" in decode and "attn_prefill" not in decode
    implied = float(decode.split("means decode-only steps of about ")[1].split(" ms")[0])
    assert 0 < implied <= float(llama.iloc[0]["silicon_tpot_ms"]) + 0.01  # the TPOT x the decode-only share

    steps = pd.DataFrame(  # two decode-only steps of 10 and 30 ms, one holding a prompt of 60 ms
        {"num_prefill_tokens": [0, 512, 0], "duration_s": [0.01, 0.06, 0.03], "num_running": [4, 5, 6]}
    )
    split = step_split(steps)
    assert split["decode steps"] == 2 and split["prompt steps"] == 1
    assert split["decode mean ms"] == pytest.approx(20.0) and split["prompt mean ms"] == pytest.approx(60.0)
    assert split["decode share"] == pytest.approx(0.4) and split["prompt share"] == pytest.approx(0.6)
    assert split["decode running"] == 5.0

    class Ranks:  # an attention-DP rank's model: every rank priced at the decode step's shape
        dp_attention = 4

        def breakdown_ranks(self, shapes):
            self.shapes = shapes
            return StepTime(0.02, {"attn_decode": OpCost(0.02)})

    ranks = Ranks()
    ops, total_ms = decode_step_ops(ranks, 8, 1000)
    assert len(ranks.shapes) == 4 and all(s == BatchShape((), (), 8, 8000, 8) for s in ranks.shapes)
    assert ops == [("attn_decode", pytest.approx(20.0), "")] and total_ms == pytest.approx(20.0)

    requests = pd.DataFrame(
        {
            "parent": [-1, 0],
            "ttft_s": [1.0, 0.5],
            "arrival_s": [0.0, 2.0],
            "enqueued_s": [0.1, 2.05],
            "first_scheduled_s": [0.3, 2.25],
            "first_token_s": [1.0, 2.5],
        }
    )
    parts = ttft_parts(requests)  # the first wave's request left out
    assert parts["requests"] == 1 and parts["ttft"] == pytest.approx(500.0)
    assert parts["way in"] + parts["queued"] + parts["prompt"] == pytest.approx(parts["ttft"])
    moved = requests.assign(transfer_start_s=[0.6, 2.4], transfer_end_s=[0.9, 2.45], first_token_s=[1.0, 2.5])
    parts = ttft_parts(moved)  # prefilled on one engine, decoded on another
    assert list(parts) == ["requests", "ttft", "to prefill", "prefill and lease", "transfer", "after"]
    assert sum(list(parts.values())[2:]) == pytest.approx(parts["ttft"]) and parts["transfer"] == pytest.approx(50.0)

    with pytest.raises(SystemExit) as exc:
        main(["--explain", "no-such-point"])
    assert exc.value.code == 2
    assert "--explain: no measured point has the id 'no-such-point'" in capsys.readouterr().err
    # a point servesim refuses when it validates the scenario: one line, not a traceback
    refused = "2026_04_06_deepseek_r1_gb200_trtllm_fp4_agg_1024x1024_c4300_tp24_ep1_35"
    with pytest.raises(SystemExit) as exc:
        main(["--explain", refused])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--explain: point {refused} is refused: " in err and "recorded as aggregated on 2025-11-17" in err
    assert "Traceback" not in err


def test_sglang_gb200_disaggregated_points_run_through_dynamo_sent_five_prompts_a_user(points):
    """InferenceX ran its GB200 SGLang disaggregated points through Dynamo's SGLang slurm_jobs until srtctl (FP4 from
    2767db504, 2026-02-07; FP8 from 37f353be2, 2026-02-09), whose client (scripts/vllm/bench.sh) sends 5 x CONC
    prompts; srtctl's sa-bench and InferenceX's own client send 10 x CONC."""
    from benchmarks.inferencex_points import prompts_per_user

    old = points[points["id"] == "dsr1_gb200_sglang_fp4_disagg_1024x1024_c12000_cfg259"].iloc[0]
    assert "measured=2025-12-21" in old["silicon_data_source"]
    assert prompts_per_user(old) == 5
    assert scenario_for(old)["workload"]["num_requests"] == 5 * 12000
    new = points[points["id"] == "dsr1_gb200_sglang_fp4_disagg_1024x1024_c4096_cfg483"].iloc[0]
    assert "measured=2026-02-08" in new["silicon_data_source"]
    assert scenario_for(new)["workload"]["num_requests"] == 10 * 4096
    agg = points[points["id"] == "dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81"].iloc[0]
    assert prompts_per_user(agg) == 10


def test_the_dynamo_clients_end_on_the_day_their_engine_and_precision_moved_to_srtctl():
    """DYNAMO_CLIENTS' days, on made-up rows: SGLang FP4 5 x CONC until 2026-02-07, FP8 until 2026-02-09 (the points of
    that day ran the new configs on srtctl), TensorRT-LLM FP4 8 x CONC until 2026-01-30; GB200 DeepSeek-R1
    disaggregated points only."""
    import pandas as pd

    from benchmarks.inferencex_points import prompts_per_user

    def row(backend: str, precision: str, day: str, **kw: str) -> pd.Series:
        fields = {
            "backend": backend,
            "precision": precision,
            "mode": "disagg",
            "system": "gb200",
            "model_path": "deepseek-ai/DeepSeek-R1",
            "silicon_data_source": f"db-dump/2026-04-27; measured={day}T00:00:00.000Z",
        }
        return pd.Series(fields | kw)

    assert [prompts_per_user(row("sglang", "fp4", d)) for d in ("2026-02-06", "2026-02-07")] == [5, 10]
    assert [prompts_per_user(row("sglang", "fp8", d)) for d in ("2026-02-08", "2026-02-09")] == [5, 10]
    assert [prompts_per_user(row("trtllm", "fp4", d)) for d in ("2026-01-29", "2026-01-30")] == [8, 10]
    assert prompts_per_user(row("trtllm", "fp8", "2026-01-29")) == 10  # FP8 went straight to srtctl
    assert prompts_per_user(row("sglang", "fp4", "2025-12-21", system="gb300")) == 10
    assert prompts_per_user(row("sglang", "fp4", "2025-12-21", mode="agg")) == 10
    assert prompts_per_user(row("trtllm", "fp4", "2025-12-19", model_path="openai/gpt-oss-120b")) == 10


def test_trtllm_gb200_disaggregated_points_run_before_2026_01_30_sent_eight_prompts_a_user(points):
    """Until srtctl (4e9a376bf, 2026-01-30) InferenceX ran its GB200 TensorRT-LLM DeepSeek-R1 FP4 disaggregated points
    through Dynamo's performance_sweeps: benchmark_disagg.slurm's MULTI_ROUND defaults to 8 (InferenceX never sets it)
    and scripts/bench.sh sends concurrency x multi_round prompts. The FP8 points of February and the FP4 points of
    March ran srtctl (10 x CONC); a gpt-oss point of the same days ran another Dynamo branch, not read: 10."""
    from benchmarks.inferencex_points import prompts_per_user

    def point(pid: str):
        return points[points["id"] == pid].iloc[0]

    export = point("2026_04_06_deepseek_r1_gb200_trtllm_fp4_disagg_1024x1024_c2048_tp4_ep4_1145")
    assert "measured=2025-12-19" in export["silicon_data_source"]
    assert prompts_per_user(export) == 8
    december = point("dsr1_gb200_trtllm_fp4_disagg_8192x1024_c24_cfg229")
    assert "measured=2025-12-19" in december["silicon_data_source"]
    assert scenario_for(december)["workload"]["num_requests"] == 8 * 24
    march = points[
        (points["backend"] == "trtllm")
        & (points["system"] == "gb200")
        & (points["mode"] == "disagg")
        & (points["model_path"] == "deepseek-ai/DeepSeek-R1")
        & points["silicon_data_source"].str.contains("measured=2026-03-23")
    ]
    assert len(march) and all(prompts_per_user(row) == 10 for _, row in march.iterrows())
    gpt_oss = point("2026_04_06_gpt_oss_120b_gb200_trtllm_fp4_disagg_8192x1024_c384_tp1_ep1_1216")
    assert "measured=2026-01-07" in gpt_oss["silicon_data_source"]
    assert prompts_per_user(gpt_oss) == 10


def test_december_sglang_points_take_the_srt_slurm_recipe_of_their_layout(points):
    """The GB200 points of 2025-12-21 ran Dynamo's slurm_jobs scripts, whose flags NVIDIA/srt-slurm published as
    recipes the day before: FP8 8k/1k on 5 prefill workers of 8 GPUs and a decode worker of 32 is mid-curve-5p1d
    (prefill chunked-prefill-size 131072, mem-fraction-static 0.80; decode max-running-requests 8192, 0.82)."""
    from benchmarks.inferencex_sglang_disagg_derive import recipe_layout

    row = points[points["id"] == "dsr1_gb200_sglang_fp8_disagg_8192x1024_c1024_cfg253"].iloc[0]
    prefill, decode = scenario_for(row)["groups"]
    assert prefill["policy"]["chunked_prefill_size"] == 131072 and prefill["kv_cache"]["mem_fraction_static"] == 0.8
    assert decode["policy"]["max_running_requests"] == 8192 and decode["kv_cache"]["mem_fraction_static"] == 0.82
    text = (
        "resources:\n  gpus_per_node: 4\n  prefill_nodes: 10\n  prefill_workers: 5\n  decode_nodes: 8\n"
        "  decode_workers: 1\nbackend:\n  sglang_config:\n    decode:\n      tp-size: 32\n"
        "benchmark:\n  concurrencies: '512x1024x2048x6144'\n"
    )
    assert recipe_layout(text) == (5, 8, 1, 32, {512, 1024, 2048, 6144})  # prefill GPUs from its nodes
    assert recipe_layout("resources: {}\n") is None


def test_an_early_point_takes_the_one_recipe_of_its_day_that_matches_its_layout(points, tmp_path):
    """early_recipe reads the recipe folder of the point's precision and lengths as it stood on the point's day and
    takes the one recipe whose worker counts, GPUs a worker and concurrencies match; two matches, or none, give
    nothing."""
    import os
    import subprocess

    from benchmarks.inferencex_sglang_disagg_derive import early_recipe

    row = points[points["id"] == "dsr1_gb200_sglang_fp8_disagg_8192x1024_c1024_cfg253"].iloc[0]
    folder = tmp_path / "recipies" / "gb200-fp8" / "8k1k"
    folder.mkdir(parents=True)

    def recipe(prefill_workers: int, concurrencies: str) -> str:
        return (
            f"resources:\n  gpus_per_node: 4\n  prefill_nodes: {2 * prefill_workers}\n  prefill_workers: "
            f"{prefill_workers}\n  decode_nodes: 8\n  decode_workers: 1\n"
            f"benchmark:\n  concurrencies: '{concurrencies}'\n"
        )

    (folder / "mid.yaml").write_text(recipe(5, "512x1024"))
    (folder / "other.yaml").write_text(recipe(3, "512x1024"))  # 3 prefill workers: not the point's 5
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    env = os.environ | {"GIT_COMMITTER_DATE": "2025-12-20T12:00:00", "GIT_AUTHOR_DATE": "2025-12-20T12:00:00"}
    subprocess.run([*git, "commit", "-q", "-m", "recipes"], check=True, env=env)
    found = early_recipe(tmp_path, row, "2025-12-21")
    assert found is not None and found[1] == "recipies/gb200-fp8/8k1k/mid.yaml"
    assert early_recipe(tmp_path, row, "2025-12-19") is None  # the folder did not exist yet
    (folder / "twin.yaml").write_text(recipe(5, "1024"))  # a second match: nothing
    subprocess.run([*git, "add", "."], check=True)
    env = env | {"GIT_COMMITTER_DATE": "2025-12-21T08:00:00", "GIT_AUTHOR_DATE": "2025-12-21T08:00:00"}
    subprocess.run([*git, "commit", "-q", "-m", "twin"], check=True, env=env)
    assert early_recipe(tmp_path, row, "2025-12-21") is None
