"""GRID files, dotted overrides, point keys and the atomic store (no simulation)."""

import json

import pytest

from simulator.config.scenario import validate_scenario
from simulator.planning.points.keys import point_key, resolved_config
from simulator.planning.points.overrides import apply_overrides, describe
from simulator.planning.points.store import PointStore, write_table_atomic
from simulator.planning.sweeps.grid import expand, load_grid
from simulator.planning.sweeps.sweep import resolve_points


def test_overrides_compose_and_never_touch_the_base():
    base = {"policy": "vllm", "workload": {"num_requests": 10}}
    out = apply_overrides(base, {"policy.max_num_seqs": 8, "workload.arrival.rate_per_s": 3.0})
    assert out["policy"] == {"kind": "vllm", "max_num_seqs": 8}
    # an absent tagged field starts from its default kind, so setting one parameter is enough
    assert out["workload"]["arrival"] == {"kind": "poisson", "rate_per_s": 3.0}
    assert base == {"policy": "vllm", "workload": {"num_requests": 10}}
    # a whole-field override applies before deeper ones, whatever the order given
    out = apply_overrides({}, {"policy.max_num_seqs": 4, "policy": {"kind": "vllm_v0", "watermark": 0.1}})
    assert out["policy"] == {"kind": "vllm_v0", "watermark": 0.1, "max_num_seqs": 4}
    assert validate_scenario(out, "x").policy.max_num_seqs == 4


def test_bad_paths_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="'parallelizm' is not a scenario field"):
        apply_overrides({}, {"parallelizm.tp": 2})
    with pytest.raises(ValueError, match="hardware is 'h100-sxm', not a mapping"):
        apply_overrides({"hardware": "h100-sxm"}, {"hardware.memory_bytes": 1})
    with pytest.raises(ValueError, match=r"grid\.yaml point 3: parallelism\.tp: Input should be greater than or equal"):
        validate_scenario(apply_overrides({}, {"parallelism.tp": 0}), "grid.yaml point 3")


def test_expand_is_a_cartesian_product_then_the_explicit_points():
    points = expand({"a.x": [1, 2], "b": ["p", "q", "r"]}, [{"c": 1}])
    assert len(points) == 7
    assert points[0] == {"a.x": 1, "b": "p"} and points[1] == {"a.x": 1, "b": "q"} and points[5] == {"a.x": 2, "b": "r"}
    assert points[-1] == {"c": 1}
    assert expand({}, []) == [{}]
    assert describe({"hardware": "l40s", "policy": {"kind": "vllm"}}) == 'hardware=l40s policy={"kind":"vllm"}'


def test_keys_follow_the_resolved_config_only():
    a = validate_scenario({"hardware": "h100-sxm"}, "a")
    b = validate_scenario({}, "b")  # the default hardware is h100-sxm
    c = validate_scenario({"hardware": "h200"}, "c")
    key = lambda cfg, **extra: point_key(resolved_config(cfg), extra)  # noqa: E731
    assert key(a) == key(b)
    assert key(a) != key(c)
    assert key(a, replicates=1) != key(a, replicates=2)
    # a spec file is keyed by its contents, not its path
    assert resolved_config(a)["hardware"]["name"] == "H100-SXM5-80GB"


def _write(path, text):
    path.write_text(text)
    return path


def test_grid_file_errors_name_file_and_field(tmp_path):
    bad = _write(tmp_path / "g.yaml", "grid:\n  parallelism.tp: []\nextra: 1\n")
    with pytest.raises(ValueError) as exc:
        load_grid(bad)
    # one line: the unknown field first (and a count of the rest)
    assert str(exc.value) == f"{bad}: extra: unknown field (misspelt?) (and 1 more problem)"
    with pytest.raises(ValueError) as exc:
        load_grid(_write(tmp_path / "g1.yaml", "grid:\n  parallelism.tp: []\n"))
    assert str(exc.value) == f"{tmp_path / 'g1.yaml'}: grid: parallelism.tp: give at least one value"
    with pytest.raises(ValueError, match="no such file"):
        load_grid(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match=r"g2.yaml: line 2: not valid YAML"):
        load_grid(_write(tmp_path / "g2.yaml", "grid:\n  a: [1, : ]\n"))


def test_every_point_is_validated_before_anything_runs(tmp_path):
    grid = _write(
        tmp_path / "g.yaml",
        "base: s.yaml\ngrid:\n  workload.arrival.rate_per_s: [1, -2]\n",
    )
    _write(tmp_path / "s.yaml", "workload: {num_requests: 5}\n")
    spec = load_grid(grid)
    assert spec.base == {"workload": {"num_requests": 5}} and spec.base_dir == tmp_path
    with pytest.raises(ValueError, match=r"point 1 \(workload.arrival.rate_per_s=-2\): workload.arrival.poisson.rate"):
        resolve_points(spec)
    unknown = _write(tmp_path / "u.yaml", "grid:\n  hardware: [h100-sxm, h900]\n")
    with pytest.raises(ValueError, match=r"point 1 \(hardware=h900\): unknown hardware 'h900'"):
        resolve_points(load_grid(unknown))


def test_store_writes_are_atomic_and_ignore_temporary_files(tmp_path):
    store = PointStore(tmp_path)
    store.save("abc", {"status": "ok", "x": 1.5, "n": float("nan")})
    (store.dir / ".def.json.123.tmp").write_text("{")  # what a kill during a write leaves
    assert store.keys() == {"abc"}
    assert store.load("abc") == {"status": "ok", "x": 1.5, "n": None}
    assert json.loads(store.path("abc").read_text())["x"] == 1.5
    (store.dir / "bad.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"bad\.json: not a sweep point"):
        store.load("bad")
    frame = write_table_atomic(tmp_path / "t.parquet", [{"a": 1}, {"a": 2}])
    assert list(frame["a"]) == [1, 2] and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_bare_router_name_takes_parameters_like_policy_and_cost_model():
    out = apply_overrides({"router": "session_affinity", "replicas": 2}, {"router.max_kv_usage": 0.8})
    assert out["router"] == {"kind": "session_affinity", "max_kv_usage": 0.8}
    assert validate_scenario(out, "grid").router.max_kv_usage == 0.8


def test_keys_follow_group_models_and_profile_contents(tmp_path):
    from tests.simulator.cost.test_profiled import make_profile, save_profile

    groups = lambda model: [{"count": 1}, {"count": 1, "model": model}]  # noqa: E731  (a heterogeneous cluster)
    a = validate_scenario({"groups": groups("llama-3.1-8b")}, "a")
    b = validate_scenario({"groups": groups("llama-2-7b")}, "b")
    assert point_key(resolved_config(a)) != point_key(resolved_config(b))
    path = save_profile(make_profile(), tmp_path / "p.json")
    profiled = validate_scenario({"cost_model": {"kind": "profiled", "profile": str(path)}}, "p")
    before = point_key(resolved_config(profiled))
    path.write_text(path.read_text().replace('"harness_version": "test"', '"harness_version": "test2"'))
    assert point_key(resolved_config(profiled)) != before  # re-calibrated: same name, new content
