"""Can a calibration be trusted? Noise per point, load from other processes, held-out error.

A profile measured on a noisy or busy machine can be wrong by an order of magnitude and
look like any other. Three checks, each a figure the profile keeps (``ProfileQuality``):

- **noise**: a point whose median is uncertain by more than ``NOISE_BOUND`` (its relative
  standard error) is measured again, up to ``NOISE_RETRIES`` rounds, and marked noisy if
  it stays so. The standard error of a median of n repeats is 1.2533 sigma / sqrt(n)
  (asymptotically, for repeats spread normally), sigma estimated as IQR / 1.349 (robust to
  the odd outlier a preempted repeat makes). Single repeats of a microsecond op on a
  virtual machine spread by 10-30% even when nothing else runs, so the spread itself
  would flag half of a quiet calibration; what a prediction inherits is the median's error;
- **load**: the CPU time other processes used while calibrating, in cores, from the
  system's counters (``/proc/stat``) less this process's own (Linux; None elsewhere);
- **held-out error**: each op's interpolation against points it was not fitted to.

``assess`` turns these into warnings: calibrate prints them loudly on stderr (``--strict``
refuses to write the profile), and every later use of the profile repeats them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.timing import Timing, pooled

NOISE_BOUND = 0.05  # relative standard error of a point's median
NOISE_RETRIES = 6  # extra rounds of passes for a noisy point
# Thresholds of the warnings, set between a quiet and a busy calibration of the test model on the 2-core CI machine
# (quick grid): quiet 22-29 of 176 points noisy, ops' held-out errors at most 19% (2 threads) and 28% (1 thread,
# attn_decode), 0.01 cores of other load; one other process spinning: 90 of 176 noisy, held-out errors up to 47%,
# 0.75 cores of other load.
MAX_NOISY_FRACTION = 0.25  # more noisy points than this, and the profile is suspect
HELD_OUT_BOUND = 0.25  # mean relative error of an op on its held-out points
BUSY_CORES = 0.3  # other processes using this many cores on average make the timings suspect
PROC_STAT = Path("/proc/stat")


def noise(t: Timing) -> float:
    """The relative standard error of a point's median: 1.2533 (IQR / 1.349) / sqrt(n) / median."""
    if t.median_s <= 0 or t.num_repeats < 1:
        return float("inf")
    return 1.2533 * (t.iqr_s / 1.349) / t.num_repeats**0.5 / t.median_s


def measure_points(
    calls: dict[tuple[int, ...], Callable[[], Any]],
    time_call: Callable[[Callable[[], Any], bool], Timing],
    passes: int,
    tick: Callable[[], None] = lambda: None,
    retries: int = NOISE_RETRIES,
) -> tuple[dict[tuple[int, ...], Timing], set[tuple[int, ...]]]:
    """Time every call in ``passes`` interleaved passes, then again (``passes`` more each round, pooled) the points
    whose median is uncertain by more than ``NOISE_BOUND``, up to ``retries`` rounds.

    Returns each point's pooled timing and the points still noisy after the retries.
    ``tick`` is called once per point of the first ``passes`` passes (the progress bar's work).
    """
    timings: dict[tuple[int, ...], list[Timing]] = {at: [] for at in calls}
    for pass_index in range(passes):  # interleaved: a burst of foreign load is spread over many points
        for at, call in calls.items():
            timings[at].append(time_call(call, pass_index == 0))
            tick()
    result = {at: pooled(ts) for at, ts in timings.items()}
    noisy = {at for at, t in result.items() if noise(t) > NOISE_BOUND}
    for _ in range(retries):
        if not noisy:
            break
        for _pass in range(passes):
            for at in noisy:
                timings[at].append(time_call(calls[at], False))
        for at in noisy:
            result[at] = pooled(timings[at])
        noisy = {at for at in noisy if noise(result[at]) > NOISE_BOUND}
    return result, noisy


def _system_busy_s() -> float | None:
    """CPU seconds all processes have used since boot (user, nice, system, irq, softirq, steal), or None."""
    try:
        fields = PROC_STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    jiffies = [int(x) for x in fields[1:]]
    busy = sum(jiffies[:3]) + sum(jiffies[5:8])  # user nice system (idle iowait) irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass(slots=True)
class LoadMeter:
    """CPU time used by other processes over an interval, in cores on average."""

    start_wall_s: float = 0.0
    start_busy_s: float | None = None
    start_own_s: float = 0.0

    def start(self) -> LoadMeter:
        self.start_wall_s, self.start_busy_s, self.start_own_s = time.monotonic(), _system_busy_s(), _own_cpu_s()
        return self

    def other_cores(self) -> float | None:
        """Average cores other processes used since ``start`` (None where the system does not say)."""
        busy = _system_busy_s()
        wall = time.monotonic() - self.start_wall_s
        if busy is None or self.start_busy_s is None or wall <= 0:
            return None
        other = (busy - self.start_busy_s) - (_own_cpu_s() - self.start_own_s)
        return max(0.0, other / wall)


def assess(
    num_points: int,
    noisy: Sequence[str],
    held_out_errors: dict[str, float | None],
    other_cores: float | None,
) -> list[str]:
    """The warnings a calibration earns: too many noisy points, an op badly held out, a busy machine.

    ``noisy`` names the noisy points (``op@coordinates``); ``held_out_errors`` is each op's
    mean relative error on its held-out points.
    """
    warnings = []
    if num_points and len(noisy) / num_points > MAX_NOISY_FRACTION:
        shown = ", ".join(noisy[:4]) + (", ..." if len(noisy) > 4 else "")
        warnings.append(
            f"{len(noisy)} of {num_points} measured points stayed noisy (median uncertain by more than "
            f"{NOISE_BOUND:.0%} after {NOISE_RETRIES} rounds of retries): {shown}"
        )
    bad = {op: e for op, e in held_out_errors.items() if e is not None and e > HELD_OUT_BOUND}
    if bad:
        shown = ", ".join(f"{op} {e:.0%}" for op, e in sorted(bad.items(), key=lambda kv: -kv[1]))
        warnings.append(f"held-out error above {HELD_OUT_BOUND:.0%}: {shown}")
    if other_cores is not None and other_cores > BUSY_CORES:
        warnings.append(
            f"the machine was busy: other processes used {other_cores:.1f} cores on average while calibrating; "
            "measure again with nothing else running"
        )
    return warnings
