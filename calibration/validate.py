"""``validate()``: run a real engine on a small workload, simulate the same requests, compare.

Both sides get the same requests (arrival times, prompt and output lengths), the same
batch policy and limits (batch cap, token budget, block size, KV blocks, recompute
preemption) and the same model. Before and after the measured run the engine serves
warm-up batches (one request alone, a few together, some arriving while others decode)
that are not compared: their prefill
and decode steps, against the ops' time the profile predicts, give the engine's time
scale and own per-step overhead (step time = scale x ops + step_s + per_seq_s x
sequences + per_kv_s x keys attended, a non-negative least-squares fit in which prefill
and decode steps weigh the same in total: the scale absorbs an engine's kernels being
faster or slower than the harness's, the overheads its scheduling, input preparation and
the work it does per key read, such as gathering paged K/V, beyond the attention kernel),
and the delay between sending a request to an idle engine and its scheduling gives the
client ingest delay. Tokens are timed by the engine
as it produces them, so the stream delay is zero on both sides.

Metrics on both sides come from ``simulator.metrics.summary.summarize`` (vLLM's definitions).
The compared run's steps whose work is known (the builtin engine's records, transformers'
reconstructed by ``token_steps``) give the step-time error by step kind (``step_errors``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from calibration.device import resolve_device
from calibration.engine import BuiltinEngine, EngineRequest, StepRecord, make_requests
from calibration.model import TorchModel
from policies import BATCH_POLICIES
from policies.batching import resolve_for_hardware
from policies.batching.hf_fifo import HfFifoParams
from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.config.schema import ScenarioConfig
from simulator.cost.profile import CalibrationProfile, EngineCalibration
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams
from simulator.kv.pool import ceil_div
from simulator.metrics.summary import summarize
from workloads import RequestStream, generate

ENGINES = ("hf", "builtin")
COMPARED = (
    *tuple(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p90")),
    "request_throughput",
    "output_throughput",
)
WARMUP_PROMPT_TOKENS = 64
WARMUP_OUTPUT_TOKENS = 24
ProgressFn = Callable[[int, int], None]


def default_workload(profile: CalibrationProfile, num_requests: int) -> dict[str, Any]:
    """A small Poisson workload sized for the profile's device (its arrival rate is set later)."""
    if profile.device.kind == "cpu":
        prompt, output = {"min_tokens": 32, "max_tokens": 256}, {"min_tokens": 8, "max_tokens": 48}
    else:
        prompt, output = {"min_tokens": 128, "max_tokens": 2048}, {"min_tokens": 32, "max_tokens": 256}
    return {
        "num_requests": num_requests,
        "arrival": {"kind": "poisson", "rate_per_s": 1.0},
        "lengths": {
            "kind": "independent",
            "prompt": {"kind": "uniform", **prompt},
            "output": {"kind": "uniform", **output},
        },
    }


def default_policy(profile: CalibrationProfile) -> dict[str, Any]:
    budget = 512 if profile.device.kind == "cpu" else 2048
    return {"kind": "hf_fifo", "max_num_seqs": 32, "max_num_batched_tokens": budget}


