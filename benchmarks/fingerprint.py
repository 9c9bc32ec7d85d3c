"""A fingerprint of the simulator's results: hashes of the request and step tables over a fixed set of scenarios.

Run it before and after a change that must not change any decision (a speed-up): every hash must be
the same, bit for bit. Each scenario runs on the fast path and, with ``--plain``, on the plain path too.

    python benchmarks/fingerprint.py [--plain] [--json out.json] [--check out.json]

``--json`` writes the hashes; ``--check`` compares with hashes written before and exits 1 on a difference.
The set: the default scenario (vLLM V1), vllm_v0, sglang, trtllm, sarathi, a trace replay, sessions with prefix
caching, 4 replicas behind a least-KV router, disaggregated prefill/decode, tp 2 and pp 2, and a small KV
cache that preempts (recompute and swap).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

import pandas as pd

from simulator.build import build
from simulator.config.scenario import validate_scenario

TRACE = "/work/shared/data/traces/splitwise_conv.csv"
N = 2000

SCENARIOS: dict[str, dict] = {
    "default": {"workload": {"num_requests": N}},
    "vllm_v0": {"policy": {"kind": "vllm_v0"}, "workload": {"num_requests": N}},
    "sglang": {"policy": {"kind": "sglang"}, "workload": {"num_requests": N}},
    "trtllm": {"policy": {"kind": "trtllm"}, "workload": {"num_requests": N}},
    "sarathi": {"policy": {"kind": "sarathi"}, "workload": {"num_requests": N}},
    "trace": {"workload": {"kind": "trace", "source": TRACE, "num_requests": N, "time_scale": 4.0}},
    "sessions_prefix": {
        "kv_cache": {"prefix_caching": True},
        "workload": {
            "kind": "sessions",
            "num_sessions": 300,
            "arrival": {"kind": "poisson", "rate_per_s": 10.0},
            "turns": {"kind": "fixed", "count": 4},
            "user_tokens": {"kind": "fixed", "tokens": 400},
            "output_tokens": {"kind": "fixed", "tokens": 120},
        },
    },
    "replicas4_router": {"replicas": 4, "router": "least_kv", "workload": {"num_requests": N}},
    "disaggregated": {
        "groups": [{"role": "prefill", "count": 1}, {"role": "decode", "count": 2}],
        "workload": {"num_requests": N},
    },
    "tp2": {"parallelism": {"tp": 2}, "workload": {"num_requests": N}},
    "pp2": {"parallelism": {"pp": 2}, "workload": {"num_requests": N}},
    "preempt_recompute": {"kv_cache": {"num_blocks": 3000}, "workload": {"num_requests": N}},
    "preempt_swap_v0": {
        "kv_cache": {"num_blocks": 3000, "swap_space_bytes": 2**34},
        "policy": {"kind": "vllm_v0", "preemption_mode": "swap"},
        "workload": {"num_requests": N},
    },
    "sarathi_small_kv": {
        "kv_cache": {"num_blocks": 3000},
        "policy": {"kind": "sarathi"},
        "workload": {"num_requests": N},
    },
}


def table_hash(df: pd.DataFrame) -> str:
    """A hash of a table's columns, dtypes and every value (floats bit for bit)."""
    h = hashlib.sha256()
    h.update(repr([(c, str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()[:16]


def fingerprint(name: str, fast_forward: bool) -> dict[str, str]:
    result = build(validate_scenario(SCENARIOS[name]), fast_forward=fast_forward).run()
    return {"requests": table_hash(result.requests), "steps": table_hash(result.steps)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plain", action="store_true", help="the plain path as well as the fast path")
    parser.add_argument("--json", help="write the hashes here")
    parser.add_argument("--check", help="compare with hashes written before")
    parser.add_argument("--only", nargs="*", help="these scenarios only")
    args = parser.parse_args()
    modes = [True, False] if args.plain else [True]
    out: dict[str, dict[str, str]] = {}
    for name in args.only or SCENARIOS:
        for ff in modes:
            key = f"{name}/{'fast' if ff else 'plain'}"
            t = time.perf_counter()
            out[key] = fingerprint(name, ff)
            print(f"{key:32} {out[key]['requests']} {out[key]['steps']} {time.perf_counter() - t:6.1f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    if args.check:
        with open(args.check) as f:
            old = json.load(f)
        diff = [k for k in out if k in old and old[k] != out[k]]
        missing = [k for k in out if k not in old]
        for k in diff:
            print(f"DIFFERS: {k}: {old[k]} -> {out[k]}")
        if missing:
            print(f"not in {args.check}: {missing}")
        print("all hashes unchanged" if not diff else f"{len(diff)} of {len(out)} differ")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
