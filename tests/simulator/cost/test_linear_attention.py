"""Hybrid linear-attention models (Qwen3.5's Gated DeltaNet layers beside full attention): the shapes read from
config.json, the recurrent state each sequence keeps, how each engine sizes it beside the KV cache, and the
kernels' times from the measured tables (aiconfigurator-core's ``linear_attention/<engine>/gdn_perf.parquet``)."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.build import build, setup_group
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.cost.roofline import RooflineCostModel, RooflineParams
from simulator.cost.shape import OP_NAMES, BatchShape
from simulator.cost.silicon import SiliconCostModel, SiliconParams
from simulator.cost.silicon.database import dependency_root
from simulator.kv.memory import SGLANG_MAMBA_FULL_MEMORY_RATIO, plan_memory, plan_sglang_memory

QWEN35 = resolve_model("Qwen/Qwen3.5-397B-A17B")
LLAMA = resolve_model("llama-3.1-70b")
B200, H200 = resolve_hardware("b200"), resolve_hardware("h200")
BF16_STATE = QWEN35.model_copy(update={"linear_state_bytes": 2.0})


def test_qwen35_is_read_as_gated_deltanet_and_full_attention_layers():
    m = QWEN35
    assert (m.num_layers, m.num_linear_layers, m.num_full_attention_layers) == (60, 45, 15)
    assert (m.linear_num_key_heads, m.linear_num_value_heads) == (16, 64)
    assert (m.linear_key_head_dim, m.linear_value_head_dim, m.linear_conv_kernel_dim) == (128, 128, 4)
    assert m.linear_state_bytes == 4.0  # config.json's mamba_ssm_dtype float32
    assert m.attn_output_gate
    # the name's 397 B total and 17 B active (the vision tower and the MTP layer left out)
    assert 390e9 < m.num_params() < 400e9
    assert 16.5e9 < m.num_active_params() < 18e9
    # only the 15 full-attention layers cache keys and values: 2 KV heads of 256, bf16
    assert m.kv_bytes_per_token() == 2 * 15 * 2 * 256 * 2
    assert m.kv_bytes_per_token_per_gpu(8) == 2 * 15 * 1 * 256 * 2


def test_a_model_without_linear_layers_dumps_as_before():
    dumped = LLAMA.model_dump()
    assert not any(k.startswith("linear_") or k == "num_linear_layers" for k in dumped)
    assert "attn_output_gate" not in dumped
    assert "num_linear_layers" in QWEN35.model_dump()


def test_linear_fields_are_checked():
    with pytest.raises(ValueError, match="needs linear_num_key_heads"):
        LLAMA.model_validate(LLAMA.model_dump() | {"num_linear_layers": 40})
    with pytest.raises(ValueError, match="num_linear_layers must be > 0"):
        LLAMA.model_validate(LLAMA.model_dump() | {"linear_num_key_heads": 16})
    with pytest.raises(ValueError, match="must be fewer than num_layers"):
        QWEN35.model_validate(QWEN35.model_dump() | {"num_linear_layers": 60})


def test_a_sequences_state_is_sglangs_mamba_cache_per_request():
    """SGLang's ``mamba_cache_per_req`` at tp 8: 45 layers x (the convolution's 3 x 1,536 channels in bf16 + the
    recurrent state's 8 heads x 128 x 128), 12,211,200 bytes in bf16 (--mamba-ssm-dtype bfloat16), 24,007,680 in the
    config's float32."""
    assert BF16_STATE.linear_state_bytes_per_seq_per_gpu(8) == 45 * (3 * 1536 * 2 + 8 * 128 * 128 * 2) == 12_211_200
    assert QWEN35.linear_state_bytes_per_seq_per_gpu(8) == 24_007_680
    assert LLAMA.linear_state_bytes_per_seq_per_gpu(8) == 0.0


