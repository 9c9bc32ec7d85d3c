"""MkDocs hook: the reference pages' tables, generated from the code so that they cannot drift.

A page holds a marker ``<!-- generated: NAME -->`` where a table belongs; ``on_page_markdown``
replaces it with ``RENDERERS[NAME]()``, rendered at build time from:

- the scenario's pydantic models (``ScenarioConfig`` and every model reachable from it: each
  field's name, type, bounds, default and description);
- the CLI's argparse parser (``servesim.cli.build_parser``: every command, its usage and each
  argument's flags, value, default and help);
- the registries (``policies.BATCH_POLICIES``, ``policies.ROUTERS``, ``simulator.cost.COST_MODELS``:
  each name with its parameters' model);
- the trace catalogue (``workloads.traces.catalog``) and the model and hardware presets (the
  YAML files of ``simulator/config/presets``, with the comments that name each figure's source).

An unknown marker fails the build. The page files themselves stay readable on GitHub: only the
tables are generated. Everything is imported inside the renderers, and only the light modules
(configuration, registries, the parser); nothing here imports plotly, torch, ray or the
simulator's engine. ``tests/docs/test_reference.py`` checks that every field and flag appears.
"""

from __future__ import annotations

import argparse
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

MARKER = re.compile(r"<!-- generated: ([a-z0-9-]+) -->")


# --- markdown helpers --------------------------------------------------------------------------------------------
def cell(text: Any) -> str:
    """One table cell: one line, pipes outside code spans escaped (the table reader keeps those in code)."""
    parts = re.split(r"(`+[^`]*?`+)", " ".join(str(text).split()))
    return "".join(part if part.startswith("`") else part.replace("|", "\\|") for part in parts)


def code(text: Any) -> str:
    """An inline code span that survives backticks inside it."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def anchor(name: str) -> str:
    """The id MkDocs' toc gives a heading of ``name`` (lower case, non-word characters dropped)."""
    return re.sub(r"[^\w\- ]", "", name).strip().lower().replace(" ", "-")


# --- pydantic models -----------------------------------------------------------------------------------------------
def _is_model(tp: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(tp, type) and issubclass(tp, BaseModel) and tp is not BaseModel


def _members(tp: Any) -> list[Any]:
    """The members of a union (``X | Y``, ``Optional``, ``Annotated`` unwrapped), else ``[tp]``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(tp) for m in _members(arg)]
    return [tp]


def nested_models(tp: Any) -> Iterator[type]:
    """Every pydantic model named in the type ``tp`` (union members, tuple and list items, a RootModel's root)."""
    from pydantic import RootModel

    for member in _members(tp):
        origin = typing.get_origin(member)
        if origin in (tuple, list, dict, typing.Literal) or origin is not None:
            if origin is typing.Literal:
                continue
            for arg in typing.get_args(member):
                if arg is not Ellipsis:
                    yield from nested_models(arg)
        elif _is_model(member):
            if issubclass(member, RootModel):
                yield from nested_models(member.model_fields["root"].annotation)
            else:
                yield member


def type_name(tp: Any, links: dict[type, str]) -> str:
    """A field's type in words: ``int``, ``"auto" | "fp8"``, ``list of [RateSegment](#ratesegment)``."""
    from pydantic import BaseModel, RootModel

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return type_name(typing.get_args(tp)[0], links)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg, links) for arg in typing.get_args(tp))
    if origin is typing.Literal:
        return " | ".join(code(repr(v).replace("'", '"')) for v in typing.get_args(tp))
    if origin in (tuple, list):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return "list of " + (type_name(args[0], links) if args else "values")
    if origin is dict:
        return "mapping"
    if tp is type(None):
        return "null"
    if tp is BaseModel:
        return "`{kind: NAME, ...}`"
    if isinstance(tp, type) and issubclass(tp, RootModel):
        return type_name(tp.model_fields["root"].annotation, links)
    if _is_model(tp):
        return f"[{tp.__name__}]({links[tp]})" if tp in links else tp.__name__
    return getattr(tp, "__name__", str(tp))


_BOUND_WORDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "length >=", "max_length": "length <="}


