"""The engine-level fit: it recovers known overheads, lives in the profile, and run and validate use it."""

import pytest

from calibration.engine import StepRecord
from calibration.engine_fit import predict, with_engine
from calibration.validate import EngineFit, fit_engine, from_calibration
from simulator.cost.profile import EngineCalibration, load_profile, save_profile
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams
from tests.simulator.cost.test_profiled import HW, MODEL, make_profile

TRUE = EngineFit(
    time_scale=1.3,
    step_overhead_s=2.5e-3,
    per_seq_overhead_s=4e-5,
    per_kv_token_overhead_s=2e-8,
    ingest_delay_s=1e-3,
    num_steps=0,
    mean_rel_error=0.0,
    fitted=True,
)


def synthetic_steps(profile) -> list[StepRecord]:
    """Steps of a made-up engine whose time is exactly TRUE's model over the profile's op times."""
    shapes = [((64 * b,) * 1, (0,), 0, 0, 1) for b in (1, 2, 4)]  # prefills of several lengths
    shapes += [((), (), b, b * ctx, b) for b in (1, 4, 16, 64) for ctx in (200, 1500, 6000)]  # decodes
    shapes += [((256,), (512,), 8, 8 * 900, 9)]  # a mixed step over a cached prefix
    steps = [StepRecord(0.0, 1.0, *s, 0) for s in shapes]
    times = predict(TRUE, steps, "per_sequence", profile)
    return [StepRecord(0.0, float(t), *s, 0) for t, s in zip(times, shapes, strict=True)]


def test_the_fit_recovers_the_overheads_of_a_synthetic_engine():
    profile = make_profile()
    fit = fit_engine(synthetic_steps(profile), [1e-3, 1e-3], "per_sequence", profile)
    assert fit.fitted
    assert fit.time_scale == pytest.approx(TRUE.time_scale, rel=1e-6)
    assert fit.step_overhead_s == pytest.approx(TRUE.step_overhead_s, rel=1e-6)
    assert fit.per_seq_overhead_s == pytest.approx(TRUE.per_seq_overhead_s, rel=1e-5)
    assert fit.per_kv_token_overhead_s == pytest.approx(TRUE.per_kv_token_overhead_s, rel=1e-5)
    assert fit.mean_rel_error < 1e-9


def calibration(**kw) -> EngineCalibration:
    fields = dict(
        engine="hf",
        engine_version="transformers test",
        attention="packed",
        num_threads=1,
        time_scale=1.3,
        step_overhead_s=2.5e-3,
        per_seq_overhead_s=4e-5,
        per_kv_token_overhead_s=2e-8,
        ingest_delay_s=1e-3,
        num_steps=40,
        fit_mean_rel_error=0.05,
        num_held_out=10,
        held_out_mean_rel_error=0.08,
    )
    return EngineCalibration(**(fields | kw))


def test_the_engine_fit_is_kept_in_the_profile_and_applied_by_the_cost_model(tmp_path):
    profile = with_engine(make_profile(schema_version=2), calibration())
    path = save_profile(profile, tmp_path / "p.json")
    loaded = load_profile(path)
    assert loaded.engines["hf"] == calibration()
    model = ProfiledCostModel(ProfiledParams(profile=str(path), engine="hf"), MODEL, HW, 1, profile=loaded)
    assert model.time_scale == 1.3 and model.step_overhead_s == 2.5e-3 and model.params.attention == "packed"
    assert from_calibration(loaded.engines["hf"]).per_kv_token_overhead_s == 2e-8
    with pytest.raises(ValueError, match=r"holds no fit for engine 'builtin' \(it has: hf\).*--engine builtin"):
        ProfiledCostModel(ProfiledParams(profile=str(path), engine="builtin"), MODEL, HW, 1, profile=loaded)


def test_run_with_a_profile_applies_its_one_engine_fit(tmp_path):
    from servesim.commands.common import _apply_profile

    path = save_profile(with_engine(make_profile(schema_version=2), calibration()), tmp_path / "p.json")
    data: dict = {}
    _apply_profile(data, path)
    assert data["cost_model"]["engine"] == "hf"
    plain = save_profile(make_profile(), tmp_path / "v1.json")
    data = {}
    _apply_profile(data, plain)
    assert "engine" not in data["cost_model"]


def test_an_engine_fit_that_misses_its_held_out_steps_makes_the_profile_suspect():
    from simulator.cost.profile import ProfileQuality

    quiet = ProfileQuality(noise_bound=0.05, num_points=10, num_noisy_points=0, other_cores=0.0, warnings=())
    base = make_profile(schema_version=2, quality=quiet)
    assert with_engine(base, calibration(held_out_mean_rel_error=0.1)).warnings == ()
    (warning,) = with_engine(base, calibration(engine="builtin", held_out_mean_rel_error=0.36)).warnings
    assert "engine builtin: its step-time fit misses held-out steps by 36%" in warning
