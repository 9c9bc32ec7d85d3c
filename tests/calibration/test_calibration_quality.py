"""A calibration that cannot be trusted says so: noisy points retried and flagged, a busy machine measured,
held-out errors judged, loud warnings at calibrate (and --strict refusal), repeated wherever the profile is used."""

import subprocess
import sys
import time

import numpy as np
import pytest

from calibration import quality
from calibration.quality import NOISE_BOUND, LoadMeter, assess, measure_points, noise
from calibration.timing import Timing
from servesim.cli import main as cli
from simulator.cost.profile import ProfileQuality, load_profile, save_profile
from tests.conftest import DATA_DIR
from tests.simulator.cost.test_profiled import make_profile


def timing(median, spread):
    """Four repeats; ``spread`` 0 is quiet, 10 wildly noisy (a tenth and ten times the median)."""
    low, high = (median / spread, median * spread) if spread else (median, median)
    samples = (low, median, median, high)
    q25, q75 = np.percentile(samples, [25, 75])
    return Timing(median, float(q75 - q25), len(samples), None, samples)


class FakeTimer:
    """Point "a" is always noisy, "b" only the first time round, "c" never."""

    def __init__(self):
        self.calls = {"a": 0, "b": 0, "c": 0}

    def time(self, fn, profile=True):
        name = fn()
        self.calls[name] += 1
        if name == "a" or (name == "b" and self.calls[name] <= 3):
            return timing(1e-3, 10)
        return timing(1e-3, 0)


def test_noisy_points_are_measured_again_and_flagged_when_they_stay_noisy():
    timer = FakeTimer()
    calls = {(1,): lambda: "a", (2,): lambda: "b", (3,): lambda: "c"}
    ticks = []
    timings, noisy = measure_points(calls, timer.time, passes=3, tick=lambda: ticks.append(1))
    assert noisy == {(1,)}
    assert len(ticks) == 9  # the first passes only: retries are not the progress bar's work
    # a retried every round (3 passes each), b once (quiet after it), c never
    assert timer.calls == {"a": 3 + 3 * quality.NOISE_RETRIES, "b": 6, "c": 3}
    assert noise(timings[(3,)]) == 0.0 and noise(timings[(1,)]) > NOISE_BOUND
    assert timings[(2,)].num_repeats == 24  # b pooled over all its repeats, the quiet ones outweighing the noisy


def test_assess_names_what_makes_a_profile_suspect():
    assert assess(100, [], {"mlp": 0.05}, 0.0) == []
    assert assess(10, ["mlp@8", "mlp@16"], {"mlp": 0.2}, 0.2) == []  # 20% of points noisy, 20% held out: tolerated
    warnings = assess(10, ["mlp@8", "mlp@16", "mlp@32"], {"mlp": 0.05, "attn_decode": 6.4}, 1.3)
    assert len(warnings) == 3
    assert "3 of 10 measured points stayed noisy" in warnings[0] and "mlp@8" in warnings[0]
    assert "held-out error above 25%: attn_decode 640%" in warnings[1]
    assert "other processes used 1.3 cores" in warnings[2]
    assert assess(10, [], {}, None) == []  # load not measurable: nothing claimed


@pytest.mark.skipif(not quality.PROC_STAT.exists(), reason="/proc/stat is Linux's")
def test_load_from_another_process_is_measured():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        meter = LoadMeter().start()
        time.sleep(1.5)
        other = meter.other_cores()
    finally:
        spinner.kill()
        spinner.wait()
    assert other is not None and other > quality.BUSY_CORES


def test_calibrating_with_a_noisy_timer_writes_the_warning_into_the_profile():
    pytest.importorskip("torch")
    from calibration.harness import calibrate
    from simulator.config.hf_config import model_spec_from_hf_config

    class AlwaysNoisy:
        label = "noisy test timer"

        def time(self, fn, profile=True):
            return timing(1e-4, 10)  # without running fn: only the verdicts on the timings are under test

    spec = model_spec_from_hf_config(DATA_DIR / "tiny_llama_config.json")
    profile = calibrate(spec, "cpu", "fp32", "quick", 1, timer=AlwaysNoisy())
    q = profile.quality
    assert q is not None and q.num_noisy_points == q.num_points > 0
    assert any("stayed noisy" in w for w in profile.warnings)
    assert all(p.noisy for table in profile.ops.values() for p in table.points)


def _suspect_profile(tmp_path):
    quality_ = ProfileQuality(
        noise_bound=0.1, num_points=10, num_noisy_points=5, other_cores=1.2, warnings=("the machine was busy",)
    )
    return save_profile(make_profile(schema_version=2, quality=quality_), tmp_path / "suspect.json")


def test_an_older_profile_still_loads_and_claims_nothing(tmp_path):
    path = save_profile(make_profile(), tmp_path / "v1.json")  # schema version 1: no quality section
    profile = load_profile(path)
    assert profile.schema_version == 1 and profile.quality is None and profile.warnings == ()


def test_calibrate_strict_refuses_a_suspect_profile_and_plain_calibrate_warns(tmp_path, monkeypatch, capsys):
    import calibration.harness

    suspect = load_profile(_suspect_profile(tmp_path))
    monkeypatch.setattr(calibration.harness, "calibrate", lambda *a, **k: suspect)
    out = tmp_path / "new.json"
    base = ["calibrate", "--model", str(DATA_DIR / "tiny_llama_config.json"), "--device", "cpu", "--quiet"]
    assert cli([*base, "--out", str(out), "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--strict: the profile is suspect, not written: the machine was busy" in err[0]
    assert not out.exists()
    assert cli([*base, "--out", str(out)]) == 0
    assert out.exists() and "is suspect: the machine was busy" in capsys.readouterr().err


def test_a_run_with_a_suspect_profile_repeats_the_warning(tmp_path, capsys):
    path = _suspect_profile(tmp_path)
    code = cli(["run", "--profile", str(path), "--num-requests", "5", "--out", str(tmp_path / "run"), "--quiet"])
    assert code == 0
    assert f"profile {path} is suspect: the machine was busy" in capsys.readouterr().err
