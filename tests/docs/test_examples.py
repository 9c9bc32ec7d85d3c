"""The examples in the documentation are true: every scenario shown validates, every workload example generates
what it says, the generic trace example reads, and every `servesim` command shown parses with the CLI's parser."""

import re
import shlex

import numpy as np
import pytest
import yaml

from simulator.config.scenario import validate_scenario
from simulator.config.schema import ScenarioConfig
from tests.conftest import ROOT
from workloads import generate
from workloads.describe import describe
from workloads.traces import read_trace

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
SOURCES = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [*PAGES, ROOT / "README.md"]}


def _blocks(language: str) -> list[tuple[str, str]]:
    return [
        (source, block)
        for source, text in SOURCES.items()
        for block in re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)
    ]


YAML_BLOCKS = _blocks("yaml")
# A YAML block is a scenario when its top-level keys are scenario fields (other blocks: grids, candidates files).
SCENARIOS = [
    (source, document)
    for source, block in YAML_BLOCKS
    for document in yaml.safe_load_all(block)
    if isinstance(document, dict) and set(document) <= set(ScenarioConfig.model_fields)
]
WORKLOAD_PAGES = ["docs/concepts/workloads.md", "docs/guides/trace.md", "docs/guides/multi-turn.md"]
WORKLOADS = [
    (source, block)
    for source, block in YAML_BLOCKS
    if source in WORKLOAD_PAGES and block.startswith("workload:") and "kind:" in block
]


def _kind(block: str) -> str:
    return re.search(r"kind: (\w+)", block).group(1)


def test_the_workload_pages_have_an_example_per_kind():
    assert sorted(_kind(block) for _, block in WORKLOADS) == ["closed_loop", "sessions", "synthetic", "trace"]


@pytest.mark.parametrize(("source", "block"), WORKLOADS, ids=lambda b: _kind(b) if "\n" in b else b)
def test_each_workload_example_generates(source, block):
    cfg = validate_scenario(yaml.safe_load(block))
    stream = generate(cfg.workload, cfg.seed)
    assert len(stream) > 0
    stats = describe(stream)
    if cfg.workload.kind == "sessions":
        assert stats["sessions"]["num_sessions"] == 500 and stats["prefix_blocks"]["repeat_fraction"] > 0.5
        assert np.all(stream.num_prompt_tokens + stream.num_output_tokens <= 32768)


def test_the_generic_csv_example_reads(tmp_path):
    (csv,) = [block for _, block in _blocks("csv")]
    (tmp_path / "example.csv").write_text(csv)
    trace = read_trace(str(tmp_path / "example.csv"))
    assert trace.format == "generic" and trace.parent.tolist() == [-1, -1, 0]
    assert trace.slo_class_names == ("interactive", "batch") and trace.think_s[2] == 4.5


def test_the_pages_show_scenarios():
    assert len(SCENARIOS) >= 10
    assert {"README.md", "docs/guides/plan.md", "docs/guides/disaggregate.md"} <= {s for s, _ in SCENARIOS}


@pytest.mark.parametrize(("source", "document"), SCENARIOS, ids=[f"{s}-{i}" for i, (s, _) in enumerate(SCENARIOS)])
def test_each_scenario_shown_validates(source, document):
    validate_scenario(document, source=source)


def _commands() -> list[tuple[str, list[str]]]:
    """Every `servesim ...` line of a bash block whose words are literal (no [optional] or A|B placeholders)."""
    out = []
    for source, block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" # ")[0].strip()
            if not line.startswith("servesim ") or re.search(r"\[|\||\.\.\.|[A-Z]{3,}\.yaml|\bDIR\b|\bN\b", line):
                continue
            out.append((source, shlex.split(line)[1:]))
    return out


COMMANDS = _commands()


def test_the_pages_show_commands():
    assert len(COMMANDS) >= 20
    assert {"run", "compare", "plan", "report", "sweep", "workload", "calibrate", "validate"} <= {
        argv[0] for _, argv in COMMANDS
    }


@pytest.mark.parametrize(("source", "argv"), COMMANDS, ids=[" ".join(a)[:60] for _, a in COMMANDS])
def test_each_command_shown_parses(source, argv, capsys):
    from servesim.cli import build_parser

    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{source}: `servesim {' '.join(argv)}` does not parse: {capsys.readouterr().err.strip()}")
        raise AssertionError from exc
