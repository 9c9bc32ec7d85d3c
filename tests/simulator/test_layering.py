"""The floors of the code: no import runs back up, between the top-level packages or inside simulator/."""

import ast
from pathlib import Path

from tests.conftest import ROOT

# top-level packages, lowest first: each may import only those on floors below it
TOP = {"workloads": 0, "policies": 0, "simulator": 1, "calibration": 2, "reports": 2, "servesim": 3}

# a module is read in one sitting (STYLE.md section 1): planning's modules stay under this many lines
MAX_LINES = 400

# simulator/ by concept, lowest first (config splits: specs and file readers below, the scenario schema,
# which names the cost models' and policies' parameters, above the cost models)
FLOORS = {
    "request": 0,
    "config-base": 0,
    "kv": 1,
    "cost": 1,
    "metrics": 1,
    "config-schema": 2,
    "engine": 2,
    "cluster": 3,
    "build": 4,
    "planning": 5,
}


def _group(module: str) -> str:
    parts = module.split(".")
    if parts[1] == "config":
        return "config-schema" if len(parts) > 2 and parts[2] in ("schema", "scenario") else "config-base"
    return parts[1]


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def _modules(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        yield ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"), path


def test_top_level_packages_import_only_floors_below():
    bad = []
    for package, floor in TOP.items():
        for module, path in _modules(package):
            for name in _imports(path):
                top = name.split(".")[0]
                if top in TOP and top != package and TOP[top] >= floor:
                    bad.append(f"{module} imports {name}")
    assert not bad, bad


def test_simulator_concepts_import_only_floors_below():
    bad = []
    for module, path in _modules("simulator"):
        mine = _group(module)
        for name in _imports(path):
            if not name.startswith("simulator."):
                continue
            theirs = _group(name)
            if theirs != mine and FLOORS[theirs] >= FLOORS[mine]:
                bad.append(f"{module} ({mine}) imports {name} ({theirs})")
    assert not bad, bad


# planning/ by concept, lowest first
PLANNING_FLOORS = {"points": 0, "sweeps": 1, "search": 1, "plans": 2, "layouts": 2}


def test_planning_concepts_import_only_floors_below():
    bad = []
    for module, path in _modules("simulator/planning"):
        parts = module.split(".")
        if len(parts) < 4:  # planning/__init__
            continue
        mine = parts[2]
        for name in _imports(path):
            if not name.startswith("simulator.planning."):
                continue
            theirs = name.split(".")[2]
            if theirs != mine and PLANNING_FLOORS[theirs] >= PLANNING_FLOORS[mine]:
                bad.append(f"{module} ({mine}) imports {name} ({theirs})")
    assert not bad, bad


def test_planning_is_grouped_by_concept_in_small_modules():
    planning = ROOT / "simulator" / "planning"
    assert not [p.name for p in planning.glob("*.py") if p.name != "__init__.py"], "a flat module in planning/"
    folders = {p.name for p in planning.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(PLANNING_FLOORS)
    for folder in folders:  # each says what it holds
        assert ast.get_docstring(ast.parse((planning / folder / "__init__.py").read_text()))
    long = [str(p.relative_to(ROOT)) for p in planning.rglob("*.py") if len(p.read_text().splitlines()) > MAX_LINES]
    assert not long, long


def test_every_simulator_folder_is_a_named_concept():
    folders = {p.name for p in (ROOT / "simulator").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {"config", "kv", "engine", "cluster", "cost", "metrics", "planning"}
    for folder in folders:  # each says what it holds
        assert ast.get_docstring(ast.parse((ROOT / "simulator" / folder / "__init__.py").read_text()))
