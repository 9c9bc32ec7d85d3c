"""Flags shared by the commands that run scenarios, and how they override a scenario."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servesim import display
from simulator.config.precision import KV_CACHE_DTYPE_BYTES
from simulator.config.precision import QUANTIZATIONS as QUANTIZATION_FORMATS

if TYPE_CHECKING:
    from simulator.config.schema import ScenarioConfig

# Values of --quantization and --kv-cache-dtype (checked here so that a bad one is one error line).
QUANTIZATIONS = tuple(QUANTIZATION_FORMATS)
KV_CACHE_DTYPES = ("auto", *KV_CACHE_DTYPE_BYTES)


def _check_choice(flag: str, value: str | None, choices: tuple[str, ...]) -> None:
    if value is not None and value not in choices:
        raise ValueError(f"{flag} {value!r}: expected one of {', '.join(choices)}")


def add_scenario_args(parser: argparse.ArgumentParser, include_policy: bool = True) -> None:
    parser.add_argument("scenario", nargs="?", type=Path, help="scenario YAML file (default: the embedded default)")
    g = parser.add_argument_group("scenario overrides")
    g.add_argument(
        "--model",
        help="model preset, Hugging Face id (read offline: the HF cache, else aiconfigurator-core's model_configs), "
        "Hugging Face model folder, config.json or spec YAML (e.g. llama-3.1-8b, Qwen/Qwen3-32B)",
    )
    g.add_argument("--hardware", help="hardware preset or spec YAML (e.g. h100-sxm)")
    g.add_argument("--tp", type=int, help="tensor-parallel degree")
    g.add_argument("--ep", type=int, help="expert-parallel degree (MoE; divides --tp and the routed experts)")
    g.add_argument(
        "--dp-attention",
        type=int,
        help="attention data-parallel ranks (divides --tp; SGLang's --dp-size with --enable-dp-attention)",
    )
    g.add_argument("--pp", type=int, help="pipeline-parallel stages")
    g.add_argument(
        "--quantization",
        metavar="{" + ",".join(QUANTIZATIONS) + "}",
        help="serve the linear layers quantized: fp8 (vLLM's --quantization fp8: 1-byte weights, FP8 GEMMs), "
        "fp8_block (128 x 128 block scales), nvfp4 (FP4 GEMMs on Blackwell), mxfp4 (4-bit weights, 16-bit GEMMs)",
    )
    g.add_argument(
        "--kv-cache-dtype",
        metavar="{" + ",".join(KV_CACHE_DTYPES) + "}",
        help="cached K/V dtype (vLLM's flag): auto keeps the model's, fp8 stores 1 byte per element",
    )
    g.add_argument("--replicas", type=int, help="identical replicas behind the router")
    g.add_argument("--router", help="router name (e.g. least_outstanding)")
    g.add_argument("--prefix-caching", action="store_true", default=None, help="reuse cached prompt prefixes")
    g.add_argument("--disaggregate", metavar="P:D", help="P prefill and D decode replicas instead of mixed ones")
    if include_policy:
        g.add_argument("--policy", help="batch policy name (e.g. vllm)")
    g.add_argument("--rate", type=float, help="mean arrival rate, requests/s")
    g.add_argument("--num-requests", type=int, help="number of requests")
    g.add_argument("--duration", type=float, help="arrivals stop after this many seconds (instead of --num-requests)")
    g.add_argument(
        "--trace",
        metavar="SOURCE",
        help="replay a trace instead of the scenario's workload: a shipped name (see `servesim workload list`) "
        "or a file",
    )
    g.add_argument("--seed", type=int, help="seed of every random stream")
    g.add_argument("--slo-ttft-ms", type=float, help="TTFT SLO for goodput, ms")
    g.add_argument("--slo-tpot-ms", type=float, help="TPOT SLO for goodput, ms")
    g.add_argument("--slo-e2el-ms", type=float, help="end-to-end latency SLO for goodput, ms")
    g.add_argument(
        "--profile",
        type=Path,
        help="calibration profile (servesim calibrate): the profiled cost model, KV capacity from the measured "
        "memory, and the profile's model and device unless --model/--hardware or the scenario name them",
    )


def _kind_of(value: Any) -> Any:
    """The kind of a tagged field's raw value (a bare name or ``{kind: ...}``), else None."""
    if isinstance(value, str):
        return value
    return value.get("kind") if isinstance(value, dict) else None


