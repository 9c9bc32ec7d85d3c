"""A built simulation: the SimPy environment, the replicas and the requests to feed them."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

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

    def _arrivals(self) -> Generator[simpy.Event, None, None]:
        env, s = self.env, self.stream
        arrival, prompt, output = s.arrival_s.tolist(), s.num_prompt_tokens.tolist(), s.num_output_tokens.tolist()
        for i in range(len(arrival)):
            at = arrival[i] + self.ingest_delay_s
            if at > env.now:
                yield env.timeout(at - env.now)
            req = Request(i, arrival[i], prompt[i], output[i])
            self.recorder.arrived(env.now)
            self._route(req).enqueue(req)

    def _route(self, req: Request) -> Replica:
        replica = self.replicas[self._next_replica]
        self._next_replica = (self._next_replica + 1) % len(self.replicas)
        return replica

    def _request_done(self, req: Request) -> None:
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
        itl_values, itl_counts = rec.itl_pairs()
        duration = float(requests["finished_s"].max()) if len(requests) else 0.0
        kv_means = [r.kv_monitor.time_average(duration) / r.kv.num_total_blocks for r in self.replicas]
        extra = {
            "mean_kv_usage": sum(kv_means) / len(kv_means),
            "max_kv_usage": max(r.kv_monitor.max_level / r.kv.num_total_blocks for r in self.replicas),
            "mean_requests_in_system": rec.in_system.time_average(duration),
            "num_steps": sum(r.num_steps for r in self.replicas),
            "num_kv_blocks": sum(r.kv.num_total_blocks for r in self.replicas),
        }
        summary = summarize(requests, itl_values, itl_counts, self.slo, self.stream_delay_s, extra)
        return RunResult(self.resolved_config, summary, requests, rec.steps_frame(), itl_values, itl_counts)
