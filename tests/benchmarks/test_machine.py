"""Every speed benchmark says which machine its timings came from, and reports medians of several runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

from benchmarks.machine import describe, load

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_machine_line_names_the_cpu_cores_and_load():
    line = describe()
    assert line.startswith("machine: ")
    assert f"{os.cpu_count()} logical cores" in line
    assert "Python " in line
    assert re.search(r"load (\d+\.\d\d / ){2}\d+\.\d\d \(1 / 5 / 15 min\)$|load n/a$", line)
    assert re.fullmatch(r"load (\d+\.\d\d / ){2}\d+\.\d\d \(1 / 5 / 15 min\)|load n/a", load())


def test_every_timing_benchmark_prints_the_machine_and_medians_of_several_runs():
    scripts = sorted(BENCHMARKS.glob("bench_*.py"))
    assert {p.stem for p in scripts} >= {"bench_default", "bench_plan", "bench_report", "bench_scale"}
    for script in scripts:
        text = script.read_text()
        assert "print(describe())" in text and "load()" in text, script.name
        assert "statistics.median" in text, script.name
        default = re.search(r'"--repeats", type=int, default=(\d+)', text)
        assert default is not None and int(default.group(1)) >= 3, script.name