def _disaggregated_groups(text: str) -> list[dict[str, Any]]:
    p, sep, d = text.partition(":")
    try:
        num_prefill, num_decode = int(p), int(d)
    except ValueError:
        raise ValueError(f"--disaggregate {text!r}: expected P:D, e.g. 2:2") from None
    if not sep or num_prefill < 1 or num_decode < 1:
        raise ValueError(f"--disaggregate {text!r}: expected P:D with both at least 1")
    return [{"role": "prefill", "count": num_prefill}, {"role": "decode", "count": num_decode}]


def _use_trace(data: dict[str, Any], source: str) -> None:
    """Make the workload a replay of ``source``, keeping the trace options a trace workload already has."""
    from workloads.traces import TRACE_CATALOG

    workload = data.get("workload")
    if not isinstance(workload, dict) or workload.get("kind") != "trace":
        workload = {"kind": "trace"}
        data["workload"] = workload
    # A file named on the command line is relative to the working directory, not the scenario's folder.
    path = Path(source).expanduser()
    workload["source"] = source if source in TRACE_CATALOG or not path.exists() else str(path.resolve())


def scenario_from_args(args: argparse.Namespace) -> tuple[ScenarioConfig, Path | None]:
    """The scenario file (or the default) with the command-line overrides applied, validated."""
    from pydantic import ValidationError

    from simulator.config.errors import format_validation_error
    from simulator.config.scenario import read_scenario_dict
    from simulator.config.schema import ScenarioConfig
    from simulator.planning.points.overrides import apply_overrides, lookup

    _check_choice("--quantization", args.quantization, QUANTIZATIONS)
    _check_choice("--kv-cache-dtype", args.kv_cache_dtype, KV_CACHE_DTYPES)
    source = "command line"
    data: dict[str, Any] = {}
    base_dir = None
    if args.scenario is not None:
        data = read_scenario_dict(args.scenario)
        source = str(args.scenario)
        base_dir = args.scenario.parent
    if args.trace is not None:
        _use_trace(data, args.trace)
    check_workload_flags(data.get("workload"), rate=args.rate, num_requests=args.num_requests, duration=args.duration)
    check_group_flags(data.get("groups"), args, source)
    overrides: dict[str, Any] = {
        "model": args.model,
        "hardware": args.hardware,
        "parallelism.tp": args.tp,
        "parallelism.ep": args.ep,
        "parallelism.dp_attention": args.dp_attention,
        "parallelism.pp": args.pp,
        "quantization": args.quantization,
        "kv_cache.dtype": args.kv_cache_dtype,
        "replicas": args.replicas,
        "workload.arrival.rate_per_s": args.rate,
        "workload.num_requests": args.num_requests,
        "workload.duration_s": args.duration,
        "seed": args.seed,
        "slo.ttft_ms": args.slo_ttft_ms,
        "slo.tpot_ms": args.slo_tpot_ms,
        "slo.e2el_ms": args.slo_e2el_ms,
    }
    for field in ("policy", "router"):  # a new kind starts from its defaults; the same kind keeps its parameters
        kind = getattr(args, field, None)
        if kind is not None and _kind_of(data.get(field)) != kind:
            overrides[field] = {"kind": kind}
    if args.prefix_caching:
        overrides["kv_cache.prefix_caching"] = True
    if args.disaggregate is not None:
        overrides["groups"] = _disaggregated_groups(args.disaggregate)
        data.pop("replicas", None)
    workload = data.get("workload")
    if isinstance(workload, dict):  # the one of num_requests / duration_s not given on the command line goes
        if args.num_requests is not None:
            workload.pop("duration_s", None)
        if args.duration is not None:
            workload.pop("num_requests", None)
            workload.pop("num_sessions", None)  # a session workload counts sessions instead
    if args.rate is not None and _kind_of(lookup(data, "workload.arrival")) is None:
        overrides["workload.arrival.kind"] = "poisson"
    try:
        data = apply_overrides(data, {path: value for path, value in overrides.items() if value is not None})
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    if getattr(args, "profile", None) is not None:
        _apply_profile(data, args.profile, base_dir)
    given = {path for path, value in overrides.items() if value is not None}
    names = {loc: f"{flag}: {loc}" for loc, (flag, path) in _FLAG_LOCS.items() if path in given}
    try:
        return ScenarioConfig.model_validate(data), base_dir
    except ValidationError as exc:  # a field a flag set is named by the flag, then the field
        raise ValueError(format_validation_error(exc, source=source, names=names)) from None


