"""Non-finite and absurd numbers are refused at the config edge, in one line naming the field (issue 15).

Each named case runs the real console script: exit status 2, one stderr line naming the
field or flag, no traceback, no hang, and no run folder left behind. A hypothesis test
then puts inf, nan or an absurd value into a random numeric field of a scenario and checks
that validation refuses it with one line naming that field.
"""

from __future__ import annotations

import copy
import math
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.build import setup_group
from simulator.config.scenario import validate_scenario
from simulator.config.schema import MAX_KV_BLOCKS
from tests.servesim.test_cli import SERVESIM
from workloads.arrivals import PiecewiseArrivals, expected_arrivals, expected_span_s
from workloads.lengths import LognormalTokens, NormalTokens, draw_tokens
from workloads.validators import MAX_NUM_REQUESTS, MAX_TOKENS

H100 = {
    "name": "H100-like",
    "flops_per_s": 989.4e12,
    "memory_bytes": 85520809984.0,
    "memory_bandwidth_bytes_per_s": 3.35e12,
    "interconnect_bandwidth_bytes_per_s": 450e9,
    "interconnect_latency_s": 5e-6,
    "host_link_bandwidth_bytes_per_s": 64e9,
    "host_link_latency_s": 1e-5,
}
FIXED_LENGTHS = "{kind: independent, prompt: {kind: fixed, tokens: 100}, output: {kind: fixed, tokens: 10}}"


def servesim(*args, cwd=None):
    # a timeout well below a hang's: the periodic-phase nan once looped for ever
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=60)


