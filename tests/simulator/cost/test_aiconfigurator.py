"""The ``aiconfigurator`` cost model: aiconfigurator's own step estimator behind servesim's ``BatchShape``."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

import servesim
from simulator.build import make_cost_model
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.cost import BatchShape
from simulator.cost.aiconfigurator import MS, AiconfiguratorParams
from simulator.cost.overhead import EngineOverheadParams
from simulator.cost.roofline import RooflineParams
from simulator.cost.shape import OP_NAMES
from simulator.cost.silicon import SiliconParams

LLAMA_8B = resolve_model("llama-3.1-8b")
H200 = resolve_hardware("h200")
NO_OVERHEAD = EngineOverheadParams(step_s=0.0, per_seq_s=0.0, tp_step_s=0.0)


@pytest.fixture(scope="module")
def aic():
    return make_cost_model(AiconfiguratorParams(), LLAMA_8B, H200, 1)


def decode(n: int, ctx_per_seq: int) -> BatchShape:
    return BatchShape(num_decode_seqs=n, decode_context_tokens=n * ctx_per_seq, num_sampled_tokens=n)


def prefill(*chunks: int) -> BatchShape:
    return BatchShape(tuple(chunks), (0,) * len(chunks), num_sampled_tokens=len(chunks))


def test_decode_and_prefill_steps_are_positive_and_grow_with_the_batch(aic):
    decode_s = [aic.step_time(decode(n, 1024)).total_s for n in (1, 8, 32, 128, 256)]
    prefill_s = [aic.step_time(prefill(t)).total_s for t in (128, 512, 2048, 8192)]
    for times in (decode_s, prefill_s):
        assert times[0] > 0
        assert all(a < b for a, b in itertools.pairwise(times))
    # a longer context costs more decode attention at the same batch
    assert aic.step_time(decode(64, 4096)).total_s > aic.step_time(decode(64, 512)).total_s


def test_a_step_is_the_estimators_own_mixed_step_plus_the_engine_overhead():
    """One whole prompt of n tokens with D decodes at context n: exactly the estimator's mixed step."""
    aic = make_cost_model(AiconfiguratorParams(overhead=NO_OVERHEAD), LLAMA_8B, H200, 1)
    n, d = 512, 64
    shape = BatchShape((n,), (0,), d, d * n, d + 1)
    assert aic.step_time(shape).total_s == pytest.approx(aic.engine.mixed_step_latency(n, d, n, 1, 0) * MS, rel=1e-9)
    assert aic.step_time(decode(d, n)).total_s == aic.engine.decode_step_latency(d, n, 1) * MS
    with_overhead = make_cost_model(AiconfiguratorParams(), LLAMA_8B, H200, 1)
    expected = EngineOverheadParams().step_s + EngineOverheadParams().per_seq_s * (d + 1)
    assert with_overhead.step_time(shape).total_s - aic.step_time(shape).total_s == pytest.approx(expected)


def test_chunks_are_priced_on_their_cached_prefix(aic):
    cold = aic.step_time(BatchShape((512,), (0,), 0, 0, 1)).total_s
    warm = aic.step_time(BatchShape((512,), (3584,), 0, 0, 1)).total_s
    two = aic.step_time(BatchShape((512, 512), (0, 3584), 0, 0, 2)).total_s
    assert warm > cold  # the same 512 new tokens attend to 4096 keys
    assert two > warm


def test_decode_step_times_are_step_times_floats(aic):
    contexts = [8 * 1000, 8 * 1024, 8 * 3000]
    assert aic.decode_step_times(8, contexts) == [aic.step_time(BatchShape((), (), 8, c, 8)).total_s for c in contexts]


def test_breakdown_sums_to_the_step_and_uses_servesims_op_names(aic):
    shape = BatchShape((512,), (1024,), 32, 32 * 2048, 33)
    step = aic.breakdown(shape)
    assert step.total_s == aic.step_time(shape).total_s
    assert sum(op.seconds for op in step.ops.values()) == pytest.approx(step.total_s, rel=1e-9)
    assert set(step.ops) <= set(OP_NAMES)
    assert {"attn_prefill", "attn_decode", "qkv_proj", "mlp_down", "lm_head", "cpu_overhead"} <= set(step.ops)
    assert aic.sources(shape)["qkv_proj"] == "silicon"


