"""Validators and bounds shared by the workload config models (and the scenario's other models).

Every number of a config is finite (``FINITE``: pydantic's ``allow_inf_nan=False``), and
the ones where an absurd finite value breaks the arithmetic are bounded. The bounds, and
why each is where it is:

- ``MAX_SECONDS``, one year: any time a config sets (a duration, a delay, a think time,
  the span of a schedule). The simulator's clock is float64 seconds, whose resolution at
  one year is about 4 ns, a thousandth of the shortest engine step; far beyond it, steps
  vanish in rounding (arrivals at 1e300 s measure a TTFT of exactly 0).
- ``MIN_RATE_PER_S`` (one request a year) to ``MAX_RATE_PER_S`` (one a nanosecond): an
  arrival rate. Slower puts the next arrival past the horizon above; faster spaces
  arrivals below the clock's resolution (an infinite rate puts every request at t = 0).
  ``rate_range(count)``: the rates at which ``count`` arrivals validate (they span at most
  ``MAX_SECONDS``), the one definition the planner's load search reads too.
- ``MAX_TOKENS``, 10**9: any token length, 100 times the longest model context. Together
  with the request cap it keeps every token sum (a session's growing context, a step's
  batch) far from int64 overflow.
- ``MAX_NUM_REQUESTS``, 10**7: requests of a run (and sessions, users, turns). A run
  holds every request and its token times in memory, about 2 KB each: 20 GB at the cap.

A length or time distribution without an upper cut must keep its draws inside these
bounds: its 1-in-10^15 tail (8 standard deviations of a normal, or of a lognormal's log;
34.5 means of an exponential) must lie within the bound. Fewer than one draw in 10^15 can
land beyond it, which is never in a run of at most 10**7 requests; a length that still
does is cut to ``MAX_TOKENS``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

MAX_SECONDS = 365 * 86_400.0
MIN_RATE_PER_S = 1.0 / MAX_SECONDS
MAX_RATE_PER_S = 1e9
MAX_TOKENS = 1_000_000_000
MAX_NUM_REQUESTS = 10_000_000
# The largest relative share of a request class (weights are normalised; this keeps their sum finite).
MAX_WEIGHT = 1e12
# Standard deviations (of a normal, or of a lognormal's log) and exponential means that bound a
# distribution's 1-in-10^15 tail: P(Z > 8) = 6e-16, P(X > 34.5 mean) = 1e-15.
TAIL_SIGMAS = 8.0
TAIL_MEANS = math.log(1e15)

# The model config of every config base: frozen, unknown fields refused, numbers finite.
FINITE = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

HORIZON = "one year: the simulator's float64 clock keeps nanosecond resolution up to there"
TOKEN_LIMIT = "servesim's limit, 100 times the longest model context"
REQUEST_LIMIT = "a run keeps every request in memory, about 2 KB each"


def bound_error(message: str) -> PydanticCustomError:
    """An error for a number outside its bound (shown with the value given)."""
    return PydanticCustomError("number_out_of_range", "{message}", {"message": message})


def at_most(limit: float, message: str) -> AfterValidator:
    """An ``Annotated`` check: values above ``limit`` are refused with ``message``."""

    def check(value: Any) -> Any:
        if value is not None and value > limit:
            raise bound_error(message)
        return value

    return AfterValidator(check)


def at_least(limit: float, message: str) -> AfterValidator:
    """An ``Annotated`` check: values below ``limit`` are refused with ``message``."""

    def check(value: Any) -> Any:
        if value is not None and value < limit:
            raise bound_error(message)
        return value

    return AfterValidator(check)


def _at_most(limit: float, unit: str, why: str) -> AfterValidator:
    return at_most(limit, f"must be at most {limit:,.0f}{unit} ({why})")


def _rate(value: float) -> float:
    if value < MIN_RATE_PER_S:
        raise bound_error(
            f"must be at least {MIN_RATE_PER_S:.3g} requests/s (one a year): slower arrivals land past the "
            f"one-year horizon where the simulator's clock keeps nanosecond resolution"
        )
    if value > MAX_RATE_PER_S:
        raise bound_error(
            f"must be at most {MAX_RATE_PER_S:g} requests/s (one a nanosecond, the simulator's time resolution)"
        )
    return value


def rate_range(count: int) -> tuple[float, float]:
    """The slowest and fastest arrival rate a workload of ``count`` arrivals validates at, requests/s.

    The one definition of those bounds for whoever sets a rate (``simulator.planning``'s load
    search among them): a rate is ``MIN_RATE_PER_S`` to ``MAX_RATE_PER_S``, and ``count``
    arrivals at it span at most ``MAX_SECONDS`` (``workloads.arrivals.check_schedule``: count /
    rate for Poisson, gamma and constant arrivals).
    """
    low = max(count / MAX_SECONDS, MIN_RATE_PER_S)
    while count / low > MAX_SECONDS:  # the division rounded up past the horizon
        low = math.nextafter(low, math.inf)
    return low, MAX_RATE_PER_S


def _rate_or_zero(value: float) -> float:
    return value if value == 0 else _rate(value)


Seconds = Annotated[float, Field(ge=0), _at_most(MAX_SECONDS, " s", HORIZON)]
"""A time in seconds, 0 to one year."""
PositiveSeconds = Annotated[float, Field(gt=0), _at_most(MAX_SECONDS, " s", HORIZON)]
"""A time in seconds above 0, at most one year."""
RatePerS = Annotated[float, Field(gt=0), AfterValidator(_rate)]
"""An arrival rate, one a year to one a nanosecond."""
RateOrZeroPerS = Annotated[float, Field(ge=0), AfterValidator(_rate_or_zero)]
"""An arrival rate, or 0 for none."""
Tokens = Annotated[int, Field(ge=1), _at_most(MAX_TOKENS, " tokens", TOKEN_LIMIT)]
"""A token length, 1 to MAX_TOKENS."""
TokensOrZero = Annotated[int, Field(ge=0), _at_most(MAX_TOKENS, " tokens", TOKEN_LIMIT)]
"""A token length, 0 to MAX_TOKENS."""
MeanTokens = Annotated[float, Field(gt=0), _at_most(MAX_TOKENS, " tokens", TOKEN_LIMIT)]
"""A mean or median token length."""
NumRequests = Annotated[int, Field(ge=1), _at_most(MAX_NUM_REQUESTS, "", REQUEST_LIMIT)]
"""A count of requests (or sessions, or users), 1 to MAX_NUM_REQUESTS."""
Count = Annotated[int, Field(ge=0), _at_most(MAX_NUM_REQUESTS, "", REQUEST_LIMIT)]
"""A count of turns or calls, 0 to MAX_NUM_REQUESTS."""


def field_error(model: str, loc: tuple[str | int, ...], message: str, value: Any) -> ValidationError:
    """A validation error located at ``loc`` (relative to the model), for a model validator to raise.

    pydantic prefixes the location with where the model sits, so the message names the field
    (``workload.duration_s``) and not just the model.
    """
    return ValidationError.from_exception_data(
        model, [InitErrorDetails(type=bound_error(message), loc=loc, input=value)]
    )


def tail_beyond(
    model: str,
    loc: tuple[str | int, ...],
    value: Any,
    tail: float,
    limit: float,
    unit: str,
    what: str,
    remedy: str,
) -> None:
    """Raise a located error when a distribution's 1-in-10^15 tail ``tail`` lies beyond ``limit``."""
    if tail > limit:
        raise field_error(
            model,
            loc,
            f"{what} reach {tail:.3g}{unit} in their 1-in-10^15 tail, beyond the limit of {limit:,.0f}{unit}; {remedy}",
            value,
        )


