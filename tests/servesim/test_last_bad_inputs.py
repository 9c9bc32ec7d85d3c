"""The last bad inputs of issue 32, each tried as a new user would: one line naming what is wrong, exit 2.

Each case is the one the issue names; the classes behind them are tested in
tests/simulator/config/test_schema_classes.py (booleans and non-finite numbers in every field),
tests/workloads/test_trace_bounds.py (trace lengths and times) and below (repeats in every
comma-separated flag).
"""

from __future__ import annotations

import pytest

from tests.simulator.config.test_bad_numbers import H100, assert_refused, cli, servesim

SESSIONS_WITHOUT_STOP = (
    "workload:\n  kind: sessions\n  turns: {kind: fixed, count: 2}\n"
    "  user_tokens: {kind: fixed, tokens: 10}\n  output_tokens: {kind: fixed, tokens: 10}\n"
)


def _args(tmp_path, command, scenario, *flags):
    args = [command]
    if scenario is not None:
        path = tmp_path / "s.yaml"
        path.write_text(scenario)
        args.append(path)
    return [*args, *flags, "--quiet", "--out", tmp_path / "x"]


def test_a_prompt_of_2_to_the_63_tokens_is_its_rows_error(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(f"arrival_s,prompt_tokens,output_tokens\n0,10,10\n1,{2**63},10\n")
    proc = servesim("run", "--trace", trace, "--no-report", "--quiet", "--out", tmp_path / "x", cwd=tmp_path)
    assert_refused(
        proc,
        f"{trace}: line 3: prompt_tokens: 9,223,372,036,854,775,808 tokens is more than 1,000,000,000 tokens "
        "(servesim's limit, 100 times the longest model context)",
        out=tmp_path / "x",
    )


def test_tp_true_is_not_tp_1(tmp_path, capsys):
    proc = cli(_args(tmp_path, "run", "parallelism: {tp: true}\n", "--no-report"), capsys)
    assert_refused(proc, "s.yaml: parallelism.tp: Input should be a number, not a boolean (got True)")


def test_sessions_without_a_stop_say_their_default(tmp_path, capsys):
    # the default is kept (scenarios rely on it) and stated where the field is described
    from workloads.sessions import DEFAULT_NUM_SESSIONS, SessionWorkload

    description = SessionWorkload.model_fields["num_sessions"].description
    assert f"With neither: {DEFAULT_NUM_SESSIONS} sessions" in description
    proc = cli(_args(tmp_path, "run", SESSIONS_WITHOUT_STOP, "--no-report"), capsys)
    assert proc.returncode == 0, proc.stderr


def test_a_hardware_spec_of_infinities_is_one_line(tmp_path, capsys):
    spec = tmp_path / "gpu.yaml"
    spec.write_text("".join(f"{k}: {v if k == 'name' else '.inf'}\n" for k, v in H100.items()))
    proc = cli(["run", "--hardware", spec, "--no-report", "--quiet", "--out", tmp_path / "x"], capsys)
    assert_refused(proc, f"{spec}: flops_per_s: Input should be a finite number (got inf) (and 6 more problems)")


def test_compare_refuses_a_rate_given_twice(tmp_path, capsys):
    proc = cli(_args(tmp_path, "compare", None, "--rates", "2,2", "--num-requests", 5), capsys)
    assert_refused(proc, "--rates '2,2': 2 is given twice (each rate runs once)", out=tmp_path / "x")


@pytest.mark.parametrize(
    ("command", "flags", "needle"),
    [
        ("compare", ("--rates", "1,2,1.0"), "--rates '1,2,1.0': 1 is given twice"),
        ("compare", ("--policies", "vllm,sarathi,vllm"), "--policies 'vllm,sarathi,vllm': vllm is given twice"),
        ("compare", ("--set", "vllm.max_num_seqs=8,16,8"), "--set 'vllm.max_num_seqs=8,16,8': 8 is given twice"),
        (
            "compare",
            ("--set", "vllm.max_num_seqs=8", "--set", "vllm.max_num_seqs=16"),
            "--set 'vllm.max_num_seqs=16': vllm.max_num_seqs is set twice",
        ),
        ("plan", ("--target-rate", "2,4,2"), "--target-rate 2,4,2: 2 is given twice"),
        ("plan", ("--target-rate", "2", "--target-rate", "2"), "--target-rate 2,2: 2 is given twice"),
        ("plan", ("--tune", "policy.max_num_seqs=8,8"), "--tune 'policy.max_num_seqs=8,8': 8 is given twice"),
        (
            "plan",
            ("--tune", "policy.max_num_seqs=8", "--tune", "policy.max_num_seqs=16"),
            "policy.max_num_seqs is tuned twice",
        ),
        ("plan", ("--price", "h100-sxm=2", "--price", "h100-sxm=3"), "h100-sxm is priced twice"),
    ],
)
def test_every_list_flag_refuses_repeats(tmp_path, capsys, command, flags, needle):
    slo = ("--slo-ttft-ms", 500) if command == "plan" else ("--policies", "vllm")
    extra = () if "--policies" in flags else slo
    proc = cli(_args(tmp_path, command, None, *extra, *flags, "--no-report"), capsys)
    assert_refused(proc, needle, out=tmp_path / "x")


def test_grid_and_candidate_axes_refuse_repeats(tmp_path, capsys):
    grid = tmp_path / "g.yaml"
    grid.write_text("grid: {policy.max_num_seqs: [8, 16, 8]}\n")
    proc = cli(["sweep", grid, "--quiet", "--out", tmp_path / "x"], capsys)
    assert_refused(proc, f"{grid}: grid: policy.max_num_seqs: 8 is given twice", out=tmp_path / "x")
    cands = tmp_path / "c.yaml"
    cands.write_text("grid: {hardware: [h100-sxm, h200]}\ntune: {policy.max_num_seqs: [64, 64]}\n")
    proc = cli(["plan", "--candidates", cands, "--slo-ttft-ms", 500, "--quiet", "--out", tmp_path / "x"], capsys)
    assert_refused(proc, f"{cands}: tune: policy.max_num_seqs: 64 is given twice", out=tmp_path / "x")
