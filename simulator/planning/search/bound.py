"""An analytic capacity bound for a plan's candidate: no simulation, a few hundred cost-model calls.

``capacity_bound`` gives, for a scenario at one load point, an upper bound on any arrival rate
(requests/s; session starts/s for a sessions workload, its requests per session apart) the
simulation can call feasible, and a mean-field guess of the SLO-limited rate
to start the search from. The bound uses the cost model the simulation uses, built as
``simulator.build.build`` builds it, and four throughput arguments per replica.

Every step the engine runs is a ``BatchShape``. Over a horizon of H seconds the steps' times
add up to at most H, so for any per-step quantity x, sum(x) <= H x max over steps of x / t:

- **decode**: a step with n running decodes produces n decode tokens. n is capped by the
  policy's sequence cap and by the KV cache: n running decodes hold at least
  ceil((prompt_i + 1) / block_size) blocks each, so n is at most the largest count whose
  smallest such needs sum to <= num_blocks; their contexts sum to at least the n smallest
  (prompt_i + 1). A step with n decodes takes at least t_lb(n) = the lesser of the
  decode-only step and a lower bound on a step that also computes prompt tokens (its n
  decodes' attention, LM head and overheads, plus the token-row ops' least time at n + 1 rows
  or more). Decode tokens/s <= D = max n / t_lb(n). A request's first token comes from its
  prefill, so lambda <= D / mean(out - 1).
- **KV x time**: a step's decodes hold at most num_blocks blocks (and at most n x the most one
  request's last decode holds), and a request's k-th decode holds ceil((prompt + k) /
  block_size): lambda <= max min(num_blocks, n x most) / t_lb(n) / mean(sum over its decodes).
- **prefill**: a step computing P prompt tokens takes at least the step's time without
  attention (the only ops whose cost depends on how the P tokens split into sequences and
  how much each has cached: dropping them makes the bound hold for any split) and without
  LM head. Prompt tokens/s <= R = max P / g(P), P up to the step's token cap (the policy's
  budget, the KV cache's slots, its sequence cap x the longest request); lambda <= R /
  mean(prompt).
- **compute**: every step computes prompt tokens or decode tokens or both, and each request
  needs prompt + out - 1 of them, so lambda <= max(R, D) / mean(prompt + out - 1).

Requests the policy may refuse (longer than max_model_len, the cache, or an unchunked
budget: a superset) cost nothing, so they are left out of the means and the bound divided by
the fraction left. A replica's bound is the least of the four; a scenario's is the sum over
its groups of count x replica bound. The plan's stability test
(``simulator.planning.search.steady``) lets up to ``max_growth_fraction`` of the offered load go
unserved, so the rate it can call stable is at most bound / (1 - max_growth_fraction): that
is ``upper_rate_per_s``.

The maxima over n and P are taken on a geometric grid of integers, with the interval
argument: on [n_i, n_{i+1}], n / t(n) <= n_{i+1} / min(t on [n_i, n_{i+1}]). The step times
of the ``silicon`` model are not monotone in n (its measured kernel tables dip by up to ~7%
between neighbouring batch sizes; ``profiled`` interpolates measurements too), so min(t on
[n_i, n_{i+1}]) is taken as the least value at grid points >= n_i (a running minimum from
the right). That is exact for
step times that do not dip between neighbouring grid points, a 2^(1/16) ratio apart; on
every model, GPU and batch range tried it stayed at or above the exact maximum found by
evaluating every integer (between 0 and ~5% above it).

No bound (``upper_rate_per_s`` None, the reason says why): closed loops (a load of users, not
a rate), disaggregated clusters (two pools, a transfer between them), speculative decoding
(a step's tokens are random), pipeline parallelism (stages overlap), attention data parallelism (its ranks'
steps are priced together, not as one engine's), policies whose KV
accounting differs (``no_kv_cache``), cost models without a per-op breakdown, and anything
that raises. With prefix caching only the decode bound is kept, without its KV cap (shared
blocks let more requests fit; cached prompt tokens are not computed).

The bound is on the long-run rate. A plan's point is a finite run whose queue-growth
estimate is noisy and whose requests' mean lengths differ from the stream's; in the runs
tried (300 requests a point) the simulated max rate stayed 1.1-3.6x below the bound, a short
run's ramp-up counting as growth.

``estimate_rate_per_s`` is a mean-field guess (see ``estimate.mean_field_rate``); only the search's start
depends on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulator.build import GroupSetup, setup_group
from simulator.config.schema import ScenarioConfig
from simulator.cost import BatchShape
from simulator.cost.shape import CostModel
from simulator.planning.search.costs import CostModels, cost_model
from simulator.planning.search.estimate import mean_field_rate
from simulator.planning.search.kv_room import decode_block_steps, kv_seq_cap, sequence_refused
from simulator.planning.search.load import load_kind
from simulator.planning.search.maxima import geometric_grid, interval_max
from simulator.planning.search.steady import SloTargets
from workloads import RequestStream

# The policies' caps on running requests, by parameter name (vllm, vllm_v0, sarathi, hf_fifo,
# continuous, priority: max_num_seqs; sglang: max_running_requests; trtllm, static: max_batch_size).
SEQ_CAP_FIELDS = ("max_num_seqs", "max_running_requests", "max_batch_size")
# Policies whose per-step token budget holds for every step (decodes plus prompt tokens, no
# exception for a long prompt), and the parameter holding it. sglang's rule is in
# step_token_budget; other policies' steps are capped by the KV cache and their sequence cap.
STRICT_BUDGET_FIELDS = {
    "vllm": "max_num_batched_tokens",
    "vllm_v0": "max_num_batched_tokens",  # None: max_model_len (plan_step's limit)
    "sarathi": "token_budget",
    "hf_fifo": "max_num_batched_tokens",
    "trtllm": "max_num_tokens",
}
# Policies that refuse a prompt longer than their budget (it must be prefilled in one step).
UNCHUNKED = {"vllm_v0": "max_num_batched_tokens"}
# Policies the bound does not model: no_kv_cache keeps no KV between steps (its KV cap and
# decode shapes differ).
UNBOUNDED_POLICIES = frozenset({"no_kv_cache"})
# Ops whose cost depends on how a step's prompt tokens split into sequences and on their
# cached context (OP_NAMES); the prefill lower bound leaves them out.
ATTENTION_OPS = ("attn_prefill", "attn_decode", "attn_linear")
# Ops that depend on a step's sequence count or sampled rows rather than its token rows.
PER_SEQ_OPS = ("lm_head", "cpu_overhead")


@dataclass(frozen=True, slots=True)
class CapacityBound:
    """An analytic bound on a scenario's max rate (requests/s), and a guess to start the search.

    ``upper_rate_per_s``: no rate above it can be called feasible by the simulation (None: no
    bound for this configuration). ``estimate_rate_per_s``: a mean-field guess of the
    SLO-limited max rate, at most the upper bound (None: none). ``reason``: one line, what
    limits the bound or why there is none.
    """

    upper_rate_per_s: float | None
    estimate_rate_per_s: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class ReplicaBound:
    """One replica's throughput bounds (requests/s) and mean-field guess."""

    rate_per_s: float | None  # None: no bound
    estimate_rate_per_s: float | None
    reason: str


