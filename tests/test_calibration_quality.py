"""Calibration you can trust: noisy timings warned about and refused, engine-level fits, older profiles.

Nothing here compares wall-clock times of real engines: timings are faked (a timer that
injects spread, a synthetic engine on a fake clock), so these tests are quick and exact.
The real engines run only where what is checked is not their speed.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration.engine import BuiltinEngine, EngineRequest, StepRecord
from calibration.harness import MAX_PASSES, MIN_PASSES, measure_points
from calibration.stepfit import bare_cost_model, fit_step_model, step_data
from calibration.timing import Timing
from policies import BATCH_POLICIES
from servesim.cli import main
from simulator.cost.profile import (
    NOISE_REL_SPREAD,
    OP_AXES,
    PROFILE_SCHEMA_VERSION,
    CalibrationProfile,
    EngineCalibration,
    LoadReport,
    MeasurementQuality,
    OpTable,
    ProfilePoint,
    StepKindError,
    cpu_model_name,
    load_profile,
    save_profile,
    thread_note,
)
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams, quality_warnings
from simulator.cost.shape import BatchShape
from tests.test_profiled import HW, MODEL, make_profile

DATA = Path(__file__).parent / "data"
V1_PROFILE = DATA / "profile_v1_tiny_cpu.json"


# -- a timer that injects spread ----------------------------------------------------------------


class FakeTimer:
    """Never calls the op: returns repeats around a formula's time with a chosen relative spread.

    ``spread(at, pass_index)`` gives the half-width of the repeats (0.5: +-50 %), ``slow(at, pass_index)``
    a factor on all of them (a burst of foreign load slows a whole pass).
    """

    label = "fake"

    def __init__(
        self, spread=lambda at, k: 0.5, time_s=lambda at: 1e-4 * (1 + sum(at) / 64), slow=lambda at, k: 1.0
    ) -> None:
        self.spread = spread
        self.time_s = time_s
        self.slow = slow
        self.calls: dict[Any, int] = {}

    def time(self, fn, profile: bool = True) -> Timing:
        at = getattr(fn, "at", None)
        k = self.calls.get(at, 0)
        self.calls[at] = k + 1
        t, w = (self.time_s(at) if at is not None else 1e-4) * self.slow(at, k), self.spread(at, k)
        samples = tuple(t * (1 + w * x) for x in np.linspace(-1, 1, 9))
        q25, q50, q75 = np.percentile(samples, [25, 50, 75])
        return Timing(float(q50), float(q75 - q25), len(samples), None, samples)


def calls_at(points):
    def call(at):
        def fn():
            return None

        fn.at = at
        return fn

    return {at: call(at) for at in points}


def test_the_cpu_timer_times_blocks_long_enough_for_short_calls():
    from calibration.timing import CpuTimer

    now = [0.0]

    def clock() -> float:
        return now[0]

    def call() -> None:  # 10 us a call, on a fake clock
        now[0] += 1e-5

    t = CpuTimer(min_run_time_s=0.01, min_repeats=3, block_s=2e-3, clock=clock).time(call)
    assert t.median_s == pytest.approx(1e-5) and t.iqr_s == pytest.approx(0, abs=1e-15)
    assert t.num_repeats >= 3 and sum(t.samples_s) * 200 >= 0.01 * 0.99  # blocks of 200 calls, 10 ms in all

    def slow() -> None:  # 30 ms a call: a block is one call, and still min_repeats of them
        now[0] += 0.03

    assert CpuTimer(min_run_time_s=0.01, min_repeats=2, clock=clock).time(slow).num_repeats == 2


def test_noisy_points_are_repeated_to_the_cap_and_marked():
    timer = FakeTimer(spread=lambda at, k: 0.5)
    timings = measure_points(calls_at([(1,), (2,), (4,)]), timer)
    assert set(timer.calls.values()) == {MAX_PASSES}
    assert all(t.rel_spread > NOISE_REL_SPREAD for t in timings.values())
    quiet = FakeTimer(spread=lambda at, k: 0.01)
    timings = measure_points(calls_at([(1,), (2,)]), quiet)
    assert set(quiet.calls.values()) == {MIN_PASSES} and all(t.rel_spread < NOISE_REL_SPREAD for t in timings.values())


def test_a_burst_in_one_pass_is_repeated_away():
    # the first pass of point (2,) was hit by a burst; later passes are quiet: pooling more passes
    # brings its spread back under the bound, and it is not marked noisy
    timer = FakeTimer(spread=lambda at, k: 0.01, slow=lambda at, k: 3.0 if (at == (2,) and k == 0) else 1.0)
    timings = measure_points(calls_at([(1,), (2,)]), timer)
    assert timer.calls[(1,)] == MIN_PASSES and MIN_PASSES < timer.calls[(2,)] <= MAX_PASSES
    assert timings[(2,)].rel_spread <= NOISE_REL_SPREAD


# -- warnings, --strict, run repeats them ------------------------------------------------------


def noisy_profile(**overrides) -> CalibrationProfile:
    """make_profile with every point's spread at 80 % and flagged noisy, held-out points 3x off."""
    base = make_profile()
    ops = {
        name: OpTable.model_validate(
            t.model_dump() | {"points": [p.model_dump() | {"iqr_s": 0.8 * p.median_s, "noisy": True} for p in t.points]}
        )
        for name, t in base.ops.items()
    }
    held = {
        "mlp_gate_up": (ProfilePoint(at=(8,), median_s=3 * 1e-5, iqr_s=1e-5, num_repeats=9, noisy=True),),
    }
    fields = {
        "ops": ops,
        "held_out": held,
        "fit": {
            "mlp_gate_up": {"grid_max_rel_error": 0.0, "held_out_mean_rel_error": 6.4, "num_held_out": 1},
            "attn_packed": {"grid_max_rel_error": 0.0, "held_out_mean_rel_error": 22.57, "num_held_out": 1},
        },
        "quality": MeasurementQuality(
            noise_rel_spread=NOISE_REL_SPREAD,
            min_passes=MIN_PASSES,
            max_passes=MAX_PASSES,
            load=LoadReport(num_cpus=2, num_threads=2, other_cpus_before=1.0, other_cpus_mean=0.9, num_samples=5),
        ),
    }
    return make_profile(**(fields | overrides))


