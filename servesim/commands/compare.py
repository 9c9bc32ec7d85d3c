"""`servesim compare`: the same requests through several batch policies, side by side."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from servesim import display
from servesim.commands.common import (
    add_out_args,
    add_scenario_args,
    check_workload_flags,
    output_folder,
    scenario_from_args,
)
from servesim.commands.report import add_report_args, check_report_args

DEFAULT_POLICIES = "static,dynamic,continuous,vllm,sarathi"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="run the same requests through several policies and compare",
        description="Run the identical request sequence (same arrivals, lengths and seed) through each "
        "policy or parameter variant; print one table, write each variant's run folder and a "
        "comparison.json.",
    )
    add_scenario_args(p, include_policy=False)
    p.add_argument(
        "--policies", default=DEFAULT_POLICIES, help=f"comma-separated policy names (default: {DEFAULT_POLICIES})"
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="POLICY.PARAM=V1[,V2...]",
        help="parameter values of one policy; several values make several variants",
    )
    p.add_argument("--rates", help="comma-separated arrival rates, requests/s (latency-versus-load curves)")
    p.add_argument("--workers", type=int, help="parallel processes (default: one per CPU)")
    add_out_args(p, "output folder (default: runs/compare-YYYYmmdd-HHMMSS)")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="table format")
    p.add_argument("--json", action="store_true", help="print comparison.json instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_report_args(p, "the comparison report.html")
    p.set_defaults(func=main)


def _rates(text: str | None) -> list[float] | None:
    from workloads.validators import MAX_RATE_PER_S, MIN_RATE_PER_S, first_repeat

    if text is None:
        return None
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--rates {text!r}: expected comma-separated numbers") from None
    if not rates or any(r <= 0 for r in rates):
        raise ValueError(f"--rates {text!r}: rates must be positive")
    repeated, rate = first_repeat(rates)
    if repeated:
        raise ValueError(f"--rates {text!r}: {rate:g} is given twice (each rate runs once)")
    for r in rates:
        if not MIN_RATE_PER_S <= r <= MAX_RATE_PER_S:  # also inf and nan
            raise ValueError(
                f"--rates {text!r}: {r:g} requests/s is outside {MIN_RATE_PER_S:.3g} (one a year) to "
                f"{MAX_RATE_PER_S:g} (one a nanosecond), the rates the simulator's clock resolves"
            )
    return rates


COLUMNS = (
    ("request_throughput", "req/s", 2),
    ("output_throughput", "out tok/s", 0),
    ("mean_ttft_ms", "TTFT mean ms", 1),
    ("p99_ttft_ms", "TTFT p99 ms", 1),
    ("mean_tpot_ms", "TPOT mean ms", 2),
    ("p99_tpot_ms", "TPOT p99 ms", 2),
    ("p99_e2el_ms", "E2EL p99 ms", 0),
    ("request_goodput", "goodput req/s", 2),
    ("preemptions", "preempt", 0),
    ("rejected", "rejected", 0),
)


def main(args: argparse.Namespace) -> int:
    check_report_args(args)
    if args.rate is not None and args.rates is not None:
        raise ValueError("--rate: not with --rates, which gives the rate of each comparison (put it in --rates)")
    cfg, base_dir = scenario_from_args(args)
    from workloads.validators import first_repeat

    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    if not names:
        raise ValueError(f"--policies {args.policies!r}: no policy names; give one or more, comma-separated")
    repeated, name = first_repeat(names)
    if repeated:
        raise ValueError(f"--policies {args.policies!r}: {name} is given twice (each policy runs once)")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1 (got {args.workers})")
    # the scenario and flags are checked: now the policies and the simulator load
    import policies
    from simulator.metrics.results import json_safe
    from simulator.planning.sweeps.compare import expand_variants, run_comparison

    for name in names:
        policies.BATCH_POLICIES.entry(name)  # unknown names list the known ones
    base = cfg.model_dump(mode="json")
    variants = expand_variants(names, args.sets, base["policy"])
    rates = _rates(args.rates)
    check_workload_flags(base["workload"], rate=rates, rate_flag="--rates")
    with output_folder(args.out, "compare", args.overwrite) as out:  # refused before the runs; undone if they fail
        with display.progress_bar("comparing", enabled=not args.quiet) as progress:
            rows = run_comparison(base, variants, out, rates, base_dir, args.workers, args.format, progress)
        doc = {
            "rates_per_s": rates,
            "variants": [v.label for v in variants],
            "rows": [r | {"summary": json_safe(r["summary"])} for r in rows],
        }
        (out / "comparison.json").write_text(json.dumps(doc, indent=2) + "\n")
        if not args.no_report:
            import reports  # plotly is imported only when a report is written

            with display.step_progress("writing report", enabled=not args.quiet) as progress:
                reports.write_comparison_report(
                    [Path(r["run_dir"]) for r in rows],
                    [r["variant"] for r in rows],
                    out / "report.html",
                    static=args.static,
                    plotlyjs=args.plotlyjs,
                    progress=progress,
                )
    if args.json:
        print(json.dumps(doc))
        return 0
    table = Table(title=f"comparison ({len(rows)} runs, identical requests per rate)", title_justify="left")
    table.add_column("variant", no_wrap=True)
    if rates:
        table.add_column("rate", justify="right")
    has_goodput = any("request_goodput" in r["summary"] for r in rows)
    for key, label, _ in COLUMNS:
        if key != "request_goodput" or has_goodput:
            table.add_column(label, justify="right")
    for r in rows:
        s = r["summary"]
        cells = [r["variant"]] + ([f"{r['rate_per_s']:g}"] if rates else [])
        for key, _, digits in COLUMNS:
            if key == "request_goodput" and not has_goodput:
                continue
            v = s.get(key)
            cells.append("-" if v is None else f"{v:,.{digits}f}")
        table.add_row(*cells)
    display.stdout.print(table)
    display.stdout.print(f"runs and comparison.json in {out}")
    if not args.no_report:
        display.stdout.print(f"report: {out / 'report.html'}")
    return 0
