"""A mean-field guess of one replica's SLO-limited rate: where the rate search starts (``bound`` gives it
with the analytic bound; only the search's start depends on it)."""

from __future__ import annotations

import math

from simulator.cost import BatchShape
from simulator.cost.shape import CostModel
from simulator.planning.search.maxima import geometric_grid
from simulator.planning.search.steady import SloTargets

# The p99 SLOs: the tail probability a p99 bound leaves over.
P99_TAIL = 0.01

# The estimate's grid: it only steers the search, so a coarser grid (a quarter octave) will do.
ESTIMATE_GRID_RATIO = 2.0**0.25


def mean_field_rate(
    cost: CostModel,
    slo: SloTargets,
    n_cap: int,
    rows_cap: int,
    mean_prompt: float,
    mean_decode: float,
    bound_per_s: float,
) -> float | None:
    """A mean-field guess of the SLO-limited rate of one replica (requests/s), at most ``bound_per_s``.

    Steady chunked batching at rate lambda with steps of tau seconds: N = lambda x mean_decode x tau
    requests decode (Little's law: each spends mean_decode steps decoding) and every step also computes
    lambda x mean_prompt x tau = N x mean_prompt / mean_decode prompt tokens. So a batch of N fixes the
    step, tau(N) = the step of N decodes (each at context mean_prompt + mean_decode / 2, half-way
    through its output) and one prompt chunk of that many tokens, and the rate, lambda(N) = N /
    (mean_decode x tau(N)). The mean-field capacity is the most lambda(N) over N <= the batch cap
    whose step fits the token cap; a TPOT bound keeps the N with tau(N) <= it. TTFT and E2EL bounds
    treat the replica as one M/M/1 server of that capacity (P(wait > w) = rho exp(-mu (1 - rho) w)),
    the rate whose p99 wait fits what the bound leaves after the request's own steps.
    """
    tpot_s = slo.tpot_p99_ms / 1000 if slo.tpot_p99_ms is not None else math.inf
    capacity, within_tpot, step_s_at = 0.0, 0.0, 0.0
    if mean_decode > 0:
        context = max(1, round(mean_prompt + mean_decode / 2))
        for n in geometric_grid(n_cap, ESTIMATE_GRID_RATIO):
            chunk = round(n * mean_prompt / mean_decode)
            if chunk + n > rows_cap:
                break
            prompts = ((chunk,), (0,)) if chunk else ((), ())
            step_s = cost.step_time(BatchShape(*prompts, n, n * context, n)).total_s
            rate = n / (mean_decode * step_s)
            capacity = max(capacity, rate)
            if step_s <= tpot_s and rate > within_tpot:
                within_tpot, step_s_at = rate, step_s
            if not step_s_at:  # not even the lightest load meets the TPOT bound: start the search there
                within_tpot, step_s_at = rate, step_s
    if capacity == 0.0:  # one-token outputs, or a batch over the token cap: the bound's rate as the server's
        capacity, step_s_at = bound_per_s, 0.0
        within_tpot = capacity
    capacity = min(capacity, bound_per_s)
    estimate = min(within_tpot, capacity)
    prefill_s = step_s_at * max(1.0, math.ceil(mean_prompt / rows_cap))
    if slo.ttft_p99_ms is not None:
        estimate = min(estimate, _mm1_rate(capacity, slo.ttft_p99_ms, prefill_s))
    if slo.e2el_p99_ms is not None:
        estimate = min(estimate, _mm1_rate(capacity, slo.e2el_p99_ms, prefill_s + mean_decode * step_s_at))
    return estimate if estimate > 0 else None


def _mm1_rate(capacity_per_s: float, bound_ms: float | None, service_s: float) -> float:
    """The rate whose p99 M/M/1 wait at ``capacity_per_s`` fits in ``bound_ms`` less ``service_s``."""
    if bound_ms is None:
        return capacity_per_s
    wait_s = bound_ms / 1000 - service_s
    if wait_s <= 0:
        return capacity_per_s * P99_TAIL  # the bound leaves no wait: the load at which 99% find the server idle
    lo, hi = 0.0, 1.0
    for _ in range(50):  # bisection on rho to float resolution of the utilisation
        rho = (lo + hi) / 2
        if rho * math.exp(-capacity_per_s * (1 - rho) * wait_s) > P99_TAIL:
            hi = rho
        else:
            lo = rho
    return lo * capacity_per_s
