"""Run-time recording: per-request rows, per-step rows and inter-token latencies.

Rows are appended as primitives into typed arrays (8 bytes a value, 4 for step counts) and turned into
tables after the run; nothing per token is kept per request. ITLs are pooled as
(value, count) pairs: every request that emitted at the end of the previous step and
emits again at the end of this one has the same gap, so one pair covers them all.

Token emissions are kept per step, not per token: (step end, tokens emitted then that were
not a request's first). Every such token reports one ITL, and an engine reports a step's
ITLs (``itl`` / ``itl_bulk``) just before its row (``step``; nothing yields in between), so
the ITL counts since the last row are that step's emissions. A window of fast-forwarded
steps (``steps_bulk``) only decodes: every step emits one token per decoding request, at
the step's end on the window's clock. First tokens are in the request rows
(``first_token_s``). A step row's end is ``start_s + duration_s``, which is the engine's
clock exactly unless a step lasts longer than the time it started at (float rounding).
"""

from __future__ import annotations

import math
import struct
from array import array

import numpy as np
import pandas as pd

from simulator.metrics.monitor import LevelMonitor
from simulator.request import Request, State

NAN = math.nan
_STEP_INT = struct.Struct("=i")  # step counts (requests, tokens, blocks) fit in 32 bits
_COUNT = struct.Struct("=q")
_ZERO = _STEP_INT.pack(0)

REQUEST_FLOAT_COLUMNS = (
    "arrival_s",
    "enqueued_s",
    "first_scheduled_s",
    "first_token_s",
    "finished_s",
    "transfer_start_s",
    "transfer_end_s",
)
REQUEST_INT_COLUMNS = (
    "request_id",
    "replica_id",
    "num_prompt_tokens",
    "num_output_tokens",
    "num_generated_tokens",
    "num_preemptions",
    "num_cached_tokens",
    "prefill_replica_id",
)
_REQ_FLOATS = struct.Struct(f"={len(REQUEST_FLOAT_COLUMNS)}d")  # a request row's floats, in column order
_REQ_INTS = struct.Struct(f"={len(REQUEST_INT_COLUMNS)}q")
STEP_FLOAT_COLUMNS = ("start_s", "duration_s")
STEP_INT_COLUMNS = (
    "replica_id",
    "engine_id",
    "num_running",
    "num_waiting",
    "num_prefill_tokens",
    "num_decode_tokens",
    "num_kv_blocks_used",
    "num_kv_blocks_cached",
    "num_preempted",
    "num_swapped",
    "num_transfer_queue",
)


def _view(values: array, dtype: type) -> np.ndarray:
    """A read-only array over ``values``'s buffer (which can no longer grow while the view lives)."""
    out = np.frombuffer(values, dtype=dtype)
    out.flags.writeable = False
    return out


def _repeat(value: int, n: int) -> bytes:
    """``n`` copies of ``value`` as a step column's bytes (its ``array('i')`` appends them whole)."""
    return _STEP_INT.pack(value) * n