def assert_refused(proc, *needles, out=None):
    """Exit 2, exactly one stderr line holding every needle, no traceback, no folder at ``out``."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    if out is not None:
        assert not out.exists(), f"{out} was left behind"


class Proc:
    """What an in-process CLI call returned, shaped like a CompletedProcess."""

    def __init__(self, returncode: int, stderr: str) -> None:
        self.returncode, self.stderr = returncode, stderr


def cli(args, capsys) -> Proc:
    """``servesim ARGS`` in this process (the same code path as the console script, without its start-up)."""
    from servesim.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in args])
    return Proc(rc, capsys.readouterr().err)


def run_refused(tmp_path, scenario_yaml: str | None, *flags, needles, capsys=None):
    """``servesim run`` refuses: through the console script, or in process when ``capsys`` is given."""
    args = ["run"]
    if scenario_yaml is not None:
        path = tmp_path / "s.yaml"
        path.write_text(scenario_yaml)
        args.append(path)
    out = tmp_path / "x"
    args = [*args, *flags, "--quiet", "--no-report", "--out", out]
    proc = servesim(*args, cwd=tmp_path) if capsys is None else cli(args, capsys)
    assert_refused(proc, *needles, out=out)
    return proc.stderr


# -- the named cases, through the console script ---------------------------------------------


# The cases named in the issue run through the console script; the rest of the class in process.
@pytest.mark.parametrize(
    ("flags", "needles", "named"),
    [
        (("--duration", "inf"), ("--duration", "workload.duration_s", "finite number"), True),
        (("--rate", "inf"), ("--rate", "rate_per_s", "finite number"), True),
        (("--rate", "1e400"), ("--rate", "rate_per_s", "finite number"), True),  # float("1e400") is inf
        (("--rate", "1e-300", "--num-requests", "5"), ("--rate", "at least 3.17e-08 requests/s"), True),
        (("--num-requests", "100000000000"), ("--num-requests", "at most 10,000,000"), True),
        (("--rate", "nan"), ("--rate", "finite number"), False),
        (("--rate", "1e12"), ("--rate", "at most 1e+09 requests/s"), False),
        (("--rate", "1e-6"), ("--rate", "1,000 requests (the default)", "more than 31,536,000 s"), False),
        (("--rate", "1e-6", "--num-requests", "100"), ("--num-requests", "more than 31,536,000 s"), False),
        (("--duration", "1e7"), ("--duration", "more than the 10,000,000 a run can hold"), False),
        (("--slo-ttft-ms", "inf"), ("--slo-ttft-ms", "finite number"), False),
        (("--replicas", "1000000000"), ("--replicas", "at most 10,000"), False),
    ],
)
def test_bad_number_flags(tmp_path, capsys, flags, needles, named):
    stderr = run_refused(tmp_path, None, *flags, needles=needles, capsys=None if named else capsys)
    assert all(needle in stderr for needle in needles) and "Traceback" not in stderr


@pytest.mark.parametrize(
    ("scenario", "needles", "named"),
    [
        (
            "workload: {num_requests: 20, arrival: {kind: gamma, rate_per_s: 2, burstiness: .inf}}",
            ("workload.arrival.gamma.burstiness", "finite number"),
            True,
        ),
        (
            "workload: {num_requests: 20, arrival: {kind: gamma, rate_per_s: 2, burstiness: 1.0e+300}}",
            ("workload.arrival.gamma.burstiness",),
            False,
        ),
        (
            "workload: {num_requests: 20, arrival: {kind: piecewise, segments: [{duration_s: .inf, rate_per_s: 2}]}}",
            ("workload.arrival.piecewise.segments.0.duration_s", "finite number"),
            True,
        ),
        (
            "workload: {kind: closed_loop, concurrency: 4, num_requests: 20, ramp_s: .inf}",
            ("workload.ramp_s", "finite number"),
            True,
        ),
        (
            "workload: {num_requests: 20, arrival: {kind: periodic, rate_per_s: 2, amplitude: 0.5, phase_s: .nan}}",
            ("workload.arrival.periodic.phase_s", "finite number"),
            True,
        ),
        (
            "workload: {kind: closed_loop, concurrency: 2, num_requests: 6, think_s: {kind: fixed, seconds: .inf}, "
            f"lengths: {FIXED_LENGTHS}}}",
            ("workload.think_s.fixed.seconds", "finite number"),
            True,
        ),
        (
            "workload:\n  kind: sessions\n  num_sessions: 5\n  turns: {kind: fixed, count: 3}\n"
            "  user_tokens: {kind: fixed, tokens: 10}\n  output_tokens: {kind: fixed, tokens: 10}\n"
            "  think_s: {kind: exponential, mean_s: 1.0e+30}\n",
            ("workload.think_s.exponential.mean_s", "at most 31,536,000 s"),
            False,
        ),
        ("client: {ingest_delay_s: .inf}", ("client.ingest_delay_s", "finite number"), True),
        ("client: {tokenize_s_per_token: .inf}", ("client.tokenize_s_per_token", "finite number"), False),
        ("client: {stream_delay_s: 1.0e+300}", ("client.stream_delay_s", "at most 31,536,000 s"), False),
        ("kv_cache: {swap_space_bytes: .inf}", ("kv_cache.swap_space_bytes", "finite number"), True),
        ("kv_cache: {num_blocks: 1000000000000}", ("kv_cache.num_blocks",), False),
        (
            "hardware: {name: big, flops_per_s: 1.0e+15, memory_bytes: 1.0e+30, memory_bandwidth_bytes_per_s: 3.0e+12,"
            " interconnect_bandwidth_bytes_per_s: 4.0e+11, interconnect_latency_s: 1.0e-6,"
            " host_link_bandwidth_bytes_per_s: 5.0e+10, host_link_latency_s: 1.0e-5}",
            ("hardware.memory_bytes", "at most 2**50 bytes"),
            True,
        ),
        (
            "workload: {num_requests: 5, lengths: {kind: independent, prompt: {kind: lognormal, median_tokens: 100,"
            " sigma: 20}, output: {kind: fixed, tokens: 10}}}",
            ("workload.lengths.independent.prompt.lognormal.sigma", "give max_tokens"),
            False,
        ),
        ("policy: {kind: static, max_wait_s: .inf}", ("policy", "max_wait_s", "finite number"), False),
    ],
)
def test_bad_numbers_in_scenario_files(tmp_path, capsys, scenario, needles, named):
    stderr = run_refused(tmp_path, scenario, needles=needles, capsys=None if named else capsys)
    assert "s.yaml: " in stderr  # the file is named too


def test_a_huge_block_is_refused_by_a_block_message(tmp_path, capsys):
    # It used to say the model "does not fit" with figures that showed it fits.
    stderr = run_refused(tmp_path, "kv_cache: {block_size: 1000000000}", needles=("kv_cache.block_size",))
    assert "exceeds max_model_len (131,072)" in stderr and "does not fit" not in stderr
    stderr = run_refused(
        tmp_path,
        "kv_cache: {block_size: 65536, gpu_memory_utilization: 0.25}",
        needles=("one KV block of 65,536 tokens takes 8 GiB per GPU", "kv_cache.block_size"),
        capsys=capsys,
    )
    assert "does not fit" not in stderr


def test_describe_refuses_lengths_that_overflow(tmp_path):
    path = tmp_path / "ln.yaml"
    path.write_text(
        "workload: {num_requests: 200, lengths: {kind: independent, prompt: {kind: lognormal, median_tokens: 100, "
        "sigma: 20}, output: {kind: fixed, tokens: 10}}}\n"
    )
    assert_refused(servesim("workload", "describe", path, "--json", cwd=tmp_path), "sigma", "1-in-10^15 tail")


# -- the rules behind them, in process --------------------------------------------------------


def test_lengths_with_a_cut_stay_positive_and_bounded():
    rng = np.random.default_rng(0)
    cut = LognormalTokens(median_tokens=100, sigma=20, max_tokens=1_000_000)
    values = draw_tokens(cut, 10_000, rng)
    assert values.min() >= 1 and values.max() <= 1_000_000
    # a spread that stays (by its 1-in-10^15 tail) within the limit needs no cut
    assert draw_tokens(NormalTokens(mean_tokens=1000, std_tokens=100), 1000, rng).min() >= 1
    with pytest.raises(ValueError, match="std_tokens"):
        NormalTokens(mean_tokens=1000, std_tokens=MAX_TOKENS)


def test_piecewise_expectations():
    cfg = PiecewiseArrivals(
        segments=[{"duration_s": 10, "rate_per_s": 1}, {"duration_s": 10, "rate_per_s": 3}], repeat=True
    )
    assert expected_arrivals(cfg, 20) == pytest.approx(40)
    assert expected_arrivals(cfg, 45) == pytest.approx(80 + 5)
    assert expected_span_s(cfg, 80) == pytest.approx(40)
    once = cfg.model_copy(update={"repeat": False})
    assert expected_arrivals(once, 30) == pytest.approx(40 + 30)  # the last rate goes on
    assert expected_span_s(once, 70) == pytest.approx(30)


def test_sessions_that_make_too_many_calls_are_refused():
    workload = {
        "kind": "sessions",
        "num_sessions": 100_000,
        "turns": {"kind": "fixed", "count": 1000},
        "user_tokens": {"kind": "fixed", "tokens": 10},
        "output_tokens": {"kind": "fixed", "tokens": 10},
    }
    with pytest.raises(ValueError) as info:
        validate_scenario({"workload": workload}, source="s.yaml")
    assert str(info.value).startswith("s.yaml: workload.turns: ") and f"{MAX_NUM_REQUESTS:,}" in str(info.value)


def test_kv_blocks_beyond_the_cap_are_refused_by_name():
    tiny = {
        "name": "tiny",
        "num_layers": 1,
        "hidden_size": 64,
        "num_attention_heads": 1,
        "num_kv_heads": 1,
        "head_dim": 8,
        "intermediate_size": 64,
        "vocab_size": 64,
        "kv_cache_bytes": 1,
        "max_context_tokens": 4096,
    }
    cfg = validate_scenario(
        {"model": tiny, "hardware": H100 | {"memory_bytes": 2.0**50}, "kv_cache": {"block_size": 1, "reserve_bytes": 0}}
    )
    with pytest.raises(ValueError, match=f"more than the {MAX_KV_BLOCKS:,} servesim tracks"):
        setup_group(cfg, cfg.replica_groups()[0], 0, None)


# -- any numeric field, any bad number --------------------------------------------------------

SCENARIOS = {
    "synthetic": {
        "hardware": H100,
        "kv_cache": {
            "block_size": 16,
            "gpu_memory_utilization": 0.9,
            "swap_space_bytes": 2**30,
            "host_cache_bytes": 0.0,
            "reserve_bytes": 2**30,
        },
        "client": {"ingest_delay_s": 4e-3, "tokenize_s_per_token": 1e-6, "stream_delay_s": 0.0},
        "slo": {"ttft_ms": 500.0, "tpot_ms": 50.0, "e2el_ms": 10_000.0},
        "max_model_len": 8192,
        "workload": {
            "num_requests": 100,
            "arrival": {"kind": "gamma", "rate_per_s": 2.0, "burstiness": 0.5},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "lognormal", "median_tokens": 400.0, "sigma": 0.5},
                "output": {"kind": "normal", "mean_tokens": 100.0, "std_tokens": 20.0},
            },
        },
    },
    "disaggregated": {  # the KV link is read only between prefill and decode groups
        "groups": [{"role": "prefill", "count": 1}, {"role": "decode", "count": 1}],
        "kv_transfer": {"bandwidth_bytes_per_s": 1e11, "latency_s": 1e-5},
    },
    "timed": {
        "workload": {
            "duration_s": 60.0,
            "arrival": {"kind": "periodic", "rate_per_s": 2.0, "amplitude": 0.5, "period_s": 30.0, "phase_s": 5.0},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "uniform", "min_tokens": 10, "max_tokens": 100},
                "output": {"kind": "zipf", "exponent": 1.2, "min_tokens": 1, "max_tokens": 100},
            },
        },
    },
    "piecewise": {
        "workload": {
            "num_requests": 100,
            "arrival": {"kind": "piecewise", "segments": [{"duration_s": 10.0, "rate_per_s": 1.0}]},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "fixed", "tokens": 100},
                "output": {"kind": "fixed", "tokens": 10},
            },
        },
    },
    "sessions": {
        "workload": {
            "kind": "sessions",
            "num_sessions": 10,
            "arrival": {"kind": "constant", "rate_per_s": 1.0},
            "turns": {"kind": "geometric", "mean_count": 3.0},
            "user_tokens": {"kind": "fixed", "tokens": 50},
            "output_tokens": {
                "kind": "lognormal",
                "median_tokens": 20.0,
                "sigma": 1.0,
                "min_tokens": 2,
                "max_tokens": 500,
            },
            "think_s": {"kind": "lognormal", "median_s": 5.0, "sigma": 0.5},
            "tool_calls": {"kind": "uniform", "min_count": 0, "max_count": 2},
            "tool_tokens": {"kind": "fixed", "tokens": 30},
            "tool_s": {"kind": "exponential", "mean_s": 2.0},
            "system_prompt_tokens": 100,
            "max_context_tokens": 8000,
        },
    },
    "closed_loop": {
        "workload": {
            "kind": "closed_loop",
            "concurrency": 4,
            "num_requests": 40,
            "ramp_s": 2.0,
            "think_s": {"kind": "uniform", "min_s": 0.5, "max_s": 1.5},
            "classes": [{"weight": 1.0, "priority": 0}, {"weight": 2.0, "priority": 1}],
        },
    },
}


def _numeric_paths(node, path=()):
    if isinstance(node, bool):
        return []
    if isinstance(node, (int, float)):
        return [path]
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _numeric_paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _numeric_paths(value, (*path, i))
    return out


FIELDS = [(name, path) for name, scenario in SCENARIOS.items() for path in _numeric_paths(scenario)]
NON_FINITE = [math.inf, -math.inf, math.nan]
# absurd finite values by field name: each breaks arithmetic somewhere if let through
ABSURD = {
    "rate_per_s": [1e300, 1e-300],
    "burstiness": [1e300, 1e-300],
    "sigma": [1e3],
    "std_tokens": [1e300],
    "memory_bytes": [1e30],
    "flops_per_s": [1e-300],
    "memory_bandwidth_bytes_per_s": [1e-300],
    "interconnect_bandwidth_bytes_per_s": [1e-300],
    "host_link_bandwidth_bytes_per_s": [1e-300],
    "bandwidth_bytes_per_s": [1e-300],
    "interconnect_latency_s": [1e30],
    "host_link_latency_s": [1e30],
    "latency_s": [1e30],
    "swap_space_bytes": [1e300],
    "host_cache_bytes": [1e300],
    "reserve_bytes": [1e300],
    "tokenize_s_per_token": [1e300],
    "weight": [1e300],
}
UNION_TAGS = {"gamma", "periodic", "piecewise", "constant", "poisson", "independent", "lognormal", "normal",
              "fixed", "uniform", "zipf", "exponential", "geometric"}  # fmt: skip


def _absurd(scenario, path) -> list:
    key = path[-1]
    parent = scenario
    for part in path[:-1]:
        parent = parent[part]
    if key in ("sigma", "std_tokens") and "max_tokens" in parent:
        return []  # a wide spread is fine when max_tokens cuts it
    if key in ABSURD:
        return ABSURD[key]
    if isinstance(key, str) and key.endswith("_s"):
        return [1e300]
    if isinstance(key, str) and (key.endswith("_ms")):
        return [1e300]
    if isinstance(key, str) and ("tokens" in key or key in ("num_requests", "num_sessions", "concurrency")):
        return [10**30]
    return []


def _set(data, path, value):
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def test_every_listed_scenario_is_valid():
    for scenario in SCENARIOS.values():
        validate_scenario(scenario)
    assert len(FIELDS) > 50


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_bad_number_anywhere_is_one_line_naming_its_field(data):
    name, path = data.draw(st.sampled_from(FIELDS), label="field")
    value = data.draw(st.sampled_from(NON_FINITE + _absurd(SCENARIOS[name], path)), label="value")
    scenario = copy.deepcopy(SCENARIOS[name])
    _set(scenario, path, value)
    with pytest.raises(ValueError) as info:
        validate_scenario(scenario, source="s.yaml")
    message = str(info.value)
    assert len(message.splitlines()) == 1, message
    prefix, loc, _ = message.split(": ", 2)
    assert prefix == "s.yaml"
    named = [part for part in loc.split(".") if part not in UNION_TAGS]
    dotted = [str(part) for part in path]
    # the field itself, or (a cross-field bound) the list or distribution holding it
    assert named == dotted or (len(named) >= 2 and dotted[: len(named)] == named), (path, message)
