"""Co-located vllm replicas against a prefill/decode split on the same GPU count, across load.

Prints p99 TTFT, p99 TPOT and goodput under SLOs for each rate, and the crossover: the
rates where the split's goodput overtakes (or falls behind) co-location. Run by hand:
``python benchmarks/disaggregation_crossover.py [--gpus 2] [--rates 1 2 ... ] [--requests 600]``.
"""

from __future__ import annotations

import argparse

from simulator.build import build
from simulator.config.scenario import validate_scenario

# long prompts and long outputs: the mix where prefill stalls hurt decoding
LENGTHS = {
    "kind": "independent",
    "prompt": {"kind": "lognormal", "median_tokens": 3000, "sigma": 0.4, "max_tokens": 12000},
    "output": {"kind": "lognormal", "median_tokens": 400, "sigma": 0.4, "max_tokens": 2000},
}


def run(deployment: dict, rate: float, n: int, slo: dict) -> dict:
    cfg = validate_scenario(
        deployment
        | {
            "router": "least_outstanding",
            "slo": slo,
            "workload": {"num_requests": n, "arrival": {"kind": "poisson", "rate_per_s": rate}, "lengths": LENGTHS},
        }
    )
    return build(cfg).run().summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--split", help="P:D prefill and decode replicas (default: half and half)")
    parser.add_argument("--rates", type=float, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--slo-ttft-ms", type=float, default=600)
    parser.add_argument("--slo-tpot-ms", type=float, default=20)
    args = parser.parse_args()
    slo = {"ttft_ms": args.slo_ttft_ms, "tpot_ms": args.slo_tpot_ms}
    num_prefill, num_decode = (
        (int(x) for x in args.split.split(":")) if args.split else (args.gpus // 2, args.gpus - args.gpus // 2)
    )
    if num_prefill + num_decode != args.gpus:
        parser.error(f"--split {args.split} does not add up to --gpus {args.gpus}")
    layouts = {
        "colocated": {"replicas": args.gpus},
        f"{num_prefill}P:{num_decode}D": {
            "groups": [{"role": "prefill", "count": num_prefill}, {"role": "decode", "count": num_decode}]
        },
    }
    print(f"{'rate':>5} {'layout':>10} {'p99 TTFT ms':>12} {'p99 TPOT ms':>12} {'goodput':>8} {'attain':>7}")
    better = []
    for rate in args.rates:
        goodput = {}
        for name, layout in layouts.items():
            s = run(layout, rate, args.requests, slo)
            goodput[name] = s["request_goodput"]
            print(
                f"{rate:>5g} {name:>10} {s['p99_ttft_ms']:>12.0f} {s['p99_tpot_ms']:>12.1f} "
                f"{s['request_goodput']:>8.2f} {s['slo_attainment']:>7.2f}"
            )
        split, colo = goodput[list(layouts)[1]], goodput["colocated"]
        better.append(split > colo)
    crossings = [args.rates[i] for i in range(1, len(better)) if better[i] != better[i - 1]]
    print("split has the higher goodput at rates:", [r for r, b in zip(args.rates, better, strict=True) if b])
    print("crossover between rates:", crossings or "none in range")


if __name__ == "__main__":
    main()