def test_a_noisy_profile_has_a_loud_warning_that_says_what_to_do():
    lines = quality_warnings(noisy_profile(), "noisy.json")
    text = "\n".join(lines)
    assert lines[0] == "noisy.json: this profile's timings are not to be trusted:"
    assert "noisy timings, typical spread (iqr/median) above 50%" in text and "mlp_gate_up 80% (7/7)" in text
    assert "mlp_gate_up 640%" in text and "attn_packed 2,257%" in text
    assert "busy machine: other processes kept 0.9 of 2 CPUs busy (mean)" in text
    assert "--strict" in lines[-1] and "quiet machine" in lines[-1]
    assert len(lines) <= 6
    assert quality_warnings(make_profile()) == []  # the clean synthetic profile


def test_busy_compares_other_load_with_the_idle_cores():
    one_thread = LoadReport(num_cpus=2, num_threads=1, other_cpus_mean=0.9)
    two_threads = LoadReport(num_cpus=2, num_threads=2, other_cpus_mean=0.9)
    assert not one_thread.busy and two_threads.busy
    assert LoadReport(num_cpus=2, num_threads=1, other_cpus_before=1.5).busy  # no samples during: before decides
    assert not LoadReport(num_cpus=2, num_threads=1, other_cpus_before=1.5, other_cpus_mean=0.5).busy
    assert not LoadReport(num_cpus=2, num_threads=2).busy  # unknown load is not busy


def tiny_config(tmp_path: Path) -> Path:
    """A very small Llama-style model: calibration's own engine steps on it take a moment."""
    cfg = json.loads((DATA / "tiny_llama_config.json").read_text())
    cfg |= {
        "_name_or_path": "micro-llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 512,
        "max_position_embeddings": 256,
    }
    path = tmp_path / "micro.json"
    path.write_text(json.dumps(cfg))
    return path


