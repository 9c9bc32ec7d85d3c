"""Where measured kernel tables live, and which of them a deployment reads.

A *table set* is one GPU's folder laid out as NVIDIA aiconfigurator's silicon database lays it out:
``<family>/<framework>/<version>/<table>.parquet`` with a ``collection_meta.yaml`` beside each table
(families ``gemm``, ``attention``, ``comm``, ``moe``, ``mla``, ...; frameworks ``vllm``, ``sglang``,
``trtllm``, and ``nccl`` under ``comm``). Two sources give table sets, read by the same code:

- the ``aiconfigurator-core`` package (a dependency; Apache-2.0, NVIDIA): ``aiconfigurator_core/systems/data/<gpu>``
  for the GPUs it measures (:func:`systems`);
- a folder written by ``servesim calibrate`` on the user's own device (:func:`folder_set`).

:func:`select` picks the framework and version a deployment reads: the version asked for, or the newest
the GEMM tables have for that framework. ``Selection.table`` then finds each table file at the newest
version not newer than that one (the backward fill aiconfigurator itself uses,
``systems/query_versions.yaml``); a table the framework never measured on this GPU is another
framework's (vLLM's first), named so in its description.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

DEPENDENCY = "aiconfigurator-core"
FRAMEWORKS = ("vllm", "sglang", "trtllm")
FAMILIES = ("gemm", "attention", "comm", "moe", "mla", "sparse_attention", "quantize")
COLLECTIVE_LIBRARIES = ("nccl",)  # comm/<library>/<version>: the collective library's own tables


def _version_key(version: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def version_key(version: str) -> tuple[int, Version | str]:
    """Sort key of a table version: releases by PEP 440 order, any other name before them."""
    return _version_key(version)


def newest(versions: list[str] | tuple[str, ...]) -> str:
    return max(versions, key=_version_key)


@cache
def dependency_root() -> Path | None:
    """``aiconfigurator_core/systems/data`` of the installed dependency, or None when it is not installed."""
    try:
        root = importlib.resources.files("aiconfigurator_core") / "systems" / "data"
    except ModuleNotFoundError:
        return None
    path = Path(str(root))
    return path if path.is_dir() else None


@cache
def dependency_version() -> str | None:
    try:
        return importlib.metadata.version(DEPENDENCY)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class TableSet:
    """One GPU's measured tables: a folder in the database layout, and where it comes from."""

    root: Path
    name: str  # the dependency's system name (``h200_sxm``) or the folder's path
    source: str  # "aiconfigurator-core 0.12.0" or "folder /path/to/tables"

    def versions(self) -> dict[str, dict[str, list[str]]]:
        """``{family: {framework: [versions, oldest first]}}`` of the tables present (parquet files only)."""
        out: dict[str, dict[str, list[str]]] = {}
        if not self.root.is_dir():
            return out
        for family in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for framework in sorted(p for p in family.iterdir() if p.is_dir()):
                found = [v.name for v in framework.iterdir() if v.is_dir() and any(v.glob("*.parquet"))]
                if found:
                    out.setdefault(family.name, {})[framework.name] = sorted(found, key=_version_key)
        return out

    def frameworks(self) -> dict[str, list[str]]:
        """``{framework: [versions of its GEMM tables]}``: the engines whose kernels were measured here."""
        return dict(self.versions().get("gemm", {}))


