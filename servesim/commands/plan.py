"""`servesim plan`: how many GPUs of which configuration serve a load within SLOs, at what cost."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from rich.table import Table

from servesim import display
from servesim.commands.common import add_out_args, output_folder
from servesim.commands.report import add_report_args, check_report_args
from servesim.commands.sweep import add_executor_args
from simulator.config.errors import format_validation_error
from simulator.planning.points.executors import check_executor_options, make_executor
from simulator.planning.search.settings import PlanRequest
from workloads.validators import first_repeat

# PlanRequest field -> the flag that sets it, so validation errors name what the user typed
FLAGS = {
    "slo_ttft_p99_ms": "--slo-ttft-ms/--slo-ttft-p99-ms",
    "slo_tpot_p99_ms": "--slo-tpot-ms/--slo-tpot-p99-ms",
    "slo_e2el_p99_ms": "--slo-e2el-ms/--slo-e2el-p99-ms",
    "attainment": "--attainment",
    "target_rate_per_s": "--target-rate",
    "replicates": "--replicates",
    "confidence": "--confidence",
    "ci_method": "--ci-method",
    "pareto_latency": "--pareto-latency",
    "search.requests_per_point": "--requests-per-point",
    "search.warmup_fraction": "--warmup-fraction",
    "search.cooldown_fraction": "--cooldown-fraction",
    "search.rel_tol": "--rel-tol",
    "search.start_rate_per_s": "--start-rate",
    "search.curve_points": "--curve-points",
    "search.max_growth_fraction": "--max-growth",
    "search.exhaustive": "--exhaustive",
    "search.pd_ratio": "--pd-ratio",
    "search.rank_all": "--rank-all",
}


def _rates(text: str) -> list[float]:
    """``--target-rate 40`` or ``40,80,160``: the loads, as floats (their range is checked against the workload)."""
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number or comma-separated numbers") from None


# flags with a default that the N-GPU question does not read (no capacity curves, frontier of cost, or intervals)
UNREAD_WITH_GPUS = (
    ("attainment", "--attainment"),
    ("confidence", "--confidence"),
    ("ci_method", "--ci-method"),
    ("pareto_latency", "--pareto-latency"),
    ("rel_tol", "--rel-tol"),
    ("curve_points", "--curve-points"),
)
# and those that intervals over replicates read, refused with one replicate (no interval is computed)
UNREAD_WITHOUT_REPLICATES = (("confidence", "--confidence"), ("ci_method", "--ci-method"))
_PARSER_DEFAULTS = {"attainment": 0.9, "confidence": 0.95, "ci_method": "t", "pareto_latency": "ttft", "rel_tol": 0.02,
                    "curve_points": 8}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="size and price candidate configurations for a load under SLOs",
        description="For each candidate configuration: the maximum request rate one replica sustains "
        "within the p99 SLOs (doubling then bisection, steady state, warm-up excluded), DistServe's "
        "per-GPU goodput, the replicas, GPUs and cost for the target rate, the latency there; ranked, "
        "with the Pareto frontier of cost and p99 latency, and intervals over --replicates seeds.",
    )
    p.add_argument("scenario", nargs="?", type=Path, help="scenario YAML file (default: the embedded default)")
    g = p.add_argument_group("question")
    for name, what in (
        ("ttft", "time to first token"),
        ("tpot", "time per output token"),
        ("e2el", "end-to-end latency"),
    ):
        g.add_argument(
            f"--slo-{name}-ms",
            f"--slo-{name}-p99-ms",
            dest=f"slo_{name}_ms",
            type=float,
            help=f"bound on the p99 {what}, ms (default: the scenario's slo.{name}_ms)",
        )
    g.add_argument(
        "--attainment",
        type=float,
        default=_PARSER_DEFAULTS["attainment"],
        help="SLO attainment for per-GPU goodput (0.9)",
    )
    g.add_argument(
        "--target-rate",
        type=_rates,
        action="extend",
        metavar="RATE[,RATE...]",
        help="load to provision for, in the workload's unit: req/s (synthetic, trace), sessions/s (sessions), "
        "users (closed_loop); default: the scenario's own. Several (comma-separated, or the flag repeated): a load "
        "curve, the cheapest deployment at each (the folder's plan is the last one's)",
    )
    g.add_argument("--candidates", type=Path, help="CANDIDATES file (default: the scenario's own configuration)")
    g.add_argument(
        "--tune",
        action="append",
        default=[],
        metavar="PATH=V1,V2,...",
        help="search a field within every candidate, e.g. policy.max_num_seqs=64,128,256 (repeat for several; "
        "refused with a CANDIDATES file that has its own tune:)",
    )
    g.add_argument("--price", action="append", default=[], metavar="HW=USD", help="USD per GPU-hour of HW")
    n = p.add_argument_group("the best deployment on N GPUs (--gpus)")
    n.add_argument(
        "--gpus",
        type=int,
        metavar="N",
        help="instead of the cheapest deployment for a load: the layout of N GPUs (TP, replicas, or prefill and "
        "decode pools; vLLM's batch limit and token budget) with the most output tokens/s per GPU under the SLOs, "
        "the Pareto front of tokens/s/GPU against tokens/s/user, the best checked by simulation",
    )
    n.add_argument("--model", help="the scenario's model replaced (a preset or Hugging Face id)")
    n.add_argument("--hardware", help="the scenario's GPU replaced (a preset, e.g. h200)")
    n.add_argument("--isl", type=int, help="every prompt this many tokens (the workload's lengths replaced)")
    n.add_argument("--osl", type=int, help="every output this many tokens (the workload's lengths replaced)")
    g.add_argument("--prices", type=Path, help="YAML file of hardware: USD per GPU-hour")
    s = p.add_argument_group("statistics and search")
    s.add_argument("--replicates", type=int, default=1, help="independent seeds; intervals need 2 or more")
    s.add_argument(
        "--confidence", type=float, default=_PARSER_DEFAULTS["confidence"], help="confidence level of the intervals"
    )
    s.add_argument(
        "--ci-method", choices=("t", "bootstrap"), default=_PARSER_DEFAULTS["ci_method"], help="t-interval or bootstrap"
    )
    s.add_argument(
        "--pareto-latency",
        choices=("ttft", "tpot", "e2el"),
        default=_PARSER_DEFAULTS["pareto_latency"],
        help="p99 for the frontier",
    )
    s.add_argument("--requests-per-point", type=int, default=2000, help="requests simulated per rate")
    s.add_argument("--warmup-fraction", type=float, default=0.2, help="first arrivals left out of statistics")
    s.add_argument("--cooldown-fraction", type=float, default=0.1, help="last arrivals left out of statistics")
    s.add_argument("--max-growth", type=float, default=0.05, help="queue growth (fraction of rate) still stable")
    s.add_argument(
        "--rel-tol", type=float, default=_PARSER_DEFAULTS["rel_tol"], help="relative width at which bisection stops"
    )
    s.add_argument("--start-rate", type=float, help="first load tried, in the target's unit (default: the target)")
    s.add_argument(
        "--curve-points",
        type=int,
        default=_PARSER_DEFAULTS["curve_points"],
        help="extra rates for the chosen candidate's capacity curves (every candidate's with --exhaustive)",
    )
    s.add_argument(
        "--pd-ratio",
        action="store_true",
        help="size a disaggregated candidate pool by pool: the prefill:decode ratio the target needs "
        "(default: copies of its own P:D cluster)",
    )
    s.add_argument(
        "--exhaustive",
        action="store_true",
        help="the plain search: every candidate and rate from the start by doubling and bisection (slower; "
        "default: guided by an analytic bound and the margins, pruning candidates that cannot be cheapest)",
    )
    s.add_argument(
        "--rank-all",
        action="store_true",
        help="guided search of every candidate, none pruned: the whole ranking and Pareto frontier (slower; "
        "default: a candidate that cannot be the cheapest is pruned, with the least it would cost)",
    )
    add_executor_args(p)
    add_out_args(p, "output folder (default: runs/plan-YYYYmmdd-HHMMSS)")
    p.add_argument("--json", action="store_true", help="print plan.json instead of tables")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_report_args(p)
    p.set_defaults(func=main)


def plan_request(args: argparse.Namespace, slo: dict[str, float] | None = None) -> PlanRequest:
    """The validated question; ValueError naming the flag.

    ``slo`` holds the scenario's bounds (``scenario_slo``); a flag given replaces its bound.
    """
    repeated, rate = first_repeat(args.target_rate or [])
    if repeated:
        given = ",".join(f"{r:g}" for r in args.target_rate)
        raise ValueError(f"--target-rate {given}: {rate:g} is given twice (each load is planned once)")
    flags = {
        "slo_ttft_p99_ms": args.slo_ttft_ms,
        "slo_tpot_p99_ms": args.slo_tpot_ms,
        "slo_e2el_p99_ms": args.slo_e2el_ms,
    }
    data: dict[str, Any] = (
        (slo or {})
        | {k: v for k, v in flags.items() if v is not None}
        | {
            "attainment": args.attainment,
            "target_rate_per_s": None if args.target_rate is None else args.target_rate[0],
            "replicates": args.replicates,
            "confidence": args.confidence,
            "ci_method": args.ci_method,
            "pareto_latency": args.pareto_latency,
            "search": {
                "requests_per_point": args.requests_per_point,
                "warmup_fraction": args.warmup_fraction,
                "cooldown_fraction": args.cooldown_fraction,
                "max_growth_fraction": args.max_growth,
                "rel_tol": args.rel_tol,
                "start_rate_per_s": args.start_rate,
                "curve_points": args.curve_points,
                "exhaustive": args.exhaustive,
                "pd_ratio": args.pd_ratio,
                "rank_all": args.rank_all,
            },
        }
    )
    try:
        return PlanRequest.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, names=FLAGS)) from None


def _yaml_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_tune(items: list[str]) -> dict[str, list[Any]]:
    """``["policy.max_num_seqs=64,128"]`` -> ``{"policy.max_num_seqs": [64, 128]}``; ValueError naming the flag."""
    from simulator.planning.points.overrides import check_path

    out: dict[str, list[Any]] = {}
    for item in items:
        path, sep, values = item.partition("=")
        parts = [v.strip() for v in values.split(",")]
        if not sep or not path or not all(parts):
            raise ValueError(f"--tune {item!r}: expected PATH=VALUE[,VALUE...], e.g. policy.max_num_seqs=64,128")
        try:
            check_path(path)
        except ValueError as exc:
            raise ValueError(f"--tune {item!r}: {exc}") from None
        if path in out:
            raise ValueError(f"--tune {item!r}: {path} is tuned twice; give its values in one --tune")
        out[path] = [_yaml_value(v) for v in parts]
        repeated, value = first_repeat(out[path])
        if repeated:
            raise ValueError(f"--tune {item!r}: {value!r} is given twice (each value is tried once)")
    return out


def _prices(args: argparse.Namespace) -> dict[str, float]:
    from simulator.planning.plans.prices import parse_price, read_prices

    prices = read_prices(args.prices) if args.prices is not None else {}
    given: set[str] = set()
    for text in args.price:
        name, usd = parse_price(text)
        if name in given:
            raise ValueError(f"--price {text!r}: {name} is priced twice; give one --price per hardware")
        given.add(name)
        prices[name] = usd
    return prices


def slo_text(slo: dict[str, Any]) -> str:
    """``TTFT 500 ms, TPOT 50 ms``: the p99 bounds a plan.json's ``slo`` sets."""
    bounds = [(name.upper(), slo.get(f"{name}_p99_ms")) for name in ("ttft", "tpot", "e2el")]
    return ", ".join(f"{name} {value:g} ms" for name, value in bounds if value is not None)


