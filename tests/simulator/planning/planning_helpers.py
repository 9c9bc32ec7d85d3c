"""Small scenarios and files shared by the sweep and plan tests."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from scipy.optimize import brentq

SERVESIM = shutil.which("servesim") or str(Path(sys.executable).parent / "servesim")
RAY_TEST_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def tiny_base(num_requests: int = 25, step_time_s: float = 0.01) -> dict[str, Any]:
    """A scenario that simulates in milliseconds: constant step time, a fixed small KV cache."""
    return {
        "cost_model": {"kind": "constant", "step_time_s": step_time_s, "per_token_s": 1e-5},
        "kv_cache": {"num_blocks": 64, "block_size": 16},
        "workload": {
            "num_requests": num_requests,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "uniform", "min_tokens": 5, "max_tokens": 60},
                "output": {"kind": "uniform", "min_tokens": 2, "max_tokens": 20},
            },
        },
        "slo": {"ttft_ms": 50, "tpot_ms": 15},
    }


def md1_base(output_tokens: int = 1, step_time_s: float = 0.1, seed: int = 0) -> dict[str, Any]:
    """One request at a time, fixed lengths, constant steps: an M/D/1 queue with D = output_tokens x step."""
    return {
        "seed": seed,
        "policy": {"kind": "vllm_v0", "max_num_seqs": 1},
        "cost_model": {"kind": "constant", "step_time_s": step_time_s},
        "kv_cache": {"num_blocks": 100, "block_size": 16},
        "workload": {
            "num_requests": 100,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0, "normalize": False},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "fixed", "tokens": 10},
                "output": {"kind": "fixed", "tokens": output_tokens},
            },
        },
    }


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def servesim(*args: Any, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([SERVESIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def md1_wait_cdf(t_s: float, rate_per_s: float, service_s: float) -> float:
    """P(W <= t) for the M/D/1 queue, by Erlang's formula.

    P(W <= t) = (1 - rho) sum_{k = 0}^{floor(t/D)} (lam (kD - t))^k / k! exp(-lam (kD - t)).
    """
    rho = rate_per_s * service_s
    total = 0.0
    for k in range(math.floor(t_s / service_s) + 1):
        x = rate_per_s * (k * service_s - t_s)
        total += x**k / math.factorial(k) * math.exp(-x)
    return (1 - rho) * total


def md1_max_rate(wait_bound_s: float, quantile: float, service_s: float) -> float:
    """The arrival rate at which the ``quantile`` of the M/D/1 waiting time equals ``wait_bound_s``."""
    return brentq(lambda lam: md1_wait_cdf(wait_bound_s, lam, service_s) - quantile, 1e-6, (1 - 1e-9) / service_s)


def shout(text: str) -> str:
    """A pool task that prints (without flushing) and returns its argument."""
    print(f"worker says {text}", end="\n", flush=False)
    return text
