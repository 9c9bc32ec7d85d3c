"""Hostile and broken inputs: each is one clear stderr line naming the file (and line), exit 2, quickly.

YAML bounds (size, nesting, alias expansion, control characters, duplicate keys), damaged
trace and run-folder files, and the --out folder rules (never an empty name, a file, or
another run's folder unless --overwrite; never a half-written folder after a failure).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servesim.commands.common import output_folder, sweep_folder
from simulator.config.files import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES, parse_yaml, read_json_object
from simulator.config.scenario import read_scenario_dict, validate_scenario

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")
TIMEOUT_S = 20  # every refusal below takes a second or two; a hang fails the test

SCENARIO = """\
model: llama-2-7b
hardware: a100-80gb
policy:
  kind: vllm_v0
  max_num_seqs: 64
workload:
  num_requests: 5
  arrival: {kind: poisson, rate_per_s: 2}
  lengths:
    kind: independent
    prompt: {kind: fixed, tokens: 300}
    output: {kind: fixed, tokens: 20}
seed: 3
"""

# nine levels of nine: 9**9 (387 million) values from ten short lines
BOMB = "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(9))


def servesim(*args, cwd):
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT_S)


def assert_one_line(proc, *needles):
    """Exit 2, one stderr line holding every needle, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def run_refused(tmp_path, name: str, text: str | bytes, *needles: str) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    out = tmp_path / "out"
    line = assert_one_line(servesim("run", path, "--quiet", "--no-report", "--out", out, cwd=tmp_path), *needles)
    assert not out.exists()  # refused before anything was written
    return line


# -- hostile YAML ------------------------------------------------------------------------


def test_deeply_nested_yaml_names_the_line(tmp_path):
    deep = "[" * 5000 + "1" + "]" * 5000
    run_refused(tmp_path, "deep.yaml", f"seed: 1\nworkload: {deep}\n", "deep.yaml: line 2:", "nested deeper than 64")


def test_deep_block_nesting(tmp_path):
    text = "".join("  " * i + f"k{i}:\n" for i in range(500))
    run_refused(tmp_path, "deep.yaml", text, "deep.yaml: line 64:", "nested deeper than")


def test_billion_laughs_in_a_typed_field_is_refused_quickly(tmp_path):
    # the anchors inside an integer field: its error message used to repr() the whole expansion
    lines = [f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(9)]
    text = SCENARIO.replace("seed: 3\n", "seed:\n" + "".join(lines))
    started = time.perf_counter()
    line = run_refused(tmp_path, "bomb.yaml", text, "bomb.yaml: line 19:", "once aliases are expanded")
    assert "more than 100,000 values" in line
    assert time.perf_counter() - started < TIMEOUT_S


def test_billion_laughs_beside_the_fields(tmp_path):
    text = BOMB + "seed: [" + ", ".join(["*a8"] * 9) + "]\n"
    run_refused(tmp_path, "bomb.yaml", text, "bomb.yaml: line ", "once aliases are expanded")


def test_nesting_built_from_aliases_counts_its_expanded_depth(tmp_path):
    chain = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200))
    run_refused(tmp_path, "chain.yaml", chain, "chain.yaml: line ", "nested deeper than", "aliases are expanded")


def test_recursive_alias(tmp_path):
    run_refused(tmp_path, "rec.yaml", "seed: 1\nworkload: &w {a: *w}\n", "rec.yaml: line 2:", "alias *w")


def test_duplicate_key_names_the_key_and_both_lines(tmp_path):
    text = SCENARIO.replace("seed: 3\n", "seed: 3\nworkload: {num_requests: 9}\n")
    line = run_refused(tmp_path, "dup.yaml", text, "dup.yaml: line 14:", "duplicate key 'workload'")
    assert "first given on line 6" in line


def test_duplicate_nested_key(tmp_path):
    text = SCENARIO.replace("  max_num_seqs: 64\n", "  max_num_seqs: 64\n  kind: sarathi\n")
    run_refused(tmp_path, "dup.yaml", text, "dup.yaml: line 6:", "duplicate key 'kind' (first given on line 4)")