# Error locations of the fields the scenario flags set: location -> (flag, override path).
_FLAG_LOCS: dict[str, tuple[str, str]] = {
    "parallelism.tp": ("--tp", "parallelism.tp"),
    "parallelism.ep": ("--ep", "parallelism.ep"),
    "parallelism.dp_attention": ("--dp-attention", "parallelism.dp_attention"),
    "parallelism.pp": ("--pp", "parallelism.pp"),
    "replicas": ("--replicas", "replicas"),
    "workload.num_requests": ("--num-requests", "workload.num_requests"),
    "workload.duration_s": ("--duration", "workload.duration_s"),
    "seed": ("--seed", "seed"),
    "slo.ttft_ms": ("--slo-ttft-ms", "slo.ttft_ms"),
    "slo.tpot_ms": ("--slo-tpot-ms", "slo.tpot_ms"),
    "slo.e2el_ms": ("--slo-e2el-ms", "slo.e2el_ms"),
    **{
        f"workload.arrival.{kind}.rate_per_s": ("--rate", "workload.arrival.rate_per_s")
        for kind in ("constant", "poisson", "gamma", "periodic")
    },
}


def check_group_flags(groups: Any, args: argparse.Namespace, source: str) -> None:
    """ValueError naming the flag when the scenario's groups set the field it would change: a flag sets the top-level
    value, which a group with its own does not read (its ``kv_cache``, ``parallelism`` or ``policy`` replaces the
    top-level one whole), and ``--disaggregate`` would replace groups the scenario already has."""
    from simulator.planning.points.overrides import group_setting

    if not isinstance(groups, list):
        return
    if getattr(args, "disaggregate", None) is not None:
        raise ValueError(f"--disaggregate: {source} already has groups; change their counts and roles there")
    flags = (
        ("--model", args.model, "model"),
        ("--hardware", args.hardware, "hardware"),
        ("--quantization", args.quantization, "quantization"),
        ("--tp", args.tp, "parallelism"),
        ("--ep", args.ep, "parallelism"),
        ("--dp-attention", args.dp_attention, "parallelism"),
        ("--pp", args.pp, "parallelism"),
        ("--kv-cache-dtype", args.kv_cache_dtype, "kv_cache"),
        ("--prefix-caching", args.prefix_caching or None, "kv_cache"),
        ("--policy", getattr(args, "policy", None), "policy"),
    )
    for flag, value, key in flags:
        i = None if value is None else group_setting(groups, key)
        if i is not None:
            raise ValueError(
                f"{flag}: {source}'s groups[{i}] sets its own {key}, which the flag does not reach; set it there "
                f"(groups[{i}].{key})"
            )


def check_workload_flags(
    workload: Any, rate: Any = None, num_requests: Any = None, duration: Any = None, rate_flag: str = "--rate"
) -> None:
    """ValueError naming the flag when --rate, --num-requests or --duration does not apply to the
    scenario's workload (its raw mapping): a closed loop has no arrival rate and no duration,
    sessions are counted in sessions, a piecewise schedule has a rate per segment."""
    if workload is not None and not isinstance(workload, dict):
        return  # not a mapping: validation says so
    workload = workload or {}
    kind = workload.get("kind", "synthetic")
    if kind == "closed_loop":
        users = workload.get("concurrency")
        if rate is not None:
            raise ValueError(
                f"{rate_flag}: the scenario's workload is a closed loop ({users} users), which has no arrival rate: "
                "each user sends its next request when its previous one ends; set workload.concurrency (or "
                "workload.think_s) instead"
            )
        if duration is not None:
            raise ValueError(
                "--duration: the scenario's workload is a closed loop, which ends after its requests "
                "(--num-requests), not at a time"
            )
    if kind == "sessions" and rate is not None and rate_flag == "--rate":
        raise ValueError(
            "--rate: the scenario's workload is sessions, whose arrival rate counts sessions per second (each "
            "session sends several requests), not requests; set workload.arrival.rate_per_s instead"
        )
    if kind == "sessions" and num_requests is not None:
        raise ValueError(
            "--num-requests: the scenario's workload is sessions, counted by workload.num_sessions (each session "
            "sends several requests); set that instead, or bound the sessions with --duration"
        )
    if rate is not None and _kind_of(workload.get("arrival")) == "piecewise":
        raise ValueError(
            f"{rate_flag}: the scenario's arrival process is piecewise, whose rate is set per segment "
            "(workload.arrival.segments); change the segments instead"
        )