def test_sglang_gives_the_state_pool_its_share_of_what_the_weights_leave():
    per_seq = BF16_STATE.linear_state_bytes_per_seq_per_gpu(8)
    plan = plan_sglang_memory(BF16_STATE, B200, 8, 16, chunked_prefill_size=16384, mem_fraction_static=0.8)
    rest = B200.memory_bytes * 0.8 - plan.weight_bytes
    share = rest * SGLANG_MAMBA_FULL_MEMORY_RATIO / (1 + SGLANG_MAMBA_FULL_MEMORY_RATIO)
    assert plan.state_slots == int(share // per_seq)
    assert plan.state_bytes == plan.state_slots * per_seq
    assert plan.kv_bytes == pytest.approx(rest - plan.state_bytes)
    # --max-running-requests with the radix cache off sizes the pool at exactly that many slots
    capped = plan_sglang_memory(
        BF16_STATE, B200, 8, 16, chunked_prefill_size=16384, mem_fraction_static=0.8, max_running_requests=128
    )
    assert capped.state_slots == 128 and capped.kv_bytes == pytest.approx(rest - 128 * per_seq)
    given = plan_sglang_memory(
        BF16_STATE, B200, 8, 16, chunked_prefill_size=16384, mem_fraction_static=0.8, max_mamba_cache_size=300
    )
    assert given.state_slots == 300
    # a model without linear layers: no pool, the KV cache everything the weights leave
    plain = plan_sglang_memory(LLAMA, B200, 8, 16, chunked_prefill_size=16384, mem_fraction_static=0.8)
    assert plain.state_slots is None and plain.state_bytes == 0.0


def test_vllm_sets_the_states_of_its_most_running_sequences_aside():
    per_seq = QWEN35.linear_state_bytes_per_seq_per_gpu(8)
    plan = plan_memory(QWEN35, B200, 8, 16, 0.9, reserve_bytes=2**30, max_seqs=256)
    assert plan.state_slots == 256 and plan.state_bytes == 256 * per_seq
    assert plan.kv_bytes == pytest.approx(B200.memory_bytes * 0.9 - plan.weight_bytes - 2**30 - 256 * per_seq)
    with pytest.raises(ValueError, match="max_num_seqs must be known"):
        plan_memory(QWEN35, B200, 8, 16, 0.9)


def scenario(**over) -> dict:
    base = {
        "model": "Qwen/Qwen3.5-397B-A17B",
        "hardware": "b200",
        "quantization": "fp8",
        "parallelism": {"tp": 8},
        "policy": {"kind": "sglang"},
        "kv_cache": {"dtype": "fp8", "mamba_ssm_dtype": "bfloat16"},
        "workload": {
            "kind": "closed_loop",
            "concurrency": 6,
            "num_requests": 40,
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "uniform", "min_tokens": 100, "max_tokens": 1500},
                "output": {"kind": "uniform", "min_tokens": 20, "max_tokens": 200},
            },
        },
    }
    return base | over


def test_sglangs_state_slots_cap_its_running_requests():
    cfg = validate_scenario(scenario(policy={"kind": "sglang", "max_mamba_cache_size": 3}))
    setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert setup.memory is not None and setup.memory.state_slots == 3
    assert setup.policy.max_mamba_cache_size == 3
    result = build(cfg).run()
    assert result.summary["completed"] == 40
    assert result.steps["num_running"].max() == 3  # six users, three at a time
    # sized from memory where not given: SGLang's share of the pool
    cfg = validate_scenario(scenario())
    setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert setup.policy.max_mamba_cache_size == setup.memory.state_slots > 1000


def test_prefix_caching_of_a_hybrid_model_is_refused():
    cfg = validate_scenario(scenario(kv_cache={"prefix_caching": True}))
    with pytest.raises(ValueError, match="hybrid linear-attention model, is not modelled"):
        build(cfg)


def test_a_hybrid_scenario_runs_the_same_on_the_fast_path_and_the_plain_one():
    """The same requests and steps bit for bit; the summary's time-averaged KV usage to rounding (a window's area
    is summed in one go, ``LevelMonitor.segments``), as every fast-path check holds it (``assert_same_run``)."""
    from tests.simulator.engine.test_fast_forward import assert_same_run

    plain, fast = assert_same_run(validate_scenario(scenario()))
    assert fast.summary["completed"] == plain.summary["completed"] == 40
    pd.testing.assert_frame_equal(fast.requests, plain.requests)
    pd.testing.assert_frame_equal(fast.steps, plain.steps)


def _gdn_ms(framework: str, version: str, phase: str, batch: int, seq_len: int) -> float:
    """One Gated DeltaNet layer's two kernels at Qwen3.5-397B's tp-8 heads (2 key, 8 value), read from the
    dependency's table directly."""
    root = dependency_root()
    assert root is not None
    path = root / "b200_sxm" / "linear_attention" / framework / version / "gdn_perf.parquet"
    frame = pd.read_parquet(path)
    rows = frame[
        (frame.phase == phase)
        & (frame.num_k_heads == 2)
        & (frame.num_v_heads == 8)
        & (frame.batch_size == batch)
        & (frame.seq_len == seq_len)
    ]
    return float(rows.groupby("kernel_source").latency.mean().sum())


