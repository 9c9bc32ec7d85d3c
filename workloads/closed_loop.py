"""Closed-loop load: a fixed number of users, each sending its next request after the previous ends.

User u (0 <= u < C) sends its first request at ``u * ramp_s / C`` and every later one
``think_s`` after its previous answer has reached it (the request's end plus the client's
``stream_delay_s``, applied by the simulator), so at most C requests are ever in the system.
Request i belongs to user ``i % C`` and depends on request ``i - C`` (RequestStream ``parent`` /
``think_s``); the simulator sends it when that one finishes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

from workloads.classes import RequestClass, assign_classes, check_classes
from workloads.default_lengths import sharegpt_like_lengths
from workloads.durations import FixedSeconds, TimeDistribution, draw_seconds
from workloads.lengths import LengthConfig, draw_lengths
from workloads.rng import Stream, rng_for
from workloads.stream import RequestStream
from workloads.validators import FINITE, NumRequests, Seconds, field_error

DEFAULT_NUM_REQUESTS = 1000


class ClosedLoopWorkload(BaseModel):
    """``concurrency`` users sending ``num_requests`` requests in all, one at a time each."""

    model_config = FINITE

    kind: Literal["closed_loop"] = "closed_loop"
    concurrency: NumRequests = Field(description="Number of users (the most requests in the system at once).")
    num_requests: NumRequests = Field(DEFAULT_NUM_REQUESTS, description="Requests sent by all users together.")
    think_s: TimeDistribution = Field(
        default_factory=lambda: FixedSeconds(seconds=0.0),
        description="Time between a request completing and its user's next request, seconds.",
    )
    lengths: LengthConfig = Field(
        default_factory=sharegpt_like_lengths,
        description="Prompt and output lengths (default: ShareGPT-like, the set's percentiles, see "
        "workloads.default_lengths).",
    )
    ramp_s: Seconds = Field(0.0, description="Users start evenly spread over this time (0: all at once).")
    classes: tuple[RequestClass, ...] | None = Field(
        None, description="Request classes, drawn per user by weight (None: unlabelled)."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_arrival_process(cls, data: Any) -> Any:
        if isinstance(data, dict) and "arrival" in data:
            raise field_error(
                "ClosedLoopWorkload",
                ("arrival",),
                "a closed loop has no arrival process: each user sends its next request when its previous one "
                "ends (with ramp_s 0 every user's first request is at t = 0); remove arrival, or for every request "
                "at t = 0 use a synthetic workload with arrival: {kind: offline}",
                data["arrival"],
            )
        return data

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: tuple[RequestClass, ...] | None) -> tuple[RequestClass, ...] | None:
        return check_classes(value)

    @model_validator(mode="after")
    def _users_send_a_request_each(self) -> ClosedLoopWorkload:
        if self.concurrency > self.num_requests:  # the extra users would never send one: fewer would run
            raise field_error(
                "ClosedLoopWorkload",
                ("concurrency",),
                f"{self.concurrency} users for {self.num_requests} requests: each user sends at least one, so only "
                f"{self.num_requests} would run; set num_requests to at least the concurrency",
                self.concurrency,
            )
        return self


def generate_closed_loop(cfg: ClosedLoopWorkload, seed: int, base_dir: Path | None = None) -> RequestStream:
    """The requests of ``cfg``; random streams LENGTHS, THINK and CLASSES."""
    n = cfg.num_requests
    users = min(cfg.concurrency, n)
    index = np.arange(n, dtype=np.int64)
    root = index < users
    prompt, output = draw_lengths(cfg.lengths, n, rng_for(seed, Stream.LENGTHS), base_dir)
    think = np.zeros(n)
    think[~root] = draw_seconds(cfg.think_s, n - users, rng_for(seed, Stream.THINK))
    columns: dict[str, Any] = {}
    if cfg.classes is not None:
        columns = assign_classes(cfg.classes, index % users, rng_for(seed, Stream.CLASSES))
    return RequestStream(
        arrival_s=np.where(root, index * cfg.ramp_s / users, np.nan),
        num_prompt_tokens=prompt,
        num_output_tokens=output,
        parent=np.where(root, -1, index - users),
        think_s=think,
        meta={"kind": "closed_loop", "concurrency": users},
        **columns,
    )
