"""`servesim workload`: look at workloads before simulating them.

- ``describe SOURCE``: a workload's statistics. SOURCE is a named trace (``azure-conv``),
  a trace file path, or a scenario YAML (its workload is generated with the scenario's seed).
- ``list``: the named traces: where each is maintained (repository, commit, path), its
  licence, rows and mean / median lengths, whether it is on this machine, and the old names
  that still work. Downloads nothing.
- ``fetch NAME... | --all``: download named traces into the cache (sha256-checked), or
  say where each one already is.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from servesim import display
from workloads.traces import FORMATS, TRACE_ALIASES, TRACE_CATALOG, read_trace

SCENARIO_SUFFIXES = (".yaml", ".yml")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "workload",
        help="describe a workload (trace, file or scenario), list or fetch the named traces",
        description="Inspect workloads: statistics of a trace or a scenario's workload; the named traces, "
        "their sources and licences, and downloading them.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    d = verbs.add_parser(
        "describe",
        help="statistics of a workload",
        description="Duration, mean rate and burstiness, prompt/output length percentiles, sessions and "
        "turns, and the fraction of prompt blocks that repeat an earlier block (the hit rate of an "
        "unbounded prefix cache). SOURCE: a named trace, a trace file, or a scenario YAML.",
    )
    d.add_argument("source", help="named trace (see `servesim workload list`), trace file, or scenario .yaml")
    d.add_argument("--format", choices=("auto", *FORMATS), default="auto", help="trace file format (default: auto)")
    d.add_argument("--seed", type=int, help="seed for a scenario's workload (default: the scenario's)")
    d.add_argument(
        "--skip-bad-rows", action="store_true", help="drop bad trace rows (and count them) instead of failing"
    )
    d.add_argument("--hash-block-tokens", type=int, help="tokens per prefix block of a generic file's hash_ids")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=main_describe)
    ls = verbs.add_parser(
        "list",
        help="the named traces, their sources and licences",
        description="List the named traces: what they are, where each is maintained (repository@commit:path), "
        "its licence, rows and mean / median prompt and output tokens, and where it is on this machine "
        "(or that it is downloaded on first use). Downloads nothing.",
    )
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    ls.set_defaults(func=main_list)
    f = verbs.add_parser(
        "fetch",
        help="download named traces into the cache",
        description="Download named traces from their canonical URLs into the user's cache, checking each "
        "file's sha256; a trace already in SERVESIM_DATA_DIR or the cache is checked, not downloaded. "
        "SERVESIM_OFFLINE=1 forbids downloads.",
    )
    f.add_argument("names", nargs="*", metavar="NAME", help="named traces (see `servesim workload list`)")
    f.add_argument("--all", action="store_true", help="every named trace")
    f.set_defaults(func=main_fetch)


def workload_stats(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """(title, statistics) of the source named on the command line."""
    from simulator.config.scenario import read_scenario_dict, validate_scenario
    from workloads import generate
    from workloads.describe import describe, describe_trace

    if args.hash_block_tokens is not None and args.hash_block_tokens < 1:
        raise ValueError(f"--hash-block-tokens must be at least 1 (got {args.hash_block_tokens})")
    path = Path(args.source)
    if path.suffix.lower() in SCENARIO_SUFFIXES:
        for flag, value in (
            ("--format", None if args.format == "auto" else args.format),
            ("--hash-block-tokens", args.hash_block_tokens),
            ("--skip-bad-rows", args.skip_bad_rows or None),
        ):
            if value is not None:
                raise ValueError(
                    f"{flag}: {path} is a scenario, whose workload says how its trace is read; set it there "
                    "(a replay workload's format, hash_block_tokens and skip_bad_rows)"
                )
        if args.seed is not None and args.seed < 0:
            raise ValueError(f"--seed must be at least 0 (got {args.seed})")
        cfg = validate_scenario(read_scenario_dict(path), source=str(path))
        seed = cfg.seed if args.seed is None else args.seed
        stream = generate(cfg.workload, seed, path.parent)
        return f"workload of {path} (seed {seed}, kind {cfg.workload.kind})", describe(stream)
    trace = read_trace(args.source, args.format, None, args.skip_bad_rows, args.hash_block_tokens)
    return f"{trace.name} ({trace.format} format)", describe_trace(trace)


def _num(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _stat_row(stats: dict[str, float] | None, digits: int = 1) -> list[str]:
    keys = ("mean", "p50", "p90", "p99", "max")
    return [_num((stats or {}).get(k), digits) for k in keys]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4g}"


def render(title: str, s: dict[str, Any]) -> list[Table]:
    """The statistics as two tables: one line per figure, then the length percentiles."""
    facts = Table(title=title, show_header=False, title_justify="left")
    facts.add_column("figure")
    facts.add_column("value", justify="right")
    facts.add_row("requests", _num(s["num_requests"]))
    if s["num_dependent_requests"]:
        facts.add_row("  sent after an earlier one ends", _num(s["num_dependent_requests"]))
    if s["meta"].get("concurrency"):
        facts.add_row("closed-loop users", _num(s["meta"]["concurrency"]))
    arrivals = s["arrivals"]
    # Dependent requests are sent when their parent ends, a time only the simulation knows.
    which = "independent arrival" if s["num_dependent_requests"] else "arrival"
    if arrivals is None:
        facts.add_row("arrival times", "none (lengths only)")
    elif arrivals.get("num_arrivals", 0) > 1 and arrivals.get("span_s") == 0:
        facts.add_row(f"{which}s", f"all at once, t = {_num(arrivals['first_s'], 3)} s (offline)")
    else:
        facts.add_row(f"duration (s, first to last {which})", _num(arrivals.get("span_s"), 1))
        facts.add_row(f"mean rate ({which}s/s)", _rate(arrivals.get("mean_rate_per_s")))
        facts.add_row(f"burstiness (CV of {which} gaps)", _rate(arrivals.get("gap_cv")))
    sessions = s["sessions"]
    if sessions is not None:
        facts.add_row("sessions", _num(sessions["num_sessions"]))
        facts.add_row(
            "  turns per session (mean / p50 / max)",
            f"{sessions['mean_turns']:.2f} / {_num(sessions['p50_turns'])} / {sessions['max_turns']:,}",
        )
    prefix = s["prefix_blocks"]
    if prefix is not None:
        fraction = prefix["repeat_fraction"]
        facts.add_row(
            f"prefix blocks of {prefix['block_tokens']} tokens (distinct)",
            f"{prefix['num_blocks']:,} ({prefix['num_distinct_blocks']:,})",
        )
        facts.add_row(
            "  repeating an earlier block (unbounded cache hit rate)", "-" if fraction is None else f"{fraction:.1%}"
        )
    for key, label in (("priority", "priority"), ("slo_class", "SLO class"), ("tenant", "tenant")):
        if s[key]:
            facts.add_row(label, ", ".join(f"{k}: {v:,}" for k, v in s[key].items()))
    meta = s["meta"]
    for key, label in (
        ("num_skipped_rows", "[bold]bad rows skipped[/bold]"),
        ("num_capped_prompts", "prompts cut to max_prompt_tokens"),
        ("num_capped_outputs", "outputs cut to max_output_tokens"),
        ("num_overlapping_rounds", "rounds overlapping the previous one (sent at once)"),
        ("num_sessions_ended_by_max_context", "sessions ended by max_context_tokens"),
        ("num_sessions_dropped_by_max_context", "sessions dropped by max_context_tokens"),
    ):
        if meta.get(key):
            facts.add_row(label, _num(meta[key]))
    lengths = Table(show_header=True, title_justify="left")
    for col in ("", "mean", "p50", "p90", "p99", "max"):
        lengths.add_column(col, justify="left" if not col else "right")
    lengths.add_row("prompt tokens", *_stat_row(s["prompt_tokens"]))
    lengths.add_row("output tokens", *_stat_row(s["output_tokens"]))
    if s["think_s"]:
        lengths.add_row("think / tool time (s)", *_stat_row(s["think_s"], 3))
    return [facts, lengths]


def main_describe(args: argparse.Namespace) -> int:
    title, stats = workload_stats(args)
    if args.json:
        print(json.dumps(stats))
        return 0
    for table in render(title, stats):
        display.stdout.print(table)
    return 0


def _local_where(entry) -> str | None:
    """Where the checked local copy of a named trace is, or None (to be downloaded)."""
    from workloads.traces.fetch import local_path

    path = local_path(entry)
    return None if path is None else str(path)


def main_list(args: argparse.Namespace) -> int:
    from workloads.traces.fetch import cache_dir

    where = {name: _local_where(entry) for name, entry in TRACE_CATALOG.items()}
    if args.json:
        traces = {
            name: {
                "format": t.format,
                "description": t.description,
                "repository": t.repository,
                "commit": t.commit,
                "path": t.path,
                "url": t.url,
                "licence": t.licence,
                "citation": t.citation,
                "sha256": t.sha256,
                "size_bytes": t.size_bytes,
                "num_rows": t.rows,
                "mean_prompt_tokens": t.mean_prompt_tokens,
                "median_prompt_tokens": t.median_prompt_tokens,
                "mean_output_tokens": t.mean_output_tokens,
                "median_output_tokens": t.median_output_tokens,
                "local_path": where[name],
                "aliases": [old for old, (target, _) in TRACE_ALIASES.items() if target == name],
            }
            for name, t in TRACE_CATALOG.items()
        }
        print(json.dumps(traces))
        return 0
    table = Table(
        title="named traces (downloaded on first use, or `servesim workload fetch NAME`)", title_justify="left"
    )
    for col in ("name", "what", "source", "licence", "rows", "prompt mean / median", "output mean / median"):
        table.add_column(col, justify="right" if col[0] in "rpo" else "left", overflow="fold")
    for name, t in TRACE_CATALOG.items():
        table.add_row(
            name,
            f"{t.description} ({t.format} format)",
            t.source,
            t.licence,
            f"{t.rows:,}",
            f"{t.mean_prompt_tokens:,.0f} / {_num(t.median_prompt_tokens)}",
            f"{t.mean_output_tokens:,.0f} / {_num(t.median_output_tokens)}",
        )
    display.stdout.print(table)
    folders: dict[str, list[str]] = {}
    for name, path in where.items():
        folders.setdefault(str(Path(path).parent) if path else "", []).append(name)
    for folder, names in folders.items():
        if folder:
            display.stdout.print(f"on this machine, in {folder}: {', '.join(names)}")
    absent = folders.get("", [])
    if absent:
        display.stdout.print(f"downloaded on first use into {cache_dir()}: {', '.join(absent)}")
    for old, (target, what) in TRACE_ALIASES.items():
        display.stdout.print(f"old name {old!r}: {target!r}, {what}")
    return 0


def main_fetch(args: argparse.Namespace) -> int:
    from workloads.traces import canonical_name
    from workloads.traces.fetch import trace_path

    if args.all == bool(args.names):
        raise ValueError("give trace names or --all (see `servesim workload list`)")
    names = list(TRACE_CATALOG) if args.all else [canonical_name(n) for n in args.names]
    unknown = [n for n in names if n not in TRACE_CATALOG]
    if unknown:
        raise ValueError(f"unknown trace {unknown[0]!r}; named: {', '.join(TRACE_CATALOG)}")
    for name in names:
        entry = TRACE_CATALOG[name]
        licence = entry.licence.split(" ")[0]
        print(f"{name}: {trace_path(name, entry)} (sha256 checked; {licence}; cite {entry.citation})")
    return 0