def lognormal_tail(median: float, sigma: float) -> float:
    """The 1-in-10^15 tail of a lognormal: median x e^(8 sigma) (inf when it overflows)."""
    try:
        return median * math.exp(TAIL_SIGMAS * sigma)
    except OverflowError:
        return math.inf


def one_stop_rule(data: Any) -> Any:
    """A workload stops after a number of requests or at a time, not both (a ``before`` model validator)."""
    if isinstance(data, dict) and data.get("num_requests") is not None and data.get("duration_s") is not None:
        raise ValueError("give num_requests or duration_s, not both")
    return data


def non_finite_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], float]]:
    """(location, value) of every inf or nan float inside nested mappings and lists of raw input."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, value)]
    found: list[tuple[tuple[str | int, ...], float]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += non_finite_paths(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found += non_finite_paths(item, (*path, i))
    return found


def refuse_non_finite(model: str, data: Any) -> None:
    """Raise a located ``finite_number`` error for the first inf or nan in raw input (for models
    this package cannot give ``allow_inf_nan=False`` itself)."""
    found = non_finite_paths(data)
    if found:
        loc, value = found[0]
        raise ValidationError.from_exception_data(model, [InitErrorDetails(type="finite_number", loc=loc, input=value)])


def first_repeat(values: Any) -> tuple[bool, Any]:
    """(True, the first value given a second time) in ``values``, else (False, None).

    For lists a user writes (a flag's comma-separated values, a grid's axis), where a repeat runs
    the same thing twice. Values compare as JSON (``true`` and ``1`` differ; mappings by content).
    """
    import json

    seen: set[str] = set()
    for value in values:
        key = json.dumps(value, sort_keys=True, default=repr)
        if key in seen:
            return True, value
        seen.add(key)
    return False, None
