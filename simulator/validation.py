"""Turning pydantic validation errors into one readable message that names the field."""

from __future__ import annotations

from pydantic import ValidationError


def format_validation_error(exc: ValidationError, source: str | None = None) -> str:
    """One line per problem: ``source: field.path: message (got value)``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (misspelt?)"
        got = ""
        if err["type"] not in ("missing", "extra_forbidden", "value_error") and "input" in err:
            shown = repr(err["input"])
            got = f" (got {shown[:60]})"
        prefix = f"{source}: " if source else ""
        lines.append(f"{prefix}{loc}: {msg}{got}")
    return "\n".join(lines)
