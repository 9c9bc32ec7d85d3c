"""Booleans are not numbers: ``true`` where a config takes a number is refused, naming the field.

pydantic's lax mode takes ``true`` as 1 and ``false`` as 0 for an int or float field, so
``parallelism: {tp: true}`` ran one GPU. Rather than a strict type on every numeric field
of every model (strict ints would also refuse ``tp: 1.0``, which YAML users write), the
models users write (a scenario, a spec file) derive from ``NoBoolNumbers``, whose validator
looks at what validation made of the input, through every model inside, unions, registries'
parameter models and before-validators resolved:

- validation succeeded: a boolean of the input that became a number is refused;
- validation failed: the input is validated again with every boolean replaced by a marker
  string, and a number field that refuses the marker is where a boolean was given (so
  ``max_num_seqs: true`` is named as such, not as "max_num_batched_tokens (1) must be at
  least ..." from the 1 it became); otherwise the first failure stands.

Bool fields keep their booleans and are left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, RootModel, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]
_MARKER = "\x00a boolean given here\x00"
# pydantic's error types for a string a number field cannot read
_NUMBER_ERRORS = frozenset({"int_parsing", "float_parsing", "int_type", "float_type", "decimal_parsing"})


def coerced_bools(raw: Any, value: Any, loc: Loc = ()) -> list[Loc]:
    """Every location where a boolean of raw input became a number in the validated ``value``."""
    if isinstance(raw, bool):
        return [loc] if isinstance(value, (int, float)) and not isinstance(value, bool) else []
    while isinstance(value, RootModel):
        value = value.root
    found: list[Loc] = []
    if isinstance(raw, dict) and isinstance(value, (BaseModel, dict)):
        validated = dict(value) if isinstance(value, BaseModel) else value  # a model iterates as (field, value)
        for key, item in raw.items():
            if isinstance(key, (str, int)) and key in validated:
                found += coerced_bools(item, validated[key], (*loc, key))
    elif isinstance(raw, (list, tuple)) and isinstance(value, (list, tuple)) and len(raw) == len(value):
        for i, (item, validated) in enumerate(zip(raw, value, strict=True)):
            found += coerced_bools(item, validated, (*loc, i))
    return found


def _marked(raw: Any, loc: Loc = ()) -> tuple[Any, list[Loc]]:
    """``raw`` with every boolean replaced by the marker, and where they were."""
    if isinstance(raw, bool):
        return _MARKER, [loc]
    if isinstance(raw, dict):
        out, where = {}, []
        for key, item in raw.items():
            out[key], found = _marked(item, (*loc, key))
            where += found
        return out, where
    if isinstance(raw, (list, tuple)):
        items = [_marked(item, (*loc, i)) for i, item in enumerate(raw)]
        return type(raw)(item for item, _ in items), [w for _, found in items for w in found]
    return raw, []


def _bool_in_number_field(raw: Any, validate: Callable[[Any], Any]) -> Loc | None:
    """Where a boolean of ``raw`` sits in a number field, found by validating it with booleans marked; else None."""
    marked, where = _marked(raw)
    if not where:
        return None
    try:
        validate(marked)
    except ValidationError as exc:
        for err in exc.errors():
            if err["type"] in _NUMBER_ERRORS and err.get("input") == _MARKER:
                # pydantic's location may hold a union member's tag besides the input's keys
                loc = tuple(err["loc"])
                return next((w for w in where if w and w[-1] == loc[-1] and _within(w, loc)), None)
    return None


def _within(short: Loc, long: Loc) -> bool:
    """``short`` is ``long`` with some parts left out (the tags pydantic adds), in order."""
    parts = iter(long)
    return all(any(p == q for q in parts) for p in short)


def _error(model: str, raw: Any, loc: Loc) -> ValidationError:
    item = raw
    for key in loc:
        item = item[key]
    kind = PydanticCustomError("bool_not_number", "Input should be a number, not a boolean")
    return ValidationError.from_exception_data(model, [InitErrorDetails(type=kind, loc=loc, input=item)])


def validate_refusing_bools(model: str, raw: Any, validate: Callable[[Any], Any]) -> Any:
    """``validate(raw)``, refusing a boolean given where a number belongs (a ValidationError naming it)."""
    try:
        value = validate(raw)
    except ValidationError:
        loc = _bool_in_number_field(raw, validate)
        if loc is None:
            raise
        raise _error(model, raw, loc) from None
    found = coerced_bools(raw, value)
    if found:
        raise _error(model, raw, found[0])
    return value


class NoBoolNumbers(BaseModel):
    """A base for the models users write: a boolean where any field of the model, or of a model inside
    it, takes a number is refused, naming the field."""

    @model_validator(mode="wrap")
    @classmethod
    def _no_bool_numbers(cls, data: Any, handler: Any) -> Any:
        return validate_refusing_bools(cls.__name__, data, handler)
