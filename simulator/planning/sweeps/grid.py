"""The GRID file of ``servesim sweep``: a base scenario and the points to run.

```yaml
base: scenario.yaml            # a scenario file (relative to this file), an inline mapping,
                               # or absent for the embedded default
grid:                          # cartesian product, in file order (the last path varies fastest)
  hardware: [h100-sxm, a100-80gb]
  parallelism.tp: [1, 2]
  workload.arrival.rate_per_s: [2, 4, 8]
points:                        # explicit points, run after the product
  - {hardware: l40s, policy: {kind: vllm, max_num_seqs: 64}}
replicates: 1                  # independent seeds per point (confidence intervals when > 1)
```

With neither ``grid`` nor ``points`` the sweep is the base scenario alone.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from simulator.config.errors import format_validation_error
from simulator.config.files import read_yaml_mapping
from simulator.config.scenario import read_scenario_dict
from simulator.planning.points.overrides import check_path
from workloads.validators import first_repeat

Overrides = dict[str, Any]
# the most points one grid may expand to: each is validated, keyed and kept in memory before
# anything runs (about 0.3 ms and a few kB each), so a larger grid is refused before it is built
MAX_POINTS = 100_000
MAX_REPLICATES = 1000


def check_grid(grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``grid`` if every key is a field path and every value a non-empty list without repeats; ValueError otherwise."""
    for path, values in grid.items():
        check_path(path)
        if not values:
            raise ValueError(f"{path}: give at least one value")
        repeated, value = first_repeat(values)
        if repeated:
            raise ValueError(f"{path}: {value!r} is given twice (each value runs once)")
    return grid


def check_points(points: list[Overrides]) -> list[Overrides]:
    for point in points:
        for path in point:
            check_path(path)
    return points


def check_size(grid: dict[str, list[Any]], points: list[Overrides], source: str = "grid", what: str = "points") -> int:
    """The number of points ``grid`` and ``points`` expand to; ValueError naming the axes above ``MAX_POINTS``.

    Computed from the axis lengths alone, before anything is built.
    """
    product = math.prod(len(v) for v in grid.values()) if grid else 0
    total = product + len(points)
    if total > MAX_POINTS:
        axes = " x ".join(f"{path} ({len(values):,})" for path, values in grid.items())
        extra = f" + {len(points):,} explicit" if points else ""
        raise ValueError(
            f"{source}: grid: {axes or 'no axes'}{extra} = {total:,} {what}, above the limit of {MAX_POINTS:,}; "
            "narrow an axis or split the sweep"
        )
    return total


def expand(grid: dict[str, list[Any]], points: list[Overrides], source: str = "grid") -> list[Overrides]:
    """The cartesian product of ``grid`` (last path fastest), then ``points``; one empty point if both are empty.

    ValueError (``check_size``) when that is more than ``MAX_POINTS``.
    """
    check_size(grid, points, source)
    out: list[Overrides] = []
    if grid:
        paths = list(grid)
        out.extend(dict(zip(paths, combo, strict=True)) for combo in itertools.product(*grid.values()))
    out.extend(dict(p) for p in points)
    return out or [{}]


class GridFile(BaseModel):
    """The contents of a GRID file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: str | dict[str, Any] | None = Field(
        None, description="Scenario file (relative to the grid file), an inline scenario, or None for the default."
    )
    grid: dict[str, list[Any]] = Field(
        default_factory=dict, description="Dotted field path -> values; the sweep runs their cartesian product."
    )
    points: list[dict[str, Any]] = Field(
        default_factory=list, description="Explicit points (dotted path -> value), run after the product."
    )
    replicates: int = Field(1, ge=1, le=MAX_REPLICATES, description="Independent seeds per point.")

    @field_validator("grid")
    @classmethod
    def _grid(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return check_grid(value)

    @field_validator("points")
    @classmethod
    def _points(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return check_points(value)


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """A GRID file resolved: the base's raw mapping, where its relative paths start, and the points."""

    source: str
    base: dict[str, Any]
    base_dir: Path | None
    points: list[Overrides]
    replicates: int


def resolve_base(base: str | dict[str, Any] | None, file_dir: Path) -> tuple[dict[str, Any], Path | None, str]:
    """(raw base mapping, base_dir for its relative paths, a label) for a ``base`` entry."""
    if base is None:
        return {}, None, "default scenario"
    if isinstance(base, str):
        path = file_dir / base
        return read_scenario_dict(path), path.parent, str(path)
    return dict(base), file_dir, "inline base"


def load_grid(path: Path | str) -> SweepSpec:
    """Read and validate a GRID file; ValueError naming the file and field."""
    p = Path(path)
    data = read_yaml_mapping(p)
    try:
        grid = GridFile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(p))) from None
    check_size(grid.grid, grid.points, str(p))  # before the base is read
    base, base_dir, _ = resolve_base(grid.base, p.parent)
    return SweepSpec(str(p), base, base_dir, expand(grid.grid, grid.points, str(p)), grid.replicates)
