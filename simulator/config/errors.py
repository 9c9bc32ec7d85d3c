"""Turning pydantic validation errors into one readable message that names the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError


def format_validation_error(
    exc: ValidationError, source: str | None = None, names: Mapping[str, str] | None = None
) -> str:
    """The first problem, in one line: ``source: field.path: message (got value)``.

    Bad input gets one line (a spec whose every number is infinite is one line, not seven),
    followed by ``(and N more problems)`` when there are others; fixing it shows the next. An
    unknown field comes first: a misspelt name is why its field is "missing".
    ``names`` renames field paths (a command's flags for the fields they set): a renamed
    problem is ``flag: message (got value)``, without the source. With ``names``, a problem
    of the whole object is its message alone.
    """
    lines = problem_lines(exc, source, names)
    more = len(lines) - 1
    return lines[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _unknown_fields_first(err: Any) -> tuple[bool, int]:
    """Sort key: unknown fields first, the outermost of them first (``modle:`` before ``workload.arival:``)."""
    unknown = err["type"] == "extra_forbidden"
    return not unknown, len(err["loc"]) if unknown else 0


def problem_lines(exc: ValidationError, source: str | None = None, names: Mapping[str, str] | None = None) -> list[str]:
    """Every problem of ``exc``, one line each, unknown fields first; ``format_validation_error`` writes the first."""
    lines = []
    errors = sorted(exc.errors(), key=_unknown_fields_first)  # stable: pydantic's order otherwise
    for err in errors:
        loc = ".".join(str(part) for part in err["loc"])
        renamed = names is not None and loc in names
        if names is not None:
            loc = names.get(loc, loc)
        elif not loc:
            loc = "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (misspelt?)"
        got = ""
        if err["type"] not in ("missing", "extra_forbidden", "value_error") and "input" in err:
            shown = repr(err["input"])
            got = f" (got {shown[:60]})"
        prefix = f"{source}: " if source and not renamed else ""
        lines.append(f"{prefix}{loc}: {msg}{got}" if loc else f"{prefix}{msg}")
    return lines