def bounds(field: Any) -> str:
    """The field's numeric bounds as written in ``Field``/``Annotated`` (``>= 1, <= 16``)."""
    parts = []
    for meta in field.metadata:
        check = getattr(meta, "func", None)  # workloads.validators.at_most / at_least: a limit and its message
        if check is not None and check.__qualname__.split(".")[0] in ("at_most", "at_least"):
            message = inspect.getclosurevars(check).nonlocals.get("message")
            if message:
                parts.append(str(message).removeprefix("must be "))
            continue
        for attr, word in _BOUND_WORDS.items():
            value = getattr(meta, attr, None)
            if value is not None and not callable(value):
                parts.append(f"{word} {value:,}" if isinstance(value, int) else f"{word} {value:g}")
    return ", ".join(parts)


def default_text(field: Any) -> str:
    """The default as a scenario file would write it; ``required`` when there is none."""
    from pydantic import BaseModel
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        kind = getattr(value, "kind", None)
        if kind is not None:
            return code(f"{{kind: {kind}}}")
        root = getattr(value, "root", None)
        if isinstance(root, BaseModel):
            return code(f"{{kind: {getattr(root, 'kind', type(root).__name__)}}}")
        return "its defaults"
    if value is None:
        return code("null")
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, float):
        return code(f"{value:g}")
    if isinstance(value, int):
        return code(f"{value}")
    return code(value)


