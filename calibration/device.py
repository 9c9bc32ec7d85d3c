"""The device a calibration or validation runs on: torch import, dtype, memory, names.

Every function imports torch lazily and turns a missing torch or a missing device into a
ValueError a user can act on.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

DeviceKind = Literal["cpu", "cuda"]
DtypeName = Literal["bf16", "fp16", "fp32"]
DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0}


def import_torch() -> Any:
    """torch, or a ValueError saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ValueError("this command needs torch: pip install 'servesim[calibrate]' (or pip install torch)") from None
    return torch


def torch_dtype(name: str) -> Any:
    torch = import_torch()
    table = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if name not in table:
        raise ValueError(f"unknown dtype {name!r}; one of {', '.join(table)}")
    return table[name]


@dataclass(frozen=True, slots=True)
class Device:
    """A resolved torch device and what the harness needs to know about it."""

    kind: DeviceKind
    torch_device: Any
    name: str
    num_threads: int

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def synchronize(self) -> None:
        if self.is_cuda:
            import_torch().cuda.synchronize(self.torch_device)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu: " + (platform.processor() or platform.machine())


def resolve_device(kind: str, num_threads: int | None = None) -> Device:
    """The device for ``kind`` ("cuda" or "cpu"); ValueError when it is not there.

    ``num_threads`` sets torch's intra-op threads (CPU timings depend on it); None keeps
    torch's default.
    """
    torch = import_torch()
    if num_threads is not None:
        if num_threads < 1:
            raise ValueError(f"--threads must be at least 1 (got {num_threads})")
        torch.set_num_threads(num_threads)
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                "--device cuda: no CUDA device is available to torch "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); use --device cpu"
            )
        dev = torch.device("cuda", torch.cuda.current_device())
        return Device("cuda", dev, torch.cuda.get_device_name(dev), torch.get_num_threads())
    if kind == "cpu":
        return Device("cpu", torch.device("cpu"), _cpu_name(), torch.get_num_threads())
    raise ValueError(f"unknown device {kind!r}; one of cuda, cpu")


def _proc_kib(path: str, field: str) -> float | None:
    """A ``field: N kB`` line of a Linux /proc file, in bytes; None when absent or unreadable."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def total_memory_bytes(device: Device) -> float:
    """Device memory (host RAM for a CPU)."""
    torch = import_torch()
    if device.is_cuda:
        return float(torch.cuda.mem_get_info(device.torch_device)[1])
    total = _proc_kib("/proc/meminfo", "MemTotal")
    if total is None:
        total = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return total


def free_memory_bytes(device: Device) -> float:
    """Memory free for new allocations now."""
    torch = import_torch()
    if device.is_cuda:
        return float(torch.cuda.mem_get_info(device.torch_device)[0])
    free = _proc_kib("/proc/meminfo", "MemAvailable")
    return free if free is not None else total_memory_bytes(device)


def rss_bytes() -> float:
    """Resident memory of this process (Linux /proc; 0 when unknown)."""
    rss = _proc_kib("/proc/self/status", "VmRSS")
    return 0.0 if rss is None else rss


def peak_rss_bytes() -> float:
    """High-water resident memory of this process since the last ``reset_peak_rss``."""
    peak = _proc_kib("/proc/self/status", "VmHWM")
    return rss_bytes() if peak is None else peak


def reset_peak_rss() -> bool:
    """Reset the process's high-water RSS (Linux: write 5 to clear_refs); False when not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def last_level_cache_bytes(device: Device) -> float:
    """Size of the last cache level in front of device memory (L2 on a GPU, L3 or L2 on a CPU).

    Falls back to 64 MiB (more than any current GPU's L2 or most CPUs' L3) when unknown,
    which errs towards more weight copies in the timing rotation, never fewer.
    """
    default = 64.0 * 2**20
    if device.is_cuda:
        props = import_torch().cuda.get_device_properties(device.torch_device)
        return float(getattr(props, "L2_cache_size", 0) or default)
    best = 0.0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        value = float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
        best = max(best, value)
    return best or default


def versions() -> tuple[str, str | None]:
    """(torch version, CUDA version of the torch build or None)."""
    torch = import_torch()
    return str(torch.__version__), torch.version.cuda