def test_merge_keys_may_still_be_overridden():
    data = parse_yaml("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 3\n", "f.yaml")
    assert data["other"] == {"x": 3, "y": 2}


def test_nul_byte_names_the_line(tmp_path):
    text = SCENARIO.replace("seed: 3", "seed: 3\x00")
    run_refused(tmp_path, "nul.yaml", text, "nul.yaml: line 13:", "NUL byte")


def test_other_control_characters_name_the_line(tmp_path):
    run_refused(tmp_path, "esc.yaml", "seed: 1\nmodel: \x1b[31mllama\n", "esc.yaml: line 2:", "U+001B")


def test_binary_file(tmp_path):
    run_refused(tmp_path, "bin.yaml", bytes(range(256)), "bin.yaml:", "not a text file")


def test_oversized_yaml(tmp_path):
    text = "seed: 1\n" + "# padding\n" * (MAX_YAML_BYTES // 10 + 1)
    run_refused(tmp_path, "big.yaml", text, "big.yaml: too large for a file (1 MiB at most)")


def test_a_spec_file_goes_through_the_same_reader(tmp_path):
    spec = tmp_path / "model.yaml"
    spec.write_text("name: m\nnum_layers: 2\nnum_layers: 3\n")
    proc = servesim("run", "--model", spec, "--quiet", "--no-report", "--out", tmp_path / "out", cwd=tmp_path)
    assert_one_line(proc, "model.yaml: line 3:", "duplicate key 'num_layers'")


def test_a_sweep_grid_goes_through_the_same_reader(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(BOMB + "grid: {seed: [" + ", ".join(["*a8"] * 9) + "]}\n")
    proc = servesim("sweep", grid, "--quiet", "--no-report", "--out", tmp_path / "sw", cwd=tmp_path)
    assert_one_line(proc, "grid.yaml: line ", "once aliases are expanded")
    assert not (tmp_path / "sw").exists()


def test_bounds_leave_ordinary_documents_alone():
    wide = "a: [" + ", ".join(["1"] * (MAX_YAML_NODES - 10)) + "]\n"
    assert len(parse_yaml(wide, "wide.yaml")["a"]) == MAX_YAML_NODES - 10
    nested = "a: " + "[" * (MAX_YAML_DEPTH - 2) + "1" + "]" * (MAX_YAML_DEPTH - 2) + "\n"
    assert parse_yaml(nested, "nested.yaml") is not None
    shared = "a: &a {x: 1}\nb: *a\nc: [*a, *a]\n"
    assert parse_yaml(shared, "shared.yaml") == {"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 1}]}
    assert parse_yaml("\ufeffa: 1\r\nb: 2\r\n", "bom.yaml") == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 2001-13-45\n", "f.yaml: line 1: not valid YAML (month must be in 1..12)"),
        ("a: &x 1\nb: &x 2\n", "f.yaml: line 2: not valid YAML (found duplicate anchor 'x' (first on line 1))"),
        ("a: 1\n---\nb: 2\n", "f.yaml: line 2: not valid YAML (expected a single document"),
        ("a: *nope\n", "f.yaml: line 1: not valid YAML (found undefined alias 'nope')"),
        ("a: " + "7" * 5000 + "\n", "f.yaml: line 1: not valid YAML (Exceeds the limit"),
        ("a: !!python/object:os.system x\n", "f.yaml: line 1: not valid YAML (could not determine a constructor"),
    ],
)
def test_every_yaml_problem_is_one_value_error_with_the_line(text, expected):
    with pytest.raises(ValueError) as err:
        parse_yaml(text, "f.yaml")
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_deeply_nested_json_run_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"config\.json: corrupted run config, not valid JSON"):
        read_json_object(path, "run config")


# -- the hypothesis test: a scenario reader never does anything but accept or one ValueError line ----


