"""The workload examples in the README are valid scenarios that generate what they say."""

import re

import numpy as np
import pytest
import yaml

from simulator.config.scenario import validate_scenario
from tests.conftest import ROOT
from workloads import generate
from workloads.describe import describe
from workloads.traces import read_trace

README = (ROOT / "README.md").read_text()
_START = README.index("## Workloads")
SECTION = README[_START : README.index("\n## ", _START + 1)]
YAML_BLOCKS = re.findall(r"```yaml\n(.*?)```", SECTION, flags=re.S)


def test_the_section_has_an_example_per_kind():
    kinds = [re.search(r"kind: (\w+)", block).group(1) for block in YAML_BLOCKS]
    assert kinds == ["synthetic", "trace", "sessions", "closed_loop"]


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda b: re.search(r"kind: (\w+)", b).group(1))
def test_each_example_generates(block):
    cfg = validate_scenario(yaml.safe_load(block))
    stream = generate(cfg.workload, cfg.seed)
    assert len(stream) > 0
    stats = describe(stream)
    if cfg.workload.kind == "sessions":
        assert stats["sessions"]["num_sessions"] == 500 and stats["prefix_blocks"]["repeat_fraction"] > 0.5
        assert np.all(stream.num_prompt_tokens + stream.num_output_tokens <= 32768)


def test_the_generic_csv_example_reads(tmp_path):
    csv = re.search(r"```csv\n(.*?)```", SECTION, flags=re.S).group(1)
    (tmp_path / "example.csv").write_text(csv)
    trace = read_trace(str(tmp_path / "example.csv"))
    assert trace.format == "generic" and trace.parent.tolist() == [-1, -1, 0]
    assert trace.slo_class_names == ("interactive", "batch") and trace.think_s[2] == 4.5