def _apply_profile(data: dict[str, Any], path: Path, base_dir: Path | None = None) -> None:
    """Point the scenario at a calibration profile (read here to default the model and hardware, and to repeat
    what calibrate warned of it)."""
    from simulator.cost.profile import load_profile

    profile = load_profile(path)
    display.warn_suspect_profile(profile, path)
    cost = data.get("cost_model") if isinstance(data.get("cost_model"), dict) else None
    params = cost if cost is not None and cost.get("kind") == "profiled" else {}
    data["cost_model"] = params | {"kind": "profiled", "profile": str(path.resolve())}
    if len(profile.engines) == 1 and "engine" not in params:  # the engine it was calibrated against
        data["cost_model"]["engine"] = next(iter(profile.engines))
    data.setdefault("model", profile.model.model_dump())
    given = data.setdefault("hardware", profile.hardware.model_dump())
    if not isinstance(given, dict):  # a preset or spec file named: it must be the GPU the profile timed
        from simulator.config.presets import resolve_hardware

        name = resolve_hardware(given, base_dir).name
        if name != profile.hardware.name:
            raise ValueError(
                f"{path}: measured on {profile.hardware.name}, not on the scenario's hardware {name} (its timings "
                "and memory are that GPU's); calibrate this GPU, or leave the hardware out"
            )


