"""benchmarks/fuzz.py on a handful of scenarios, its shrinker, and how it records a failure."""

from __future__ import annotations

import yaml

from benchmarks import fuzz
from benchmarks.fuzzing.shrink import shrink, signature


def test_fuzz_runs_a_handful_of_scenarios_and_counts_them(tmp_path, capsys):
    code = fuzz.main(["--scenarios", "25", "--workers", "1", "--out", str(tmp_path / "out"), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert printed.startswith("scenarios: 25 (") and "failures: 0 (0 distinct)" in printed
    simulated = int(printed.split("requests simulated: ")[1].split(",")[0].replace(",", ""))
    assert simulated > 25  # most scenarios ran, with several requests each
    assert not (tmp_path / "out").exists()  # nothing failed, nothing written


def test_the_same_seed_draws_the_same_scenarios_and_chunks_differ():
    a, b = fuzz.draw_scenarios(7, 5), fuzz.draw_scenarios(7, 5)
    assert a == b and len(a) == 5
    assert fuzz.draw_scenarios(8, 5) != a


def test_shrink_keeps_only_what_the_failure_needs():
    data = fuzz.draw_scenarios(3, 1)[0] | {"policy": {"kind": "sglang", "max_running_requests": 7}, "replicas": 3}

    def fails(candidate):
        policy = candidate.get("policy", {})
        return "boom" if policy.get("kind") == "sglang" and candidate.get("replicas", 1) > 1 else None

    assert shrink(data, fails) == {"policy": {"kind": "sglang"}, "replicas": 2}


def test_shrink_never_trades_one_failure_for_another():
    data = {"a": 5, "b": 9}

    def fails(candidate):  # dropping b fails too, but differently: b must stay
        return "first" if "b" in candidate and candidate.get("a", 0) >= 2 else "second"

    assert shrink(data, fails) == {"a": 2, "b": 0}


def test_a_failure_is_written_shrunk_with_its_original_and_error(tmp_path, monkeypatch):
    data = fuzz.draw_scenarios(11, 1)[0] | {"client": {"stream_delay_s": 0.3}}

    def judge(candidate, timeout_s):  # stands in for a real bug: any stream delay over 0.1 s "fails"
        delay = candidate.get("client", {}).get("stream_delay_s", 0.0)
        return (None, "Failure: user sent early", "trace") if delay > 0.1 else (1, None, "")

    monkeypatch.setattr(fuzz, "judge", judge)
    path = fuzz.write_failure(tmp_path, 0, data, "Failure: user sent early", "trace", 10.0)
    assert yaml.safe_load(path.read_text()) == {"client": {"stream_delay_s": 0.15}}  # halved once, still over
    assert yaml.safe_load((tmp_path / "000-original.yaml").read_text()) == data
    assert (tmp_path / "000-error.txt").read_text().startswith("Failure: user sent early")


def test_signature_masks_numbers():
    assert signature(ValueError("request 12: 3.5 s\nmore")) == "ValueError: request N: N s"
