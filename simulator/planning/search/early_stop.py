"""Ending a load point's simulation once its SLO verdicts are certainly False.

An overloaded point is the costliest to simulate (its batches grow without bound) and its
verdict is plain long before the end. ``VerdictWatch`` reads the requests of a running
simulation at regular simulated times and raises ``VerdictKnown`` out of ``env.run()`` as
soon as both of ``steady_stats``'s verdicts, ``meets_slo`` and ``meets_attainment``, are
sure to be False whatever happens next. It never stops a point whose full run would give a
True verdict: the test of the watch is that the verdicts equal the full run's.

What is certain at simulated time ``now``, for a request of the measurement window (known
up front from the arrival times, ordered as ``steady_stats`` orders them):

- rejected: it fails every bound (its latencies count as +inf);
- finished: its latencies, computed as ``request_latencies`` computes them (same float
  operations in the same order), against ``bound * (1 + SLO_SLACK)``;
- no first token yet: its first token comes at ``now`` or later, so its TTFT is at least
  ``now + stream_delay_s - arrival_s``; likewise its E2EL while unfinished, and while
  unfinished after its first token its TPOT is at least ``(now - first_token_s) / (n - 1)``
  (``n`` = its output tokens). Float sums are monotone, so these lower bounds computed in
  request_latencies' order are below the final values; a request known to fail only by a
  lower bound must exceed the bound by a further relative ``MARGIN``, and ``now`` is taken
  ``STAMP_SLACK`` (relative) early, because a fast-forward window stamps its clock sums,
  which can differ from SimPy's clock by an ulp.

p99 is certainly above a bound once ``k`` population members are known to exceed it with
``k >= n - floor((n - 1) * 0.99)`` (``percentile_inf``: the order statistic at floor(pos)
is then one of them, and the interpolation is not below it). For TPOT the population
(window requests less finished one-token outputs) is not known until the end; the watch
uses an upper bound of it, which is safe because that threshold never decreases with ``n``.
Attainment is certainly below target once ``(n - k_any) / n < attainment`` (``k_any``: window
requests known to fail any bound): stability only makes verdicts False, so it is not needed.

``slo_only``: stop once ``meets_slo`` alone is certainly False (the attainment verdict left
unknown unless it is certain too): a probe's verdict (``prune.probe_verdict``) reads ``meets_slo``
only, and p99 needs 1% of the window past a bound where the attainment needs 1 - attainment.

The watch only reads: it holds the window's Request objects (given by the simulation's
``observe`` hook at admission) until each is resolved (every bound settled: failed, or met
at its finish), and each check costs the requests that arrived and are unresolved. It
stops checking once every window request is resolved, once the verdicts can no longer both
become certain, or once nothing else is scheduled, so it never keeps a simulation alive.
The extra events it schedules change no simulated result: SimPy orders events at one
instant by priority and then by scheduling order, which the watch's own events leave as it
was among the others.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.cluster.simulation import Simulation
from simulator.metrics.summary import SLO_SLACK
from simulator.planning.search.steady import SloTargets
from simulator.request import Request, State
from workloads import RequestStream

MARGIN = 1e-9  # relative, on a bound that a lower bound (not an exact latency) must exceed
STAMP_SLACK = 1e-12  # relative: a timestamp still to come may fall this far before the clock's now
CHECKS_PER_SPAN = 400
MIN_CHECK_INTERVAL_S = 1e-3

_TTFT, _TPOT, _E2EL = 1, 2, 4
_NAMES = ((_TTFT, "TTFT"), (_TPOT, "TPOT"), (_E2EL, "E2EL"))


class VerdictKnown(Exception):
    """Both verdicts of the point are certainly False; raised out of ``env.run()`` by ``VerdictWatch``.

    Its data are its ``args`` (SimPy re-creates an exception from its args when one escapes a
    process).
    """

    def __init__(self, num_admitted: int, now_s: float, reason: str, attainment_known: bool = True) -> None:
        super().__init__(num_admitted, now_s, reason, attainment_known)

    @property
    def num_admitted(self) -> int:
        """Requests admitted to the simulation when it was stopped."""
        return self.args[0]

    @property
    def now_s(self) -> float:
        """Simulated time of the stop."""
        return self.args[1]

    @property
    def reason(self) -> str:
        return self.args[2]

    @property
    def attainment_known(self) -> bool:
        """Whether ``meets_attainment`` was certainly False too (a ``slo_only`` watch may stop before)."""
        return self.args[3]

    def __str__(self) -> str:
        return f"verdicts known at {self.now_s:.6g} s, {self.num_admitted} requests admitted: {self.reason}"


def p99_threshold(n: int) -> int:
    """The fewest of ``n`` values above a bound that put ``percentile_inf(values, 99)`` above it.

    ``percentile_inf`` interpolates between the order statistics at floor and ceil of
    ``pos = (n - 1) * 99 / 100.0`` (the same float expression here): once the top k hold
    floor(pos), the result is at least that value. Nondecreasing in n.
    """
    return n - math.floor((n - 1) * 99 / 100.0)


def default_check_interval_s(stream: RequestStream) -> float:
    """The arrival span over ``CHECKS_PER_SPAN``, at least ``MIN_CHECK_INTERVAL_S``.

    A stop then lags the moment the verdicts became certain by at most 1/400 of the
    arrivals, and a run that goes on past its last arrival (an overloaded one draining) is
    checked as often; each check costs the window requests that arrived and are unresolved.
    """
    arrival = stream.arrival_s
    span = float(arrival[-1] - arrival[0]) if len(arrival) else 0.0
    return max(span / CHECKS_PER_SPAN, MIN_CHECK_INTERVAL_S)


class VerdictWatch:
    """Watches one simulation of ``stream`` and raises ``VerdictKnown`` when both verdicts are certainly False
    (``slo_only``: when ``meets_slo`` is).

    ``slo``, ``warmup_fraction`` and ``cooldown_fraction`` are the ones ``steady_stats`` will
    be given; ``stream_delay_s`` is the simulation's (client-side latencies include it).
    """

    def __init__(
        self,
        stream: RequestStream,
        slo: SloTargets,
        warmup_fraction: float,
        cooldown_fraction: float,
        stream_delay_s: float,
        check_interval_s: float | None = None,
        slo_only: bool = False,
    ) -> None:
        if not self.applies(stream, slo):
            raise ValueError(
                "an early stop needs every arrival time known up front (no sessions or closed loops) "
                "and a TTFT, TPOT or E2EL bound"
            )
        self.stream = stream
        self.slo = slo
        self.slo_only = slo_only
        self.stream_delay_s = stream_delay_s
        self.check_interval_s = default_check_interval_s(stream) if check_interval_s is None else check_interval_s
        if not self.check_interval_s > 0:
            raise ValueError(f"check_interval_s must be positive, got {check_interval_s}")
        n = len(stream)
        order = np.lexsort((np.arange(n), stream.arrival_s))  # by (arrival_s, request_id), as steady_stats
        window = order[int(n * warmup_fraction) : n - int(n * cooldown_fraction)]
        self._ids: list[int] = window.tolist()
        self._arrival: list[float] = stream.arrival_s[window].tolist()
        self._outputs: list[int] = stream.num_output_tokens[window].tolist()
        in_window = np.zeros(n, dtype=bool)
        in_window[window] = True
        self._in_window: list[bool] = in_window.tolist()
        nw = len(self._ids)
        self.num_window = nw
        # the bounds in force, their limits as steady_stats / meets_slo form them, and the p99 thresholds
        bounds = ((_TTFT, slo.ttft_p99_ms), (_TPOT, slo.tpot_p99_ms), (_E2EL, slo.e2el_p99_ms))
        self._bounds = {bit: b for bit, b in bounds if b is not None}
        self._need = sum(self._bounds)
        self._limit = {bit: b * (1 + SLO_SLACK) for bit, b in self._bounds.items()}
        self._limit_lb = {bit: limit * (1 + MARGIN) for bit, limit in self._limit.items()}
        num_one_token = sum(1 for k in self._outputs if k == 1)
        self._tpot_min_population = nw - num_one_token  # the fewest the TPOT population can hold
        self._reqs: dict[int, Request] = {}
        # per arrived, unresolved window request: [request id, arrival, output tokens, failed bits, settled bits]
        self._active: list[list] = []
        self._next = 0  # window position of the next request to arrive
        self._failed = dict.fromkeys(self._bounds, 0)  # bit -> window requests known to fail it
        self._failed_any = 0
        self._one_token_finished = 0  # window requests finished with one output token (no TPOT)
        self.num_admitted = 0
        self.num_checks = 0
        self._sim: Simulation | None = None
        self._start_s = 0.0

    @staticmethod
    def applies(stream: RequestStream, slo: SloTargets | None = None) -> bool:
        """Whether a watch can judge runs of ``stream`` (and ``slo``, when given).

        Only streams whose arrival times are all known up front (no sessions or closed-loop
        users: ``stream.parent is None``), with a window of two requests at least
        (``steady_stats`` raises otherwise), and only with a latency bound.
        """
        if stream.parent is not None or len(stream) < 2:
            return False
        return slo is None or any(b is not None for b in (slo.ttft_p99_ms, slo.tpot_p99_ms, slo.e2el_p99_ms))

    def attach(self, sim: Simulation) -> None:
        """Watch ``sim``: observe its admissions and check at every ``check_interval_s`` of simulated time."""
        if self._sim is not None:
            raise RuntimeError("a VerdictWatch watches one simulation")
        if len(sim.stream) != len(self.stream) or sim.stream_delay_s != self.stream_delay_s:
            raise ValueError("the simulation runs another stream or stream delay than the watch was made for")
        if self.num_window < 2:
            return  # steady_stats will refuse the run: nothing to watch
        self._sim = sim
        sim.observe(self._admitted)
        self._start_s = sim.env.now
        self._schedule()

    # -- during the run -----------------------------------------------------------------

    def _admitted(self, req: Request) -> None:
        self.num_admitted += 1
        if self._in_window[req.request_id]:
            self._reqs[req.request_id] = req

    def _schedule(self) -> None:
        assert self._sim is not None
        env = self._sim.env
        at = self._start_s + (self.num_checks + 1) * self.check_interval_s
        env.timeout(max(at - env.now, 0.0)).callbacks.append(self._tick)

    def _tick(self, _event: object) -> None:
        # A plain callback rather than a process: the exception leaves env.step() at once, as raised.
        assert self._sim is not None
        env = self._sim.env
        self.num_checks += 1
        if self._check(env.now) and env.peek() != math.inf:
            self._schedule()

    def _check(self, now: float) -> bool:
        """Update the counts at ``now``; raise VerdictKnown if both verdicts are certain, else whether to go on."""
        d = self.stream_delay_s
        late = (now - abs(now) * STAMP_SLACK) + d  # a latency still to come is at least late - arrival
        limit, limit_lb, need = self._limit, self._limit_lb, self._need
        arrival, ids, outputs = self._arrival, self._ids, self._outputs
        nw = self.num_window
        active = self._active
        while self._next < nw and arrival[self._next] <= now:
            j = self._next
            settled = _TPOT if outputs[j] == 1 else 0  # a one-token output has no TPOT (unless rejected: not counted)
            active.append([ids[j], arrival[j], outputs[j], 0, settled & need])
            self._next += 1
        reqs = self._reqs
        failed_count = self._failed
        keep: list[list] = []
        open_any = 0  # unresolved window requests not yet known to fail anything
        open_bits = dict.fromkeys(self._bounds, 0)  # bit -> unresolved window requests not settled on it
        for e in active:
            rid, a, n, failed, settled = e
            todo = need & ~settled
            req = reqs.get(rid)
            new = 0
            state = req.state if req is not None else None
            if state is State.FINISHED:
                assert req is not None and req.first_token_s is not None and req.finished_s is not None
                ttft = req.first_token_s + d - a  # as request_latencies
                e2el = req.finished_s + d - a
                if todo & _TTFT and ttft * 1000 > limit[_TTFT]:
                    new |= _TTFT
                if todo & _E2EL and e2el * 1000 > limit[_E2EL]:
                    new |= _E2EL
                ng = req.num_generated_tokens
                if ng > 1:
                    if todo & _TPOT and (e2el - ttft) / (ng - 1) * 1000 > limit[_TPOT]:
                        new |= _TPOT
                else:
                    self._one_token_finished += 1
                settled = need
            elif state is State.REJECTED:
                new = todo
                settled = need
            else:
                first = req.first_token_s if req is not None else None
                if todo & _TTFT:
                    if first is None:
                        if (late - a) * 1000 > limit_lb[_TTFT]:
                            new |= _TTFT
                    else:
                        if (first + d - a) * 1000 > limit[_TTFT]:
                            new |= _TTFT
                        settled |= _TTFT
                if todo & _E2EL and (late - a) * 1000 > limit_lb[_E2EL]:
                    new |= _E2EL
                if (
                    todo & _TPOT
                    and first is not None
                    and ((late - a) - (first + d - a)) / (n - 1) * 1000 > limit_lb[_TPOT]
                ):
                    new |= _TPOT
                settled |= new
            if new:
                if not failed:
                    self._failed_any += 1
                for bit in failed_count:
                    if new & bit:
                        failed_count[bit] += 1
                failed |= new
            if settled != need:
                e[3], e[4] = failed, settled
                keep.append(e)
                if not failed:
                    open_any += 1
                for bit in open_bits:
                    if not settled & bit:
                        open_bits[bit] += 1
        self._active = active = keep
        if not active:
            self._reqs.clear()
        elif len(reqs) > 2 * len(active):  # drop the resolved ones
            self._reqs = {e[0]: reqs[e[0]] for e in active if e[0] in reqs}
        self._raise_if_known(now)
        # can both verdicts still become certain?
        to_come = nw - self._next
        attainable = (nw - self._failed_any - open_any - to_come) / nw < self.slo.attainment
        p99_reachable = any(
            failed_count[bit] + open_bits[bit] + to_come >= p99_threshold(self._p99_population(bit, final=True))
            for bit in failed_count
        )
        return p99_reachable and (attainable or self.slo_only)

    def _p99_population(self, bit: int, final: bool = False) -> int:
        """An upper bound of the metric's p99 population now (``final``: the least that bound can become)."""
        if bit != _TPOT:
            return self.num_window
        return self._tpot_min_population if final else self.num_window - self._one_token_finished

    def _raise_if_known(self, now: float) -> None:
        nw = self.num_window
        p99 = []
        for bit, name in _NAMES:
            if bit in self._failed:
                k, need = self._failed[bit], p99_threshold(self._p99_population(bit))
                if k >= need:
                    p99.append(
                        f"p99 {name} already above {self._bounds[bit]:g} ms: {k} of {nw} window requests past it"
                    )
        if not p99:
            return
        bound = (nw - self._failed_any) / nw  # the most the attainment (a mean of nw booleans) can be
        if not bound < self.slo.attainment:
            if self.slo_only:
                raise VerdictKnown(self.num_admitted, now, "; ".join(p99), attainment_known=False)
            return
        attainment = f"SLO attainment at most {bound:.4g} < {self.slo.attainment:g} ({self._failed_any} of {nw} fail)"
        raise VerdictKnown(self.num_admitted, now, "; ".join([*p99, attainment]))