@dataclass(frozen=True)
class Table:
    """One measured table a deployment reads: its file, and the framework and version it was measured with."""

    path: Path
    framework: str
    version: str
    note: str = ""  # why not the framework or version asked for

    def describe(self) -> str:
        return f"{self.framework} {self.version}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Selection:
    """The framework and version a deployment reads its tables from (see :func:`select`)."""

    tables: TableSet
    framework: str  # asked for
    version: str  # asked for, or the newest GEMM tables of ``base``
    base: str  # the framework read (``framework`` unless it was not measured on this GPU)

    def table(self, family: str, filename: str) -> Table | None:
        """The ``<family>/<fw>/<v>/<filename>`` read: ``base``'s newest version not newer than ``version`` (else its
        oldest newer one), else another framework's newest (vLLM's first), else None."""
        root = self.tables.root / family
        limit = _version_key(self.version)
        order = [self.base] + [f for f in ("vllm", *FRAMEWORKS) if f != self.base]
        if root.is_dir():
            order += sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in order)
        for fw in order:
            if fw in COLLECTIVE_LIBRARIES:
                continue
            folder = root / fw
            versions = [p.parent.name for p in folder.glob(f"*/{filename}")]
            if not versions:
                continue
            if fw == self.base:
                older = [v for v in versions if _version_key(v) <= limit]
                chosen = newest(older) if older else min(versions, key=_version_key)
                note = (
                    "" if chosen == self.version else f"newest measured {'before' if older else 'after'} {self.version}"
                )
            else:
                chosen = newest(versions)
                note = f"{self.base} not measured"
            if fw != self.framework and self.base != self.framework and not note:
                note = f"{self.framework} not measured on {self.tables.name}"
            return Table(folder / chosen / filename, fw, chosen, note)
        return None

    def older_tables(self, family: str, filename: str) -> list[Table]:
        """The ``base`` framework's other versions of ``filename`` older than the one :meth:`table` reads, newest
        first: where a shape was not measured at that version, an older version's measurement of it is the same
        engine's kernel (read per shape, e.g. MoE shapes the collector dropped from a later run)."""
        chosen = self.table(family, filename)
        if chosen is None or chosen.framework != self.base:
            return []
        folder = self.tables.root / family / self.base
        versions = [p.parent.name for p in folder.glob(f"*/{filename}")]
        older = sorted((v for v in versions if _version_key(v) < _version_key(chosen.version)), key=_version_key)
        note = f"shape not measured at {chosen.version}"
        return [Table(folder / v / filename, self.base, v, note) for v in older[::-1]]

    def library(self, filename: str = "nccl_perf.parquet", library: str = "nccl") -> Table | None:
        """The newest ``comm/<library>/<version>/<filename>`` (NCCL's tables are the library's, not an engine's)."""
        found = [p.parent.name for p in (self.tables.root / "comm" / library).glob(f"*/{filename}")]
        if not found:
            return None
        chosen = newest(found)
        return Table(self.tables.root / "comm" / library / chosen / filename, library, chosen)


def systems() -> tuple[str, ...]:
    """The GPUs whose tables the dependency ships (a folder with at least one parquet table)."""
    root = dependency_root()
    if root is None:
        return ()
    return tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*/*/*/*.parquet"))))


def table_set(system: str) -> TableSet:
    """The dependency's tables of GPU ``system`` (``h200_sxm``); ValueError naming the GPUs it has otherwise."""
    root = dependency_root()
    if root is None:
        raise ValueError(f"measured tables need the {DEPENDENCY} package (pip install {DEPENDENCY})")
    if system not in systems():
        raise ValueError(f"no measured kernel tables for {system!r} in {DEPENDENCY} (it has: {', '.join(systems())})")
    return TableSet(root / system, system, f"{DEPENDENCY} {dependency_version()}")


def folder_set(path: str | Path) -> TableSet:
    """A folder of tables in the database layout (``servesim calibrate`` writes one); ValueError when it holds none."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ValueError(f"{path}: no such folder of measured tables")
    tables = TableSet(root.resolve(), str(root), f"folder {root}")
    if "gemm" not in tables.versions():
        raise ValueError(f"{path}: no gemm/<framework>/<version>/gemm_perf.parquet (not a folder of measured tables)")
    return tables


def resolve(tables: str | Path) -> TableSet:
    """A table set by name: a GPU of the dependency, else a folder (a path with a separator or that exists)."""
    text = str(tables)
    if text in systems() or not ("/" in text or Path(text).expanduser().is_dir()):
        return table_set(text)
    return folder_set(text)


def select(tables: TableSet, framework: str = "vllm", version: str | None = None) -> Selection:
    """The framework and version ``tables`` are read from for a deployment on ``framework``.

    ``version`` None takes the newest version of the framework's GEMM tables. A framework never measured on
    this GPU reads vLLM's tables (or another's), noted in each table's description; asking for a version of
    it, or for a version that was not measured, is a ValueError naming what there is.
    """
    gemm = tables.versions().get("gemm", {})
    if not gemm:
        raise ValueError(f"{tables.name}: no GEMM tables")
    base = framework
    if framework not in gemm:
        if version is not None:
            raise ValueError(
                f"cost_model.framework: {framework} was not measured on {tables.name} "
                f"(measured: {', '.join(f'{f} {newest(v)}' for f, v in sorted(gemm.items()))})"
            )
        base = next(f for f in ("vllm", *FRAMEWORKS, *sorted(gemm)) if f in gemm)
    if version is None:
        version = newest(gemm[base])
    elif version not in gemm[base]:
        raise ValueError(
            f"cost_model.version: {framework} {version} was not measured on {tables.name} "
            f"(measured: {', '.join(gemm[base])})"
        )
    return Selection(tables, framework, version, base)
