"""The CANDIDATES file of ``servesim plan``: the configurations to size and compare.

```yaml
candidates:                       # explicit candidates
  - name: h100                    # optional; defaults to a label of the overrides
    overrides: {hardware: h100-sxm}
  - name: a100-tp2
    overrides: {hardware: a100-80gb, parallelism.tp: 2, policy.max_num_seqs: 128}
grid:                             # optional: every combination is a candidate too
  hardware: [l40s, h200]
  parallelism.tp: [1, 2]
prices: {l40s: 0.89}              # optional USD per GPU-hour, by preset or spec name
```

Overrides are dotted field paths applied to the plan's scenario, as in a GRID file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from simulator.config.errors import format_validation_error
from simulator.config.files import read_yaml_mapping
from simulator.planning.grid import check_grid, check_points, expand
from simulator.planning.overrides import describe
from simulator.planning.prices import PriceTable


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CandidateEntry(_Frozen):
    """One explicit candidate."""

    name: str | None = Field(None, min_length=1, description="Label in tables; defaults to the overrides.")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Dotted field path -> value.")

    @field_validator("overrides")
    @classmethod
    def _paths(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_points([value])
        return value


class CandidatesFile(_Frozen):
    """The contents of a CANDIDATES file."""

    candidates: list[CandidateEntry] = Field(default_factory=list, description="Explicit candidates.")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="A cartesian grid of candidates.")
    prices: PriceTable = Field(default_factory=lambda: PriceTable({}), description="USD per GPU-hour overrides.")

    @field_validator("grid")
    @classmethod
    def _grid(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return check_grid(value)


@dataclass(frozen=True, slots=True)
class CandidateSpec:
    """A named set of overrides of the plan's scenario."""

    name: str
    overrides: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CandidateSet:
    source: str
    candidates: list[CandidateSpec]
    prices: dict[str, float]


def candidates_from(file: CandidatesFile, source: str) -> CandidateSet:
    """Explicit candidates, then the grid's; ValueError for an empty set or a repeated name."""
    specs = [CandidateSpec(c.name or describe(c.overrides), dict(c.overrides)) for c in file.candidates]
    if file.grid:
        specs += [CandidateSpec(describe(o), o) for o in expand(file.grid, [], source)]
    if not specs:
        raise ValueError(f"{source}: no candidates (give candidates: or grid:)")
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"{source}: candidates: the name {spec.name!r} is used twice")
        seen.add(spec.name)
    return CandidateSet(source, specs, dict(file.prices.root))


def load_candidates(path: Path | str) -> CandidateSet:
    """Read and validate a CANDIDATES file; ValueError naming the file and field."""
    p = Path(path)
    try:
        file = CandidatesFile.model_validate(read_yaml_mapping(p))
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(p))) from None
    return candidates_from(file, str(p))


def scenario_only() -> CandidateSet:
    """The default candidate set: the scenario's own configuration."""
    return CandidateSet("scenario", [CandidateSpec("scenario", {})], {})