def capacity_bound(
    cfg: ScenarioConfig,
    base_dir: Path | None,
    stream: RequestStream,
    slo: SloTargets,
    max_growth_fraction: float,
    cost_models: CostModels | None = None,
) -> CapacityBound:
    """The capacity bound of ``cfg`` serving ``stream`` (its load point's requests); see the module docstring.

    ``cost_models``: the cost models of earlier bounds, shared by the candidates and replicates that run the
    same one (``costs.CostModels``). Never raises: a configuration it cannot bound gets ``upper_rate_per_s``
    None and the reason.
    """
    try:
        why = _unbounded_reason(cfg)
        if why is not None:
            return CapacityBound(None, None, why)
        prompt = np.asarray(stream.num_prompt_tokens, dtype=np.int64)
        output = np.asarray(stream.num_output_tokens, dtype=np.int64)
        if len(prompt) == 0:
            return CapacityBound(None, None, "no bound: the workload has no requests")
        total, estimate, reasons = 0.0, 0.0, []
        for i, g in enumerate(cfg.replica_groups()):
            s = setup_group(cfg, g, i, base_dir)
            kind = s.policy.kind
            if kind in UNBOUNDED_POLICIES:
                return CapacityBound(None, None, f"no bound: policy {kind} keeps no KV cache between steps")
            if s.pp > 1:
                return CapacityBound(None, None, "no bound: pipeline parallelism (pp > 1) overlaps its stages")
            if s.dp_attention > 1:
                return CapacityBound(None, None, "no bound: attention data parallelism (dp_attention > 1)")
            params = s.cost_model
            cost = cost_model(s, cost_models)
            if cost.breakdown(BatchShape((1,), (0,), 0, 0, 1)).ops is None:
                return CapacityBound(None, None, f"no bound: cost model {params.kind} gives no per-op breakdown")
            r = replica_bound(cfg, s, cost, prompt, output, slo, cost_models)
            if r.rate_per_s is None:
                return CapacityBound(None, None, f"no bound: {r.reason}")
            total += g.count * r.rate_per_s
            if estimate is not None and r.estimate_rate_per_s is not None:
                estimate += g.count * r.estimate_rate_per_s
            else:
                estimate = None
            reasons.append(r.reason if len(cfg.replica_groups()) == 1 else f"{s.name}: {r.reason}")
        if not math.isfinite(total):
            return CapacityBound(None, None, "no bound: no step cost limits this workload")
        if load_kind(cfg) == "session_rate":  # the plan's load is session starts: each brings its calls
            per_session = len(prompt) / len(np.unique(stream.session_id)) if stream.session_id is not None else 1.0
            total, estimate = total / per_session, None if estimate is None else estimate / per_session
        upper = total / (1.0 - max_growth_fraction)
        if estimate is not None:
            estimate = min(estimate, upper)
        return CapacityBound(upper, estimate, "; ".join(reasons))
    except Exception as exc:  # a bound is advice: any failure means "no bound", with its cause
        return CapacityBound(None, None, f"no bound: {type(exc).__name__}: {exc}")


