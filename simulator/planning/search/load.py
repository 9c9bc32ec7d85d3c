"""The load a plan searches over, for every kind of workload, and how one load point is configured.

A plan asks for the largest load one replica sustains within the SLOs. What a "load" is
depends on the scenario's workload:

===================  ====================  ==========  ====================================================
workload             load                  unit        one load point x simulates
===================  ====================  ==========  ====================================================
synthetic            arrival rate          req/s       ``arrival.rate_per_s = x``, ``num_requests = N``
trace (timestamps)   request rate          req/s       ``time_scale = x / r0``, ``num_requests = n``
trace (lengths only) arrival rate          req/s       ``arrival.rate_per_s = x``, ``num_requests = n``
sessions             session start rate    sessions/s  ``arrival.rate_per_s = x``, ``num_sessions = S``
closed_loop          concurrency (users)   users       ``concurrency = x``, ``num_requests = max(N, 10 x)``
===================  ====================  ==========  ====================================================

with ``N`` the plan's requests per point, ``duration_s`` dropped in every case, and:

- trace: ``n = min(N, the requests the trace holds after its window)``, chosen by the
  trace's own ``sample`` rule, the same requests at every rate; ``r0`` is their mean rate
  at ``time_scale`` 1, ``stream_rate`` of the replayed stream (requests over the span of
  the independent arrivals), so replaying at ``x / r0`` times the trace's speed offers
  ``x`` requests/s (think times between a session's requests shrink alike);
- sessions: ``S = ceil(N / c)``, ``c`` the mean LLM calls per session of ``N`` sessions
  drawn with the point's seed, so a point holds about ``N`` requests;
- closed loop: at least ``CLOSED_LOOP_REQUESTS_PER_USER`` requests per user, so that every
  user sends several requests after the warm-up.

A load point is only simulated inside ``Load.bounds()``: for rates, the rates a scenario
validates at (``workloads.validators.rate_range``: its arrivals span at most the one-year
horizon, and the rate is at most one a nanosecond), and its arrivals span at least
``MIN_SPAN_S`` (below, every request arrives at once and a higher rate changes nothing);
for a closed loop between 1 and ``MAX_USERS`` users. A search that reaches the slowest
rate without meeting the SLOs reports the candidate infeasible, never a validation error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from simulator.config.schema import ScenarioConfig
from workloads import RequestStream, generate
from workloads.closed_loop import ClosedLoopWorkload
from workloads.replay import TraceWorkload
from workloads.sessions import SessionWorkload
from workloads.validators import HORIZON, MAX_RATE_PER_S, MAX_SECONDS, rate_range

MIN_SPAN_S = 1e-6
MAX_USERS = 65_536
CLOSED_LOOP_REQUESTS_PER_USER = 10
LoadKind = Literal["arrival_rate", "trace_rate", "session_rate", "concurrency"]
UNITS: dict[str, str] = {
    "arrival_rate": "req/s",
    "trace_rate": "req/s",
    "session_rate": "sessions/s",
    "concurrency": "users",
}
PATHS: dict[str, str] = {
    "arrival_rate": "workload.arrival.rate_per_s",
    "trace_rate": "workload.time_scale",
    "session_rate": "workload.arrival.rate_per_s",
    "concurrency": "workload.concurrency",
}


@dataclass(frozen=True, slots=True)
class Load:
    """How a load point of one (candidate, seed) is configured; see the module docstring."""

    kind: LoadKind
    count: int  # requests per point (sessions for session_rate; the floor for concurrency)
    native_rate_per_s: float | None = None  # trace_rate: the replayed requests' mean rate at time_scale 1

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    @property
    def path(self) -> str:
        """The scenario field the load sets."""
        return PATHS[self.kind]

    @property
    def integer(self) -> bool:
        return self.kind == "concurrency"

    def bounds(self) -> tuple[float, float]:
        """The smallest and largest load a point may be simulated at."""
        if self.integer:
            return 1.0, float(MAX_USERS)
        low, high = rate_range(self.count)
        return low, min(high, self.count / MIN_SPAN_S)

    def overrides(self, load: float) -> dict[str, Any]:
        """Dotted-path overrides that put one copy of the scenario at ``load``."""
        if self.kind == "concurrency":
            users = users_at(load)
            return {
                "workload.concurrency": users,
                "workload.num_requests": max(self.count, CLOSED_LOOP_REQUESTS_PER_USER * users),
            }
        if self.kind == "trace_rate":
            assert self.native_rate_per_s is not None
            return {
                "workload.time_scale": load / self.native_rate_per_s,
                "workload.num_requests": self.count,
                "workload.duration_s": None,
            }
        count = "workload.num_sessions" if self.kind == "session_rate" else "workload.num_requests"
        return {"workload.arrival.rate_per_s": load, count: self.count, "workload.duration_s": None}


def users_at(load: float) -> int:
    """The whole number of users a concurrency load runs with (a fractional share rounds up)."""
    return max(1, math.ceil(load - 1e-9))


def stream_rate(stream: RequestStream) -> float | None:
    """Requests per second of a stream: its requests over the span of its independent arrivals.

    ``(n - 1) / span`` for a stream of independent requests; a stream with sessions counts
    every request of them (``n / roots x (roots - 1) / span``). None when the independent
    arrivals do not spread over time (fewer than two, or all at one instant).
    """
    roots = stream.arrival_s if stream.parent is None else stream.arrival_s[stream.parent < 0]
    if len(roots) < 2:
        return None
    span = float(roots[-1] - roots[0])
    if not span > 0 or not math.isfinite(span):
        return None
    return len(stream) / len(roots) * (len(roots) - 1) / span


def _arrival_rate(workload: Any, what: str) -> float:
    arrival = workload.arrival
    if "rate_per_s" not in type(arrival).model_fields:
        raise ValueError(f"arrival kind {arrival.kind!r} has no rate to search over ({what})")
    return float(arrival.rate_per_s)


def load_kind(cfg: ScenarioConfig) -> LoadKind:
    """The kind of load a plan searches for ``cfg``'s workload (a trace is timed unless it has an arrival)."""
    w = cfg.workload.root
    if isinstance(w, ClosedLoopWorkload):
        return "concurrency"
    if isinstance(w, SessionWorkload):
        return "session_rate"
    if isinstance(w, TraceWorkload):
        return "trace_rate" if w.arrival is None else "arrival_rate"
    return "arrival_rate"