class MetricsRecorder:
    """Collects what a run produces; ``requests_frame`` / ``steps_frame`` / ``itl_pairs`` read it out."""

    def __init__(self, record_steps: bool = True) -> None:
        # request rows, row by row (one packed row a request: two calls instead of fifteen appends)
        self._req_f = array("d")  # REQUEST_FLOAT_COLUMNS
        self._req_i = array("q")  # REQUEST_INT_COLUMNS
        self._status = array("b")  # 1 finished, 0 rejected
        self.reject_reasons: dict[int, str] = {}
        self.finish_reasons: dict[int, str] = {}  # finished short of the output (request.py: vLLM V0's ignored)
        self.record_steps = record_steps
        self._step_f = {c: array("d") for c in STEP_FLOAT_COLUMNS}
        self._step_i = {c: array("i") for c in STEP_INT_COLUMNS}  # 4 bytes a value: steps outnumber requests
        self._window_columns = tuple(
            self._step_i[c] for c in ("num_running", "num_waiting", "num_kv_blocks_cached", "num_transfer_queue")
        )
        self._itl_value = array("d")
        self._itl_count = array("q")
        self._emit_s = array("d")  # step ends at which tokens other than first tokens were emitted
        self._emit_n = array("q")  # how many
        self._pending_tokens = 0  # ITLs reported since the engine's last step row
        self.in_system = LevelMonitor()
        self.num_arrived = 0
        # engines writing here: one alone may record a fast-forward window's steps a step late (``Engine``: nothing
        # else writes ITLs or emissions in between, so their order is kept)
        self.num_engines = 0

    # -- during the run ----------------------------------------------------------------

    def arrived(self, now_s: float) -> None:
        self.num_arrived += 1
        self.in_system.add(now_s, 1)

    def request_done(self, req: Request, now_s: float) -> None:
        """Record a request that reached FINISHED or REJECTED; it may be dropped afterwards."""
        self._req_f.frombytes(
            _REQ_FLOATS.pack(
                req.arrival_s,
                NAN if (t := req.enqueued_s) is None else t,
                NAN if (t := req.first_scheduled_s) is None else t,
                NAN if (t := req.first_token_s) is None else t,
                NAN if (t := req.finished_s) is None else t,
                NAN if (t := req.transfer_start_s) is None else t,
                NAN if (t := req.transfer_end_s) is None else t,
            )
        )
        self._req_i.frombytes(
            _REQ_INTS.pack(
                req.request_id,
                -1 if req.replica_id is None else req.replica_id,
                req.num_prompt_tokens,
                req.num_output_tokens,
                req.num_generated_tokens,
                req.num_preemptions,
                req.num_cached_tokens,
                -1 if req.prefill_replica_id is None else req.prefill_replica_id,
            )
        )
        finished = req.state is State.FINISHED
        self._status.append(1 if finished else 0)
        if not finished:
            self.reject_reasons[req.request_id] = req.reject_reason or ""
        elif req.finish_reason is not None:
            self.finish_reasons[req.request_id] = req.finish_reason
        self.in_system.add(now_s, -1)

    def itl(self, value_s: float, count: int = 1) -> None:
        self._itl_value.append(value_s)
        self._itl_count.append(count)
        self._pending_tokens += count

    def extra_tokens(self, count: int) -> None:
        """Tokens the coming step row's step emitted beyond one per request (speculative decoding's accepted
        proposals: they arrive with that request's token, one ITL for the lot, as a streamed chunk)."""
        self._pending_tokens += count

    def step(
        self,
        replica_id: int,
        engine_id: int,
        start_s: float,
        duration_s: float,
        num_running: int,
        num_waiting: int,
        num_prefill_tokens: int,
        num_decode_tokens: int,
        num_kv_blocks_used: int,
        num_kv_blocks_cached: int,
        num_preempted: int,
        num_swapped: int,
        num_transfer_queue: int,
    ) -> None:
        """One engine step: when, how long, and the engine's state right after it."""
        if self._pending_tokens:
            self._emit_s.append(start_s + duration_s)
            self._emit_n.append(self._pending_tokens)
            self._pending_tokens = 0
        if not self.record_steps:
            return
        self._step_f["start_s"].append(start_s)
        self._step_f["duration_s"].append(duration_s)
        s = self._step_i
        s["replica_id"].append(replica_id)
        s["engine_id"].append(engine_id)
        s["num_running"].append(num_running)
        s["num_waiting"].append(num_waiting)
        s["num_prefill_tokens"].append(num_prefill_tokens)
        s["num_decode_tokens"].append(num_decode_tokens)
        s["num_kv_blocks_used"].append(num_kv_blocks_used)
        s["num_kv_blocks_cached"].append(num_kv_blocks_cached)
        s["num_preempted"].append(num_preempted)
        s["num_swapped"].append(num_swapped)
        s["num_transfer_queue"].append(num_transfer_queue)

    def steps_bulk(
        self,
        replica_id: int,
        engine_id: int,
        clock_s: list[float],
        durations_s: list[float],
        columns: dict[str, int | list[int] | tuple[int | list[int], int]],
    ) -> None:
        """Many consecutive steps of one engine at once.

        Step j starts at ``clock_s[j]`` and lasts ``durations_s[j]``; ``columns`` holds every
        other step column as a list, a constant, or (list or constant, last step's value).
        The steps only decode: each emits one token per decode, at ``clock_s[j + 1]``.
        """
        n = len(durations_s)
        self._pending_tokens = 0  # the window's ITLs: its decodes, counted below
        decodes = columns["num_decode_tokens"]
        if isinstance(decodes, tuple):
            decodes = decodes[0] if isinstance(decodes[0], int) else [*decodes[0][: n - 1], decodes[1]]
        if isinstance(decodes, int):
            if decodes:
                self._emit_s.fromlist(clock_s[1 : n + 1])
                self._emit_n.frombytes(_COUNT.pack(decodes) * n)
        else:
            for end_s, count in zip(clock_s[1 : n + 1], decodes, strict=True):
                if count:
                    self._emit_s.append(end_s)
                    self._emit_n.append(count)
        if not self.record_steps:
            return
        self._step_f["start_s"].fromlist(clock_s[:n])
        self._step_f["duration_s"].fromlist(durations_s)
        self._step_i["replica_id"].frombytes(_repeat(replica_id, n))
        self._step_i["engine_id"].frombytes(_repeat(engine_id, n))
        for name in STEP_INT_COLUMNS[2:]:
            value = columns[name]
            column = self._step_i[name]
            if isinstance(value, tuple):
                value, last = value
                if n > 1:
                    if isinstance(value, int):
                        column.frombytes(_repeat(value, n - 1))
                    else:
                        column.fromlist(value[: n - 1])
                column.append(last)
            elif isinstance(value, int):
                column.frombytes(_repeat(value, n))
            else:
                column.fromlist(value)

    def decode_window(
        self,
        replica_id: int,
        engine_id: int,
        clock_s: list[float],
        durations_s: list[float],
        num_decode: int,
        num_running: tuple[int, int],
        num_waiting: tuple[int, int],
        num_kv_blocks_used: tuple[int | list[int], int],
        num_kv_blocks_cached: tuple[int, int],
        num_transfer_queue: tuple[int, int],
    ) -> None:
        """``steps_bulk`` of a fast-forward window, its columns one by one (the hot path: no dict, no type tests
        but one): every step decodes ``num_decode`` requests and nothing else; each other column is (the value of
        every step but the last, or a list of them for ``num_kv_blocks_used``; the last step's value)."""
        n = len(durations_s)
        self._pending_tokens = 0  # the window's ITLs: its decodes, counted below
        if num_decode:
            self._emit_s.fromlist(clock_s[1 : n + 1])
            self._emit_n.frombytes(_COUNT.pack(num_decode) * n)
        if not self.record_steps:
            return
        self._step_f["start_s"].fromlist(clock_s[:n])
        self._step_f["duration_s"].fromlist(durations_s)
        s = self._step_i
        pack = _STEP_INT.pack
        m = n - 1
        s["replica_id"].frombytes(pack(replica_id) * n)
        s["engine_id"].frombytes(pack(engine_id) * n)
        zeros = _ZERO * n
        s["num_prefill_tokens"].frombytes(zeros)
        s["num_decode_tokens"].frombytes(pack(num_decode) * n)
        s["num_preempted"].frombytes(zeros)
        s["num_swapped"].frombytes(zeros)
        for column, (value, last) in zip(
            self._window_columns, (num_running, num_waiting, num_kv_blocks_cached, num_transfer_queue), strict=True
        ):
            column.frombytes(pack(value) * m)
            column.append(last)
        column = s["num_kv_blocks_used"]
        value, last = num_kv_blocks_used
        if isinstance(value, int):
            column.frombytes(pack(value) * m)
        else:
            column.fromlist(value[:m])
        column.append(last)

    def itl_bulk(self, values_s: list[float], count: int) -> None:
        """ITLs of ``count`` requests each, one pair per value."""
        self._itl_value.fromlist(values_s)
        self._itl_count.frombytes(_COUNT.pack(count) * len(values_s))
        self._pending_tokens += count * len(values_s)

    # -- after the run -----------------------------------------------------------------

    @property
    def num_done(self) -> int:
        return len(self._status)

    def requests_frame(self) -> pd.DataFrame:
        """One row per request that ended, sorted by request id (one copy of each column).

        ``reject_reason``: why a rejected request never ran; ``finish_reason``: why a finished one
        ended short of its output ("" for the rest).
        """
        ints = np.frombuffer(self._req_i, dtype=np.int64).reshape(-1, len(REQUEST_INT_COLUMNS))
        floats = np.frombuffer(self._req_f, dtype=np.float64).reshape(-1, len(REQUEST_FLOAT_COLUMNS))
        ids = ints[:, 0]
        order = np.argsort(ids, kind="stable")
        cols: dict[str, np.ndarray] = {c: ints[order, j] for j, c in enumerate(REQUEST_INT_COLUMNS)}
        cols.update({c: floats[order, j] for j, c in enumerate(REQUEST_FLOAT_COLUMNS)})
        status = np.frombuffer(self._status, dtype=np.int8)[order]
        cols["status"] = np.where(status == 1, "finished", "rejected").astype(object)
        for column, by_id in (("reject_reason", self.reject_reasons), ("finish_reason", self.finish_reasons)):
            reasons = np.full(len(ids), "", dtype=object)
            if by_id:
                reasons[np.searchsorted(cols["request_id"], list(by_id))] = list(by_id.values())
            cols[column] = reasons
        return pd.DataFrame(cols, copy=False)

    def steps_frame(self) -> pd.DataFrame:
        cols: dict[str, np.ndarray] = {c: np.frombuffer(a, dtype=np.int32) for c, a in self._step_i.items()}
        cols.update({c: np.frombuffer(a, dtype=np.float64) for c, a in self._step_f.items()})
        order = ["replica_id", "engine_id", "start_s", "duration_s", *STEP_INT_COLUMNS[2:]]
        frame = pd.DataFrame({name: cols[name] for name in order}, copy=False)
        # in time order, ties by replica and engine (recording order differs when steps are batched);
        # one engine records in order already, and sorting would copy every column
        start = cols["start_s"]
        if len(start) > 1 and not (np.all(start[1:] > start[:-1])):
            frame = frame.sort_values(["start_s", "replica_id", "engine_id"], kind="stable").reset_index(drop=True)
        return frame

    def token_emissions(self) -> tuple[np.ndarray, np.ndarray]:
        """(step end in s, tokens emitted then) for every token but requests' first, in recording order: read-only
        views of what was recorded (no copy: at a million requests each is about 120 MB)."""
        return _view(self._emit_s, np.float64), _view(self._emit_n, np.int64)

    def itl_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Pooled inter-token latencies as (values in s, counts): read-only views of what was recorded."""
        return _view(self._itl_value, np.float64), _view(self._itl_count, np.int64)
