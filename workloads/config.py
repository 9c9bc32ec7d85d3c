"""The workload part of a scenario: which requests arrive, when, and how long they are.

``WorkloadConfig`` is one of four kinds, chosen by ``kind`` (``synthetic`` when absent, so
scenario files written before the other kinds existed stay valid):

- ``synthetic``: an arrival process and a length distribution (``SyntheticWorkload``).
- ``trace``: a trace file replayed (``workloads.replay.TraceWorkload``).
- ``sessions``: multi-turn conversations and agent loops (``workloads.sessions.SessionWorkload``).
- ``closed_loop``: a fixed number of users (``workloads.closed_loop.ClosedLoopWorkload``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from workloads.arrivals import ArrivalConfig, PoissonArrivals, check_schedule
from workloads.classes import RequestClass, check_classes
from workloads.closed_loop import ClosedLoopWorkload
from workloads.default_lengths import sharegpt_like_lengths
from workloads.lengths import LengthConfig
from workloads.replay import TraceWorkload
from workloads.sessions import SessionWorkload
from workloads.validators import FINITE, NumRequests, PositiveSeconds, one_stop_rule, refuse_non_finite

DEFAULT_NUM_REQUESTS = 1000
# Llama-3.1-8B on one H100 with the sharegpt-8k-multiturn lengths saturates near 6.7 requests/s under the
# roofline model (measured with the set's rows; the default lengths follow its percentiles, see
# workloads.default_lengths); 5 keeps it busy (about 75% load) but stable.
DEFAULT_RATE_PER_S = 5.0


class SyntheticWorkload(BaseModel):
    """A synthetic workload: an arrival process and a length distribution.

    Give ``num_requests`` or ``duration_s`` (arrivals before that time), not both;
    with neither, ``num_requests`` is 1000.
    """

    model_config = FINITE

    kind: Literal["synthetic"] = "synthetic"
    num_requests: NumRequests | None = Field(
        None,
        description=f"How many requests arrive; give this or duration_s. With neither: {DEFAULT_NUM_REQUESTS:,} "
        "requests.",
    )
    duration_s: PositiveSeconds | None = Field(
        None,
        description="Arrivals stop at this time, seconds; give this or num_requests (None: num_requests bounds them).",
    )
    arrival: ArrivalConfig = Field(
        default_factory=lambda: PoissonArrivals(rate_per_s=DEFAULT_RATE_PER_S), description="The arrival process."
    )
    lengths: LengthConfig = Field(
        default_factory=sharegpt_like_lengths,
        description="Prompt and output lengths (default: ShareGPT-like, the set's percentiles, see "
        "workloads.default_lengths).",
    )
    classes: tuple[RequestClass, ...] | None = Field(
        None, description="Request classes (priority, SLO class, tenant), drawn per request by weight."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_stop_rule(cls, data: Any) -> Any:
        return one_stop_rule(data)

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: tuple[RequestClass, ...] | None) -> tuple[RequestClass, ...] | None:
        return check_classes(value)

    @model_validator(mode="after")
    def _schedule(self) -> SyntheticWorkload:
        check_schedule(
            "SyntheticWorkload",
            self.arrival,
            "num_requests",
            self.num_requests,
            self.resolved_num_requests,
            self.duration_s,
            "requests",
        )
        return self

    @property
    def resolved_num_requests(self) -> int | None:
        """The request count, or None when the workload is bounded by duration."""
        if self.duration_s is not None:
            return None
        return self.num_requests if self.num_requests is not None else DEFAULT_NUM_REQUESTS


WorkloadKind = SyntheticWorkload | TraceWorkload | SessionWorkload | ClosedLoopWorkload
WORKLOAD_KINDS: dict[str, type[BaseModel]] = {
    "synthetic": SyntheticWorkload,
    "trace": TraceWorkload,
    "sessions": SessionWorkload,
    "closed_loop": ClosedLoopWorkload,
}


class WorkloadConfig(RootModel[WorkloadKind]):
    """A workload of any kind; ``root`` is the kind's own model.

    Validated from a mapping whose ``kind`` picks the model (``synthetic`` when absent).
    Errors name the fields as written (``workload.arrival.rate_per_s``), without the kind.
    Attribute reads go to the chosen model, so ``cfg.workload.num_requests`` works.
    """

    model_config = ConfigDict(frozen=True)

    root: WorkloadKind = Field(default_factory=SyntheticWorkload)

    @field_validator("root", mode="wrap")
    @classmethod
    def _by_kind(cls, value: Any, handler: Any) -> WorkloadKind:
        if isinstance(value, (SyntheticWorkload, TraceWorkload, SessionWorkload, ClosedLoopWorkload)):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"expected a mapping of workload fields, got {type(value).__name__}")
        kind = value.get("kind", "synthetic")
        model = WORKLOAD_KINDS.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise ValueError(f"unknown workload kind {kind!r}; known: {', '.join(WORKLOAD_KINDS)}")
        if model.model_config.get("allow_inf_nan", True):  # a kind whose model does not refuse inf and nan itself
            refuse_non_finite(model.__name__, value)
        # The model's own ValidationError propagates with locations relative to the workload.
        return model.model_validate(value)  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        if name == "root" or name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.root, name)
