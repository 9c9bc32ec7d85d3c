"""Timing one op call: torch's benchmark timer on a CPU, CUDA events plus the profiler on a GPU.

Both return the median of repeats and their interquartile range, and the repeats, so that a
grid measured in several interleaved passes can pool them (``pooled``). On CUDA each repeat
brackets one call with events after a warm-up (what an engine without CUDA graphs pays,
launches included), and the torch profiler adds the kernels' own device time per call,
recorded beside the event time. Attribute names of the profiler's events changed across
torch releases (``self_cuda_time_total`` became ``self_device_time_total``); both are read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.device import Device, import_torch


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds per call: median and spread of repeats, kernel time when profiled; the repeats themselves."""

    median_s: float
    iqr_s: float
    num_repeats: int
    kernel_s: float | None = None
    samples_s: tuple[float, ...] = ()


def pooled(timings: list[Timing]) -> Timing:
    """One Timing from several passes over the same call: median and IQR of all their repeats.

    Measuring a grid in interleaved passes spreads a burst of foreign load over many
    points instead of letting it decide one.
    """
    samples = np.array([s for t in timings for s in t.samples_s])
    q25, q50, q75 = np.percentile(samples, [25, 50, 75])
    kernels = [t.kernel_s for t in timings if t.kernel_s is not None]
    return Timing(float(q50), float(q75 - q25), len(samples), float(np.median(kernels)) if kernels else None)


class CpuTimer:
    """``torch.utils.benchmark.Timer`` with torch's current thread count (its default of one would mislead)."""

    label = "torch.utils.benchmark.Timer.blocked_autorange (wall clock)"

    def __init__(self, min_run_time_s: float = 0.05) -> None:
        self.min_run_time_s = min_run_time_s

    def time(self, fn: Callable[[], Any], profile: bool = True) -> Timing:
        torch = import_torch()
        from torch.utils import benchmark

        timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        m = timer.blocked_autorange(min_run_time=self.min_run_time_s)
        return Timing(float(m.median), float(m.iqr), len(m.times), None, tuple(float(t) for t in m.times))


def _kernel_seconds(prof: Any, calls: int) -> float | None:
    """Device time of the CUDA kernels a profiler recorded, per call."""
    total_us = 0.0
    found = False
    for evt in prof.key_averages():
        device_type = str(getattr(evt, "device_type", ""))
        if not device_type.endswith("CUDA"):
            continue
        value = getattr(evt, "self_device_time_total", None)
        if value is None:
            value = getattr(evt, "self_cuda_time_total", None)
        if value is None:
            continue
        total_us += float(value)
        found = True
    return total_us * 1e-6 / calls if found else None


class CudaTimer:
    """Warm-up, then CUDA events around each of ``repeats`` calls; then the profiler's kernel time."""

    label = "CUDA events (median of repeats) and torch.profiler kernel times"

    def __init__(self, device: Device, warmup: int = 3, repeats: int = 15, profiled_calls: int = 3) -> None:
        self.device = device
        self.warmup = warmup
        self.repeats = repeats
        self.profiled_calls = profiled_calls

    def time(self, fn: Callable[[], Any], profile: bool = True) -> Timing:
        torch = import_torch()
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize(self.device.torch_device)
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(self.repeats)
        ]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(self.device.torch_device)
        times = np.array([s.elapsed_time(e) * 1e-3 for s, e in pairs])
        q25, q50, q75 = np.percentile(times, [25, 50, 75])
        kernel_s = None
        if not profile:
            return Timing(float(q50), float(q75 - q25), len(times), None, tuple(times.tolist()))
        try:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(self.profiled_calls):
                    fn()
                torch.cuda.synchronize(self.device.torch_device)
            kernel_s = _kernel_seconds(prof, self.profiled_calls)
        except (RuntimeError, AssertionError, AttributeError):
            kernel_s = None  # the profiler is optional evidence; event times stand on their own
        return Timing(float(q50), float(q75 - q25), len(times), kernel_s, tuple(times.tolist()))


def make_timer(device: Device, quick: bool, passes: int = 1) -> CpuTimer | CudaTimer:
    """The device's timer, its repeats split over ``passes`` interleaved passes."""
    if device.is_cuda:
        return CudaTimer(device, repeats=max(3, (15 if quick else 40) // passes))
    return CpuTimer(min_run_time_s=(0.036 if quick else 0.2) / passes)