def describe(model: type) -> str:
    """A model's docstring, its first paragraph on one line."""
    doc = (model.__doc__ or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def field_rows(model: type, links: dict[type, str], skip: tuple[str, ...] = ()) -> list[list[str]]:
    rows = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        text = field.description or ""
        limits = bounds(field)
        rows.append([code(name), type_name(field.annotation, links), default_text(field), limits, text])
    return rows


FIELD_HEADER = ["field", "type", "default", "bounds", "description"]


def collect_models(roots: list[type]) -> list[type]:
    """Every model reachable from ``roots`` through their fields, roots first, then in the order met."""
    seen: list[type] = []
    todo = list(roots)
    while todo:
        model = todo.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            todo.extend(m for m in nested_models(field.annotation) if m not in seen)
    return seen


def model_sections(models: list[type], links: dict[type, str], level: int = 3) -> str:
    out = []
    for model in models:
        out.append(f"{'#' * level} {model.__name__}\n")
        intro = describe(model)
        if intro:
            out.append(intro + "\n")
        out.append(table(FIELD_HEADER, field_rows(model, links)) + "\n")
    return "\n".join(out)


# Scenario fields that are a registry's {kind: NAME, ...}: their parameters are on the policies page.
TAGGED_LINKS = {
    "policy": "policies.md#batch-policies",
    "cost_model": "policies.md#cost-models",
    "router": "policies.md#routers",
}


def scenario_models() -> list[type]:
    """ScenarioConfig and every model its fields reach (workloads, arrivals, lengths, specs ...)."""
    from simulator.config.schema import ScenarioConfig

    return collect_models([ScenarioConfig])


def render_scenario_fields() -> str:
    from simulator.config.schema import ScenarioConfig

    models = scenario_models()
    links = {m: f"#{anchor(m.__name__)}" for m in models}
    rows = []
    for name, field in ScenarioConfig.model_fields.items():
        kind = type_name(field.annotation, links)
        if name in TAGGED_LINKS:
            kind = f"[`{{kind: NAME, ...}}`]({TAGGED_LINKS[name]})"
        rows.append([code(name), kind, default_text(field), bounds(field), field.description or ""])
    top = "### ScenarioConfig\n\n" + describe(ScenarioConfig) + "\n\n" + table(FIELD_HEADER, rows) + "\n"
    return top + "\n" + model_sections(models[1:], links)


# --- registries ----------------------------------------------------------------------------------------------------
def _registry_sections(registry: Any, traits: Callable[[Any], str] | None = None) -> str:
    out = []
    for name in registry:
        entry = registry.entry(name)
        out.append(f"### `{name}`\n")
        doc = (entry.factory.__doc__ or "").strip()
        if doc:
            out.append(" ".join(doc.split("\n\n")[0].split()) + "\n")
        module = getattr(entry.factory, "__module__", "")
        if module:
            out.append(
                f"Implemented in `{module.replace('.', '/')}.py`" + (f"; {traits(entry)}" if traits else "") + ".\n"
            )
        params = entry.params
        if params is not None:
            nested = collect_models([params])
            links = {m: f"#{anchor(m.__name__)}" for m in nested}
            rows = field_rows(params, links, skip=("kind",))
            if rows:
                out.append(f"Parameters ({code(params.__name__)}): write `{{kind: {name}, ...}}`.\n")
                out.append(table(FIELD_HEADER, rows) + "\n")
            else:
                out.append(f"No parameters: write `{{kind: {name}}}` or `{name}`.\n")
            for sub in nested[1:]:
                out.append(f"#### {sub.__name__}\n")
                out.append(table(FIELD_HEADER, field_rows(sub, links)) + "\n")
    return "\n".join(out)


def _batch_traits(entry: Any) -> str:
    t = entry.traits
    said = [f"engine tables: {t.engine}"]
    said.append("fast-forwards decode-only steps" if t.steady_decode else "plans every step")
    if t.reserves_kv:
        said.append("reserves KV for prompt + output")
    if not t.prefix_caching:
        said.append("no prefix caching")
    if not t.kv_transfer:
        said.append("cannot serve a prefill or decode group")
    if t.hardware_defaults:
        said.append("some defaults from the GPU")
    return ", ".join(said)


def render_batch_policies() -> str:
    import policies

    return _registry_sections(policies.BATCH_POLICIES, _batch_traits)


def render_policy_notes() -> str:
    """Each batch policy's module docstring: what it models, from which engine source files, what it leaves out."""
    import importlib

    import policies

    out = []
    seen: dict[str, str] = {}
    for name in policies.BATCH_POLICIES:
        module = importlib.import_module(policies.BATCH_POLICIES.entry(name).factory.__module__)
        if module.__name__ in seen:
            out.append(f"### `{name}`\n\nSee [`{seen[module.__name__]}`](#{seen[module.__name__]}).\n")
            continue
        seen[module.__name__] = name
        doc = (module.__doc__ or "").strip()
        title, _, rest = doc.partition("\n")
        out.append(f"### `{name}`\n\n{title.strip()}\n\n{rest.strip()}\n\n(`{module.__name__.replace('.', '/')}.py`)\n")
    return "\n".join(out)


def render_routers() -> str:
    import policies

    return _registry_sections(policies.ROUTERS)


def render_cost_models() -> str:
    from simulator.cost import COST_MODELS

    return _registry_sections(COST_MODELS)


# --- the CLI -------------------------------------------------------------------------------------------------------
def command_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """(``servesim run``, its parser) for the top level and every command and subcommand, depth first."""
    from servesim.cli import build_parser

    out: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(f"{name} {sub_name}", sub)

    walk("servesim", build_parser())
    return out


def _argument_value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " | ".join(code(c) for c in action.choices)
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.nargs in ("*", "+"):
        return code(f"{metavar}...")
    return code(metavar)


def _argument_default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    if isinstance(action.default, (list, tuple)):
        return code(",".join(str(v) for v in action.default)) if action.default else ""
    return code(action.default)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return parser._get_formatter()._expand_help(action)


def render_cli() -> str:
    out = []
    for name, parser in command_parsers():
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        out.append(f"## `{name}`\n")
        if parser.description:
            out.append(" ".join(parser.description.split()) + "\n")
        usage = parser.format_usage().strip().removeprefix("usage: ")
        out.append(f"```text\n{usage}\n```\n")
        if sub is not None:
            helps = {a.dest: a.help for a in sub._choices_actions}
            rows = [[f"[`{name} {c}`](#{anchor(f'{name} {c}')})", helps.get(c, "")] for c in sub.choices]
            out.append(table(["command", "what it does"], rows) + "\n")
        rows = []
        for action in parser._actions:
            if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
                continue
            flags = ", ".join(code(s) for s in action.option_strings) or code(action.dest)
            rows.append([flags, _argument_value(action), _argument_default(action), _help(parser, action)])
        if rows:
            out.append(table(["argument", "value", "default", "help"], rows) + "\n")
    return "\n".join(out)


# --- data sets and presets ------------------------------------------------------------------------------------------
def render_traces() -> str:
    from workloads.traces.catalog import TRACE_ALIASES, TRACE_CATALOG

    rows = []
    for name, t in TRACE_CATALOG.items():
        url = f"https://github.com/{t.repository}/blob/{t.commit}/{t.path}"
        rows.append(
            [
                code(name),
                t.description,
                f"{t.rows:,}",
                f"{t.mean_prompt_tokens:,.0f} / {t.median_prompt_tokens:,.0f}",
                f"{t.mean_output_tokens:,.0f} / {t.median_output_tokens:,.0f}",
                code(t.format),
                f"[{t.repository}@{t.commit[:7]}]({url}): {code(t.path)}",
                t.licence,
                t.citation,
                code(t.sha256[:16] + "..."),
            ]
        )
    header = ["name", "what", "rows", "prompt mean / median", "output mean / median", "reader", "source", "licence"]
    text = table([*header, "cite", "sha256"], rows) + "\n"
    if TRACE_ALIASES:
        aliases = ", ".join(f"{code(old)} -> {code(new)}" for old, new in _alias_pairs(TRACE_ALIASES))
        text += f"\nOlder names that still work, with a warning: {aliases}.\n"
    return text


def _alias_pairs(aliases: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """(old name, catalogue name) of each alias (``TRACE_ALIASES`` maps an old name to (new name, note))."""
    return [(old, new) for old, (new, _note) in aliases.items()]


def _preset_comments(filename: str) -> dict[str, list[str]]:
    """Per top-level key of a presets YAML file, the trailing comments of its lines (``field: comment``)."""
    from importlib import resources

    text = resources.files("simulator.config.presets").joinpath(filename).read_text(encoding="utf-8")
    comments: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")) and line.rstrip().endswith(":"):
            current = line.rstrip()[:-1]
            comments[current] = []
        elif current and "#" in line and line.startswith(" "):
            field, _, comment = line.partition("#")
            comments[current].append(f"{field.split(':')[0].strip()}: {comment.strip()}")
    return comments


def render_hardware() -> str:
    from simulator.config.presets import hardware_presets

    comments = _preset_comments("hardware.yaml")
    rows = []
    for key, hw in hardware_presets().items():
        fp8 = getattr(hw, "fp8_flops_per_s", None)
        price = hw.price_per_hour_usd
        rows.append(
            [
                code(key),
                hw.name,
                f"{hw.flops_per_s / 1e12:,.0f}",
                f"{fp8 / 1e12:,.0f}" if fp8 else "-",
                f"{hw.memory_bytes / 2**30:,.1f}",
                f"{hw.memory_bandwidth_bytes_per_s / 1e12:.2f}",
                f"{hw.interconnect_bandwidth_bytes_per_s / 1e9:,.0f}",
                f"{price:.2f}" if price is not None else "-",
                code(hw.silicon_tables) if hw.silicon_tables else "roofline only",
                "; ".join(comments.get(key, [])),
            ]
        )
    header = ["preset", "GPU", "BF16 TFLOP/s", "FP8 TFLOP/s", "memory GiB", "HBM TB/s", "link GB/s", "USD/h"]
    return table([*header, "measured tables", "sources (hardware.yaml)"], rows) + "\n"


def render_models() -> str:
    from simulator.config.presets import model_presets

    rows = []
    for key, m in model_presets().items():
        kv_per_token = m.kv_bytes_per_token()
        rows.append(
            [
                code(key),
                m.name,
                f"{m.num_params() / 1e9:.1f}",
                f"{m.num_active_params() / 1e9:.1f}",
                str(m.num_layers),
                f"{m.num_attention_heads} / {m.num_kv_heads}",
                f"{kv_per_token / 2**10:,.0f}",
                f"{m.max_context_tokens:,}",
                m.quantization or "-",
            ]
        )
    header = ["preset", "model", "params (B)", "active (B)", "layers", "heads / KV heads", "KV KiB per token"]
    return table([*header, "max context", "quantization"], rows) + "\n"


RENDERERS: dict[str, Callable[[], str]] = {
    "scenario-fields": render_scenario_fields,
    "batch-policies": render_batch_policies,
    "routers": render_routers,
    "policy-notes": render_policy_notes,
    "cost-models": render_cost_models,
    "cli": render_cli,
    "traces": render_traces,
    "hardware": render_hardware,
    "models": render_models,
}


def expand(markdown: str) -> str:
    """``markdown`` with every generated-table marker replaced; ValueError on an unknown one."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in RENDERERS:
            raise ValueError(f"unknown generated section {name!r}; known: {', '.join(RENDERERS)}")
        return RENDERERS[name]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown)