def plan_table(plan: dict[str, Any]) -> Table:
    from simulator.planning.plans.figures import OPERATING_POINT_COLUMNS, candidate_columns, candidate_figure_cells

    unit = (plan.get("load") or {}).get("unit", "req/s")
    t = Table(
        title=f"plan for {plan['target_rate_per_s']:g} {unit} (p99 SLOs: {slo_text(plan['slo'])})",
        title_justify="left",
    )
    headers = ["rank", "candidate", *(h for h, _, _ in candidate_columns(unit) + OPERATING_POINT_COLUMNS), "Pareto"]
    for h in headers:
        t.add_column(h, justify="left" if h == "candidate" else "right")
    order = {name: i for i, name in enumerate(plan["ranking"])}
    for c in sorted(plan["candidates"], key=lambda c: order.get(c["name"], len(order))):
        t.add_row(
            str(c["rank"]) if c["rank"] is not None else c["status"],
            c["name"] + (" (chosen)" if c["chosen"] else ""),
            *(text for _, text in candidate_figure_cells(c)),
            "yes" if c["pareto"] else "",
        )
    return t


def load_curve_table(plan: dict[str, Any]) -> Table:
    """The cheapest deployment at each load of a load curve."""
    unit = (plan.get("load") or {}).get("unit", "req/s")
    t = Table(title="load curve: the cheapest deployment at each load", title_justify="left")
    for h in (f"target ({unit})", "chosen", "replicas", "GPUs", "USD/h"):
        t.add_column(h, justify="left" if h == "chosen" else "right")
    for row in plan["load_curve"]:

        def cell(x: float | None, digits: int = 0) -> str:
            return "-" if x is None else f"{x:,.{digits}f}"

        t.add_row(
            f"{row['target_rate_per_s']:g}",
            row["chosen"] or "none",
            cell(row["replicas"]),
            cell(row["num_gpus"]),
            cell(row["cost_per_hour_usd"], 2),
        )
    return t


