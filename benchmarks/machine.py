"""The machine a speed benchmark ran on, in one line: every timing benchmark prints it first, and its load again at the
end, so a figure quoted from it says where it came from (timings on a loaded machine are noisy: compare medians of
interleaved runs, as the benchmarks take them)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows, else "unknown CPU"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> float | None:
    """Physical memory in GiB, where the OS says (POSIX ``sysconf``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, OSError, ValueError):
        return None


def load() -> str:
    """The 1-, 5- and 15-minute load averages ("n/a" where the OS keeps none)."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "load n/a"
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def describe() -> str:
    """``machine: <CPU>, <N> logical cores, <M> GiB, <OS>, Python <v>, <load>``."""
    memory = _memory_gib()
    parts = [
        _cpu_model(),
        f"{os.cpu_count() or '?'} logical cores",
        *([f"{memory:.0f} GiB"] if memory is not None else []),
        f"{platform.system()} {platform.release()}",
        f"Python {platform.python_version()}",
        load(),
    ]
    return "machine: " + ", ".join(parts)