def validation_scenario(
    profile: CalibrationProfile,
    profile_path: Path | None,
    engine: str,
    workload_data: dict[str, Any] | None,
    num_requests: int | None,
) -> ScenarioConfig:
    """The scenario both sides run: the profile's model and device, the workload, policy and KV limits.

    ``profile_path`` None: a profile not yet written (engine-level calibration), which nothing builds from.

    ``workload_data`` is a scenario mapping (its workload, seed, policy, kv_cache and
    max_model_len are used); without one, a default Poisson workload (``validate`` sets
    its rate once the engine's timing is known, see ``with_default_rate``).
    """
    data = dict(workload_data or {})
    unused = set(data) - {"workload", "seed", "policy", "kv_cache", "max_model_len"}
    if unused:
        raise ValueError(
            f"--workload: {', '.join(sorted(unused))} cannot be set here (the profile gives the model and "
            "device, validate measures the client delays); remove them"
        )
    scenario = {
        "seed": 0,
        "policy": default_policy(profile),
        "workload": default_workload(profile, num_requests or 32),
        "kv_cache": {"block_size": 16},
        **{k: v for k, v in data.items() if v is not None},
        "model": profile.model.model_dump(),
        "hardware": profile.hardware.model_dump(),
        "cost_model": {"kind": "profiled"} | ({"profile": str(profile_path.resolve())} if profile_path else {}),
    }
    if isinstance(scenario["workload"], dict) and num_requests is not None:
        scenario["workload"] = {k: v for k, v in scenario["workload"].items() if k != "duration_s"}
        scenario["workload"]["num_requests"] = num_requests
    cfg = validate_scenario(scenario, source="--workload")
    # the policy as the engine runs it on the profile's device (vllm's budget and max_num_seqs default per
    # GPU): both sides, and the warm-ups' shapes, read the same values
    policy = resolve_for_hardware(cfg.policy, profile.hardware.memory_bytes, profile.hardware.name)
    cfg = cfg.model_copy(update={"policy": policy})
    if engine == "hf" and cfg.policy.kind != "hf_fifo":
        raise ValueError("--engine hf runs transformers' FIFO scheduler: the policy must be hf_fifo (or left out)")
    if cfg.kv_cache.num_blocks is None:
        stream = generate(cfg.workload, cfg.seed)
        longest = int((stream.num_prompt_tokens + stream.num_output_tokens).max())
        seqs = getattr(cfg.policy, "max_num_seqs", 32)
        blocks = seqs * ceil_div(longest, cfg.kv_cache.block_size) + 1
        kv = cfg.kv_cache.model_dump() | {"num_blocks": blocks}
        cfg = validate_scenario(cfg.model_dump() | {"kv_cache": kv}, source="--workload")
    _check_warmup_fits(cfg, profile)
    return cfg


def _check_warmup_fits(cfg: ScenarioConfig, profile: CalibrationProfile) -> None:
    """The warm-up requests that fit the engine's timing must run under the scenario's limits."""
    longest = max(prompt + output for _, prompt, output in _warmup_runs(cfg))
    max_len = cfg.max_model_len or profile.model.max_context_tokens
    if longest > max_len:
        raise ValueError(
            f"--workload: max_model_len {max_len} is below the {longest} tokens of the warm-up requests "
            "that fit the engine's timing; raise it"
        )
    blocks = ceil_div(longest, cfg.kv_cache.block_size)
    assert cfg.kv_cache.num_blocks is not None
    if blocks > cfg.kv_cache.num_blocks:
        raise ValueError(
            f"--workload: kv_cache.num_blocks {cfg.kv_cache.num_blocks} cannot hold one warm-up request "
            f"({longest} tokens, {blocks} blocks of {cfg.kv_cache.block_size}); raise it"
        )


def with_default_rate(cfg: ScenarioConfig, cost_model: dict[str, Any]) -> ScenarioConfig:
    """Set the arrival rate so that about two requests are in flight (Little's law on the simulator).

    The time of one request of mean lengths served alone comes from ``cost_model`` (the
    profile with the engine's fitted timing).
    """
    scenario = cfg.model_dump() | {"cost_model": cost_model}
    cfg = validate_scenario(scenario)
    stream = generate(cfg.workload, cfg.seed)
    one = RequestStream(
        np.array([0.0]),
        np.array([round(stream.num_prompt_tokens.mean())]),
        np.array([round(stream.num_output_tokens.mean())]),
    )
    alone_s = build(cfg, stream=one, record_steps=False).run().summary["mean_e2el_ms"] / 1e3
    workload = cfg.workload.model_dump() | {"arrival": {"kind": "poisson", "rate_per_s": 2.0 / alone_s}}
    return validate_scenario(scenario | {"workload": workload})


# -- engines --------------------------------------------------------------------------------