def _mutate(text: str, kind: str, where: float, amount: int) -> str:
    lines = text.splitlines(keepends=True)
    i = min(int(where * len(lines)), len(lines) - 1)
    pos = min(int(where * len(text)), len(text))
    if kind == "nul":
        return text[:pos] + "\x00" + text[pos:]
    if kind == "control":
        return text[:pos] + chr(amount % 32 or 1) + text[pos:]
    if kind == "duplicate":
        return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    if kind == "nest":
        key, sep, _ = lines[i].partition(":")
        deep = "[" * amount + "1" + "]" * amount
        lines[i] = f"{key}{sep} {deep}\n" if sep else f"{deep}\n"
        return "".join(lines)
    if kind == "bomb":
        key, sep, _ = lines[i].partition(":")
        value = "[" + ", ".join(["*a8"] * 9) + "]"
        lines[i] = f"{key}{sep} {value}\n" if sep and key.strip() else f"x: {value}\n"
        return BOMB + "".join(lines)
    if kind == "truncate":
        return text[:pos]
    assert kind == "insert"
    return text[:pos] + ":-[{&*!|>'\"%@`#,?"[amount % 17] + text[pos:]


@settings(max_examples=20, deadline=10_000, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["nul", "control", "duplicate", "nest", "bomb", "truncate", "insert"]),
    where=st.floats(0, 1),
    amount=st.integers(1, 3000),
)
def test_mutated_scenario_is_accepted_or_one_value_error_line(kind, where, amount):
    text = _mutate(SCENARIO, kind, where, amount)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text(text, encoding="utf-8")
        started = time.perf_counter()
        try:
            data = read_scenario_dict(path)
        except ValueError as exc:
            message = str(exc)
            assert message.startswith(str(path)) and "\n" not in message, message
            return
        finally:
            assert time.perf_counter() - started < 5
        try:  # what is read is then validated: a ValueError (one line per bad field), nothing else
            validate_scenario(data, source=str(path))
        except ValueError as exc:
            assert all(line.startswith(str(path)) for line in str(exc).splitlines())


# -- damaged trace and run-folder files -----------------------------------------------------


def _gzip_trace() -> bytes:
    rows = "".join(f"{i * 0.5},{100 + i},{10 + i}\n" for i in range(2000))
    return gzip.compress(("arrival_s,prompt_tokens,output_tokens\n" + rows).encode())


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        (lambda b: b[:30] + bytes(x ^ 0xFF for x in b[30:40]) + b[40:], "Error -3 while decompressing"),
        (lambda b: b[: len(b) // 2], "ended before the end-of-stream marker"),
        (lambda b: b[:-8] + bytes(x ^ 0xFF for x in b[-8:-4]) + b[-4:], "CRC check failed"),
        (lambda b: b"\x1f\x8b", "ended before"),
    ],
    ids=["corrupt", "truncated", "crc", "header-only"],
)
def test_damaged_gzip_trace_is_one_line(tmp_path, damage, detail):
    trace = tmp_path / "t.csv.gz"
    trace.write_bytes(damage(_gzip_trace()))
    proc = servesim("run", "--trace", trace, "--quiet", "--no-report", "--out", tmp_path / "out", cwd=tmp_path)
    assert_one_line(proc, "t.csv.gz: not a valid gzip file", detail)
    assert not (tmp_path / "out").exists()


