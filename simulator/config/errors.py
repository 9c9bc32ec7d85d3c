"""Turning pydantic validation errors into one readable message that names the field."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError


def format_validation_error(
    exc: ValidationError, source: str | None = None, names: Mapping[str, str] | None = None
) -> str:
    """One line per problem: ``source: field.path: message (got value)``.

    ``names`` renames field paths (a command's flags for the fields they set): a renamed
    problem is ``flag: message (got value)``, without the source. With ``names``, a problem
    of the whole object is its message alone.
    """
    lines = []
    for err in exc.errors():
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
    return "\n".join(lines)
