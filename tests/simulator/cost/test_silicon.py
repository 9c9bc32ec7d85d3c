"""The ``silicon`` cost model: measured kernel tables, interpolated, with the anchored roofline outside them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from simulator.build import make_cost_model
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.cost import BatchShape
from simulator.cost.roofline import RooflineParams
from simulator.cost.silicon import SiliconParams
from simulator.cost.silicon.tables import Curve, available, load_tables

LLAMA_8B = resolve_model("llama-3.1-8b")
LLAMA_70B = resolve_model("llama-3.1-70b")
H100 = resolve_hardware("h100-sxm")


def silicon(model=LLAMA_8B, hardware=H100, tp=1, **params):
    return make_cost_model(SiliconParams(**params), model, hardware, tp)


def decode(n: int, ctx_per_seq: int) -> BatchShape:
    return BatchShape(num_decode_seqs=n, decode_context_tokens=n * ctx_per_seq, num_sampled_tokens=n)


def prefill(*chunks: int) -> BatchShape:
    return BatchShape(tuple(chunks), (0,) * len(chunks), num_sampled_tokens=len(chunks))


def test_the_dependency_measures_the_gpus_the_presets_name():
    measured = set(available())
    assert {"a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "l40s"} <= measured
    for name in ("h100-sxm", "h200", "a100-80gb", "l40s", "b200"):
        assert resolve_hardware(name).silicon_tables in measured


def test_curve_exact_on_points_monotone_between_and_none_outside():
    c = Curve([1, 4, 16], [1e-5, 2e-5, 8e-5])
    assert [c(x) for x in (1, 4, 16)] == [1e-5, 2e-5, 8e-5]
    xs = np.linspace(1, 16, 200)
    ys = [c(float(x)) for x in xs]
    assert all(a <= b for a, b in itertools.pairwise(ys))
    assert c(0.5) is None and c(17) is None


def test_gemm_ops_equal_the_table_on_grid_points():
    """Llama-3.1-8B's QKV GEMM is n = 4096 + 2 x 1024 = 6144, k = 4096: both on the grid."""
    table = load_tables("h100_sxm").gemm("bf16")
    m_axis = list(table.m)
    j, k = list(table.n).index(6144), list(table.k).index(4096)
    cost = silicon()
    for m in (1, 64, 1024, 4096):
        shape = BatchShape((m,), (0,), num_sampled_tokens=1)
        gemm_s = math.exp(table._log_s[m_axis.index(m), j, k])
        expected = (gemm_s + cost._rope_s(m)) * LLAMA_8B.num_layers
        assert cost.breakdown(shape).ops["qkv_proj"].seconds == pytest.approx(expected, rel=1e-12)
        expected = gemm_s * LLAMA_8B.num_layers  # the output projection: n = 4096, k = 4096, GEMM alone
        o_table = math.exp(table._log_s[m_axis.index(m), list(table.n).index(4096), k]) * LLAMA_8B.num_layers
        assert cost.breakdown(shape).ops["o_proj"].seconds == pytest.approx(o_table, rel=1e-12)
        assert cost.sources(shape)["o_proj"] == "measured"
        assert cost.sources(shape)["qkv_proj"] == "measured GEMM + roofline rotary"


def test_gemm_interpolation_lies_between_the_enclosing_measurements():
    cost = silicon()
    lo, hi = (cost.breakdown(BatchShape((m,), (0,), num_sampled_tokens=1)).ops["o_proj"].seconds for m in (1024, 1280))
    mids = [cost.breakdown(BatchShape((m,), (0,), num_sampled_tokens=1)).ops["o_proj"].seconds for m in (1100, 1200)]
    assert lo <= mids[0] <= mids[1] <= hi


def test_decode_attention_equals_the_table_and_interpolates_monotonically():
    tables = load_tables("h100_sxm")
    key = "decode/bf16/32/8/128"
    batch, lengths, ms = tables.array(f"{key}/batch"), tables.array(f"{key}/len"), tables.array(f"{key}/ms")
    cost = silicon()
    j = list(lengths).index(1023)
    per_layer = float(ms[list(batch).index(16), j]) * 1e-3
    assert cost.breakdown(decode(16, 1023)).ops["attn_decode"].seconds == pytest.approx(per_layer * 32, rel=1e-6)
    times = [cost.breakdown(decode(16, c)).ops["attn_decode"].seconds for c in range(1023, 2048, 64)]
    assert all(a <= b for a, b in itertools.pairwise(times))


def test_outside_the_tables_the_roofline_is_anchored_continuously_and_counted():
    """Batch 256 was measured up to 511 cached tokens per sequence: beyond, the roofline's slope from there."""
    cost = silicon()
    at_edge = cost.breakdown(decode(256, 511)).ops["attn_decode"].seconds
    just_past = cost.breakdown(decode(256, 512)).ops["attn_decode"].seconds
    assert just_past == pytest.approx(at_edge, rel=0.01)
    assert cost.sources(decode(256, 4000))["attn_decode"].startswith("roofline anchored")
    before = sum(cost.fallbacks.values())
    cost.step_time(decode(256, 4000))
    assert sum(cost.fallbacks.values()) > before
    assert 0 < cost.fallback_fraction < 1