def chosen_interval_lines(plan: dict) -> list[str]:
    """The chosen candidate's operating-point mean TTFT and TPOT with their prediction intervals (plan.json's
    ``operating_point.prediction_intervals``), as ``servesim run`` prints a run's."""
    from simulator.metrics.intervals import METRICS, Interval

    chosen = next((c for c in plan.get("candidates", []) if c.get("chosen")), None)
    point = (chosen or {}).get("operating_point") or {}
    given = point.get("prediction_intervals") or {}
    intervals = [
        Interval(metric, point[metric]["value"], *given[metric], given["level"], given["basis"])
        for metric in METRICS
        if metric in given and (point.get(metric) or {}).get("value")
    ]
    return [f"operating point: {line}" for line in display.interval_lines(intervals)]


# flags of the cheapest-deployment question that the N-GPU question refuses (it searches its own layouts)
NOT_WITH_GPUS = (
    ("candidates", "--candidates"),
    ("tune", "--tune"),
    ("target_rate", "--target-rate"),
    ("price", "--price"),
    ("prices", "--prices"),
    ("pd_ratio", "--pd-ratio"),
    ("exhaustive", "--exhaustive"),
    ("rank_all", "--rank-all"),
    ("start_rate", "--start-rate"),
)


def scenario_overrides(args: argparse.Namespace, base: dict[str, Any], label: str) -> dict[str, Any]:
    """``base`` with ``--model``, ``--hardware``, ``--isl`` and ``--osl`` applied; ValueError naming the flag."""
    from simulator.config.scenario import validate_scenario
    from simulator.planning.points.overrides import apply_overrides

    over: dict[str, Any] = {k: v for k, v in (("model", args.model), ("hardware", args.hardware)) if v is not None}
    for flag, value in (("--isl", args.isl), ("--osl", args.osl)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} {value}: expected a positive number of tokens")
    if (args.isl is None) != (args.osl is None):
        raise ValueError("--isl and --osl: give both (every prompt and every output of that length)")
    if args.isl is not None:
        fixed = {"kind": "independent", "prompt": {"kind": "fixed", "tokens": args.isl}}
        over["workload.lengths"] = fixed | {"output": {"kind": "fixed", "tokens": args.osl}}
    if not over:
        return base
    data = apply_overrides(base, over)
    flags = ", ".join(
        f for f, v in (("--model", args.model), ("--hardware", args.hardware), ("--isl/--osl", args.isl)) if v
    )
    try:
        validate_scenario(data, label)
    except ValueError as exc:
        raise ValueError(f"{flags}: {exc}") from None
    return data


