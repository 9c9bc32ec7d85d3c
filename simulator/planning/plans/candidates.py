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
tune:                             # optional: engine limits searched within every candidate
  policy.max_num_seqs: [64, 128, 256]
prices: {l40s: 0.89}              # optional USD per GPU-hour, by preset or spec name
```

Overrides are dotted field paths applied to the plan's scenario, as in a GRID file.

``tune`` (top level, or on one candidate, whose keys then replace the top level's) turns a
candidate into variants, one per combination of the values (``h100 [policy.max_num_seqs=64]``,
...), all of the same family: each is planned as a candidate (and pruned like one), and
the plan reports each family's best variant, the cheapest feasible one. What to tune is
the user's choice; the engine limits (``policy.max_num_seqs``, ``policy.max_num_batched_tokens``)
are what it is for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from simulator.config.errors import format_validation_error
from simulator.config.files import read_yaml_mapping
from simulator.planning.plans.prices import PriceTable
from simulator.planning.points.overrides import describe
from simulator.planning.sweeps.grid import check_grid, check_points, expand


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CandidateEntry(_Frozen):
    """One explicit candidate."""

    name: str | None = Field(None, min_length=1, description="Label in tables; defaults to the overrides.")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Dotted field path -> value.")
    tune: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Field path -> values searched within this candidate (replaces the top level's).",
    )

    @field_validator("overrides")
    @classmethod
    def _paths(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_points([value])
        return value

    @field_validator("tune")
    @classmethod
    def _tune(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return check_grid(value)


class CandidatesFile(_Frozen):
    """The contents of a CANDIDATES file."""

    candidates: list[CandidateEntry] = Field(default_factory=list, description="Explicit candidates.")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="A cartesian grid of candidates.")
    tune: dict[str, list[Any]] = Field(
        default_factory=dict, description="Field path -> values searched within every candidate (its variants)."
    )
    prices: PriceTable = Field(default_factory=lambda: PriceTable({}), description="USD per GPU-hour overrides.")

    @field_validator("grid", "tune")
    @classmethod
    def _grid(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return check_grid(value)


@dataclass(frozen=True, slots=True)
class CandidateSpec:
    """A named set of overrides of the plan's scenario; a tuned variant names its family and its tuned values."""

    name: str
    overrides: dict[str, Any]
    family: str | None = None
    tuned: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CandidateSet:
    source: str
    candidates: list[CandidateSpec]
    prices: dict[str, float]


def candidates_from(file: CandidatesFile, source: str) -> CandidateSet:
    """Explicit candidates, then the grid's, each expanded into its tuned variants; ValueError for an empty set
    or a repeated name."""
    entries = [(c.name or describe(c.overrides), dict(c.overrides), c.tune or file.tune) for c in file.candidates]
    if file.grid:
        entries += [(describe(o), o, file.tune) for o in expand(file.grid, [], source)]
    if not entries:
        raise ValueError(f"{source}: no candidates (give candidates: or grid:)")
    specs = []
    for name, overrides, tune in entries:
        specs += tuned_variants(name, overrides, tune, source)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"{source}: candidates: the name {spec.name!r} is used twice")
        seen.add(spec.name)
    return CandidateSet(source, specs, dict(file.prices.root))


def tuned_variants(
    name: str, overrides: dict[str, Any], tune: dict[str, list[Any]], source: str
) -> list[CandidateSpec]:
    """The candidate itself without ``tune``; else one variant per combination of the tuned values.

    ValueError when a tuned path is also one of the candidate's overrides (which would win is unclear).
    """
    if not tune:
        return [CandidateSpec(name, overrides)]
    clash = sorted(set(tune) & set(overrides))
    if clash:
        raise ValueError(f"{source}: candidate {name!r}: {clash[0]} is both an override and tuned; give it once")
    return [
        CandidateSpec(f"{name} [{describe(values)}]", overrides | values, family=name, tuned=values)
        for values in expand(tune, [], f"{source}: tune")
    ]


def load_candidates(path: Path | str, tune: dict[str, list[Any]] | None = None) -> CandidateSet:
    """Read and validate a CANDIDATES file; ValueError naming the file and field.

    ``tune`` (the ``--tune`` flags) applies where the file gives no ``tune:`` of its own
    (ValueError when it does). A candidate's own ``tune:`` replaces either.
    """
    p = Path(path)
    try:
        file = CandidatesFile.model_validate(read_yaml_mapping(p))
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, source=str(p))) from None
    if tune and file.tune:
        raise ValueError(f"--tune: {p} has its own tune:; give the values in one place")
    if tune:
        file = file.model_copy(update={"tune": check_grid(dict(tune))})
    return candidates_from(file, str(p))


def scenario_only(tune: dict[str, list[Any]] | None = None) -> CandidateSet:
    """The default candidate set: the scenario's own configuration (its variants with ``tune``)."""
    return CandidateSet("scenario", tuned_variants("scenario", {}, check_grid(dict(tune or {})), "--tune"), {})