def test_decode_step_times_equal_step_time_bit_for_bit():
    cost = silicon(model=LLAMA_70B, tp=4)
    for n in (1, 7, 64, 300):
        contexts = [n * 10, n * 1000 + 3, n * 9000, n * 70000]
        fast = cost.decode_step_times(n, contexts)
        plain = [
            cost.step_time(BatchShape(num_decode_seqs=n, decode_context_tokens=c, num_sampled_tokens=n)).total_s
            for c in contexts
        ]
        assert fast == plain


def test_prefill_chunk_on_a_cached_prefix_costs_as_the_prompt_of_equal_causal_work():
    cost = silicon()
    cached = BatchShape((512,), (1536,), num_sampled_tokens=1)
    # 512 x 1536 + 512 x 513 / 2 = 917,760 query-key pairs, the causal work of a 1,354-token prompt
    equal = prefill(1354)
    a, b = (cost.breakdown(s).ops["attn_prefill"].seconds for s in (cached, equal))
    assert a == pytest.approx(b, rel=0.01)
    assert cost.breakdown(prefill(512)).ops["attn_prefill"].seconds < a


def test_tp8_decode_is_faster_than_tp4_on_nvlink():
    for params in (SiliconParams(), RooflineParams()):
        times = {
            tp: make_cost_model(params, LLAMA_70B, H100, tp).step_time(decode(1, 1000)).total_s for tp in (2, 4, 8)
        }
        assert times[8] < times[4] < times[2], (params.kind, times)


def test_hardware_without_tables_is_the_roofline():
    mi300x = resolve_hardware("mi300x")
    assert mi300x.silicon_tables is None
    cost = silicon(hardware=mi300x)
    roof = make_cost_model(RooflineParams(), LLAMA_8B, mi300x, 1)
    for shape in (decode(8, 900), prefill(700, 30), BatchShape((100,), (50,), 4, 4000, 5)):
        assert cost.step_time(shape).total_s == roof.step_time(shape).total_s
        assert set(cost.sources(shape).values()) <= {"roofline (no table)", "engine overhead model"}


def test_unknown_tables_name_is_refused():
    with pytest.raises(ValueError, match=r"cost_model\.tables: no measured kernel tables for 'h900'"):
        silicon(tables="h900")


def test_measured_tables_are_slower_than_the_datasheet_roofline_where_it_is_optimistic():
    """The roofline's attention at the default efficiencies is faster than FA3 measures on H100."""
    cost = silicon()
    roof = make_cost_model(RooflineParams(), LLAMA_8B, H100, 1)
    for shape in (decode(32, 2047), prefill(4096)):
        name = "attn_decode" if shape.num_decode_seqs else "attn_prefill"
        assert cost.breakdown(shape).ops[name].seconds > roof.breakdown(shape).ops[name].seconds


def test_fp8_gemms_follow_the_fp8_tables_and_the_lm_head_stays_bf16():
    """FP8 changes a GEMM's time by what the FP8 table measured, not by the datasheet's 2x."""
    from simulator.build import deployed_model

    fp8_model = deployed_model(LLAMA_8B, "fp8")
    tables = load_tables("h100_sxm")
    bf16_t, fp8_t = tables.gemm("bf16"), tables.gemm("fp8")
    j, k = list(bf16_t.n).index(4096), list(bf16_t.k).index(4096)
    bf16, fp8 = silicon(), silicon(model=fp8_model)
    for m in (1, 256, 8192):
        shape = BatchShape((m,), (0,), num_sampled_tokens=1)
        i = list(bf16_t.m).index(m)
        table_ratio = math.exp(fp8_t._log_s[i, j, k] - bf16_t._log_s[i, j, k])
        ratio = fp8.breakdown(shape).ops["o_proj"].seconds / bf16.breakdown(shape).ops["o_proj"].seconds
        assert ratio == pytest.approx(table_ratio, rel=1e-9)
        lm = [c.breakdown(shape).ops["lm_head"].seconds for c in (bf16, fp8)]
        assert lm[0] == lm[1]
    # without FP8 tensor cores (A100) the bf16 kernels' time is anchored to 1-byte weights by the roofline
    a100 = silicon(model=fp8_model, hardware=resolve_hardware("a100-80gb"))
    assert "1-byte weights" in a100.sources(decode(1, 100))["mlp_down"]
    a100_bf16 = silicon(hardware=resolve_hardware("a100-80gb"))
    assert a100.step_time(decode(1, 100)).total_s < a100_bf16.step_time(decode(1, 100)).total_s


def test_fp8_kv_cache_reads_the_fp8_attention_table():
    from simulator.build import deployed_model

    model = deployed_model(LLAMA_8B, None, "fp8")
    tables = load_tables("h100_sxm")
    key = "decode/fp8/32/8/128"
    batch, lengths, ms = tables.array(f"{key}/batch"), tables.array(f"{key}/len"), tables.array(f"{key}/ms")
    expected = float(ms[list(batch).index(8), list(lengths).index(4095)]) * 1e-3 * 32
    got = silicon(model=model).breakdown(decode(8, 4095)).ops["attn_decode"].seconds
    assert got == pytest.approx(expected, rel=1e-6)
