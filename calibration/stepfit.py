"""The step model of a real engine, fitted to its measured whole steps.

For a step of shape S (``simulator.cost.shape.BatchShape``)::

    seconds = time_scale x ops(S) + step_s + per_seq_s x sequences + per_token_s x new tokens
              + per_kv_s x keys attended

``ops(S)`` is the profile's op time of the step (the profiled cost model with no overhead
and scale 1, in the engine's attention layout). Every coefficient is >= 0. The fit minimises
a robust loss (scipy.optimize.least_squares, ``soft_l1`` by default: quadratic up to
``loss_scale`` relative error, linear beyond, so that a few steps stretched by a burst of
foreign load or a garbage collection pull the fit little) of the relative error
(predicted - measured) / measured, with every step kind present (prefill, decode, mixed)
weighing the same in total: engines run many more decode steps than prefills, but TTFT
rests on the latter. It starts from the non-negative linear least-squares solution
(scipy.optimize.nnls) of the same weighted problem, and works on columns scaled to unit
size (the coefficients span nine orders of magnitude).

Used by ``calibrate --engine`` (``calibration.engine_fit``) and by ``validate --fit-in-run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, nnls

from calibration.engine import StepRecord
from simulator.cost.profile import STEP_KINDS, CalibrationProfile, StepKindError
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams
from simulator.cost.shape import BatchShape

LOSSES = ("soft_l1", "huber", "cauchy", "linear")
DEFAULT_LOSS = "soft_l1"
DEFAULT_LOSS_SCALE = 0.05  # relative error where the loss turns linear: above quiet steps' jitter
MIN_TIME_SCALE = 1e-3  # a fitted scale below this says the steps did not tell ops from overhead
COEFFICIENTS = (
    "time_scale",
    "step_overhead_s",
    "per_seq_overhead_s",
    "per_token_overhead_s",
    "per_kv_token_overhead_s",
)


def step_kind(shape: BatchShape) -> str:
    """prefill (chunks only), decode (decodes only) or mixed."""
    if shape.prefill_new_tokens and shape.num_decode_seqs:
        return "mixed"
    return "prefill" if shape.prefill_new_tokens else "decode"


@dataclass(frozen=True, slots=True)
class StepData:
    """Measured steps as columns: op time, counts, the measured seconds and the kind of each."""

    ops_s: np.ndarray
    seqs: np.ndarray
    tokens: np.ndarray
    keys: np.ndarray
    measured_s: np.ndarray
    kinds: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.measured_s)

    def subset(self, mask: np.ndarray) -> StepData:
        return StepData(
            self.ops_s[mask],
            self.seqs[mask],
            self.tokens[mask],
            self.keys[mask],
            self.measured_s[mask],
            tuple(k for k, keep in zip(self.kinds, mask, strict=True) if keep),
        )

    def design(self) -> np.ndarray:
        return np.column_stack([self.ops_s, np.ones_like(self.ops_s), self.seqs, self.tokens, self.keys])


def bare_cost_model(profile: CalibrationProfile, attention: str) -> ProfiledCostModel:
    """The profile's op times alone: scale 1, no overhead, the given attention layout, no engine section."""
    params = ProfiledParams(
        step_overhead_s=0.0,
        per_seq_overhead_s=0.0,
        per_token_overhead_s=0.0,
        per_kv_token_overhead_s=0.0,
        time_scale=1.0,
        attention=attention,  # type: ignore[arg-type]
        engine_fit=False,
    )
    return ProfiledCostModel(params, profile.model, profile.hardware, 1, profile=profile)


def step_data(
    shapes: Sequence[BatchShape], measured_s: Sequence[float], profile: CalibrationProfile, attention: str
) -> StepData:
    bare = bare_cost_model(profile, attention)
    return StepData(
        ops_s=np.array([bare.step_time(s).total_s for s in shapes], dtype=float),
        seqs=np.array([s.num_seqs for s in shapes], dtype=float),
        tokens=np.array([s.num_new_tokens for s in shapes], dtype=float),
        keys=np.array([s.num_kv_tokens for s in shapes], dtype=float),
        measured_s=np.array(measured_s, dtype=float),
        kinds=tuple(step_kind(s) for s in shapes),
    )