def test_the_undamaged_gzip_trace_runs(tmp_path):
    trace = tmp_path / "t.csv.gz"
    trace.write_bytes(_gzip_trace())
    out = tmp_path / "out"
    proc = servesim("run", "--trace", trace, "--num-requests", 5, "--quiet", "--no-report", "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "summary.json").is_file()


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("t.jsonl", '{"prompt_tokens": 5, "output_tokens": 5}\n{"prompt_tokens": ' + "[" * 50_000 + "\n",
         "t.jsonl: line 2: not valid JSON (nested too deeply)"),
        ("t.csv", "prompt_tokens,output_tokens\n5,5\n" + "9" * 200_000 + ",5\n",
         "t.csv: line 3: not a CSV record (field larger than field limit"),
    ],
)  # fmt: skip
def test_hostile_trace_rows_name_the_line(tmp_path, name, text, expected):
    trace = tmp_path / name
    trace.write_text(text)
    proc = servesim("run", "--trace", trace, "--quiet", "--no-report", "--out", tmp_path / "out", cwd=tmp_path)
    assert_one_line(proc, expected)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """One small run folder (Parquet tables); tests copy it."""
    root = tmp_path_factory.mktemp("hostile")
    out = root / "run"
    proc = servesim("run", "--num-requests", 5, "--quiet", "--no-report", "--out", out, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return out


def _copy(run_folder: Path, dest: Path) -> Path:
    shutil.copytree(run_folder, dest)
    return dest


def test_report_of_a_folder_holding_two_runs_tables(tmp_path, run_folder):
    d = _copy(run_folder, tmp_path / "r")
    shutil.copy(d / "requests.parquet", d / "requests.csv")
    proc = servesim("report", d, "--quiet", cwd=tmp_path)
    assert_one_line(proc, f"{d}: holds both requests.parquet and requests.csv")


@pytest.mark.parametrize("table", ["requests", "steps", "itl"])
def test_report_of_a_truncated_table_names_it(tmp_path, run_folder, table):
    d = _copy(run_folder, tmp_path / "r")
    data = (d / f"{table}.parquet").read_bytes()
    (d / f"{table}.parquet").write_bytes(data[: len(data) // 2])
    proc = servesim("report", d, "--quiet", cwd=tmp_path)
    assert_one_line(proc, f"{d / f'{table}.parquet'}: corrupted {table} table")
    assert not (d / "report.html").exists()


def test_report_out_problems(tmp_path, run_folder):
    d = _copy(run_folder, tmp_path / "r")
    (tmp_path / "afile").write_text("x")
    assert_one_line(servesim("report", d, "--quiet", "--out", "", cwd=tmp_path), "--out '': empty file name")
    assert_one_line(servesim("report", d, "--quiet", "--out", d, cwd=tmp_path), "is a folder, not a file")
    proc = servesim("report", d, "--quiet", "--out", tmp_path / "afile" / "x.html", cwd=tmp_path)
    assert_one_line(proc, "cannot create", "afile (a file of that name exists)")


# -- the --out folder ---------------------------------------------------------------------


def test_empty_out_is_refused_and_nothing_is_written(tmp_path):
    proc = servesim("run", "--num-requests", 5, "--quiet", "--no-report", "--out", "", cwd=tmp_path)
    assert_one_line(proc, "--out '': empty folder name")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "compare"])
def test_out_naming_a_file(tmp_path, command):
    (tmp_path / "f").write_text("keep")
    proc = servesim(command, "--num-requests", 5, "--quiet", "--no-report", "--out", "f", cwd=tmp_path)
    assert_one_line(proc, "--out f: is a file, not a folder")
    assert (tmp_path / "f").read_text() == "keep"
    proc = servesim(command, "--num-requests", 5, "--quiet", "--no-report", "--out", "f/sub", cwd=tmp_path)
    assert_one_line(proc, "--out f/sub: cannot create the folder")


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_used_folder_needs_overwrite(tmp_path, run_folder, command):
    d = _copy(run_folder, tmp_path / "r")
    before = sorted(p.name for p in d.iterdir())
    proc = servesim(command, "--num-requests", 5, "--quiet", "--no-report", "--out", d, cwd=tmp_path)
    assert_one_line(proc, f"--out {d}: folder not empty", "--overwrite")
    assert sorted(p.name for p in d.iterdir()) == before


def test_overwrite_replaces_the_earlier_run_whole(tmp_path, run_folder):
    d = _copy(run_folder, tmp_path / "r")
    args = ("run", "--num-requests", 7, "--quiet", "--no-report", "--format", "csv", "--out", d, "--overwrite")
    proc = servesim(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in d.iterdir())
    assert not [n for n in names if n.endswith(".parquet") or n.startswith(".")], names
    assert json.loads((d / "summary.json").read_text())["completed"] == 7
    proc = servesim("report", d, "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_overwrite_never_removes_other_files(tmp_path, run_folder):
    d = _copy(run_folder, tmp_path / "r")
    (d / "notes.txt").write_text("mine")
    proc = servesim("run", "--num-requests", 5, "--quiet", "--no-report", "--out", d, "--overwrite", cwd=tmp_path)
    assert_one_line(proc, "holds 'notes.txt', which servesim does not write")
    assert (d / "notes.txt").read_text() == "mine" and (d / "requests.parquet").is_file()


def test_default_folders_never_collide(tmp_path):
    for _ in range(2):
        proc = servesim("run", "--num-requests", 3, "--quiet", "--no-report", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "runs").iterdir())) == 2