def _unbounded_reason(cfg: ScenarioConfig) -> str | None:
    if load_kind(cfg) == "concurrency":
        return "no bound: a closed loop's load is its number of users, not a rate"
    if cfg.speculative is not None:
        return "no bound: speculative decoding (a step's accepted tokens are random)"
    if any(g.role != "mixed" for g in cfg.replica_groups()):
        return "no bound: a disaggregated cluster (prefill and decode pools)"
    return None


# -- one replica ----------------------------------------------------------------------------------


def _int_param(policy: Any, name: str) -> int | None:
    value = getattr(policy, name, None)
    return int(value) if value is not None else None


def seq_cap(policy: Any) -> int | None:
    """The policy's cap on running requests (None: none given)."""
    caps = [v for name in SEQ_CAP_FIELDS if (v := _int_param(policy, name)) is not None]
    return min(caps) if caps else None


def step_token_budget(policy: Any, max_model_len: int, longest_tokens: int, n_cap: int) -> int | None:
    """Tokens every step of this policy computes at most (None: no budget holds for every step).

    ``longest_tokens``: the longest prompt + output of the workload (a recompute's prefill);
    ``n_cap``: the most decodes one step holds.
    """
    if policy.kind == "sglang":
        # get_new_batch_prefill: with chunked prefill every prompt chunk fits what is left of
        # chunked_prefill_size after the mixed decodes; without, the batch stays under max_prefill_tokens
        # but for its first request, which may exceed it; mixed decodes come on top (decode batches: n_cap)
        size = policy.chunked_prefill_size
        if size is not None and size > 0:
            return max(size, n_cap)
        return policy.max_prefill_tokens + longest_tokens + n_cap
    name = STRICT_BUDGET_FIELDS.get(policy.kind)
    if name is None:
        return None
    value = _int_param(policy, name)
    if value is None and policy.kind == "vllm_v0":
        return max_model_len
    return value


def _without(ops: dict, names: tuple[str, ...]) -> float:
    """The ops' seconds but ``names`` and the eager launches (beside the GPU's work: left out of a lower bound)."""
    return sum(op.seconds for name, op in ops.items() if name not in names and name != "eager_host")