def test_silicon_prices_the_linear_layers_from_the_measured_gdn_kernels():
    # the config's float32 state, the one SGLang's table was measured on (aiconfigurator's collect_gdn.py)
    c = SiliconCostModel(SiliconParams(framework="sglang"), QWEN35, B200, tp=8)
    assert c._gdn is not None
    decode = BatchShape(num_decode_seqs=16, decode_context_tokens=16 * 900, num_sampled_tokens=16)
    ops = c.breakdown(decode).ops
    assert ops["attn_linear"].seconds == pytest.approx(45 * 1e-3 * _gdn_ms("sglang", "0.5.14", "generation", 16, 1))
    assert c.sources(decode)["attn_linear"] == "decode measured"
    prefill = BatchShape((1024,), (0,), num_sampled_tokens=1)
    ops = c.breakdown(prefill).ops
    assert ops["attn_linear"].seconds == pytest.approx(45 * 1e-3 * _gdn_ms("sglang", "0.5.14", "context", 1, 1024))
    # the decode state does not grow with the context; full attention runs on 15 layers only
    longer = BatchShape(num_decode_seqs=16, decode_context_tokens=16 * 9000, num_sampled_tokens=16)
    assert c.breakdown(longer).ops["attn_linear"] == c.breakdown(decode).ops["attn_linear"]
    assert c.tables_of(decode)["attn_linear"].startswith("sglang 0.5.14, causal_conv1d_fn")
    # every op is one of the shared decomposition's (servesim estimate, reports and planning read them by name), in
    # its order
    mixed = BatchShape((512,), (0,), 16, 16 * 900, 17)
    names = list(c.breakdown(mixed).ops)
    assert {"linear_in_proj", "attn_linear", "linear_out_proj"} <= set(names) <= set(OP_NAMES)
    assert names == [n for n in OP_NAMES if n in names]
    # a bf16 state (--mamba-ssm-dtype bfloat16) moves half the bytes: the measured decode anchored at it, nearly
    # halved where the state's traffic dominates, barely changed where the kernels' launches do
    half = SiliconCostModel(SiliconParams(framework="sglang"), BF16_STATE, B200, tp=8)
    big = BatchShape(num_decode_seqs=1024, decode_context_tokens=1024 * 900, num_sampled_tokens=1024)
    ratio_big = half.breakdown(big).ops["attn_linear"].seconds / c.breakdown(big).ops["attn_linear"].seconds
    ratio_small = half.breakdown(decode).ops["attn_linear"].seconds / c.breakdown(decode).ops["attn_linear"].seconds
    assert 0.5 < ratio_big < 0.56 and 0.75 < ratio_small < 1.0
    assert half.sources(big)["attn_linear"] == "decode measured, its 4-byte state anchored"
    # the window's decode steps at once equal each step priced alone
    contexts = [16 * 900 + 16 * k for k in range(5)]
    assert half.decode_step_times(16, contexts) == [
        SiliconCostModel(SiliconParams(framework="sglang"), BF16_STATE, B200, tp=8)
        .step_time(BatchShape(num_decode_seqs=16, decode_context_tokens=x, num_sampled_tokens=16))
        .total_s
        for x in contexts
    ]


def test_the_roofline_prices_full_attention_on_the_full_layers_and_the_delta_rule_on_the_linear_ones():
    r = RooflineCostModel(RooflineParams(), QWEN35, H200, tp=8)
    every = QWEN35.model_copy(update={"num_linear_layers": 0})  # the same shapes, every layer full attention
    full = RooflineCostModel(RooflineParams(), every, H200, tp=8)
    decode = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 4000, num_sampled_tokens=8)
    ops, ref = r.breakdown(decode).ops, full.breakdown(decode).ops
    assert ops["attn_decode"].flops == pytest.approx(ref["attn_decode"].flops * 15 / 60)
    assert "attn_linear" not in ref
    # decode: each sequence's state read and written once a layer, whatever its context
    longer = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 40000, num_sampled_tokens=8)
    assert r.breakdown(longer).ops["attn_linear"] == ops["attn_linear"]
    assert ops["attn_linear"].bytes >= 45 * 8 * 2 * (8 * 128 * 128 * 4)
    # prefill: the chunked delta rule grows with the tokens, not their pairs
    short, long = (r.breakdown(BatchShape((n,), (0,), num_sampled_tokens=1)).ops for n in (4096, 8192))
    assert long["attn_linear"].flops == pytest.approx(2 * short["attn_linear"].flops)
    assert long["attn_prefill"].flops > 3.9 * short["attn_prefill"].flops
    # the decode window's steps equal each step priced alone
    contexts = [8 * 4000 + 8 * k for k in range(40)]
    assert r.decode_step_times(8, contexts) == [
        r.step_time(BatchShape(num_decode_seqs=8, decode_context_tokens=x, num_sampled_tokens=8)).total_s
        for x in contexts
    ]


