"""The workload config: four kinds behind one field, old scenario files still valid; layering."""

import ast

import pytest
from pydantic import ValidationError

from simulator.config.scenario import validate_scenario
from tests.conftest import ROOT
from workloads import WorkloadConfig
from workloads.closed_loop import ClosedLoopWorkload
from workloads.config import SyntheticWorkload
from workloads.replay import TraceWorkload
from workloads.sessions import SessionWorkload


def test_a_workload_without_kind_is_synthetic_as_before():
    cfg = validate_scenario(
        {"workload": {"num_requests": 50, "arrival": {"kind": "gamma", "rate_per_s": 2, "burstiness": 0.5}}}
    )
    assert isinstance(cfg.workload.root, SyntheticWorkload)
    assert cfg.workload.num_requests == 50 and cfg.workload.arrival.burstiness == 0.5  # attributes reach the kind
    assert cfg.workload.resolved_num_requests == 50
    assert isinstance(validate_scenario({}).workload.root, SyntheticWorkload)
    assert WorkloadConfig(num_requests=7).resolved_num_requests == 7


@pytest.mark.parametrize(
    ("workload", "kind"),
    [
        ({"kind": "synthetic", "duration_s": 10}, SyntheticWorkload),
        ({"kind": "trace", "source": "azure-conv", "time_scale": 2}, TraceWorkload),
        (
            {
                "kind": "sessions",
                "turns": {"kind": "fixed", "count": 2},
                "user_tokens": {"kind": "fixed", "tokens": 9},
                "output_tokens": {"kind": "fixed", "tokens": 9},
            },
            SessionWorkload,
        ),
        ({"kind": "closed_loop", "concurrency": 8}, ClosedLoopWorkload),
    ],
)
def test_each_kind_validates_and_round_trips(workload, kind):
    cfg = validate_scenario({"workload": workload})
    assert isinstance(cfg.workload.root, kind)
    dumped = cfg.model_dump(mode="json")
    assert dumped["workload"]["kind"] == workload["kind"]
    assert validate_scenario(dumped) == cfg  # a run's config.json is a valid scenario again


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (
            {"kind": "replay"},
            "workload: unknown workload kind 'replay'; known: synthetic, trace, sessions, closed_loop",
        ),
        ({"kind": "trace"}, "workload.source: Field required"),
        (
            {"kind": "trace", "source": "azure-conv", "time_scale": 0},
            "workload.time_scale: Input should be greater than 0",
        ),
        ({"kind": "trace", "source": "azure-conv", "window_s": [5, 1]}, "window_s must be [start, end)"),
        (
            {"kind": "trace", "source": "azure-conv", "num_requests": 5, "duration_s": 9},
            "give num_requests or duration_s, not both",
        ),
        ({"kind": "closed_loop", "concurrency": 0}, "workload.concurrency: Input should be greater than or equal to 1"),
        ({"kind": "closed_loop", "concurrency": 2, "duration_s": 5}, "workload.duration_s: unknown field"),
        ({"arrival": {"kind": "periodic", "rate_per_s": 1, "amplitude": 1.5}}, "workload.arrival.periodic.amplitude"),
        (
            {
                "lengths": {
                    "kind": "independent",
                    "prompt": {"kind": "zipf", "exponent": 1},
                    "output": {"kind": "fixed", "tokens": 1},
                }
            },
            "workload.lengths.independent.prompt.zipf.max_tokens: Field required",
        ),
        ("sharegpt", "workload: expected a mapping of workload fields, got str"),
    ],
)
def test_bad_workload_fields_are_named(workload, message):
    with pytest.raises(ValueError) as info:
        validate_scenario({"workload": workload})
    assert message in str(info.value)


def test_configs_are_frozen():
    cfg = WorkloadConfig.model_validate({"kind": "closed_loop", "concurrency": 2})
    with pytest.raises(ValidationError):
        cfg.root.concurrency = 3


def test_workloads_imports_nothing_of_the_other_packages():
    forbidden = {"simulator", "policies", "servesim", "calibration", "reports"}
    root = ROOT / "workloads"
    files = sorted(root.rglob("*.py"))
    assert len(files) > 15
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path.name} imports {name}"