def test_calibrate_warns_about_noisy_timings_and_strict_refuses(tmp_path, monkeypatch, capsys):
    import calibration.harness as harness

    monkeypatch.setattr(harness, "make_timer", lambda *a, **k: FakeTimer(spread=lambda at, k: 0.9))
    model = tiny_config(tmp_path)
    out = tmp_path / "strict.json"
    code = main(["calibrate", "--model", str(model), "--device", "cpu", "--threads", "1", "--strict", "--quiet",
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and not out.exists(), err
    assert len(err.strip().splitlines()) == 1
    assert "--strict:" in err and "not to be trusted" in err and "noisy timings" in err

    out = tmp_path / "noisy.json"
    code = main(["calibrate", "--model", str(model), "--device", "cpu", "--threads", "1", "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0 and out.is_file()
    assert captured.err.startswith(f"warning: {out}: this profile's timings are not to be trusted")
    profile = load_profile(out)
    assert profile.schema_version == PROFILE_SCHEMA_VERSION and profile.device.num_threads == 1
    assert all(p.noisy for t in profile.ops.values() for p in t.points)
    assert profile.quality is not None and profile.quality.load is not None
    assert profile.quality.load.num_threads == 1 and profile.calibration_wall_s is not None


def test_run_repeats_a_profiles_warning(tmp_path, capsys):
    path = save_profile(noisy_profile(), tmp_path / "noisy.json")
    code = main(["run", "--profile", str(path), "--num-requests", "5", "--quiet", "--no-report", "--json",
                 "--out", str(tmp_path / "r")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert f"warning: {path.resolve()}: this profile's timings are not to be trusted" in captured.err
    assert "what to do" in captured.err and json.loads(captured.out)["completed"] == 5
    clean = save_profile(make_profile(), tmp_path / "clean.json")
    code = main(["run", "--profile", str(clean), "--num-requests", "5", "--quiet", "--no-report", "--json",
                 "--out", str(tmp_path / "r2")])  # fmt: skip
    assert code == 0 and "warning" not in capsys.readouterr().err


def test_a_thread_count_other_than_the_profiles_is_named():
    here = cpu_model_name()
    profile = make_profile(
        device={"kind": "cpu", "name": here, "num_threads": 3, "torch_version": "x", "timer": "wall"}
    )
    note = thread_note(profile, threads_here=1)
    assert note is not None and "measured with 3 torch threads, an engine here runs with 1" in note
    assert "--threads 1" in note
    assert thread_note(profile, threads_here=3) is None
    assert thread_note(make_profile(), threads_here=1) is None  # a GPU profile: threads do not decide


# -- older profiles ----------------------------------------------------------------------------


def test_a_version_1_profile_written_by_the_previous_code_still_loads_and_predicts(tmp_path, capsys):
    profile = load_profile(V1_PROFILE)
    assert profile.schema_version == 1 and profile.engine is None and profile.quality is None
    assert not any(p.noisy for t in profile.ops.values() for p in t.points)
    cost = ProfiledCostModel(ProfiledParams(), profile.model, profile.hardware, 1, profile=profile)
    assert cost.time_scale == 1.0 and cost.step_overhead_s == profile.overhead.step_s
    assert cost.attention == "per_sequence" and cost.per_token_overhead_s == 0.0
    assert cost.step_time(BatchShape((100,), (0,), num_sampled_tokens=1)).total_s > 0
    quality_warnings(profile)  # computable for an old profile (its held-out errors decide)
    code = main(["run", "--profile", str(V1_PROFILE), "--num-requests", "5", "--rate", "1", "--quiet",
                 "--no-report", "--json", "--out", str(tmp_path / "r")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    # and saved again by this servesim it keeps its version and reads back the same
    again = load_profile(save_profile(profile, tmp_path / "again.json"))
    assert again == profile


# -- the engine section in the profiled cost model ------------------------------------------------


def engine_section(**overrides) -> EngineCalibration:
    fields: dict[str, Any] = {
        "engine": "hf",
        "engine_version": "transformers 5.17.0",
        "attention": "packed",
        "num_threads": 1,
        "policy": "hf_fifo",
        "max_num_seqs": 32,
        "max_num_batched_tokens": 512,
        "block_size": 16,
        "time_scale": 1.4,
        "step_overhead_s": 3e-3,
        "per_seq_overhead_s": 40e-6,
        "per_token_overhead_s": 2e-6,
        "per_kv_token_overhead_s": 5e-9,
        "ingest_delay_s": 2e-4,
        "loss": "soft_l1",
        "loss_scale": 0.05,
        "fit_error": {"decode": StepKindError(num_steps=10, mean_rel_error=0.03)},
        "held_out_error": {"decode": StepKindError(num_steps=4, mean_rel_error=0.04)},
        "steps": (),
        "wall_s": 1.0,
    }
    return EngineCalibration(**(fields | overrides))


def test_the_profiled_model_uses_the_engine_section_unless_the_scenario_overrides():
    profile = make_profile(engine=engine_section())
    m = ProfiledCostModel(ProfiledParams(), MODEL, HW, 1, profile=profile)
    assert (m.time_scale, m.step_overhead_s, m.per_seq_overhead_s) == (1.4, 3e-3, 40e-6)
    assert (m.per_token_overhead_s, m.per_kv_token_overhead_s, m.attention) == (2e-6, 5e-9, "packed")
    shape = BatchShape((64,), (0,), num_decode_seqs=8, decode_context_tokens=8 * 400, num_sampled_tokens=9)
    bare = bare_cost_model(profile, "packed").step_time(shape).total_s
    expected = 1.4 * bare + 3e-3 + 40e-6 * 9 + 2e-6 * 72 + 5e-9 * shape.num_kv_tokens
    assert m.step_time(shape).total_s == pytest.approx(expected, rel=1e-12)
    # the fast-forward path agrees float for float
    contexts = [8 * 100, 8 * 1000]
    assert m.decode_step_times(8, contexts) == [m.step_time(BatchShape((), (), 8, c, 8)).total_s for c in contexts]
    over = ProfiledCostModel(ProfiledParams(time_scale=1.0, attention="per_sequence"), MODEL, HW, 1, profile=profile)
    assert over.time_scale == 1.0 and over.attention == "per_sequence" and over.step_overhead_s == 3e-3
    off = ProfiledCostModel(ProfiledParams(engine_fit=False), MODEL, HW, 1, profile=profile)
    assert off.time_scale == 1.0 and off.step_overhead_s == profile.overhead.step_s


def test_an_engine_fit_that_misses_its_held_out_steps_is_warned_about():
    bad = engine_section(held_out_error={"mixed": StepKindError(num_steps=5, mean_rel_error=0.6)})
    lines = quality_warnings(make_profile(engine=bad))
    assert any("the hf engine fit misses its held-out steps" in line and "mixed 60%" in line for line in lines)


# -- the engine-level fit recovers a synthetic engine's overheads ---------------------------------


def kinked_profile() -> CalibrationProfile:
    """Op times that are flat (weights read) then linear in tokens, attention growing with keys: not a
    linear function of the step's counts, so that scale and overheads are told apart."""
    base = make_profile()

    def seconds(op: str, at: tuple[int, ...]) -> float:
        if len(at) == 1:
            return max(5e-5, 2e-7 * at[0]) if op != "embed" else 1e-6 + 1e-9 * at[0]
        a, b = at
        return 2e-6 + 1e-10 * a * (a + b) if op != "attn_decode" else 2e-6 + 3e-10 * a * b

    ops = {}
    for name, t in base.ops.items():
        points = [ProfilePoint(at=at, median_s=seconds(name, at), iqr_s=0.0, num_repeats=5)
                  for at in itertools.product(*t.axis_values())]  # fmt: skip
        ops[name] = OpTable(axes=OP_AXES[name], scope=t.scope, points=tuple(points))
    return make_profile(ops=ops)


# an engine whose own time is about a quarter of each step (transformers' on a CPU: more)
TRUTH = {
    "time_scale": 1.3,
    "step_overhead_s": 3e-3,
    "per_seq_overhead_s": 300e-6,
    "per_token_overhead_s": 20e-6,
    "per_kv_token_overhead_s": 150e-9,
}


class _Clocked(BuiltinEngine):
    """The builtin engine's scheduling and bookkeeping without a model: each step advances a fake clock
    by the truth's step time, with noise and a few outliers."""

    def __init__(self, policy, num_blocks, block_size, max_len, step_s, rng) -> None:
        model = type("M", (), {"num_kv_blocks": num_blocks, "block_size": block_size})()
        super().__init__(model, BATCH_POLICIES.get(policy.kind)(policy), max_len)
        self.now, self.step_s, self.rng = 0.0, step_s, rng

    def forward(self, scheduled):
        new, cached, decodes, context = [], [], 0, 0
        for r, n in scheduled:
            c = r.num_computed_tokens
            if n == 1 and c > 0:
                decodes, context = decodes + 1, context + c + 1
            else:
                new.append(n)
                cached.append(c)
        sampled = {r.request_id: 0 for r, n in scheduled if r.num_computed_tokens + n == r.num_tokens}
        shape = BatchShape(tuple(new), tuple(cached), decodes, context, len(sampled))
        noise = self.rng.lognormal(0.0, 0.02)
        if self.rng.random() < 0.04:  # a step stretched by foreign load
            noise *= 3.0
        self.now += self.step_s(shape) * noise
        return sampled


class SyntheticEngine:
    name = "builtin"
    version = "synthetic engine"
    attention = "per_sequence"
    attn_implementation = None

    def __init__(self, profile, policy, num_blocks, block_size, max_len, seed) -> None:
        bare = bare_cost_model(profile, "per_sequence")

        def step_s(shape: BatchShape) -> float:
            return (
                TRUTH["time_scale"] * bare.step_time(shape).total_s
                + TRUTH["step_overhead_s"]
                + TRUTH["per_seq_overhead_s"] * shape.num_seqs
                + TRUTH["per_token_overhead_s"] * shape.num_new_tokens
                + TRUTH["per_kv_token_overhead_s"] * shape.num_kv_tokens
            )

        self.engine = _Clocked(policy, num_blocks, block_size, max_len, step_s, np.random.default_rng(seed))

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def run(self, requests: list[EngineRequest], progress=None) -> list[StepRecord]:
        e = self.engine
        e.steps, e.now = [], 0.0
        pending = sorted(requests, key=lambda r: r.arrival_s)
        while any(r.status not in ("finished", "rejected") for r in requests):
            while pending and pending[0].arrival_s <= e.now:
                e.submit(pending.pop(0), e.now)
            if e.is_idle:
                e.now = pending[0].arrival_s
                continue
            e.step(lambda: e.now)
        return list(e.steps)


def test_the_engine_fit_recovers_a_synthetic_engines_overheads(monkeypatch):
    import calibration.engine_fit as engine_fit

    profile = kinked_profile()

    def make(name, spec, dtype, device, policy, num_blocks, block_size, max_len, seed):
        return SyntheticEngine(profile, policy, num_blocks, block_size, max_len, seed)

    monkeypatch.setattr(engine_fit, "make_engine", make)
    device = type("D", (), {"kind": "cuda", "num_threads": 1})()
    section = engine_fit.calibrate_engine(profile, "builtin", device, seed=3, sleep=lambda s: None)  # type: ignore[arg-type]
    got = {k: getattr(section, k) for k in TRUTH}
    assert got == pytest.approx(TRUTH, rel=0.1), got
    kinds = {s.kind for s in section.steps}
    assert kinds == {"prefill", "decode", "mixed"}
    assert any(s.prefill_cached_tokens and max(s.prefill_cached_tokens) > 0 for s in section.steps)
    assert set(section.held_out_error) == {"prefill", "decode", "mixed"}
    for kind, e in section.held_out_error.items():
        assert e.num_steps > 0 and e.mean_rel_error is not None and e.mean_rel_error < 0.1, (kind, e)
    assert section.policy == "hf_fifo" and section.engine_version == "synthetic engine"


def test_the_robust_loss_resists_outliers_that_pull_plain_least_squares():
    profile = kinked_profile()
    bare = bare_cost_model(profile, "per_sequence")
    shapes = [BatchShape((p,), (c,), num_sampled_tokens=1) for p in (16, 128, 512, 2048) for c in (0, 256, 2048)]
    shapes += [BatchShape((), (), b, b * ctx, b) for b in (1, 4, 16, 32) for ctx in (128, 512, 2048, 8000)]
    shapes += [BatchShape((p,), (0,), b, b * 300, b + 1) for p in (64, 512) for b in (2, 8, 16)]
    rng = np.random.default_rng(0)
    truth = np.array(list(TRUTH.values()))
    data = step_data(shapes, [1.0] * len(shapes), profile, "per_sequence")
    measured = data.design() @ truth * rng.lognormal(0, 0.01, len(shapes))
    measured[::9] *= 4.0  # a few steps four times too slow
    data = step_data(shapes, measured, profile, "per_sequence")
    robust = fit_step_model(data)
    plain = fit_step_model(data, loss="linear")
    r_err = np.abs(robust.coefficients / truth - 1)
    p_err = np.abs(plain.coefficients / truth - 1)
    assert r_err.max() < 0.1 and p_err.max() > 2 * r_err.max(), (r_err, p_err)
    assert bare.step_time(shapes[0]).total_s > 0


# -- the HF engine's step records --------------------------------------------------------------


def test_transformers_steps_are_shaped_from_the_schedulers_plan():
    from calibration.hf_engine import _record

    # two decodes (one token over 40 and 7 cached), one chunk of 100 over 60 cached that does not sample yet,
    # and a new prompt of 30 that does
    plan = [(1, 40, True), (1, 7, True), (100, 60, False), (30, 0, True)]
    r = _record(plan, 1.0, 1.25)
    assert (r.prefill_new_tokens, r.prefill_cached_tokens) == ((100, 30), (60, 0))
    assert (r.num_decode_seqs, r.decode_context_tokens, r.num_sampled_tokens) == (2, 41 + 8, 3)
    assert r.end_s - r.start_s == pytest.approx(0.25)


# -- validate is a held-out check ----------------------------------------------------------------


def test_validate_uses_the_profile_as_calibrated_and_fits_nothing(tmp_path, monkeypatch):
    """The builtin engine really runs (four requests on the v1 profile's tiny model); nothing is timed against it."""
    import calibration.validate as validate_module
    from calibration import HARNESS_VERSION

    def no_fit(*args, **kwargs):
        raise AssertionError("validate fitted something without --fit-in-run")

    monkeypatch.setattr(validate_module, "fit_step_model", no_fit)
    section = engine_section(
        engine="builtin", engine_version=f"servesim builtin {HARNESS_VERSION}", attention="per_sequence"
    )
    profile = load_profile(V1_PROFILE).model_copy(update={"engine": section, "schema_version": 2})
    path = save_profile(profile, tmp_path / "with-engine.json")
    result = validate_module.validate(load_profile(path), path, "builtin", num_requests=4)
    fit = result.fit
    assert not fit.fitted and "the profile's engine fit" in fit.source
    used = (fit.time_scale, fit.step_overhead_s, fit.per_seq_overhead_s, fit.per_token_overhead_s)
    assert used == (1.4, 3e-3, 40e-6, 2e-6) and fit.per_kv_token_overhead_s == 5e-9
    assert fit.ingest_delay_s == 2e-4 and result.scenario.client.ingest_delay_s == 2e-4
    cost = result.scenario.cost_model
    assert (cost.time_scale, cost.step_overhead_s, cost.per_kv_token_overhead_s) == (1.4, 3e-3, 5e-9)
    assert result.measured_summary["completed"] == 4 and result.engine_steps
    assert set(result.step_errors) <= {"prefill", "decode", "mixed"} and result.step_errors
    assert {"p99_ttft_ms", "p99_e2el_ms", "step_decode_ms"} <= set(result.comparison)
    assert not any("engine fit describes" in note for note in result.notes)
    out = result.write(tmp_path / "v")
    written = json.loads((out / "validation.json").read_text())
    assert written["fitted_in_run"] is False and written["engine_fit"]["time_scale"] == 1.4