def test_qwen3_next_layer_types_come_from_its_full_attention_interval(tmp_path):
    """Qwen3-Next's config.json has no layer_types, only full_attention_interval (transformers' Qwen3NextConfig makes
    every interval-th layer full attention); without either the Gated DeltaNet layers are refused, not misread."""
    import json

    from simulator.config.hf_config import model_spec_from_hf_config
    from simulator.cost.silicon.database import dependency_root

    root = dependency_root()
    assert root is not None
    cfg = json.loads((root.parent.parent / "model_configs" / "Qwen--Qwen3.5-397B-A17B_config.json").read_text())
    text = {k: v for k, v in cfg["text_config"].items() if k != "layer_types"}
    (tmp_path / "config.json").write_text(json.dumps(text | {"full_attention_interval": 4}))
    spec = model_spec_from_hf_config(tmp_path / "config.json")
    assert (spec.num_linear_layers, spec.num_full_attention_layers) == (45, 15)
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in text.items() if k != "full_attention_interval"}))
    with pytest.raises(ValueError, match="neither 'layer_types' nor a positive 'full_attention_interval'"):
        model_spec_from_hf_config(tmp_path / "config.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"parallelism": {"tp": 32}}, "tp=32 does not divide the 16 key and 64 value heads"),
        ({"parallelism": {"tp": 4, "pp": 2}}, "pp=2: pipeline stages of .* are not modelled"),
        ({"cost_model": {"kind": "aiconfigurator"}}, "Gated DeltaNet layers are not mapped to an aiconfigurator"),
    ],
)
def test_what_a_hybrid_model_cannot_run_is_refused_in_one_line(change, message):
    with pytest.raises(ValueError, match=message):
        build(validate_scenario(scenario(**change)))


def test_a_hybrid_model_in_a_disaggregated_cluster_is_refused():
    groups = [
        {"name": "p", "role": "prefill", "count": 1, "parallelism": {"tp": 8}},
        {"name": "d", "role": "decode", "count": 1, "parallelism": {"tp": 8}},
    ]
    cfg = validate_scenario({k: v for k, v in scenario().items() if k != "parallelism"} | {"groups": groups})
    with pytest.raises(
        ValueError, match=r"group p: role prefill with .* hybrid linear-attention model, is not modelled"
    ):
        build(cfg)


def test_mtp_runs_beside_a_hybrid_model_as_one_full_attention_layer():
    cfg = validate_scenario(scenario(speculative={"method": "mtp", "num_tokens": 1, "acceptance_rate": 0.8}))
    setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert setup.proposer is not None
    assert (setup.proposer.num_layers, setup.proposer.num_linear_layers) == (1, 0)
    assert setup.proposer.num_full_attention_layers == 1
    assert build(cfg).run().summary["completed"] == 40


def test_sglangs_given_slots_are_shared_among_attention_dp_ranks():
    per_seq = BF16_STATE.linear_state_bytes_per_seq_per_gpu(1)
    plan = plan_sglang_memory(
        BF16_STATE,
        B200,
        8,
        16,
        chunked_prefill_size=16384,
        mem_fraction_static=0.8,
        max_running_requests=128,
        dp_attention=8,
    )
    assert plan.state_slots == 16 and plan.state_bytes == 16 * per_seq


def test_the_state_dtype_anchoring_follows_the_engine_whose_gdn_table_is_read():
    # SGLang's collector ran its decode on a float32 state; vLLM's does not say (read as measured)
    sglang = SiliconCostModel(SiliconParams(framework="sglang"), BF16_STATE, B200, tp=8)
    vllm = SiliconCostModel(SiliconParams(framework="vllm"), BF16_STATE, B200, tp=8)
    assert sglang.tables is not None and sglang.tables.sources["gdn"].startswith("sglang 0.5.14")
    assert (sglang._gdn_state_bytes, vllm._gdn_state_bytes) == (4.0, None)
    assert vllm._gdn is not None  # vLLM's prefill kernel is named chunk_gated_delta_rule_flashinfer on B200