# Measured agreement with `silicon` on H200 (Llama-3.1-8B, tp 1, default overhead in both): decode
# 1-256 sequences 0.998-1.012, prefill 8k 0.995, a 512-token chunk on 3584 cached 0.986, prefill 2k 1.048.
# Both read aiconfigurator's vLLM tables; they part where they compose a step differently (below), and
# where a GEMM column is not monotone in m: `silicon` reads it as the nearest non-decreasing curve
# (convert.monotone_in_m), aiconfigurator each row as measured; the 2k prefill's GEMMs part so by 4.8 %
# (before that fit, every shape agreed within 0.990-1.006).
AGREEMENT = 0.03
AGREEMENT_WHERE_A_COLUMN_IS_FITTED = 0.06  # the 2k prefill (above)


@pytest.mark.parametrize(
    ("shape", "band"),
    [
        pytest.param(decode(1, 1024), AGREEMENT, id="decode1"),
        pytest.param(decode(32, 1024), AGREEMENT, id="decode32"),
        pytest.param(decode(128, 2048), AGREEMENT, id="decode128"),
        pytest.param(prefill(2048), AGREEMENT_WHERE_A_COLUMN_IS_FITTED, id="prefill2k"),
        pytest.param(prefill(8192), AGREEMENT, id="prefill8k"),
        pytest.param(BatchShape((512,), (3584,), 0, 0, 1), AGREEMENT, id="chunk512on3584"),
    ],
)
def test_agrees_with_silicon_within_the_measured_band(aic, shape, band):
    silicon = make_cost_model(SiliconParams(), LLAMA_8B, H200, 1)
    ratio = aic.step_time(shape).total_s / silicon.step_time(shape).total_s
    assert abs(ratio - 1) < band


def test_a_scenario_runs_end_to_end():
    cfg = servesim.scenario(
        model="llama-3.1-8b",
        hardware="h200",
        cost_model={"kind": "aiconfigurator"},
        workload={"num_requests": 20, "arrival": {"kind": "poisson", "rate_per_s": 5}},
    )
    result = servesim.run(cfg)
    assert result.summary["completed"] == 20
    assert result.summary["p50_tpot_ms"] > 0


def test_fp8_and_moe_deployments_build():
    fp8 = resolve_model("llama-3.1-8b").model_copy(update={"quantization": "fp8", "weight_bytes": 1.0})
    bf16_s = make_cost_model(AiconfiguratorParams(), LLAMA_8B, H200, 1).step_time(prefill(4096)).total_s
    fp8_s = make_cost_model(AiconfiguratorParams(), fp8, H200, 1).step_time(prefill(4096)).total_s
    assert fp8_s < bf16_s
    mixtral = make_cost_model(AiconfiguratorParams(), resolve_model("mixtral-8x7b"), H200, 2, ep=2)
    assert mixtral.step_time(decode(16, 1024)).total_s > 0
    assert set(mixtral.breakdown(BatchShape((512,), (0,), 16, 16 * 1024, 17)).ops) <= set(OP_NAMES)


def test_moe_agrees_with_silicon_under_the_estimators_power_law_expert_load():
    """aiconfigurator loads experts by a power law (balanced, silicon was 8-12 % apart from it). Under silicon's
    power_law_1.01 Mixtral-8x7B at tp 2 agrees to 1.1-1.7 %."""
    mixtral = resolve_model("mixtral-8x7b")
    aic = make_cost_model(AiconfiguratorParams(), mixtral, H200, 2)
    silicon = make_cost_model(
        SiliconParams(roofline=RooflineParams(moe_token_distribution="power_law_1.01")), mixtral, H200, 2
    )
    for shape in (decode(32, 1024), prefill(2048)):
        assert abs(aic.step_time(shape).total_s / silicon.step_time(shape).total_s - 1) < AGREEMENT


def test_unsupported_deployments_are_one_clear_error():
    plain_mlp = LLAMA_8B.model_copy(update={"gated_mlp": False})
    with pytest.raises(ValueError, match=r"^cost_model.kind aiconfigurator: model .*plain two-matrix MLP"):
        make_cost_model(AiconfiguratorParams(), plain_mlp, H200, 1)
    with pytest.raises(ValueError, match=r"^cost_model.kind aiconfigurator: hardware .* no aiconfigurator system"):
        make_cost_model(AiconfiguratorParams(), LLAMA_8B, resolve_hardware("mi300x"), 1)
    with pytest.raises(ValueError, match=r"^cost_model.kind aiconfigurator: no vllm 0.0.1 tables for h200_sxm"):
        make_cost_model(AiconfiguratorParams(version="0.0.1"), LLAMA_8B, H200, 1)


def test_cli_refuses_an_unpriceable_deployment_in_one_line(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: llama-3.1-8b\nhardware: mi300x\ncost_model: {kind: aiconfigurator}\n")
    out = subprocess.run(
        [sys.executable, "-m", "servesim", "run", str(scenario), "--num-requests", "5", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "cost_model.kind aiconfigurator" in out.stderr
    assert "Traceback" not in out.stderr
