"""How busy other processes keep this machine's CPUs while calibration measures.

Wall-clock timings on a CPU are only as good as the cores they run on are free: another
process on a measured core stretches some repeats and not others (noise), or all of them
(a bias no spread shows). ``LoadMonitor`` samples, in a background thread, the CPU time all
processes used on the CPUs this process may run on (``/proc/stat``, steal time of a
virtual machine included) minus this process's own (``time.process_time``, all threads),
so what is left is other processes' load, in CPUs. It takes a short sample before the
measurement starts and keeps sampling during it; ``report()`` gives a
``simulator.cost.profile.LoadReport``, whose ``busy`` compares that load with the CPUs
the measurement leaves idle. Where ``/proc/stat`` cannot be read (not Linux), psutil's
system-wide percentages are used if psutil is installed, else the figures stay None.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np

from simulator.cost.profile import LoadReport, num_cpus

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def busy_cpu_seconds(cpus: set[int] | None = None) -> float | None:
    """CPU seconds all processes spent busy on ``cpus`` since boot (steal included); None when unknown."""
    cpus = _affinity() if cpus is None else cpus
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        try:
            import psutil
        except ImportError:
            return None
        t = psutil.cpu_times()
        return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))
    total = 0.0
    found = False
    for line in lines:
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        if int(name[3:]) not in cpus:
            continue
        values = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(values) - values[3] - values[4]
        found = True
    return total / _CLK_TCK if found else None


def load_average() -> tuple[float, ...]:
    try:
        return tuple(os.getloadavg())
    except (AttributeError, OSError):
        return ()


class LoadMonitor:
    """Other processes' CPU load before and during a measurement (module docstring)."""

    def __init__(self, num_threads: int, interval_s: float = 0.5) -> None:
        self.num_threads = num_threads
        self.interval_s = interval_s
        self.cpus = _affinity()
        self.before: float | None = None
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _others(self, seconds: float, stop: threading.Event | None = None) -> float | None:
        """Other processes' mean load in CPUs over the next ``seconds`` (or until ``stop``)."""
        busy0, own0, t0 = busy_cpu_seconds(self.cpus), time.process_time(), time.monotonic()
        if busy0 is None:
            return None
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)
        busy1, own1, t1 = busy_cpu_seconds(self.cpus), time.process_time(), time.monotonic()
        if busy1 is None or t1 - t0 < 0.05:
            return None
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)

    def sample_before(self, seconds: float = 0.5) -> None:
        """A sample of the load before the measurement (blocks for ``seconds``)."""
        self.before = self._others(seconds)

    def start(self) -> LoadMonitor:
        def loop() -> None:
            while not self._stop.is_set():
                value = self._others(self.interval_s, self._stop)
                if value is not None:
                    self.samples.append(value)

        self._thread = threading.Thread(target=loop, name="servesim-load-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> LoadReport:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.report()

    def report(self) -> LoadReport:
        s = np.array(self.samples)
        return LoadReport(
            num_cpus=min(num_cpus(), len(self.cpus)) or 1,
            num_threads=self.num_threads,
            other_cpus_before=self.before,
            other_cpus_mean=float(s.mean()) if len(s) else None,
            other_cpus_p90=float(np.percentile(s, 90)) if len(s) else None,
            load_average=load_average(),
            num_samples=len(s) + (self.before is not None),
        )
