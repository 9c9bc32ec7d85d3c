"""The calibration profile format and the profiled cost model (numpy only, no torch).

Profiles here are synthetic: op times from simple formulas over a grid, so that what
interpolation must return is known by hand.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesim.cli import main
from simulator.build import build
from simulator.config.presets import hardware_presets, model_presets
from simulator.config.scenario import validate_scenario
from simulator.cost.interpolate import GridInterpolator
from simulator.cost.profile import (
    OP_AXES,
    CalibrationProfile,
    DeviceInfo,
    GridSpec,
    MemoryProfile,
    OpTable,
    ProfilePoint,
    StepOverhead,
    load_profile,
    save_profile,
)
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams
from simulator.cost.shape import BatchShape
from tests.conftest import make_stream

MODEL = model_presets()["llama-3.1-8b"]
HW = hardware_presets()["h200"]
TOKENS = (1, 4, 16, 64, 256, 1024)
NEW, CACHED = (1, 64, 512), (0, 256, 2048)
SEQS, CTX = (1, 8, 64), (128, 1024, 8192)
PACKED_T, PACKED_KV = (1, 64, 1024), (128, 4096)


def linear_time(op: str, at: tuple[int, ...]) -> float:
    """A made-up, increasing time for ``op`` at ``at``: 10 us + a per-unit slope."""
    slope = {"embed": 1e-9, "lm_head": 2e-7}.get(op, 1e-7)
    return 1e-5 + slope * at[0] * (1 + (at[1] / 1000 if len(at) > 1 else 0))


def table(op: str, axes_values) -> OpTable:
    import itertools

    points = tuple(
        ProfilePoint(at=at, median_s=linear_time(op, at), iqr_s=0.0, num_repeats=5)
        for at in itertools.product(*axes_values)
    )
    return OpTable(axes=OP_AXES[op], scope="model" if op in ("embed", "lm_head") else "layer", points=points)


def make_profile(**overrides) -> CalibrationProfile:
    ops = {op: table(op, [TOKENS]) for op in OP_AXES if len(OP_AXES[op]) == 1}
    ops["attn_prefill"] = table("attn_prefill", [NEW, CACHED])
    ops["attn_decode"] = table("attn_decode", [SEQS, CTX])
    ops["attn_packed"] = table("attn_packed", [PACKED_T, PACKED_KV])
    fields = {
        "schema_version": 1,
        "harness_version": "test",
        "created_utc": "2026-01-01T00:00:00+00:00",
        "device": DeviceInfo(kind="cuda", name="synthetic", num_threads=1, torch_version="x", timer="formula"),
        "dtype": "bf16",
        "model": MODEL,
        "hardware": HW,
        "grid": GridSpec(
            name="quick",
            num_tokens=TOKENS,
            prefill_new_tokens=NEW,
            prefill_cached_tokens=CACHED,
            decode_seqs=SEQS,
            decode_context_tokens=CTX,
            sampled_tokens=TOKENS,
            packed_tokens=PACKED_T,
            packed_kv_tokens=PACKED_KV,
        ),
        "ops": ops,
        "overhead": StepOverhead(step_s=2e-3, per_seq_s=1e-5, num_steps=10),
        "memory": MemoryProfile(
            device_memory_bytes=100 * 2**30,
            weight_bytes=16 * 2**30,
            activation_peak_bytes=2 * 2**30,
            activation_tokens=1024,
            runtime_bytes=2**30,
        ),
    }
    return CalibrationProfile(**(fields | overrides))


def cost(profile=None, **params) -> ProfiledCostModel:
    return ProfiledCostModel(
        ProfiledParams(**params), MODEL, HW, 1, profile=make_profile() if profile is None else profile
    )


# -- the schema ---------------------------------------------------------------------------------


def test_profile_round_trips_through_json(tmp_path):
    profile = make_profile()
    path = save_profile(profile, tmp_path / "p.json")
    assert load_profile(path) == profile


def test_corrupted_profile_is_a_clear_error(tmp_path):
    path = save_profile(make_profile(), tmp_path / "p.json")
    path.write_text(path.read_text()[:500])
    with pytest.raises(ValueError, match=r"p.json: corrupted profile, not valid JSON"):
        load_profile(path)
    with pytest.raises(ValueError, match="no such profile file"):
        load_profile(tmp_path / "missing.json")


def test_wrong_schema_version_is_refused(tmp_path):
    data = json.loads(make_profile().model_dump_json())
    data["schema_version"] = 99
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"schema version 99 is not supported .* re-run `servesim calibrate`"):
        load_profile(tmp_path / "p.json")


def test_missing_field_names_the_field(tmp_path):
    data = json.loads(make_profile().model_dump_json())
    del data["memory"]["weight_bytes"]
    (tmp_path / "p.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"p.json: memory.weight_bytes: Field required"):
        load_profile(tmp_path / "p.json")


def test_incomplete_grid_is_refused():
    points = table("qkv_proj", [TOKENS]).points[:-1]
    full = table("attn_decode", [SEQS, CTX]).points
    with pytest.raises(ValueError, match="full grid"):
        OpTable(axes=OP_AXES["attn_decode"], scope="layer", points=full[1:])
    assert len(OpTable(axes=("num_tokens",), scope="layer", points=points).points) == len(TOKENS) - 1


def test_profile_of_another_model_is_refused():
    other = model_presets()["llama-3.1-70b"]
    with pytest.raises(ValueError, match=r"measured Llama-3.1-8B, which does not match .*Llama-3.1-70B"):
        ProfiledCostModel(ProfiledParams(), other, HW, 1, profile=make_profile())


def test_profile_cannot_predict_tensor_parallelism():
    with pytest.raises(ValueError, match="tp=2"):
        ProfiledCostModel(ProfiledParams(), MODEL, HW, 2, profile=make_profile())


# -- interpolation ------------------------------------------------------------------------------


@pytest.mark.parametrize("space", ["log", "linear"])
def test_interpolation_is_exact_on_grid_points(space):
    values = {(t, c): linear_time("attn_decode", (t, c)) for t in SEQS for c in CTX}
    f = GridInterpolator([SEQS, CTX], values, space)
    for at, t in values.items():
        assert f(at) == pytest.approx(t, rel=1e-12)
    assert f((SEQS[-1] + 1, CTX[0])) is None and f((0, CTX[0])) is None


@settings(max_examples=200, deadline=None)
@given(a=st.floats(1, 1024), b=st.floats(1, 1024), space=st.sampled_from(["log", "linear"]))
def test_interpolation_is_monotone_between_grid_points(a, b, space):
    values = {(t,): linear_time("qkv_proj", (t,)) for t in TOKENS}
    f = GridInterpolator([TOKENS], values, space)
    lo, hi = sorted((a, b))
    assert f((lo,)) <= f((hi,)) * (1 + 1e-12)
    # and lies between the enclosing grid values
    i = max(j for j, t in enumerate(TOKENS) if t <= lo)
    j = min(j for j, t in enumerate(TOKENS) if t >= lo)
    assert values[(TOKENS[i],)] * (1 - 1e-12) <= f((lo,)) <= values[(TOKENS[j],)] * (1 + 1e-12)


def test_step_time_on_grid_points_is_the_sum_of_measured_ops():
    m = cost()
    shape = BatchShape((64,), (256,), num_decode_seqs=0, num_sampled_tokens=1)
    ops = m.breakdown(shape).ops
    L = MODEL.num_layers
    assert ops["qkv_proj"].seconds == pytest.approx(linear_time("qkv_proj", (64,)) * L)
    assert ops["attn_prefill"].seconds == pytest.approx(linear_time("attn_prefill", (64, 256)) * L)
    assert ops["embed"].seconds == pytest.approx(linear_time("embed", (64,)))
    assert ops["lm_head"].seconds == pytest.approx(linear_time("lm_head", (1,)))
    assert ops["cpu_overhead"].seconds == pytest.approx(2e-3 + 1e-5)
    assert m.fallbacks == {} and m.num_lookups > 0
    decode = BatchShape(num_decode_seqs=8, decode_context_tokens=8 * 1024, num_sampled_tokens=8)
    assert m.breakdown(decode).ops["attn_decode"].seconds == pytest.approx(linear_time("attn_decode", (8, 1024)) * L)


def test_outside_the_grid_falls_back_to_the_roofline_and_counts():
    m = cost()
    big = BatchShape((4096,), (0,), num_sampled_tokens=1)
    ops = m.breakdown(big).ops
    assert m.fallbacks["qkv_proj"] == 1 and m.fallbacks["attn_prefill"] == 1
    # anchored: the edge's measured time scaled by the roofline's ratio (here 4x the tokens)
    roof = m.roofline.breakdown(big).ops["qkv_proj"].seconds
    edge = m.roofline.breakdown(BatchShape((1024,), (0,))).ops["qkv_proj"].seconds
    assert ops["qkv_proj"].seconds == pytest.approx(linear_time("qkv_proj", (1024,)) * MODEL.num_layers * roof / edge)
    assert 0 < m.fallback_fraction < 1
    plain = cost(extrapolation="roofline")
    assert plain.breakdown(big).ops["qkv_proj"].seconds == pytest.approx(roof)


def test_without_a_profile_every_op_is_the_roofline():
    m = ProfiledCostModel(ProfiledParams(), MODEL, HW, 1, profile=None)
    shape = BatchShape((100,), (0,), num_sampled_tokens=1)
    assert m.breakdown(shape).ops["mlp_down"].seconds == m.roofline.breakdown(shape).ops["mlp_down"].seconds
    assert m.fallback_fraction == 1.0


def test_packed_attention_and_time_scale():
    shape = BatchShape((64,), (0,), num_decode_seqs=8, decode_context_tokens=8 * 400, num_sampled_tokens=9)
    packed = cost(attention="packed").breakdown(shape).ops
    assert "attn_decode" not in packed
    T, kv = 64 + 8, 64 + 8 * 400
    f = GridInterpolator(
        [PACKED_T, PACKED_KV], {(t, k): linear_time("attn_packed", (t, k)) for t in PACKED_T for k in PACKED_KV}
    )
    assert packed["attn_prefill"].seconds == pytest.approx(f((T, kv)) * MODEL.num_layers)
    scaled = cost(time_scale=2.0).breakdown(shape)
    base = cost().breakdown(shape)
    assert scaled.ops["mlp_down"].seconds == pytest.approx(2 * base.ops["mlp_down"].seconds)
    assert scaled.ops["cpu_overhead"].seconds == base.ops["cpu_overhead"].seconds


# -- wiring: scenarios, KV capacity, CLI --------------------------------------------------------


def scenario_with(profile_path: Path, **fields):
    return validate_scenario(
        {
            "model": MODEL.model_dump(),
            "hardware": "h200",
            "cost_model": {"kind": "profiled", "profile": str(profile_path)},
            "workload": {"num_requests": 20, "arrival": {"kind": "poisson", "rate_per_s": 5}},
        }
        | fields
    )


def test_kv_capacity_comes_from_the_measured_memory(tmp_path):
    path = save_profile(make_profile(), tmp_path / "p.json")
    sim = build(scenario_with(path))
    gib = 2**30
    block = MODEL.kv_bytes_per_token() * 16
    expected = int((100 * gib * 0.9 - 16 * gib - 3 * gib) // block)
    assert sim.engines[0].kv.num_total_blocks == expected
    result = build(scenario_with(path), stream=make_stream([0.0, 0.1], [300, 20], [20, 5])).run()
    assert result.summary["completed"] == 2


def test_profiled_without_a_profile_file_is_refused():
    cfg = validate_scenario({"cost_model": {"kind": "profiled"}})
    with pytest.raises(ValueError, match=r"cost_model\.profile: the profiled cost model needs a profile file"):
        build(cfg)


SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")


def test_cli_run_and_estimate_read_a_profile(tmp_path):
    path = save_profile(make_profile(), tmp_path / "p.json")
    proc = subprocess.run(
        [SERVESIM, "estimate", "--profile", path, "--prefill", "64:256", "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ops"]["attn_prefill"] == pytest.approx(linear_time("attn_prefill", (64, 256)) * MODEL.num_layers)
    proc = subprocess.run(
        [SERVESIM, "run", "--profile", path, "--num-requests", "30", "--quiet", "--json", "--out", tmp_path / "r"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["cost_model"]["kind"] == "profiled" and config["hardware"]["name"] == HW.name
    proc = subprocess.run(
        [SERVESIM, "run", "--profile", path, "--model", "llama-2-7b", "--quiet"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "does not match the scenario's model Llama-2-7B" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_validate_refuses_a_policy_transformers_does_not_run(tmp_path):
    path = save_profile(make_profile(), tmp_path / "p.json")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("policy: {kind: vllm_v0}\n")
    proc = subprocess.run(
        [SERVESIM, "validate", "--profile", path, "--engine", "hf", "--workload", scenario, "--quiet"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "the policy must be hf_fifo" in proc.stderr and "Traceback" not in proc.stderr
    scenario.write_text("hardware: h100-sxm\n")
    proc = subprocess.run(
        [SERVESIM, "validate", "--profile", path, "--engine", "builtin", "--workload", scenario, "--quiet"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--workload: hardware cannot be set here" in proc.stderr


def test_validate_fit_recovers_an_engines_scale_and_overheads():
    """Warm-up steps timed as scale x ops + step + per_seq x seqs + per_kv x keys give those four back."""
    from calibration.engine import StepRecord
    from calibration.validate import fit_engine

    profile = make_profile()
    bare = cost(profile, step_overhead_s=0.0, per_seq_overhead_s=0.0, attention="packed")
    truth = (1.3, 1.5e-3, 40e-6, 3e-6)
    shapes = [((64,) * b, (0,) * b, 0, 0, b) for b in (1, 4, 8)]  # prefills of b prompts
    shapes += [((), (), b, b * ctx, b) for b in (1, 4, 8) for ctx in (70, 300, 900, 2000)]
    steps = []
    for new, cached, b, ctx, sampled in shapes:
        shape = BatchShape(new, cached, b, ctx, sampled)
        seconds = truth[0] * bare.step_time(shape).total_s + truth[1] + truth[2] * shape.num_seqs
        steps.append(StepRecord(0.0, seconds + truth[3] * shape.num_kv_tokens, new, cached, b, ctx, sampled, 0))
    fit = fit_engine(steps, [1e-4], "packed", profile)
    got = (fit.time_scale, fit.step_overhead_s, fit.per_seq_overhead_s, fit.per_kv_token_overhead_s)
    assert got == pytest.approx(truth, rel=1e-6)
    assert fit.mean_rel_error < 1e-9 and fit.ingest_delay_s == pytest.approx(1e-4)
    # the simulator's step time with the fitted parameters is the engine's
    fitted = cost(
        profile,
        attention="packed",
        time_scale=fit.time_scale,
        step_overhead_s=fit.step_overhead_s,
        per_seq_overhead_s=fit.per_seq_overhead_s,
        per_kv_token_overhead_s=fit.per_kv_token_overhead_s,
    )
    for step in steps:
        assert fitted.step_time(step.shape()).total_s == pytest.approx(step.end_s, rel=1e-6)


@pytest.mark.parametrize("attention", ["per_sequence", "packed"])
def test_decode_step_times_equal_step_time_inside_and_outside_the_grid(attention):
    """The fast-forward path's vectorised decode times are step_time's, float for float."""
    import numpy as np

    m = cost(attention=attention, time_scale=1.3, per_kv_token_overhead_s=2e-9)
    for n in (1, 8, 50, 200):  # 200 sequences lie beyond the grid's largest batch
        contexts = n * np.array([1, 100, 1000, 5000, 20000]) + np.arange(5)
        got = m.decode_step_times(n, contexts)
        want = [m.step_time(BatchShape((), (), n, int(c), n)).total_s for c in contexts]
        assert got == want


@pytest.mark.parametrize("attention", ["per_sequence", "packed"])
def test_fast_forward_with_a_profile_equals_the_plain_path(tmp_path, attention):
    from tests.simulator.engine.test_fast_forward import assert_same_run

    path = save_profile(make_profile(), tmp_path / "p.json")
    cfg = scenario_with(
        path,
        cost_model={"kind": "profiled", "profile": str(path), "attention": attention, "per_kv_token_overhead_s": 1e-9},
        workload={"num_requests": 150, "arrival": {"kind": "poisson", "rate_per_s": 8}},
    )
    plain, fast = assert_same_run(cfg)
    assert fast.summary["num_steps"] == plain.summary["num_steps"] > 150


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"policy": 5}, "--workload: policy"),
        ({"kv_cache": 5}, "--workload: kv_cache"),
        ({"workload": [1, 2]}, "--workload: workload"),
        ({"max_model_len": 10}, "max_model_len 10 is below the"),
        ({"kv_cache": {"num_blocks": 1}}, "kv_cache.num_blocks 1 cannot hold one warm-up request"),
    ],
)
def test_validate_names_the_bad_workload_field(tmp_path, data, message):
    from calibration.validate import validation_scenario

    path = save_profile(make_profile(), tmp_path / "p.json")
    with pytest.raises(ValueError, match=re.escape(message)):
        validation_scenario(make_profile(), path, "hf", data, None)


def test_validate_on_a_machine_without_the_profiles_device_says_so(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = save_profile(make_profile(), tmp_path / "p.json")  # measured on "cuda"
    code = main(["validate", "--profile", str(path), "--engine", "builtin", "--requests", "4", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "p.json: measured on cuda (synthetic)" in err and "--device" not in err


def test_a_profile_with_an_infinite_time_is_refused(tmp_path):
    path = save_profile(make_profile(), tmp_path / "p.json")
    text = path.read_text()
    first = text.index('"median_s": ') + len('"median_s": ')
    path.write_text(text[:first] + "Infinity" + text[text.index(",", first) :])
    with pytest.raises(ValueError, match="median_s"):
        load_profile(path)


def test_a_degenerate_engine_fit_falls_back_to_the_profile():
    from calibration.engine import StepRecord
    from calibration.validate import fit_engine

    # every step took 5 ms whatever its work: the ops explain nothing
    steps = [StepRecord(0.0, 5e-3, (), (), b, b * 100, b, 0) for b in (1, 2, 4, 8, 16, 32)]
    fit = fit_engine(steps, [0.0], "per_sequence", make_profile())
    assert not fit.fitted and fit.time_scale == 1.0 and fit.per_kv_token_overhead_s == 0.0
    assert fit.step_overhead_s == make_profile().overhead.step_s


def test_decode_step_times_count_no_fallback_for_contexts_inside_the_grid():
    # the per-batch-size probe of the context-free ops attends to 1 token per sequence, below the grid:
    # its lookups are not the run's
    m = cost()
    m.decode_step_times(8, [8192, 16384])
    assert m.fallbacks == {} and m.fallback_fraction == 0.0
