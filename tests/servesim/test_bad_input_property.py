"""Malformed input across every command: exit 2, one line on stderr naming what is wrong, nothing left behind.

Hypothesis draws a command (run, compare, sweep, plan, workload describe, estimate) and one
malformation: a bad number in a scenario field (non-finite, negative, the wrong type), a bad flag
value, a hostile YAML text, or a corrupt trace. Each is run as a user runs it (the console
script, in a subprocess with a time limit, so a hang fails the test). The property:

- exit status 2, no traceback;
- exactly one line on stderr, naming the field, the flag or the file;
- no output folder left behind.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")
TIME_LIMIT_S = 60

# a small valid scenario: each case breaks one thing in it
BASE = {
    "seed": 0,
    "workload": {
        "num_requests": 20,
        "arrival": {"kind": "poisson", "rate_per_s": 4.0},
        "lengths": {
            "kind": "independent",
            "prompt": {"kind": "lognormal", "median_tokens": 200, "sigma": 0.5},
            "output": {"kind": "uniform", "min_tokens": 10, "max_tokens": 50},
        },
    },
    "kv_cache": {"block_size": 16, "gpu_memory_utilization": 0.9, "swap_space_bytes": 1.0e9},
    "client": {"ingest_delay_s": 0.001, "stream_delay_s": 0.0},
    "slo": {"ttft_ms": 500.0},
}
# (dotted path, how it is named in the message)
NUMERIC_FIELDS = (
    ("workload.arrival.rate_per_s", "rate_per_s"),
    ("workload.num_requests", "num_requests"),
    ("workload.lengths.prompt.median_tokens", "median_tokens"),
    ("workload.lengths.prompt.sigma", "sigma"),
    ("workload.lengths.output.max_tokens", "max_tokens"),
    ("kv_cache.block_size", "block_size"),
    ("kv_cache.gpu_memory_utilization", "gpu_memory_utilization"),
    ("kv_cache.swap_space_bytes", "swap_space_bytes"),
    ("client.ingest_delay_s", "ingest_delay_s"),
    ("slo.ttft_ms", "ttft_ms"),
    ("seed", "seed"),
)
BAD_NUMBERS = (float("inf"), float("-inf"), float("nan"), -1, -1e300, "abc", [1], {"x": 1})
# flag -> bad values; each is named in the message
BAD_FLAGS = {
    "--rate": ("inf", "nan", "-1", "abc", "1e400"),
    "--num-requests": ("0", "-5", "abc", "1.5"),
    "--duration": ("inf", "nan", "-1"),
    "--seed": ("-1", "abc"),
    "--tp": ("0", "-2", "abc"),
}
HOSTILE_YAML = {
    "a NUL byte": "seed: 0\nworkload:\n  num_requests: 2\x000\n",
    "a duplicate key": "seed: 0\nseed: 1\n",
    "deep nesting": "workload: " + "[" * 5000 + "]" * 5000 + "\n",
    "an alias bomb": "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
    + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
    + "workload: {num_requests: *i}\n",
    "a truncated mapping": "workload: {num_requests: 20, arrival: {kind: poisson",
    "not a mapping": "- 1\n- 2\n",
}


def _set(data: dict, dotted: str, value) -> dict:
    out = yaml.safe_load(yaml.safe_dump(data))
    node = out
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    return out


def _yaml_text(data: dict) -> str:
    # yaml.safe_dump writes .inf / .nan, as a user would
    return yaml.safe_dump(data, sort_keys=False)


def _command(name: str, scenario: Path, out: Path, tmp: Path) -> list[str]:
    if name == "run":
        return ["run", str(scenario), "--out", str(out), "--no-report", "--quiet"]
    if name == "compare":
        return ["compare", str(scenario), "--policies", "vllm,sarathi", "--out", str(out), "--workers", "1", "--quiet"]
    if name == "sweep":
        grid = tmp / "grid.yaml"
        grid.write_text(_yaml_text({"base": str(scenario), "grid": {"policy.max_num_seqs": [8, 16]}}))
        return ["sweep", str(grid), "--out", str(out), "--workers", "1", "--no-report", "--quiet"]
    if name == "plan":
        return [
            "plan",
            str(scenario),
            "--target-rate",
            "2",
            "--candidates",
            "h100-sxm:tp1",
            "--out",
            str(out),
            "--no-report",
            "--quiet",
        ]
    raise AssertionError(name)


@st.composite
def cases(draw):
    """(command line, what the one stderr line must mention) over a fresh temporary folder."""
    kind = draw(st.sampled_from(["field", "flag", "yaml", "trace"]))
    command = draw(st.sampled_from(["run", "compare", "sweep", "plan"]))
    if kind == "field":
        path, name = draw(st.sampled_from(NUMERIC_FIELDS))
        value = draw(st.sampled_from(BAD_NUMBERS))
        return command, {"scenario": _yaml_text(_set(BASE, path, value))}, [], name
    if kind == "flag":
        command = draw(st.sampled_from(["run", "compare"]))
        flag = draw(st.sampled_from(sorted(BAD_FLAGS)))
        value = draw(st.sampled_from(BAD_FLAGS[flag]))
        return command, {"scenario": _yaml_text(BASE)}, [f"{flag}={value}"], flag
    if kind == "yaml":
        label = draw(st.sampled_from(sorted(HOSTILE_YAML)))
        return command, {"scenario": HOSTILE_YAML[label]}, [], "scenario.yaml"
    garbage = draw(st.sampled_from(["gz", "binary", "header"]))
    return "run", {"scenario": _yaml_text(BASE), "trace": garbage}, [], "trace"


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(cases())
def test_every_command_refuses_bad_input_in_one_line(tmp_path_factory, case):
    command, files, extra, must_name = case
    tmp = tmp_path_factory.mktemp("bad")
    scenario = tmp / "scenario.yaml"
    scenario.write_bytes(files["scenario"].encode("utf-8", "surrogatepass"))
    out = tmp / "out"
    args = _command(command, scenario, out, tmp) + extra
    if "trace" in files:
        trace = tmp / ("trace.csv.gz" if files["trace"] == "gz" else "trace.csv")
        if files["trace"] == "gz":
            trace.write_bytes(gzip.compress(b"timestamp,input_length,output_length\n0,10,10\n")[:-12] + b"garbage")
        elif files["trace"] == "binary":
            trace.write_bytes(bytes(range(256)) * 8)
        else:
            trace.write_text("timestamp,input_length,output_length\n")
        args += ["--trace", str(trace)]
    proc = subprocess.run([SERVESIM, *args], capture_output=True, text=True, timeout=TIME_LIMIT_S, cwd=tmp)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, (args, lines)
    assert must_name.lower() in lines[0].lower(), (must_name, lines[0])
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
