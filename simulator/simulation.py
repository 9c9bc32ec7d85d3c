"""A built simulation: the SimPy environment, the replicas and the requests to feed them."""

from __future__ import annotations

from collections.abc import Callable, Generator
from functools import partial
from typing import Any

import numpy as np
import simpy

from simulator.metrics import MetricsRecorder
from simulator.replica import Replica
from simulator.request import Request
from simulator.results import RunResult
from simulator.summary import request_latencies, summarize
from workloads import RequestStream

ProgressFn = Callable[[int, int], None]


class Simulation:
    """Runs ``stream`` through ``replicas``; ``run()`` returns the result tables and summary."""

    def __init__(
        self,
        env: simpy.Environment,
        replicas: list[Replica],
        stream: RequestStream,
        recorder: MetricsRecorder,
        resolved_config: dict[str, Any],
        slo: dict[str, float | None],
        ingest_delay_s: float = 0.0,
        stream_delay_s: float = 0.0,
    ) -> None:
        self.env = env
        self.replicas = replicas
        self.stream = stream
        self.recorder = recorder
        self.resolved_config = resolved_config
        self.slo = slo
        self.ingest_delay_s = ingest_delay_s
        self.stream_delay_s = stream_delay_s
        self._progress: ProgressFn | None = None
        self._progress_every = max(1, len(stream) // 200)
        self._next_replica = 0
        for replica in replicas:
            replica.on_done = self._request_done
        self._prompt = stream.num_prompt_tokens.tolist()
        self._output = stream.num_output_tokens.tolist()
        self._priority = stream.priority.tolist() if stream.priority is not None else None
        # dependent requests (sessions, closed-loop users): parent index -> children
        self._children: dict[int, list[int]] = {}
        self._think_s: list[float] = []
        if stream.parent is not None:
            assert stream.think_s is not None
            self._think_s = stream.think_s.tolist()
            for child, parent in enumerate(stream.parent.tolist()):
                if parent >= 0:
                    self._children.setdefault(parent, []).append(child)

    def _roots(self) -> list[int]:
        if self.stream.parent is None:
            return list(range(len(self.stream)))
        return np.flatnonzero(self.stream.parent < 0).tolist()

    def _arrivals(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        arrival = self.stream.arrival_s
        for i in self._roots():
            sent_s = float(arrival[i])
            at = sent_s + self.ingest_delay_s
            if at > env.now:
                yield env.timeout(at - env.now)
            self._admit(i, sent_s)

    def _admit(self, i: int, sent_s: float, _event: simpy.Event | None = None) -> None:
        """Request i reaches the serving system (it was sent by the client at ``sent_s``)."""
        priority = self._priority[i] if self._priority is not None else 0
        req = Request(i, sent_s, self._prompt[i], self._output[i], priority)
        self.recorder.arrived(self.env.now)
        self._route(req).enqueue(req)

    def _route(self, req: Request) -> Replica:
        replica = self.replicas[self._next_replica]
        self._next_replica = (self._next_replica + 1) % len(self.replicas)
        return replica

    def _request_done(self, req: Request) -> None:
        for child in self._children.pop(req.request_id, ()):
            think = self._think_s[child]
            sent_s = self.env.now + think
            self.env.timeout(think + self.ingest_delay_s).callbacks.append(partial(self._admit, child, sent_s))
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
        return self._result()

    def _result(self) -> RunResult:
        rec = self.recorder
        requests = rec.requests_frame()
        lat = request_latencies(requests, self.stream_delay_s)
        requests = requests.merge(lat[["request_id", "ttft_s", "tpot_s", "e2el_s"]], on="request_id", how="left")
        ids = requests["request_id"].to_numpy()
        for column in ("priority", "session_id", "parent"):
            values = getattr(self.stream, column)
            if values is not None:
                requests[column] = values[ids]
        for column, names in (("slo_class", self.stream.slo_class_names), ("tenant", self.stream.tenant_names)):
            codes = getattr(self.stream, column)
            if codes is not None:
                requests[column] = np.asarray(names, dtype=object)[codes[ids]] if names else codes[ids]
        itl_values, itl_counts = rec.itl_pairs()
        duration = float(requests["finished_s"].max()) if len(requests) else 0.0
        kv_means = [r.kv_monitor.time_average(duration) / r.kv.num_total_blocks for r in self.replicas]
        extra = {
            "mean_kv_usage": sum(kv_means) / len(kv_means),
            "max_kv_usage": max(r.kv_monitor.max_level / r.kv.num_total_blocks for r in self.replicas),
            "mean_requests_in_system": rec.in_system.time_average(duration),
            "num_steps": sum(r.num_steps for r in self.replicas),
            "swaps_out": sum(r.num_swaps_out for r in self.replicas),
            "num_kv_blocks": sum(r.kv.num_total_blocks for r in self.replicas),
        }
        summary = summarize(requests, itl_values, itl_counts, self.slo, self.stream_delay_s, extra)
        return RunResult(self.resolved_config, summary, requests, rec.steps_frame(), itl_values, itl_counts)