def records_data(steps: Sequence[StepRecord], profile: CalibrationProfile, attention: str) -> StepData:
    return step_data([s.shape() for s in steps], [s.end_s - s.start_s for s in steps], profile, attention)


@dataclass(frozen=True, slots=True)
class StepModel:
    """Fitted coefficients of the step model (module docstring)."""

    time_scale: float
    step_overhead_s: float
    per_seq_overhead_s: float
    per_token_overhead_s: float
    per_kv_token_overhead_s: float
    loss: str = DEFAULT_LOSS
    loss_scale: float = DEFAULT_LOSS_SCALE
    num_steps: int = 0

    @property
    def coefficients(self) -> np.ndarray:
        return np.array([getattr(self, name) for name in COEFFICIENTS])

    @property
    def degenerate(self) -> bool:
        return self.time_scale < MIN_TIME_SCALE

    def predict(self, data: StepData) -> np.ndarray:
        return data.design() @ self.coefficients


def kind_weights(kinds: Sequence[str]) -> np.ndarray:
    """Per step, 1 / (steps of its kind), so that every kind present weighs the same in total."""
    counts = {k: sum(1 for x in kinds if x == k) for k in set(kinds)}
    w = np.array([1.0 / counts[k] for k in kinds])
    return w * len(kinds) / w.sum() if len(kinds) else w


def _loss(name: str, scale: float, weights: np.ndarray):
    c2 = scale * scale

    def rho(z: np.ndarray) -> np.ndarray:
        u = z / c2
        if name == "soft_l1":
            s = np.sqrt(1 + u)
            values = np.vstack([2 * (s - 1) * c2, 1 / s, -0.5 / (c2 * s**3)])
        elif name == "huber":
            inside = u <= 1
            r = np.sqrt(np.where(inside, 1.0, u))
            values = np.vstack(
                [
                    np.where(inside, z, c2 * (2 * r - 1)),
                    np.where(inside, 1.0, 1 / r),
                    np.where(inside, 0.0, -0.5 / (c2 * r**3)),
                ]
            )
        elif name == "cauchy":
            values = np.vstack([c2 * np.log1p(u), 1 / (1 + u), -1 / (c2 * (1 + u) ** 2)])
        else:
            values = np.vstack([z, np.ones_like(z), np.zeros_like(z)])
        return values * weights

    return rho


def fit_step_model(
    data: StepData,
    loss: str = DEFAULT_LOSS,
    loss_scale: float = DEFAULT_LOSS_SCALE,
    balance_kinds: bool = True,
) -> StepModel:
    """The robust, non-negative fit of the step model to ``data`` (module docstring)."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; one of {', '.join(LOSSES)}")
    if len(data) == 0:
        raise ValueError("no engine steps to fit")
    m = data.measured_s
    x = data.design() / m[:, None]  # relative: predicted / measured = x @ theta
    col = np.abs(x).max(axis=0)
    col[col == 0] = 1.0
    xn = x / col
    w = kind_weights(data.kinds) if balance_kinds else np.ones(len(m))
    root = np.sqrt(w)[:, None]
    start, _ = nnls(xn * root, root[:, 0])
    theta = start
    if loss != "linear":
        result = least_squares(
            lambda t: xn @ t - 1.0,
            start,
            jac=lambda t: xn,
            bounds=(0.0, np.inf),
            loss=_loss(loss, loss_scale, w),
            f_scale=1.0,
            method="trf",
            x_scale=1.0,
        )
        theta = np.maximum(result.x, 0.0)
    coef = theta / col
    return StepModel(*(float(c) for c in coef), loss=loss, loss_scale=loss_scale, num_steps=len(m))


def kind_errors(predicted: np.ndarray, measured: np.ndarray, kinds: Sequence[str]) -> dict[str, StepKindError]:
    """Errors of ``predicted`` against ``measured`` by step kind (kinds absent are left out)."""
    rel = (np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)
    out = {}
    for kind in STEP_KINDS:
        mask = np.array([k == kind for k in kinds], dtype=bool)
        if not mask.any():
            continue
        e = rel[mask]
        out[kind] = StepKindError(
            num_steps=int(mask.sum()),
            mean_rel_error=float(np.mean(np.abs(e))),
            p90_rel_error=float(np.percentile(np.abs(e), 90)),
            mean_signed_rel_error=float(np.mean(e)),
        )
    return out
