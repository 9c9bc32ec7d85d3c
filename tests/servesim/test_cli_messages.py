"""Messages name the thing that is wrong (issue 15): the flag the user gave, not a field it happened to reach.

The two cases the issue names run through the console script; the rest of the class in
process (the same code path, without the start-up). Each: exit 2, one stderr line naming
the flag, no traceback, no output folder left behind.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from simulator.config.errors import format_validation_error, problem_lines
from simulator.config.schema import ScenarioConfig
from tests.simulator.config.test_bad_numbers import assert_refused, cli, servesim

CLOSED_LOOP = "workload: {kind: closed_loop, concurrency: 4, num_requests: 20}\n"
SESSIONS = (
    "workload:\n  kind: sessions\n  num_sessions: 5\n  turns: {kind: fixed, count: 2}\n"
    "  user_tokens: {kind: fixed, tokens: 10}\n  output_tokens: {kind: fixed, tokens: 10}\n"
)
PIECEWISE = "workload: {num_requests: 20, arrival: {kind: piecewise, segments: [{duration_s: 10, rate_per_s: 2}]}}\n"


def _args(tmp_path, command, scenario, *flags):
    args = [command]
    if scenario is not None:
        path = tmp_path / "s.yaml"
        path.write_text(scenario)
        args.append(path)
    return [*args, *flags, "--quiet", "--no-report", "--out", tmp_path / "x"]


def test_compare_with_no_policies_names_policies(tmp_path):
    proc = servesim(*_args(tmp_path, "compare", None, "--policies", ",", "--num-requests", 5), cwd=tmp_path)
    assert_refused(proc, "--policies ','", "no policy names", out=tmp_path / "x")
    assert "--workers" not in proc.stderr


def test_rate_on_a_closed_loop_names_the_flag(tmp_path):
    proc = servesim(*_args(tmp_path, "run", CLOSED_LOOP, "--rate", 3), cwd=tmp_path)
    assert_refused(proc, "--rate: ", "closed loop (4 users)", "workload.concurrency", out=tmp_path / "x")
    assert "unknown field" not in proc.stderr


@pytest.mark.parametrize(
    ("command", "scenario", "flags", "needles"),
    [
        ("run", CLOSED_LOOP, ("--duration", 3), ("--duration: ", "closed loop", "--num-requests")),
        ("run", SESSIONS, ("--num-requests", 4), ("--num-requests: ", "workload.num_sessions")),
        ("run", PIECEWISE, ("--rate", 4), ("--rate: ", "piecewise", "workload.arrival.segments")),
        ("run", None, ("--rate", -2), ("--rate: workload.arrival.poisson.rate_per_s: ", "greater than 0")),
        ("run", None, ("--tp", 0), ("--tp: parallelism.tp: ",)),
        ("run", None, ("--seed", -1), ("--seed: seed: ",)),
        ("compare", None, ("--workers", 0), ("--workers must be at least 1 (got 0)",)),
        ("compare", None, ("--rates", "1,inf"), ("--rates '1,inf'", "inf requests/s is outside")),
        ("compare", None, ("--rates", "1,1e-300"), ("--rates '1,1e-300'",)),
        ("compare", CLOSED_LOOP, ("--rates", "1,2"), ("--rates: ", "closed loop")),
        ("compare", CLOSED_LOOP, ("--rate", 2), ("--rate: ", "closed loop")),
    ],
)
def test_flags_that_do_not_apply_are_named(tmp_path, capsys, command, scenario, flags, needles):
    assert_refused(cli(_args(tmp_path, command, scenario, *flags), capsys), *needles, out=tmp_path / "x")


def test_a_scenario_field_is_still_named_with_its_file(tmp_path, capsys):
    # a bad rate written in the file (not given by --rate) names the file and the field
    scenario = "workload: {num_requests: 5, arrival: {kind: poisson, rate_per_s: .inf}}\n"
    proc = cli(_args(tmp_path, "run", scenario, "--seed", 1), capsys)
    assert_refused(proc, "s.yaml: workload.arrival.poisson.rate_per_s: Input should be a finite number")


def test_renamed_fields_drop_the_source():
    with pytest.raises(ValidationError) as info:
        ScenarioConfig.model_validate({"seed": -1, "replicas": 0})
    assert problem_lines(info.value, source="s.yaml", names={"seed": "--seed"}) == [
        "--seed: Input should be greater than or equal to 0 (got -1)",
        "s.yaml: replicas: Input should be greater than or equal to 1 (got 0)",
    ]
    # the message is the first problem alone, in one line
    assert format_validation_error(info.value, source="s.yaml", names={"seed": "--seed"}) == (
        "--seed: Input should be greater than or equal to 0 (got -1) (and 1 more problem)"
    )


def test_duration_on_sessions_replaces_their_count(tmp_path, capsys):
    # --duration bounds the sessions instead of num_sessions (it used to say "give num_sessions or
    # duration_s, not both", naming neither the flag nor what to do)
    proc = cli(_args(tmp_path, "compare", SESSIONS, "--duration", 3, "--policies", "vllm", "--workers", 1), capsys)
    assert proc.returncode == 0, proc.stderr