def _interrupt_when(ready, args, cwd: Path) -> subprocess.CompletedProcess:
    """Run servesim, send it SIGINT once ``ready()`` (its folder is claimed), and return how it ended."""
    # a child inherits an ignored SIGINT (a library run earlier in this worker may have set SIG_IGN, and
    # Python then keeps it ignored): start it with the default disposition, as a terminal would
    proc = subprocess.Popen(
        [SERVESIM, *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not ready() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def test_an_interrupted_run_leaves_no_folder(tmp_path):
    out = tmp_path / "runs" / "new"
    args = ("run", "--num-requests", 200_000, "--rate", 500, "--quiet", "--no-report", "--out", out)
    proc = _interrupt_when(out.exists, args, tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert not (tmp_path / "runs").exists()  # the parent it made goes too


def test_an_interrupted_overwrite_restores_the_earlier_run(tmp_path, run_folder):
    d = _copy(run_folder, tmp_path / "r")
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    args = ("run", "--num-requests", 200_000, "--rate", 500, "--quiet", "--no-report", "--out", d, "--overwrite")
    proc = _interrupt_when(lambda: any(d.glob(".servesim-old-*")), args, tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_output_folder_undoes_a_failure(tmp_path):
    fresh = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), output_folder(str(fresh), "run") as out:
        (out / "summary.json").write_text("{}")
        raise RuntimeError("boom")
    assert not (tmp_path / "a").exists()
    used = tmp_path / "used"
    used.mkdir()
    (used / "summary.json").write_text("old")
    (used / "report_figures").mkdir()
    (used / "report_figures" / "ttft.png").write_bytes(b"png")
    with pytest.raises(KeyboardInterrupt), output_folder(str(used), "run", overwrite=True) as out:
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == []
        (out / "summary.json").write_text("new")
        (out / "requests.csv").write_text("new")
        raise KeyboardInterrupt
    assert sorted(p.name for p in used.iterdir()) == ["report_figures", "summary.json"]
    assert (used / "summary.json").read_text() == "old"
    with output_folder(str(used), "run", overwrite=True) as out:
        (out / "summary.json").write_text("new")
    assert sorted(p.name for p in used.iterdir()) == ["summary.json"]


def test_sweep_folders_resume_and_other_folders_are_refused(tmp_path, run_folder):
    d = _copy(run_folder, tmp_path / "r")
    with pytest.raises(ValueError, match="not a sweep folder"):
        sweep_folder(str(d), tmp_path / "default")
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    (sweep / "points").mkdir()
    (sweep / "points" / "abc.json").write_text("{}")
    (sweep / "notes.txt").write_text("mine")
    assert sweep_folder(str(sweep), tmp_path / "default") == sweep  # resumed as it is
    assert (sweep / "points" / "abc.json").is_file() and (sweep / "notes.txt").is_file()
    with pytest.raises(ValueError, match=r"holds 'notes\.txt'"):
        sweep_folder(str(sweep), tmp_path / "default", overwrite=True)
    (sweep / "notes.txt").unlink()
    assert sweep_folder(str(sweep), tmp_path / "default", overwrite=True) == sweep
    assert list(sweep.iterdir()) == []
    with pytest.raises(ValueError, match="empty folder name"):
        sweep_folder("", tmp_path / "default")
    assert not os.path.exists(tmp_path / "default")