class _Builtin:
    name = "builtin"

    def __init__(self, profile: CalibrationProfile, cfg: ScenarioConfig, device: Any, seed: int) -> None:
        kv = cfg.kv_cache
        assert kv.num_blocks is not None
        model = TorchModel(profile.model, device, profile.dtype, kv.num_blocks, kv.block_size, seed=seed)
        policy = BATCH_POLICIES.get(cfg.policy.kind)(cfg.policy)
        self.engine = BuiltinEngine(model, policy, cfg.max_model_len or profile.model.max_context_tokens)
        self.version = "servesim builtin"
        self.attention = "per_sequence"

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def run(self, requests: Sequence[EngineRequest], progress: ProgressFn | None = None) -> list[StepRecord]:
        self.engine.steps = []
        import torch

        with torch.inference_mode():
            self.engine.run(requests, progress)
        return list(self.engine.steps)


class _Hf:
    name = "hf"

    def __init__(self, profile: CalibrationProfile, cfg: ScenarioConfig, device: Any, seed: int) -> None:
        from calibration.hf_engine import HfEngine

        kv = cfg.kv_cache
        assert kv.num_blocks is not None and isinstance(cfg.policy, HfFifoParams)
        self.engine = HfEngine(profile.model, device, profile.dtype, cfg.policy, kv.num_blocks, kv.block_size, seed)
        self.version = f"transformers {self.engine.version}"
        self.attention = "packed"

    def start(self) -> None:
        self.engine.start()
        self.attention = self.engine.attention_layout

    def stop(self) -> None:
        self.engine.stop()

    def run(self, requests: Sequence[EngineRequest], progress: ProgressFn | None = None) -> list[StepRecord]:
        self.engine.run(requests, progress)
        return []


# -- warm-up: the engine's own overhead and ingest delay ------------------------------------


@dataclass(frozen=True, slots=True)
class EngineFit:
    """What the warm-up measured: step time = time_scale x ops + step + per_seq x seqs + per_kv x keys."""

    time_scale: float
    step_overhead_s: float
    per_seq_overhead_s: float
    per_kv_token_overhead_s: float
    ingest_delay_s: float
    num_steps: int
    mean_rel_error: float
    fitted: bool


STEP_TOLERANCE_S = 5e-4  # tokens of one step are stamped within this of each other
MIN_TIME_SCALE = 1e-3  # a fitted scale below this is degenerate (see fit_engine)


def token_steps(requests: Sequence[EngineRequest], budget: int | None = None) -> list[StepRecord]:
    """Engine steps reconstructed from the token times of ``requests`` (any arrival pattern).

    Tokens stamped together (within ``STEP_TOLERANCE_S``) come from one step. A step is kept
    when its work is known exactly: every request decoding at the time (its first token
    earlier, its last one not yet) emitted one token in it, each request emitting its first
    token was scheduled no earlier than the previous step's end (its whole prompt ran in this
    step: a chunked prompt started before is left out), and no other request was scheduled
    and still without a token (a prompt chunk hidden in the step). A step with decodes starts
    when the previous one, itself complete, ended; a step of prompts only starts when its
    requests were scheduled. A decode attends to its prompt plus the tokens so far. With the
    engine's token ``budget``, a step whose prompts and decodes would exceed it is left out (its
    prompt was chunked over steps that emitted nothing).
    """
    events = sorted((t, i, k) for i, r in enumerate(requests) for k, t in enumerate(r.token_times_s))
    groups: list[list[tuple[float, int, int]]] = []
    for event in events:
        if groups and event[0] - groups[-1][0][0] <= STEP_TOLERANCE_S:
            groups[-1].append(event)
        else:
            groups.append([event])
    first = {i: g for g in range(len(groups) - 1, -1, -1) for _, i, k in groups[g] if k == 0}
    last = {i: g for g in range(len(groups)) for _, i, _ in groups[g]}
    ends = [group[-1][0] for group in groups]

    def complete(g: int) -> bool:
        members = [i for _, i, _ in groups[g]]
        if len(set(members)) != len(members):
            return False
        active = {i for i in first if first[i] < g <= last[i]}
        return active <= set(members)

    steps = []
    for g, group in enumerate(groups):
        if not complete(g):
            continue
        new = [(i, k) for _, i, k in group if k == 0]
        decodes = [(i, k) for _, i, k in group if k > 0]
        scheduled = [requests[i].first_scheduled_s for i, _ in new]
        if None in scheduled:
            continue
        boundary = ends[g - 1] if g > 0 else -math.inf
        if any(s < boundary - STEP_TOLERANCE_S for s in scheduled):  # type: ignore[operator]
            continue  # a prompt begun in an earlier step (chunked)
        hidden = [
            r
            for j, r in enumerate(requests)
            if r.first_scheduled_s is not None and r.first_scheduled_s <= ends[g] and first.get(j, len(groups)) > g
        ]
        if hidden:
            continue
        if decodes:
            if g == 0 or not complete(g - 1):
                continue
            start = boundary
        else:
            start = max(scheduled)  # type: ignore[type-var]
        prompts = tuple(requests[i].num_prompt_tokens for i, _ in new)
        if budget is not None and sum(prompts) + len(decodes) > budget:
            continue  # more than one step's tokens: the prompt ran in chunks
        context = sum(requests[i].num_prompt_tokens + k for i, k in decodes)
        steps.append(StepRecord(start, ends[g], prompts, (0,) * len(prompts), len(decodes), context, len(group), 0))
    return steps