def own_load(cfg: ScenarioConfig, base_dir: Path | None = None) -> float:
    """The load ``cfg`` itself offers, in its load unit: the plan's default target.

    Its arrival rate, its session start rate, its number of users, or for a trace with
    timestamps the mean rate of the requests it replays as configured (window, count,
    ``time_scale``). ValueError when it has none.
    """
    w = cfg.workload.root
    kind = load_kind(cfg)
    if kind == "concurrency":
        return float(w.concurrency)  # type: ignore[union-attr]
    if kind == "trace_rate":
        rate = stream_rate(generate(w, cfg.seed, base_dir))
        if rate is None:
            raise ValueError(f"trace {w.source}: its requests do not spread over time, so it has no rate")  # type: ignore[union-attr]
        return rate
    return _arrival_rate(w, "session starts" if kind == "session_rate" else "requests")


def plan_load(cfg: ScenarioConfig, seed: int, base_dir: Path | None, requests_per_point: int) -> Load:
    """The ``Load`` of ``cfg`` at ``seed`` with ``requests_per_point``; ValueError when it has no load to vary.

    Reads a trace (and draws sessions) to size the points; see the module docstring.
    """
    w = cfg.workload.root
    kind = load_kind(cfg)
    if kind == "concurrency":
        return Load(kind, requests_per_point)
    if kind == "session_rate":
        _arrival_rate(w, "session starts")
        drawn = generate(w.model_copy(update={"num_sessions": requests_per_point, "duration_s": None}), seed, base_dir)
        calls = len(drawn) / requests_per_point
        return Load(kind, max(2, math.ceil(requests_per_point / calls)))
    if not isinstance(w, TraceWorkload):
        _arrival_rate(w, "requests")
        return Load(kind, requests_per_point)
    # a trace: replay the same requests at every load, at most requests_per_point of them
    if kind == "arrival_rate":
        _arrival_rate(w, "requests")
    whole = w.model_copy(update={"num_requests": None, "duration_s": None, "time_scale": 1.0})
    available = len(generate(whole, seed, base_dir))
    count = min(requests_per_point, available)
    if kind == "arrival_rate":
        return Load(kind, count)
    chosen = generate(whole.model_copy(update={"num_requests": count}), seed, base_dir)
    rate = stream_rate(chosen)
    if rate is None:
        raise ValueError(
            f"trace {w.source}: the {count} requests replayed do not spread over time, so no time scale gives "
            "them a rate (widen window_s)"
        )
    return Load(kind, count, rate)


def check_load(load: Load, value: float, what: str) -> None:
    """ValueError (naming ``what``) unless ``value`` is a load this kind of point can be simulated at."""
    low, high = load.bounds()
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} {value:g}: must be a positive finite number")
    if load.integer and value != round(value):
        raise ValueError(f"{what} {value:g}: the load of a closed-loop workload is its number of users, a whole number")
    if not low <= value <= high:
        raise ValueError(f"{what} {value:g} {load.unit}: outside [{low:.3g}, {high:.3g}], {_bounds_reason(load)}")


def _bounds_reason(load: Load) -> str:
    if load.integer:
        return f"the users a closed-loop point can simulate (1 to {MAX_USERS:,})"
    return (
        f"the loads at which {load.count:,} {'sessions' if load.kind == 'session_rate' else 'requests'} per point "
        f"arrive over {MIN_SPAN_S:g} s to {MAX_SECONDS:,.0f} s of simulated time, at most {MAX_RATE_PER_S:g} a second "
        f"(below, every request arrives at once; beyond, {HORIZON})"
    )


def search_range(load: Load, target: float, max_doublings: int, max_halvings: int) -> tuple[float, float]:
    """(floor, ceiling) of the rate search: target / 2^halvings to target x 2^doublings, within ``bounds``.

    Every claim the search makes is relative to this range: "unbounded" means no load up to
    the ceiling (at least the target) missed the SLOs, "infeasible" that none down to the
    floor met them.
    """
    low, high = load.bounds()
    floor, ceiling = max(target / 2.0**max_halvings, low), min(target * 2.0**max_doublings, high)
    if load.integer:
        floor, ceiling = float(math.ceil(floor)), float(math.floor(ceiling))
    return floor, ceiling