def _possibly_refused(s: GroupSetup, prompt: np.ndarray, output: np.ndarray, block_size: int) -> np.ndarray:
    """Requests a policy may refuse (a superset: a refused request costs nothing, so leaving them out of the
    work is safe): longer than max_model_len, KV for prompt + output about the whole cache (less vllm_v0's
    watermark; with sliding-window blocks, its blocks with a chunk's window span), or, for a policy without chunked
    prefill, a prompt over its budget."""
    total = prompt + output
    watermark_blocks = int(float(getattr(s.policy, "watermark", 0.0) or 0.0) * s.num_blocks)
    refused = (total > s.max_model_len) | (total >= (s.num_blocks - watermark_blocks) * block_size)
    if s.windowed:  # vLLM V1 refuses a sequence whose blocks with a chunk's window span do not fit
        refused |= sequence_refused(s, total, block_size)
    name = UNCHUNKED.get(s.policy.kind)
    if name is not None:
        limit = _int_param(s.policy, name) or s.max_model_len
        refused |= prompt > limit
    if s.policy.kind == "trtllm" and not s.policy.enable_chunked_prefill:
        refused |= prompt > s.policy.max_num_tokens
    return refused


def _rows_lower_bounds(cost: CostModel, grid: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """For steps computing T prompt (and maybe decode) tokens, T on ``grid``: the token-row ops' times
    (right-running minimum: a lower bound for any T' >= T) and the rest of a one-sequence step without
    attention or LM head (the per-step and per-sequence overheads, nondecreasing in T)."""
    rows, rest = [], []
    for t in grid:
        ops = cost.breakdown(BatchShape((t,), (0,), 0, 0, 0)).ops
        assert ops is not None
        rows.append(_without(ops, ATTENTION_OPS + PER_SEQ_OPS))
        rest.append(ops["cpu_overhead"].seconds if "cpu_overhead" in ops else 0.0)
    env = np.minimum.accumulate(np.asarray(rows)[::-1])[::-1]
    return env, np.asarray(rest)


def replica_bound(
    cfg: ScenarioConfig,
    s: GroupSetup,
    cost: CostModel,
    prompt: np.ndarray,
    output: np.ndarray,
    slo: SloTargets,
    shared: CostModels | None = None,
) -> ReplicaBound:
    """One replica's bound (requests/s) serving requests of these ``prompt``/``output`` lengths."""
    kv = s.group.kv_cache or cfg.kv_cache
    block_size, prefix_caching = kv.block_size, kv.prefix_caching
    served = ~_possibly_refused(s, prompt, output, block_size)
    if not served.any():
        return ReplicaBound(None, None, "every request may be too long for the model or its KV cache")
    served_fraction = float(served.mean())
    mean_prompt = float(prompt[served].mean())
    mean_decode = float(np.maximum(output[served] - 1, 0).mean())  # the first token comes from the prefill

    # the batch cap: the policy's, the KV cache's (without prefix caching), the workload's size
    n_cap, cap_what = len(prompt), "every request of the workload"
    policy_cap = seq_cap(s.policy)
    if policy_cap is not None and policy_cap <= n_cap:
        n_cap, cap_what = policy_cap, "the policy's cap"
    if not prefix_caching:
        kv_cap = kv_seq_cap(prompt, block_size, s.num_blocks)
        if kv_cap < n_cap:
            n_cap, cap_what = kv_cap, f"KV cache: {kv_cap:,} seqs"
    if n_cap == 0:
        return ReplicaBound(None, None, "the KV cache holds no request's first decode")
    # tokens one step computes at most: the policy's budget; the KV cache's slots (every computed token
    # writes KV); at most the policy's cap of sequences, each computing at most its prompt + output
    total = prompt + output
    budget = step_token_budget(s.policy, s.max_model_len, int(total.max()), n_cap)
    largest = np.sort(total)[::-1][: policy_cap if policy_cap is not None else len(total)]
    rows_cap = min(s.num_blocks * block_size, int(largest.sum()))
    if budget is not None:
        rows_cap = min(rows_cap, budget)
    rows_grid = geometric_grid(max(rows_cap, 1))
    if shared is None:
        rows_env, rest = _rows_lower_bounds(cost, rows_grid)
    else:  # the replicates of a candidate price the same grid
        rows_env, rest = shared.rows(cost, rows_grid, _rows_lower_bounds)
    # the engine's CPU time runs beside the GPU's (V1, SGLang, TensorRT-LLM) or after it (V0): at least the longer
    prefill_tokens_per_s, prefill_at = interval_max(rows_grid, list(np.maximum(rows_env, rest)))

    # decode: n decodes at the least total context n requests can have; a step with prompt tokens as well
    # takes at least its n decodes' attention and LM head plus the token-row ops' least time at >= n + 1 rows, or
    # the engine's CPU time if that is longer
    context = np.cumsum(np.sort(prompt + 1))
    grid_index = np.asarray(rows_grid)
    n_grid = geometric_grid(n_cap)
    t_lb = []
    for n in n_grid:
        ctx = int(context[n - 1])
        decode_only = cost.step_time(BatchShape((), (), n, ctx, n)).total_s
        mixed = math.inf
        if n + 1 <= rows_cap:
            ops = cost.breakdown(BatchShape((1,), (0,), n, ctx, n)).ops
            assert ops is not None
            rows_s = _without(ops, ATTENTION_OPS + PER_SEQ_OPS)
            least_rows_s = min(rows_s, float(rows_env[np.searchsorted(grid_index, n + 1, side="right") - 1]))
            cpu_s = ops["cpu_overhead"].seconds if "cpu_overhead" in ops else 0.0
            gpu_s = _without(ops, ("attn_prefill", "cpu_overhead")) - rows_s + least_rows_s
            mixed = max(gpu_s, cpu_s)  # beside the GPU's or after it: at least the longer
        t_lb.append(min(decode_only, mixed))
    decode_tokens_per_s, decode_at = interval_max(n_grid, t_lb)

    bounds = {}
    if mean_decode > 0:
        bounds["decode"] = (
            decode_tokens_per_s / mean_decode,
            f"decode {decode_tokens_per_s:,.0f} tok/s at <= {decode_at:,} seqs ({cap_what}), "
            f"{mean_decode:,.1f} decode tokens/request",
        )
    if mean_decode > 0 and not prefix_caching:
        # KV x time: a step's n decodes hold at most num_blocks blocks, and at most n x the most blocks one
        # request's last decode holds; each request needs decode_block_steps of them over its decodes
        most_blocks = int(-(-(prompt + np.maximum(output - 1, 0)).max() // block_size))
        block_steps_per_s, kv_at = interval_max(n_grid, t_lb, lambda n: np.minimum(s.num_blocks, n * most_blocks))
        mean_block_steps = float(decode_block_steps(prompt[served], output[served], block_size).mean())
        bounds["kv"] = (
            block_steps_per_s / mean_block_steps,
            f"KV cache {s.num_blocks:,} blocks x {block_steps_per_s / s.num_blocks:,.0f} steps/s at <= {kv_at:,} "
            f"seqs, {mean_block_steps:,.0f} block-steps/request",
        )
    if not prefix_caching:
        bounds["prefill"] = (
            prefill_tokens_per_s / mean_prompt,
            f"prefill {prefill_tokens_per_s:,.0f} tok/s at <= {prefill_at:,} tokens/step, "
            f"{mean_prompt:,.1f} prompt tokens/request",
        )
        rows_per_s = max(prefill_tokens_per_s, decode_tokens_per_s)
        bounds["rows"] = (
            rows_per_s / (mean_prompt + mean_decode),
            f"compute {rows_per_s:,.0f} tok/s (prompt + decode) at <= {rows_cap:,} tokens/step, "
            f"{mean_prompt + mean_decode:,.1f} tokens/request",
        )
    if not bounds:
        return ReplicaBound(math.inf, None, "no step cost limits this workload")
    rate, what = min(bounds.values())
    rate /= served_fraction  # requests the policy may refuse cost nothing
    if served_fraction < 1:
        what += f", {1 - served_fraction:.1%} possibly refused"
    estimate = mean_field_rate(cost, slo, n_cap, rows_cap, mean_prompt, mean_decode, rate)
    return ReplicaBound(rate, estimate, what)