def main(args: argparse.Namespace) -> int:
    from simulator.config.scenario import read_scenario_dict
    from simulator.planning.search.slo import scenario_slo

    check_report_args(args)
    check_executor_options(args.executor, args.workers, args.address)
    if args.scenario is not None:
        base, base_dir, label = read_scenario_dict(args.scenario), args.scenario.parent, str(args.scenario)
    else:
        base, base_dir, label = {}, None, "default scenario"
    base = scenario_overrides(args, base, label)
    request = plan_request(args, scenario_slo(base, label))
    if args.gpus is not None:
        return gpus_main(args, base, base_dir, label, request)
    if args.replicates < 2:
        for name, flag in UNREAD_WITHOUT_REPLICATES:
            if getattr(args, name) != _PARSER_DEFAULTS[name]:
                raise ValueError(f"{flag}: intervals need --replicates 2 or more (one seed gives none)")
    prices = _prices(args)
    tune = parse_tune(args.tune)
    # the question is checked: now the planning machinery (pandas, the simulator) loads
    from simulator.planning.plans.candidates import load_candidates, scenario_only
    from simulator.planning.plans.plan import execute_load_curve, execute_plan, prepare_plan
    from simulator.planning.plans.prepare import check_prices_apply
    from simulator.planning.plans.prices import parse_price
    from simulator.planning.search.load import check_load

    cset = load_candidates(args.candidates, tune) if args.candidates is not None else scenario_only(tune)
    inputs = prepare_plan(base, base_dir, label, cset, request, prices)  # every input checked before Ray starts
    check_prices_apply((parse_price(text)[0] for text in args.price), inputs.candidates)
    for target in args.target_rate or []:
        check_load(inputs.load, target, "--target-rate")
    with output_folder(args.out, "plan", args.overwrite) as out:  # refused before Ray starts; undone if it fails
        executor = make_executor(args.executor, args.workers, args.address)
        tally = [""]  # the candidates decided so far, shown in each stage's bar (one live bar at a time)

        def verdicts(done: int, total: int, text: str) -> None:
            tally[0] = f" [{done}/{total} candidates decided: {text}]"

        def stage(description: str):
            return display.progress_bar(description + tally[0], enabled=not args.quiet)

        try:
            if args.target_rate is not None and len(args.target_rate) > 1:
                result = execute_load_curve(inputs, request, executor, args.target_rate, stage, verdicts)
            else:
                result = execute_plan(inputs, request, executor, stage, verdicts=verdicts)
        finally:
            executor.close()
        result.write(out)
        if not args.no_report:
            import reports  # plotly is imported only when a report is written

            reports.write_plan_report(out, out / "report.html", static=args.static, plotlyjs=args.plotlyjs)
    if args.json:
        print(json.dumps(result.plan))
        return 0
    display.stdout.print(plan_table(result.plan))
    if "load_curve" in result.plan:
        display.stdout.print(load_curve_table(result.plan))
    chosen = result.plan["chosen"]
    display.stdout.print(f"chosen: {chosen}" if chosen else "chosen: none (no candidate meets the SLOs)")
    for line in chosen_interval_lines(result.plan):
        display.stdout.print(line)
    for note in result.plan["notes"]:
        display.stdout.print(f"note: {note}")
    display.stdout.print(f"plan folder: {out}")
    if not args.no_report:
        display.stdout.print(f"report: {out / 'report.html'}")
    return 0