def test_the_converter_sums_each_phases_two_kernels_per_head_layout(tmp_path):
    """convert._gdn on a small table of the database layout: the convolution plus the delta rule, per cell, for
    whichever name the engine's chunk kernel has (vLLM's on L40S: chunk_gated_delta_rule_triton)."""
    from types import SimpleNamespace

    from simulator.cost.silicon.convert import _gdn
    from simulator.cost.silicon.database import Table

    layout = {"d_model": 2048, "num_k_heads": 16, "head_k_dim": 128, "num_v_heads": 32, "head_v_dim": 128}
    rows = [
        {"phase": "context", "kernel_source": k, "batch_size": b, "seq_len": n, "latency": ms * b * n / 64}
        for k, ms in (("causal_conv1d_fn", 0.01), ("chunk_gated_delta_rule_triton", 0.05))
        for b in (1, 2)
        for n in (64, 128)
    ] + [
        {"phase": "generation", "kernel_source": k, "batch_size": b, "seq_len": 1, "latency": ms * b}
        for k, ms in (("causal_conv1d_update", 0.002), ("fused_recurrent_gated_delta_rule_packed_decode", 0.004))
        for b in (1, 8)
    ]
    path = tmp_path / "gdn_perf.parquet"
    pd.DataFrame([r | layout for r in rows]).to_parquet(path)
    table = Table(path, "vllm", "0.24.0")
    out: dict = {}
    meta: dict = {}
    _gdn(SimpleNamespace(table=lambda family, filename: table), out, meta)
    key = "16/128/32/128"
    assert out[f"gdn_prefill/{key}/ms"].ravel().tolist() == pytest.approx([0.06, 0.12, 0.12, 0.24])
    assert out[f"gdn_decode/{key}"].ravel().tolist() == pytest.approx([1.0, 8.0, 0.006, 0.048])
    assert meta["gdn"].endswith("chunk_gated_delta_rule_triton, fused_recurrent_gated_delta_rule_packed_decode")


@pytest.mark.parametrize("kind", ["roofline", "silicon"])
def test_unfused_input_projections_are_four_gemms_and_three_copies(kind):
    """SGLang 0.5.9's Gated DeltaNet layer runs in_proj_qkv, in_proj_z, in_proj_b and in_proj_a in turn and copies q,
    k and v contiguous (``gdn_input_projections: separate``): the op is the four GEMMs at their own widths plus the
    copies, longer than the one fused GEMM of their summed width; every other op is unchanged, and the memoized step
    time is the breakdown's."""
    assert sum(QWEN35.linear_in_proj_widths()) == QWEN35.linear_in_proj_width()
    assert QWEN35.linear_in_proj_widths() == (2 * 2048 + 8192, 8192, 64, 64)

    def model(mode):
        roof = RooflineParams(gdn_input_projections=mode)
        if kind == "roofline":
            return RooflineCostModel(roof, QWEN35, B200, 8)
        return SiliconCostModel(SiliconParams(framework="sglang", roofline=roof), QWEN35, B200, 8)

    fused, separate = model("fused"), model("separate")
    roof = RooflineCostModel(RooflineParams(gdn_input_projections="separate"), QWEN35, B200, 8)
    for shape in (
        BatchShape((), (), 4, 4 * 1500, 4),
        BatchShape((), (), 32, 32 * 1500, 32),
        BatchShape((900,), (0,), 3, 4500, 4),
    ):
        a, b = fused.breakdown(shape).ops, separate.breakdown(shape).ops
        assert b["linear_in_proj"].seconds > a["linear_in_proj"].seconds
        assert {n: op for n, op in a.items() if n != "linear_in_proj"} == {
            n: op for n, op in b.items() if n != "linear_in_proj"
        }
        assert separate.step_time(shape).total_s == separate.breakdown(shape).total_s
        rows = roof.linear_rows(shape)
        copies = roof._gdn_copies(rows).seconds
        if kind == "roofline":
            parts = [roof._linear_proj(rows, w / 8, QWEN35.hidden_size).seconds for w in QWEN35.linear_in_proj_widths()]
        else:
            parts = [separate._gemm_lookup(f"linear_in_proj/{p}", rows)[0] * 45 for p in ("qkv", "z", "b", "a")]
        assert b["linear_in_proj"].seconds == pytest.approx(copies + sum(parts), rel=1e-12)