def _warmup_runs(cfg: ScenarioConfig) -> list[tuple[int, int, int]]:
    """(sequences, prompt tokens, output tokens): alone, small batches in one prefill step, long contexts."""
    budget = getattr(cfg.policy, "max_num_batched_tokens", None) or 512
    seqs = getattr(cfg.policy, "max_num_seqs", 8)
    runs = [(1, WARMUP_PROMPT_TOKENS, WARMUP_OUTPUT_TOKENS)]
    for b, prompt, output in ((4, 2 * WARMUP_PROMPT_TOKENS, 8), (8, WARMUP_PROMPT_TOKENS, WARMUP_OUTPUT_TOKENS)):
        b = min(b, seqs)
        prompt = min(prompt, budget // b)
        if b > 1 and prompt >= 8:
            runs.append((b, prompt, output))
    # longer contexts: the prefill is split over several steps, the decodes after it are not
    runs.append((min(8, seqs), 4 * WARMUP_PROMPT_TOKENS, 16))
    runs.append((min(2, seqs), 6 * WARMUP_PROMPT_TOKENS, 16))
    if seqs >= 16 and budget // 16 >= 8:  # a wide decode batch
        runs.append((16, min(WARMUP_PROMPT_TOKENS // 2, budget // 16), 16))
    return runs


@dataclass(frozen=True, slots=True)
class Staggered:
    """Requests decoding when others arrive one by one: steps mixing a whole prompt with decodes."""

    num_decoding: int
    decode_prompt_tokens: int
    arriving_prompt_tokens: tuple[int, ...]
    steps_apart: int  # arrivals this many decode steps apart


def _staggered_runs(cfg: ScenarioConfig) -> list[Staggered]:
    budget = getattr(cfg.policy, "max_num_batched_tokens", None) or 512
    seqs = getattr(cfg.policy, "max_num_seqs", 8)
    b = min(4, seqs - 1)
    if b < 1:
        return []
    room = budget - seqs  # a prompt that fits one step beside every decode
    prompts = tuple(p for p in (32, 96, 160, 224) if p <= room)[: seqs - b]
    return [Staggered(b, WARMUP_PROMPT_TOKENS, prompts, 6)] if prompts else []


def staggered_requests(run: Staggered, step_s: float, vocab: int, seed: int) -> list[EngineRequest]:
    """``run``'s requests, their arrivals spaced by ``step_s`` (a decode step's measured time)."""
    n = len(run.arriving_prompt_tokens)
    first_s = 4 * step_s + run.steps_apart * step_s  # the decoding ones have left their prefill by then
    arrivals = [0.0] * run.num_decoding + [first_s + j * run.steps_apart * step_s for j in range(n)]
    output = WARMUP_OUTPUT_TOKENS + (n + 1) * run.steps_apart + 8
    prompts = [run.decode_prompt_tokens] * run.num_decoding + list(run.arriving_prompt_tokens)
    outputs = [output] * run.num_decoding + [8] * n
    return make_requests(arrivals, prompts, outputs, vocab, seed)


def token_budget(cfg: ScenarioConfig) -> int | None:
    """The policy's tokens per step, where it has such a limit."""
    return getattr(cfg.policy, "max_num_batched_tokens", None) or getattr(cfg.policy, "token_budget", None)


def engine_steps(engine: _Builtin | _Hf, requests: Sequence[EngineRequest], cfg: ScenarioConfig) -> list[StepRecord]:
    """Run ``requests``; the steps whose work is known: the builtin engine's own records (less those
    that preempted), transformers' reconstructed from its token times (``token_steps``)."""
    recorded = engine.run(requests)
    steps = recorded if recorded else token_steps(requests, token_budget(cfg))
    return [s for s in steps if s.num_preempted == 0]


def collect_warmup(
    engine: _Builtin | _Hf, profile: CalibrationProfile, cfg: ScenarioConfig, seed: int
) -> tuple[list[StepRecord], list[float], float]:
    """Serve the warm-up batches; their steps, the ingest delays of idle sends and a lone decode step's time."""
    vocab = profile.model.vocab_size
    # the first calls pay one-off costs; this run also times a decode step, to space the staggered arrivals
    alone = make_requests([0.0], [WARMUP_PROMPT_TOKENS], [8], vocab, seed)
    engine.run(alone)
    step_s = float(np.median(np.diff(alone[0].token_times_s))) if len(alone[0].token_times_s) > 1 else 1e-3
    steps: list[StepRecord] = []
    ingest: list[float] = []
    for b, prompt, output in _warmup_runs(cfg):
        reqs = make_requests([0.0] * b, [prompt] * b, [output] * b, vocab, seed + b)
        steps += engine_steps(engine, reqs, cfg)
        ingest += [min(r.first_scheduled_s for r in reqs if r.first_scheduled_s is not None)]
    for j, run in enumerate(_staggered_runs(cfg)):
        steps += engine_steps(engine, staggered_requests(run, step_s, vocab, seed + 50 + j), cfg)
    return steps, ingest, step_s


def step_terms(
    steps: list[StepRecord], attention: str, profile: CalibrationProfile
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step: the profile's op time (no overhead), the sequences scheduled and the keys attended."""
    params = ProfiledParams(step_overhead_s=0.0, per_seq_overhead_s=0.0, attention=attention)  # type: ignore[arg-type]
    bare = ProfiledCostModel(params, profile.model, profile.hardware, 1, profile=profile)
    shapes = [s.shape() for s in steps]
    ops = np.array([bare.step_time(shape).total_s for shape in shapes])
    seqs = np.array([shape.num_seqs for shape in shapes], dtype=float)
    keys = np.array([shape.num_kv_tokens for shape in shapes], dtype=float)
    return ops, seqs, keys


def fit_engine(
    steps: list[StepRecord], ingest: list[float], attention: str, profile: CalibrationProfile, fit: bool = True
) -> EngineFit:
    """The engine's time scale, per-step overhead and ingest delay from warm-up steps (module docstring).

    With ``fit=False``, or when the fit is degenerate (scale below ``MIN_TIME_SCALE``), the
    profile is taken as it is (scale 1, the harness's overhead; ``fitted`` False) and only
    the ingest delay is measured.
    """
    measured = np.array([s.end_s - s.start_s for s in steps])
    ops, seqs, keys = step_terms(steps, attention, profile)
    if fit:
        # least squares with every coefficient >= 0 in relative terms; the few prefill steps weigh as
        # much in total as the many decode steps (TTFT rests on the former, TPOT on the latter)
        has_prefill = np.array([bool(s.prefill_new_tokens) for s in steps])
        weight = np.where(has_prefill, 1.0 / max(1, has_prefill.sum()), 1.0 / max(1, (~has_prefill).sum()))
        design = np.column_stack([ops, np.ones_like(ops), seqs, keys]) / measured[:, None]
        root = np.sqrt(weight)[:, None]
        (scale, step_s, per_seq_s, per_kv_s), _ = nnls(design * root, root[:, 0])
        # an op time scale near zero says the warm-up steps did not tell ops from overhead
        # (too few, or all alike): the profile is then taken as it is
        fit = bool(scale >= MIN_TIME_SCALE)
    if not fit:
        scale, step_s, per_seq_s, per_kv_s = 1.0, profile.overhead.step_s, profile.overhead.per_seq_s, 0.0
    predicted = scale * ops + step_s + per_seq_s * seqs + per_kv_s * keys
    return EngineFit(
        time_scale=float(scale),
        step_overhead_s=float(step_s),
        per_seq_overhead_s=float(per_seq_s),
        per_kv_token_overhead_s=float(per_kv_s),
        ingest_delay_s=max(0.0, float(np.median(ingest))),
        num_steps=len(steps),
        mean_rel_error=float(np.mean(np.abs(predicted - measured) / measured)),
        fitted=fit,
    )


TIMINGS = ("profile", "in-run", "ops")
DRIFT_WARNING = 0.15  # warm-up steps this much slower or faster than the profile's engine fit predicts


def predict(fit: EngineFit, steps: list[StepRecord], attention: str, profile: CalibrationProfile) -> np.ndarray:
    """The fitted step model's time for each of ``steps``."""
    ops, seqs, keys = step_terms(steps, attention, profile)
    return (
        fit.time_scale * ops + fit.step_overhead_s + fit.per_seq_overhead_s * seqs + fit.per_kv_token_overhead_s * keys
    )


STEP_KINDS = ("prefill", "decode", "mixed")


def step_kind(step: StepRecord) -> str:
    """``prefill`` (prompts only), ``decode`` (decodes only) or ``mixed``."""
    if not step.prefill_new_tokens:
        return "decode"
    return "mixed" if step.num_decode_seqs else "prefill"


def step_errors(
    fit: EngineFit, steps: list[StepRecord], attention: str, profile: CalibrationProfile
) -> dict[str, dict[str, float | int | None]]:
    """Per step kind: how many steps, their mean measured and predicted time (ms), and the mean signed and
    absolute relative error of the prediction, (predicted - measured) / measured."""
    out: dict[str, dict[str, float | int | None]] = {}
    measured = np.array([s.end_s - s.start_s for s in steps])
    predicted = predict(fit, steps, attention, profile) if steps else np.zeros(0)
    kinds = np.array([step_kind(s) for s in steps])
    for kind in STEP_KINDS:
        mask = kinds == kind
        m, p = measured[mask], predicted[mask]
        rel = (p - m) / m if mask.any() else np.zeros(0)
        out[kind] = {
            "num_steps": int(mask.sum()),
            "mean_measured_ms": float(m.mean() * 1e3) if mask.any() else None,
            "mean_predicted_ms": float(p.mean() * 1e3) if mask.any() else None,
            "mean_rel_error": float(rel.mean()) if mask.any() else None,
            "mean_abs_rel_error": float(np.abs(rel).mean()) if mask.any() else None,
        }
    return out


def from_calibration(c: EngineCalibration) -> EngineFit:
    """The engine timing a profile's engine-level fit gives (nothing fitted here)."""
    return EngineFit(
        time_scale=c.time_scale,
        step_overhead_s=c.step_overhead_s,
        per_seq_overhead_s=c.per_seq_overhead_s,
        per_kv_token_overhead_s=c.per_kv_token_overhead_s,
        ingest_delay_s=c.ingest_delay_s,
        num_steps=c.num_steps,
        mean_rel_error=c.fit_mean_rel_error,
        fitted=True,
    )


def _cost_model(cfg: ScenarioConfig, attention: str, fit: EngineFit) -> dict[str, Any]:
    return cfg.cost_model.model_dump() | {
        "attention": attention,
        "time_scale": fit.time_scale,
        "step_overhead_s": fit.step_overhead_s,
        "per_seq_overhead_s": fit.per_seq_overhead_s,
        "per_kv_token_overhead_s": fit.per_kv_token_overhead_s,
    }


# -- the comparison -------------------------------------------------------------------------


def measured_frame(requests: Sequence[EngineRequest]) -> pd.DataFrame:
    """The engine's requests in the simulator's per-request table format."""
    nan = math.nan
    rows = []
    for r in requests:
        times = r.token_times_s
        rows.append(
            {
                "request_id": r.request_id,
                "replica_id": 0,
                "num_prompt_tokens": r.num_prompt_tokens,
                "num_output_tokens": r.num_output_tokens,
                "num_generated_tokens": r.num_generated_tokens,
                "num_preemptions": r.num_preemptions,
                "arrival_s": r.arrival_s,
                "enqueued_s": nan if r.admitted_s is None else r.admitted_s,
                "first_scheduled_s": nan if r.first_scheduled_s is None else r.first_scheduled_s,
                "first_token_s": times[0] if times else nan,
                "finished_s": nan if r.finished_s is None else r.finished_s,
                "status": "finished" if r.status == "finished" else "rejected",
                "reject_reason": r.reject_reason or "",
            }
        )
    return pd.DataFrame(rows)


def measured_itl(requests: Sequence[EngineRequest]) -> np.ndarray:
    gaps = [np.diff(r.token_times_s) for r in requests if len(r.token_times_s) > 1]
    return np.concatenate(gaps) if gaps else np.zeros(0)


def compare(measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """{metric: {measured, predicted, rel_error}} with rel_error = (predicted - measured) / measured."""
    out: dict[str, dict[str, float | None]] = {}
    for key in COMPARED:
        m, p = measured.get(key), predicted.get(key)
        err = None if m in (None, 0) or p is None else (p - m) / m
        out[key] = {"measured": m, "predicted": p, "rel_error": err}
    return out


@dataclass
class ValidationResult:
    """Both runs and their comparison."""

    engine: str
    engine_version: str
    scenario: ScenarioConfig
    fit: EngineFit
    comparison: dict[str, dict[str, float | None]]
    measured_summary: dict[str, Any]
    predicted_summary: dict[str, Any]
    measured_requests: pd.DataFrame
    predicted_requests: pd.DataFrame
    engine_steps: list[StepRecord] = field(default_factory=list)
    wall_s: float = 0.0
    timing_source: str = "fitted in-run"  # where the engine's time per step came from (see validate)
    timing_drift: float | None = None  # warm-up steps' time over the profile's engine fit, less 1 (profile timing)
    step_errors: dict[str, dict[str, float | int | None]] = field(default_factory=dict)  # of the compared run

    def write(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.measured_requests.to_csv(out_dir / "measured_requests.csv", index=False)
        self.predicted_requests.to_csv(out_dir / "predicted_requests.csv", index=False)
        if self.engine_steps:
            steps = pd.DataFrame([asdict(s) for s in self.engine_steps])
            steps.to_csv(out_dir / "engine_steps.csv", index=False)

        def dump(name: str, obj: Any) -> None:
            (out_dir / name).write_text(json.dumps(obj, indent=2, default=_json_default) + "\n")

        dump("comparison.json", self.comparison)
        dump("measured_summary.json", self.measured_summary)
        dump("predicted_summary.json", self.predicted_summary)
        dump(
            "validation.json",
            {
                "engine": self.engine,
                "engine_version": self.engine_version,
                "engine_fit": asdict(self.fit),
                "timing_source": self.timing_source,
                "timing_drift": self.timing_drift,
                "step_errors": self.step_errors,
                "scenario": self.scenario.model_dump(mode="json"),
                "wall_s": self.wall_s,
            },
        )
        return out_dir


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def _clean(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()}


def validate(
    profile: CalibrationProfile,
    profile_path: Path,
    engine_name: str,
    workload_data: dict[str, Any] | None = None,
    num_requests: int | None = None,
    progress: ProgressFn | None = None,
    timing: str = "profile",
) -> ValidationResult:
    """Run ``engine_name`` ("hf" or "builtin") on the workload, simulate it, and compare (module docstring).

    ``timing`` says where the engine's time per step comes from: "profile" (the default, a held-out
    check) uses the profile as calibrated, its engine-level fit for this engine when it has one
    (``servesim calibrate --engine``), else its op times and the harness's overhead; "in-run" fits the
    engine's timing to warm-up requests served around the compared ones; "ops" ignores any engine fit.
    """
    if engine_name not in ENGINES:
        raise ValueError(f"unknown engine {engine_name!r}; one of {', '.join(ENGINES)}")
    started = time.perf_counter()
    cfg = validation_scenario(profile, profile_path, engine_name, workload_data, num_requests)
    try:
        device = resolve_device(profile.device.kind, profile.device.num_threads)
    except ValueError:  # a profile measured on a GPU, validated where there is none
        raise ValueError(
            f"{profile_path}: measured on {profile.device.kind} ({profile.device.name}); validate runs the engine "
            "on the profile's device, and torch sees none here"
        ) from None
    if timing not in TIMINGS:
        raise ValueError(f"unknown timing {timing!r}; one of {', '.join(TIMINGS)}")
    calibrated = profile.engines.get(engine_name) if timing == "profile" else None
    engine = (_Hf if engine_name == "hf" else _Builtin)(profile, cfg, device, cfg.seed)
    engine.start()
    try:
        # warm-ups before and after the compared requests bracket them: if the machine's speed
        # drifts during the run (other load), an in-run fit sees both ends of it
        steps, ingest, _ = collect_warmup(engine, profile, cfg, cfg.seed)
        first = (
            from_calibration(calibrated)
            if calibrated is not None
            else fit_engine(steps, ingest, engine.attention, profile, timing == "in-run")
        )
        drift = None
        if calibrated is not None and steps:  # the engine's speed now against its speed at calibrate time
            measured_s = np.array([s.end_s - s.start_s for s in steps])
            drift = float(np.median(measured_s / predict(first, steps, calibrated.attention, profile)) - 1)
        if workload_data is None or "workload" not in workload_data:
            cfg = with_default_rate(cfg, _cost_model(cfg, engine.attention, first))
        stream = generate(cfg.workload, cfg.seed)
        requests = make_requests(
            stream.arrival_s, stream.num_prompt_tokens, stream.num_output_tokens, profile.model.vocab_size, cfg.seed
        )
        compared_steps = engine.run(requests, progress)
        after, ingest_after = [], []
        if timing == "in-run":
            after, ingest_after, _ = collect_warmup(engine, profile, cfg, cfg.seed + 7)
    finally:
        engine.stop()
    if calibrated is not None:
        fit, source = first, f"profile (engine fit of {calibrated.engine_version})"
    elif timing == "in-run":
        fit, source = fit_engine(steps + after, ingest + ingest_after, engine.attention, profile), "fitted in-run"
    else:
        fit, source = first, "profile (op times only: no engine fit for this engine)"
    attention = calibrated.attention if calibrated is not None else engine.attention
    cost = _cost_model(cfg, attention, fit)
    known = [s for s in (compared_steps or token_steps(requests, token_budget(cfg))) if s.num_preempted == 0]
    measured_requests = measured_frame(requests)
    itl = measured_itl(requests)
    measured_summary = _clean(summarize(measured_requests, itl, np.ones(len(itl), dtype=np.int64)))
    measured_summary["preemptions"] = int(measured_requests["num_preemptions"].sum())

    sim_cfg = validate_scenario(
        cfg.model_dump()
        | {
            "cost_model": cost,
            "client": {"ingest_delay_s": fit.ingest_delay_s, "tokenize_s_per_token": 0.0, "stream_delay_s": 0.0},
        }
    )
    predicted = build(sim_cfg, stream=stream).run()
    return ValidationResult(
        engine=engine_name,
        engine_version=engine.version,
        scenario=sim_cfg,
        fit=fit,
        timing_source=source,
        timing_drift=drift,
        step_errors=step_errors(fit, known, attention, profile),
        comparison=compare(measured_summary, predicted.summary),
        measured_summary=measured_summary,
        predicted_summary=_clean(predicted.summary),
        measured_requests=measured_requests,
        predicted_requests=predicted.requests,
        engine_steps=compared_steps,
        wall_s=time.perf_counter() - started,
    )