def gpus_main(
    args: argparse.Namespace, base: dict[str, Any], base_dir: Path | None, label: str, request: PlanRequest
) -> int:
    """``servesim plan --gpus N``: the best deployment on N GPUs."""
    import time

    for name, flag in NOT_WITH_GPUS:
        if getattr(args, name):
            raise ValueError(f"{flag}: not with --gpus (the N-GPU question searches its own layouts on N GPUs)")
    if args.replicates != 1:
        raise ValueError("--replicates: not with --gpus (each layout is checked by one simulation)")
    for name, flag in UNREAD_WITH_GPUS:
        if getattr(args, name) != _PARSER_DEFAULTS[name]:
            raise ValueError(f"{flag}: not with --gpus (each layout is judged by its checked point meeting the SLOs)")
    from simulator.planning.layouts.best import GpusQuestion, best_on_gpus

    t0 = time.perf_counter()
    question = GpusQuestion(args.gpus, request)
    with output_folder(args.out, "plan", args.overwrite) as out:
        executor = make_executor(args.executor, args.workers, args.address)
        try:
            result = best_on_gpus(base, base_dir, label, question, executor)
        finally:
            executor.close()
        result.write(out)
        if not args.no_report:
            import reports

            reports.write_plan_report(out, out / "report.html", static=args.static, plotlyjs=args.plotlyjs)
    wall_s = time.perf_counter() - t0
    if args.json:
        print(json.dumps(result.plan))
        return 0
    display.stdout.print(gpus_table(result.plan))
    chosen = result.plan["chosen"]
    if chosen is None:
        display.stdout.print("chosen: none (no layout confirmed by simulation to meet the SLOs)")
    else:
        display.stdout.print(
            f"chosen: {chosen['layout']}, max_num_seqs {chosen['max_num_seqs']}: {chosen['tokens_per_s_per_gpu']:,.1f} "
            f"tokens/s/GPU, {chosen['tokens_per_s_per_user']:,.1f} tokens/s/user at {chosen['rate_per_s']:.3g} req/s "
            f"(simulated p99 TTFT {chosen['sim_p99_ttft_ms']:,.0f} ms, TPOT {chosen['sim_p99_tpot_ms']:,.1f} ms)"
        )
    for note in result.plan["notes"]:
        display.stdout.print(f"note: {note}")
    display.stdout.print(f"answered in {wall_s:.1f} s; plan folder: {out}")
    if not args.no_report:
        display.stdout.print(f"report: {out / 'report.html'}")
    return 0


def gpus_table(plan: dict[str, Any]) -> Table:
    """The Pareto front of the N-GPU question, most tokens/s/GPU first."""
    t = Table(
        title=f"Pareto front on {plan['num_gpus']} GPUs (p99 SLOs: {slo_text(plan['slo'])})", title_justify="left"
    )
    for h in ("layout", "max_num_seqs", "conc.", "TTFT ms", "TPOT ms", "req/s", "tok/s/GPU", "tok/s/user", "simulated"):
        t.add_column(h, justify="left" if h == "layout" else "right")
    for r in plan["pareto_front"]:
        sim = "" if not r["checked"] else ("met" if r["sim_meets_slo"] else "missed")
        t.add_row(
            r["layout"] + (" (chosen)" if r["chosen"] else ""),
            str(r["max_num_seqs"]),
            str(r["concurrency"]),
            f"{r['ttft_ms']:,.0f}",
            f"{r['tpot_ms']:,.1f}",
            f"{r['rate_per_s']:.3g}",
            f"{r['tokens_per_s_per_gpu']:,.1f}",
            f"{r['tokens_per_s_per_user']:,.1f}",
            sim,
        )
    return t
