"""A built simulation: the SimPy environment, the replicas, the router and the requests."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import simpy

from policies.routing import Router
from simulator.cluster.replica import Replica
from simulator.cost.link import Link
from simulator.engine.loop import Engine
from simulator.metrics.recorder import MetricsRecorder
from simulator.metrics.results import RunResult
from simulator.metrics.tables import run_result
from simulator.request import Request, State, transition
from workloads import RequestStream

ProgressFn = Callable[[int, int], None]
AdmitFn = Callable[[Request], None]


RANKED = -(2**62)  # SimPy event priorities below URGENT (0): ranked arrivals, before every other event at an instant
LATE = simpy.core.NORMAL + 1  # after every ordinary event at an instant: prefilled requests offered to decode replicas
TRANSFERS = LATE + 2**62  # after the offers: KV transfers leased at the instant start, ranked by request id


class Arrival(simpy.Timeout):
    """A timeout processed before every ordinary event at the same instant.

    The tie rule: at one instant, requests reaching an engine (from a client or a session, and KV
    landing from a transfer) come before engine steps end, so the plan made at a step's end sees
    every request that arrived at that instant. SimPy orders events at one instant by priority,
    then by when they were scheduled; arrivals take the urgent priority, so the order no longer
    depends on which was scheduled first (the plain path schedules one event per step, the
    fast-forward path one per window: with the insertion order they disagreed on ties).

    ``rank`` orders arrivals at one instant among themselves (a dependent request's index: the order in
    which requests that ended at one instant were reported differs between the paths, and with it the
    order their users' next requests were routed in); ranked arrivals come before unranked ones.
    """

    def __init__(self, env: simpy.Environment, delay: float, value: Any = None, rank: int | None = None) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        # as simpy.Timeout.__init__, at the urgent priority (ranked: below it, in rank order)
        self.env = env
        self.callbacks = []
        self._value = value
        self._delay = delay
        self._ok = True
        env.schedule(self, simpy.core.URGENT if rank is None else RANKED + rank, delay)


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """How a prefilled request's KV moves to its decode replica."""

    link: Link
    layerwise_overlap: bool

    def exposed_s(self, num_bytes: float, num_layers: int, prefill_step_s: float) -> float:
        """Transfer time left after the prefill step ends.

        With layer-wise overlap each layer's KV is sent while later layers compute: only
        the last layer's share, or whatever the compute could not hide, remains.
        """
        full = self.link.time_s(num_bytes)
        if not self.layerwise_overlap:
            return full
        return max(full / num_layers, full - prefill_step_s * (num_layers - 1) / num_layers)


class Simulation:
    """Runs ``stream`` through ``replicas`` behind ``router`` (and, disaggregated, the decode pool behind
    ``decode_router``); ``run()`` returns tables and summary."""

    def __init__(
        self,
        env: simpy.Environment,
        replicas: list[Replica],
        router: Router,
        stream: RequestStream,
        recorder: MetricsRecorder,
        resolved_config: dict[str, Any],
        slo: dict[str, float | None],
        ingest_delay_s: float = 0.0,
        stream_delay_s: float = 0.0,
        kv_transfer: KvTransfer | None = None,
        tokenize_s_per_token: float = 0.0,
        decode_router: Router | None = None,
    ) -> None:
        self.env = env
        self.replicas = replicas
        self.router = router
        self.stream = stream
        self.recorder = recorder
        self.resolved_config = resolved_config
        self.slo = slo
        self.ingest_delay_s = ingest_delay_s
        self.tokenize_s_per_token = tokenize_s_per_token
        self.stream_delay_s = stream_delay_s
        self.kv_transfer = kv_transfer
        self.entry = [r for r in replicas if r.role != "decode"]
        self.decode = [r for r in replicas if r.role == "decode"]
        assert self.entry and (kv_transfer is not None) == bool(self.decode) == (decode_router is not None)
        self.decode_router = decode_router  # the decode pool's own router (its state is not the entry pool's)
        self._replica_of = {id(e): r for r in replicas for e in r.engines}
        # the most KV tokens any one decode engine can hold: longer requests can never decode
        self._decode_capacity_tokens = max((r.max_request_tokens for r in self.decode), default=0)
        self._sources: dict[int, Engine] = {}  # request id -> prefill engine holding its KV
        self.offering = False  # EngineHooks.offering: prefilled requests are being offered (_offer)
        self._progress: ProgressFn | None = None
        self._observers: list[AdmitFn] = []  # see observe()
        self._progress_every = max(1, len(stream) // 200)
        self._prompt = stream.num_prompt_tokens.tolist()
        self._output = stream.num_output_tokens.tolist()
        self._priority = stream.priority.tolist() if stream.priority is not None else None
        self._session = stream.session_id.tolist() if stream.session_id is not None else None
        # dependent requests (sessions, closed-loop users): parent index -> children
        self._children: dict[int, list[int]] = {}
        self._think_s: list[float] = []
        if stream.parent is not None:
            assert stream.think_s is not None
            self._think_s = stream.think_s.tolist()
            for child, parent in enumerate(stream.parent.tolist()):
                if parent >= 0:
                    self._children.setdefault(parent, []).append(child)
        for engine in self.engines:  # every engine tells this simulation what leaves it (EngineHooks)
            engine.start(self)

    @property
    def engines(self) -> list[Engine]:
        return [e for r in self.replicas for e in r.engines]

    def observe(self, on_admit: AdmitFn) -> None:
        """Call ``on_admit(req)`` with each Request as it is admitted, before it is routed (or rejected).

        Observers only read: they must not change the request or the simulation.
        """
        self._observers.append(on_admit)

    # -- arrivals -------------------------------------------------------------------------

    def _roots(self) -> list[int]:
        if self.stream.parent is None:
            return list(range(len(self.stream)))
        return np.flatnonzero(self.stream.parent < 0).tolist()

    def _arrivals(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        arrival = self.stream.arrival_s
        for i in self._roots():
            sent_s = float(arrival[i])
            # admitted in the order sent: one behind a longer prompt waits for that one's tokenising
            at = sent_s + self._ingest_s(i)
            if at > env.now:
                yield Arrival(env, at - env.now)
            self._admit(i, sent_s)

    def _ingest_s(self, i: int) -> float:
        """From request i's sending to its reaching the serving system: the API server, then tokenising."""
        return self.ingest_delay_s + self.tokenize_s_per_token * self._prompt[i]

    def _admit(self, i: int, sent_s: float, _event: simpy.Event | None = None) -> None:
        """Request i reaches the serving system (it was sent by the client at ``sent_s``)."""
        s = self.stream
        req = Request(
            i,
            sent_s,
            self._prompt[i],
            self._output[i],
            self._priority[i] if self._priority is not None else 0,
            self._session[i] if self._session is not None else -1,
            s.prefix_hashes(i),
            s.hash_block_tokens,
        )
        if self._observers:
            for on_admit in self._observers:
                on_admit(req)
        self.recorder.arrived(self.env.now)
        total = req.num_prompt_tokens + req.num_output_tokens
        if self.decode and total > self._decode_capacity_tokens:
            transition(
                req,
                State.REJECTED,
                self.env.now,
                f"prompt + output of {total} tokens exceeds the KV "
                f"capacity of every decode replica ({self._decode_capacity_tokens} tokens)",
            )
            self.recorder.request_done(req, self.env.now)
            self.request_done(req)
            return
        self.entry[self.router.route(req, self.entry, self.env.now)].enqueue(req)

    # -- disaggregation -------------------------------------------------------------------

    def prefilled(self, req: Request, engine: Engine, step_s: float) -> None:
        """A prefill engine finished ``req``'s prompt: it is offered to a decode replica at this instant, after every
        engine step that ends at it (``_offer``)."""
        req.prefill_replica_id = engine.replica_id
        self._sources[req.request_id] = engine
        req.transfer_step_s = step_s
        offer = simpy.Event(self.env)
        offer.callbacks.append(partial(self._offer, req))
        offer._ok, offer._value = True, None
        self.env.schedule(offer, LATE)

    def _offer(self, req: Request, _event: simpy.Event) -> None:
        """Pick a decode replica for prefilled ``req``, which reserves memory for the KV.

        The tie rule: a decode engine's step ending at the instant a prompt is done is recorded, and its next step
        planned, before the request is offered (the offer leases blocks and wakes the engine). Engines' step ends at
        one instant are ordered by when they were scheduled, which differs between the plain path (an event a step)
        and the fast-forward path (an event a window, and a wake-up at its end): at the lowest priority the offer
        comes after all of them on both."""
        total = req.num_prompt_tokens + req.num_output_tokens
        fits = [r for r in self.decode if r.max_request_tokens >= total]
        assert self.decode_router is not None
        self.offering = True
        try:
            fits[self.decode_router.route(req, fits, self.env.now)].offer_transfer(req)
        finally:
            self.offering = False

    def reserved(self, req: Request, destination: Engine) -> None:
        """A decode engine leased blocks for ``req``'s KV: send it, last at this instant.

        The tie rule: transfers leased at one instant queue for their prefill replica's link in request order, after
        every step ending at the instant and every offer made at it. Decode engines lease at their step ends, whose
        order at one instant differs between the plain and the fast-forward path."""
        start = simpy.Event(self.env)
        start.callbacks.append(partial(self._start_transfer, req, destination))
        start._ok, start._value = True, None
        self.env.schedule(start, TRANSFERS + req.request_id)

    def _start_transfer(self, req: Request, destination: Engine, _event: simpy.Event) -> None:
        self.env.process(self._transfer(req, self._sources.pop(req.request_id), destination))

    def _transfer(self, req: Request, source: Engine, destination: Engine) -> Generator[simpy.Event, None, None]:
        assert self.kv_transfer is not None
        replica = self._replica_of[id(source)]
        model = self.resolved_config["model"]
        nbytes = req.num_computed_tokens * source.block_bytes / source.kv.block_size
        with replica.kv_link.request() as claim:
            yield claim
            req.transfer_start_s = self.env.now
            yield Arrival(self.env, self.kv_transfer.exposed_s(nbytes, model["num_layers"], req.transfer_step_s))
        req.transfer_end_s = self.env.now
        source.release_sent(req)
        destination.accept_transferred(req)

    # -- completions ----------------------------------------------------------------------

    def request_done(self, req: Request) -> None:
        """``req`` ended: its user (a closed-loop user, a session) sends the next request ``think_s`` after the
        answer has reached it, the end's ``stream_delay_s`` after the engine emitted it (one path for both)."""
        assert req.finished_s is not None
        # From the end the request records: a fast-forward window stamps it from the steps' own clock sums, which
        # can lie an ulp past the SimPy clock; counted from the clock, the next turn was sent before the end.
        lag = req.finished_s - self.env.now
        for child in self._children.pop(req.request_id, ()):
            wait = self.stream_delay_s + self._think_s[child]
            sent_s = req.finished_s + wait
            delay = max(lag + wait, 0.0) + self._ingest_s(child)
            Arrival(self.env, delay, rank=child).callbacks.append(partial(self._admit, child, sent_s))
        done = self.recorder.num_done
        if self._progress is not None and (done % self._progress_every == 0 or done == len(self.stream)):
            self._progress(done, len(self.stream))

    def run(self, progress: ProgressFn | None = None) -> RunResult:
        """Simulate until every request has finished or been rejected."""
        self._progress = progress
        self.env.process(self._arrivals())
        self.env.run()
        n = len(self.stream)
        assert self.recorder.num_done == n, (
            f"{n - self.recorder.num_done} of {n} requests never finished: the simulation stalled"
        )
        return run_result(
            self.recorder, self.stream, self.replicas, self.resolved_config, self.slo, self.stream_delay_s
        )