def timestamped_out_dir(command: str) -> Path:
    """``runs/<command>-YYYYmmdd-HHMMSS`` (``-2``, ``-3``... when taken): a new folder for each invocation."""
    base = Path("runs") / dt.datetime.now().strftime(f"{command}-%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists() or path.is_symlink():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def check_writable_out(path: Path, is_file: bool = False) -> None:
    """Make the --out folder (or a file's folder) now, before long work; ValueError naming --out if it cannot be."""
    folder = path.parent if is_file else path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ValueError(f"--out {path}: cannot create {folder} (a file of that name exists)") from None
    except OSError as exc:
        raise ValueError(f"--out {path}: cannot create {folder} ({exc.strerror})") from None
    if is_file and path.is_dir():
        shown = "'' (or .)" if path == Path() else str(path)  # argparse made an empty --out the working folder
        raise ValueError(f"--out {shown}: is a folder, not a file")


# -- the --out folder of a command ---------------------------------------------------------

OVERWRITE_HELP = (
    "replace an earlier servesim output in --out (removes only the files servesim writes; refused if the "
    "folder holds others)"
)
# Files servesim writes into an output folder (runs, comparisons, plans, sweeps, validations)...
_OWN_FILES = frozenset(
    {
        "summary.json",
        "config.json",
        "comparison.json",
        "report.html",
        "plan.json",
        "sweep.json",
        "measured_summary.json",
        "predicted_summary.json",
        "validation.json",
    }
)
# ...and its tables, each as .parquet or .csv.
_OWN_TABLES = frozenset(
    {
        "requests",
        "steps",
        "itl",
        "replicas",
        "candidates",
        "points",
        "sweep",
        "measured_requests",
        "predicted_requests",
        "engine_steps",
    }
)
_ASIDE_PREFIX = ".servesim-old-"  # an earlier run's files while the new run is being written


def add_out_args(parser: argparse.ArgumentParser, help: str, overwrite_help: str = OVERWRITE_HELP) -> None:
    """``--out FOLDER`` (kept a string, so that an empty one can be refused) and ``--overwrite``."""
    parser.add_argument("--out", metavar="FOLDER", help=help)
    parser.add_argument("--overwrite", action="store_true", help=overwrite_help)


def out_dir_arg(value: str | Path | None, command: str) -> Path:
    """The folder ``--out`` names, or ``runs/<command>-<time>`` without it; ValueError for an empty one."""
    if value is None:
        return timestamped_out_dir(command)
    if not str(value).strip():
        raise ValueError(f"--out {str(value)!r}: empty folder name (without --out: a new runs/{command}-... folder)")
    return Path(value)


def _is_own(entry: Path, depth: int = 0) -> bool:
    """Whether ``entry`` is something servesim writes into an output folder (never follows a link)."""
    if entry.is_symlink():
        return False
    name = entry.name
    if entry.is_file():
        stem, _, ext = name.rpartition(".")
        return (
            name in _OWN_FILES
            or (ext in ("parquet", "csv") and stem in _OWN_TABLES)
            or (name.startswith("plotly-") and name.endswith(".min.js"))  # --plotlyjs beside
            or (name.startswith(".") and name.endswith(".tmp"))  # an atomic write that was interrupted
        )
    if not entry.is_dir() or depth >= 3:
        return False
    children = list(entry.iterdir())
    if name.startswith(_ASIDE_PREFIX):  # left by a run that was killed
        return all(_is_own(c, depth + 1) for c in children)
    if name.endswith("_figures"):  # --static images
        return all(c.is_file() and not c.is_symlink() and c.suffix in (".png", ".svg") for c in children)
    if name == "points":  # a sweep's finished points
        return all(c.is_file() and not c.is_symlink() and c.suffix in (".json", ".tmp") for c in children)
    # a compare variant's run folder, or its per-rate run folders
    return bool(children) and all(_is_own(c, depth + 1) for c in children)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()


def _restore(path: Path, aside: Path) -> None:
    """Move the earlier run's files back from ``aside`` into ``path``."""
    with contextlib.suppress(OSError):
        for entry in aside.iterdir():
            os.replace(entry, path / entry.name)
        aside.rmdir()


def _entries(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError as exc:
        raise ValueError(f"--out {path}: cannot read the folder ({exc.strerror or exc})") from None


def _check_reusable(path: Path, entries: list[Path], overwrite: bool, what: str = "") -> None:
    """ValueError unless the non-empty folder may be cleared: --overwrite given and only servesim's files."""
    if not overwrite:
        more = f" and {len(entries) - 1} more" if len(entries) > 1 else ""
        raise ValueError(
            f"--out {path}: folder not empty{what} (holds {entries[0].name}{more}); add --overwrite to replace "
            "an earlier servesim output there, or choose a new folder"
        )
    foreign = [e for e in entries if not _is_own(e)]
    if foreign:
        raise ValueError(
            f"--out {path}: holds {foreign[0].name!r}, which servesim does not write; --overwrite replaces only "
            "servesim's own files, so move it away or choose another folder"
        )


def _create(path: Path) -> Path:
    """Make ``path`` and its missing parents; the topmost folder made."""
    top = path
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            break
        top = parent
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise ValueError(f"--out {path}: cannot create the folder ({exc.strerror or exc})") from None
    return top


@contextlib.contextmanager
def output_folder(value: str | Path | None, command: str, overwrite: bool = False) -> Iterator[Path]:
    """The --out folder of a command that writes one, made ready before long work; yields its path.

    Refused (ValueError naming --out): an empty name, a file, a folder that cannot be made or
    read, and a folder that is not empty, unless ``overwrite`` is given and everything in it
    is servesim's own output (an earlier run's files, never anything else). The earlier files
    are moved aside into a hidden folder inside it while the command runs; when the command
    fails or is interrupted, what it wrote is removed and the earlier files come back (a
    folder it made is removed whole), so a failed command leaves no half-written folder.
    """
    path = out_dir_arg(value, command)
    created: Path | None = None
    aside: Path | None = None
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ValueError(f"--out {path}: {'is a file' if path.is_file() else 'exists'}, not a folder")
        entries = _entries(path)
        if entries:
            _check_reusable(path, entries, overwrite)
        try:
            aside = Path(tempfile.mkdtemp(prefix=_ASIDE_PREFIX, dir=path))  # also proves the folder writable
            for entry in entries:
                os.replace(entry, aside / entry.name)
        except OSError as exc:
            if aside is not None:
                _restore(path, aside)
            raise ValueError(f"--out {path}: cannot write into the folder ({exc.strerror or exc})") from None
        if not entries:
            aside.rmdir()
            aside = None
    else:
        created = _create(path)
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):
            if created is not None:
                shutil.rmtree(created)
            else:
                for entry in path.iterdir():
                    if entry != aside:
                        _remove(entry)
                if aside is not None:
                    _restore(path, aside)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def sweep_folder(value: str | Path | None, default: Path, overwrite: bool = False) -> Path:
    """The --out folder of a sweep, which is meant to be reused: a sweep folder there resumes.

    Refused: an empty name, a file, and a non-empty folder that is not a sweep folder (no
    sweep.json or points/), unless ``overwrite``. With ``overwrite`` a folder of servesim's
    own files (a sweep's included) is emptied first, so the sweep starts afresh; nothing is
    undone when a sweep fails, its finished points are kept for the resume.
    """
    path = default if value is None else out_dir_arg(value, "sweep")
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ValueError(f"--out {path}: {'is a file' if path.is_file() else 'exists'}, not a folder")
        entries = _entries(path)
        is_sweep = (path / "sweep.json").is_file() or (path / "points").is_dir()
        if entries and (overwrite or not is_sweep):
            _check_reusable(path, entries, overwrite, "" if is_sweep else " and not a sweep folder")
            try:
                for entry in entries:
                    _remove(entry)
            except OSError as exc:
                raise ValueError(f"--out {path}: cannot clear the folder ({exc.strerror or exc})") from None
    else:
        _create(path)
    return path
