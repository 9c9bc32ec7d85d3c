"""The generated reference: every scenario field, CLI flag and registered name appears, and generating it imports
nothing heavy. The walks below are the tests' own, independent of the generator's."""

import argparse
import importlib.util
import re
import subprocess
import sys
import typing

import pytest
from pydantic import BaseModel, RootModel

from tests.conftest import ROOT

HOOK = ROOT / "docs" / "hooks" / "reference.py"


def _load_hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _load_hook()


def _sections(markdown: str, level: str) -> dict[str, str]:
    """Heading text (backticks dropped) -> the markdown up to the next heading of that level or above."""
    parts = re.split(rf"^({level}+) (.+)$", markdown, flags=re.M)
    out = {}
    for i in range(1, len(parts) - 2, 3):
        out[parts[i + 1].strip().strip("`")] = parts[i + 2]
    return out


def _models_under(tp) -> list[type]:
    """Every pydantic model a field's annotation names (through unions, Annotated, tuples and RootModels)."""
    found = []
    if isinstance(tp, type) and issubclass(tp, RootModel):
        return _models_under(tp.model_fields["root"].annotation)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and tp is not BaseModel:
        return [tp]
    for arg in typing.get_args(tp):
        found += _models_under(arg)
    return found


def _all_scenario_models() -> list[type]:
    from simulator.config.schema import ScenarioConfig

    seen, todo = [], [ScenarioConfig]
    while todo:
        model = todo.pop()
        if model not in seen:
            seen.append(model)
            todo += [m for f in model.model_fields.values() for m in _models_under(f.annotation)]
    return seen


@pytest.fixture(scope="module")
def scenario_page():
    return _sections(reference.render_scenario_fields(), "###")


def test_every_scenario_model_and_field_is_in_the_reference(scenario_page):
    models = _all_scenario_models()
    assert len(models) > 20  # workloads, arrivals, lengths, sessions, specs ... are reached
    missing = []
    for model in models:
        section = scenario_page.get(model.__name__)
        if section is None:
            missing.append(model.__name__)
            continue
        missing += [f"{model.__name__}.{name}" for name in model.model_fields if f"| `{name}` |" not in section]
    assert not missing, f"missing from the scenario reference: {missing}"


def test_field_descriptions_and_defaults_are_shown(scenario_page):
    from simulator.config.schema import KvCacheConfig

    row = next(line for line in scenario_page["KvCacheConfig"].splitlines() if line.startswith("| `block_size` |"))
    assert "`16`" in row and KvCacheConfig.model_fields["block_size"].description.split(" (")[0] in row
    seed = next(line for line in scenario_page["ScenarioConfig"].splitlines() if line.startswith("| `seed` |"))
    assert ">= 0" in seed


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    from servesim.cli import build_parser

    out, todo = [], [("servesim", build_parser())]
    while todo:
        name, parser = todo.pop()
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    return out


def test_every_command_and_flag_is_in_the_reference():
    page = _sections(reference.render_cli(), "##")
    commands = _commands()
    assert {"servesim run", "servesim plan", "servesim workload describe"} <= {name for name, _ in commands}
    missing = []
    for name, parser in commands:
        section = page.get(name)
        if section is None:
            missing.append(name)
            continue
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            names = action.option_strings or [action.dest]
            missing += [f"{name} {flag}" for flag in names if f"`{flag}`" not in section]
    assert not missing, f"missing from the CLI reference: {missing}"


def test_every_registered_name_and_parameter_is_in_the_reference():
    import policies
    from simulator.cost import COST_MODELS

    renders = {
        policies.BATCH_POLICIES: reference.render_batch_policies(),
        policies.ROUTERS: reference.render_routers(),
        COST_MODELS: reference.render_cost_models(),
    }
    missing = []
    for registry, markdown in renders.items():
        page = _sections(markdown, "###")
        for name in registry:
            section = page.get(name)
            if section is None:
                missing.append(name)
                continue
            params = registry.entry(name).params
            fields = params.model_fields if params is not None else {}
            missing += [f"{name}.{f}" for f in fields if f != "kind" and f"| `{f}` |" not in section]
    assert not missing, f"missing from the policies reference: {missing}"


def test_data_tables_list_every_trace_and_preset():
    from simulator.config.presets import hardware_presets, model_presets
    from workloads.traces.catalog import TRACE_CATALOG

    traces, hardware, models = reference.render_traces(), reference.render_hardware(), reference.render_models()
    assert all(f"| `{name}` |" in traces for name in TRACE_CATALOG)
    assert all(t.licence.split(" ")[0] in traces for t in TRACE_CATALOG.values())
    assert all(f"| `{name}` |" in hardware for name in hardware_presets())
    assert "H100 SXM datasheet" in hardware  # the sources come from hardware.yaml's comments
    assert all(f"| `{name}` |" in models for name in model_presets())


def test_every_marker_in_the_pages_is_known_and_every_table_is_placed():
    pages = sorted((ROOT / "docs").rglob("*.md"))
    used = {m for page in pages for m in reference.MARKER.findall(page.read_text())}
    assert used == set(reference.RENDERERS)
    with pytest.raises(ValueError, match="unknown generated section"):
        reference.expand("<!-- generated: no-such-table -->")


def test_generating_the_reference_imports_nothing_heavy():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('hook', {str(HOOK)!r})\n"
        "hook = importlib.util.module_from_spec(spec); spec.loader.exec_module(hook)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('simulator', 'policies', 'servesim')]\n"
        "for render in hook.RENDERERS.values(): render()\n"
        "heavy = ('torch', 'ray', 'plotly', 'reports', 'simpy', 'pyarrow', 'kaleido', 'playwright', 'transformers')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
