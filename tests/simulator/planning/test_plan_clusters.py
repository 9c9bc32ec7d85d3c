"""Sweeps and plans count every GPU of a scenario that is itself a cluster."""

import pytest

from simulator.config.presets import hardware_presets
from simulator.config.scenario import validate_scenario
from simulator.planning.points.capacity import deployment_cost_per_hour, gpus_per_replica
from simulator.planning.points.keys import resolved_config


def _spec_price(ref, spec):
    return spec.get("price_per_hour_usd")


def test_replicas_times_tp_times_pp():
    resolved = resolved_config(validate_scenario({"replicas": 3, "parallelism": {"tp": 2, "pp": 2}}))
    assert gpus_per_replica(resolved) == 12
    price = hardware_presets()["h100-sxm"].price_per_hour_usd
    assert deployment_cost_per_hour(resolved, _spec_price) == pytest.approx(12 * price)


def test_heterogeneous_groups_are_priced_per_group():
    cfg = validate_scenario(
        {"groups": [{"count": 1, "hardware": "h200", "parallelism": {"tp": 2}}, {"count": 2, "hardware": "l40s"}]}
    )
    resolved = resolved_config(cfg)
    hw = hardware_presets()
    assert gpus_per_replica(resolved) == 4
    expected = 2 * hw["h200"].price_per_hour_usd + 2 * hw["l40s"].price_per_hour_usd
    assert deployment_cost_per_hour(resolved, _spec_price) == pytest.approx(expected)
    overridden = deployment_cost_per_hour(
        resolved, lambda ref, spec: 1.0 if ref == "l40s" else spec["price_per_hour_usd"]
    )
    assert overridden == pytest.approx(2 * hw["h200"].price_per_hour_usd + 2 * 1.0)
