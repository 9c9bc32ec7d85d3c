"""``calibrate --engine``: run a real engine over designed batches and fit its whole steps.

The harness times kernels one by one; a real engine also spends time per step of its own
(scheduling, building inputs, gathering paged K/V, sampling, bookkeeping), and its kernels
need not be the harness's. This runs the engine itself (transformers' continuous batching,
``calibration.hf_engine``, or servesim's builtin engine, ``calibration.engine``) on a
designed set of request batches, records every step as the engine runs it (its own loop
timed start to end, the shape from its scheduler), and fits the step model of
``calibration.stepfit`` to them:

- **prefill**: one request of each of several prompt lengths up to the token budget, and a
  few prompts sharing one step, each twice (one prefill step per run), sent to an engine idle
  for ``IDLE_BEFORE_PREFILL_S``: a step of prefills alone is, in serving, the step of an engine
  that had nothing to do (else the prefill would share a step with decodes), and on a shared CPU
  such a step is slower than one run back to back (caches cooled by other processes; 10-25 %
  on a busy 2-core machine);
- **cached prefix**: prompts longer than the budget, which the engine splits into chunks,
  the later ones over the earlier ones' cached tokens (neither engine shares prefixes
  between requests during calibration, so a split prompt is where cached context arises);
- **decode**: a grid of batch sizes and context lengths (eight tokens out each, so seven
  decode steps per batch), as far as a prefill-token cap allows;
- **mixed**: requests arriving while a batch decodes, so that their prefill shares steps
  with its decodes under the engine's token budget (the arrival time follows a preliminary
  fit of the steps before).

Some configurations of each kind (interior ones, never the extremes) are held out: not
fitted, only predicted, and their error by step kind is what the profile reports. One
warm-up run first pays the engine's one-off costs and is not recorded.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from calibration.device import Device
from calibration.engine import StepRecord, make_requests
from calibration.stepfit import DEFAULT_LOSS, DEFAULT_LOSS_SCALE, MIN_TIME_SCALE, fit_step_model, kind_errors, step_data
from calibration.validate import default_policy, make_engine
from policies.batching.hf_fifo import HfFifoParams
from simulator.cost.profile import CalibrationProfile, EngineCalibration, EngineStep
from simulator.cost.shape import BatchShape
from simulator.kv import ceil_div

BLOCK_SIZE = 16
DECODE_OUTPUT_TOKENS = 8
MIXED_DECODE_OUTPUT_TOKENS = 24
MIXED_AFTER_STEPS = 4
PREFILL_REPEATS = 2
IDLE_BEFORE_PREFILL_S = 0.25
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class DesignRun:
    """One batch of requests sent to the engine; the last ``late`` arrive while the others decode."""

    kind: str  # prefill, cached, decode, mixed
    prompts: tuple[int, ...]
    outputs: tuple[int, ...]
    held_out: bool = False
    late: int = 0

    @property
    def num_kv_tokens(self) -> int:
        return sum(p + o for p, o in zip(self.prompts, self.outputs, strict=True))


def design(budget: int, max_seqs: int, max_len: int, device_kind: str) -> list[DesignRun]:
    """The batches to run (module docstring), within the token budget, batch cap and max context."""
    fits = [p for p in sorted({budget // 32, budget // 8, budget // 4, budget // 2, budget}) if 8 <= p <= max_len - 2]
    runs: list[DesignRun] = []
    # prefill: single prompts of several lengths, then a few prompts together in one step
    configs = [(1, p) for p in fits] + [(b, budget // b) for b in (4, 2) if b <= max_seqs and budget // b >= 8]
    held = {(1, fits[len(fits) // 2])} if len(fits) >= 3 else set()
    held |= {(2, budget // 2)} if (2, budget // 2) in configs else set()
    for b, p in configs:
        runs += [DesignRun("prefill", (p,) * b, (2,) * b, (b, p) in held) for _ in range(PREFILL_REPEATS)]
    # cached prefix: prompts the budget splits into chunks
    longs = [budget + budget // 4, 2 * budget, 2 * budget + budget // 2]
    longs = [p for p in longs if p <= max_len - 2]
    for i, p in enumerate(longs):
        runs.append(DesignRun("cached", (p,), (2,), held_out=len(longs) >= 3 and i == 1))
    # decode: a grid of batch sizes and contexts, capped in prefill tokens
    if device_kind == "cuda":
        seqs, contexts, cap = (1, 4, 16, 64, 128), (128, 512, 2048, 8192), 16 * budget
    else:
        seqs, contexts, cap = (1, 2, 4, 8, 16, 32), (32, 128, 512, 1024), 8 * budget
    seqs = tuple(b for b in seqs if b <= max_seqs)
    contexts = tuple(c for c in contexts if c + DECODE_OUTPUT_TOKENS <= max_len)
    for ib, b in enumerate(seqs):
        for ic, c in enumerate(contexts):
            if b * c > cap:
                continue
            interior = 0 < ib < len(seqs) - 1 and 0 < ic < len(contexts) - 1
            runs.append(
                DesignRun("decode", (c,) * b, (DECODE_OUTPUT_TOKENS,) * b, held_out=interior and (ib + ic) % 2 == 0)
            )
    # mixed: newcomers' prefills joining a decoding batch
    prompt = max(8, budget // 8)
    mixed = [(2, 1, budget // 4), (8, 2, budget // 8), (8, 1, budget // 2), (4, 1, budget)]
    for i, (b, m, q) in enumerate(mixed):
        b = min(b, max(1, max_seqs - m))
        if q < 8 or q + 4 > max_len or prompt + MIXED_DECODE_OUTPUT_TOKENS > max_len:
            continue
        prompts = (prompt,) * b + (q,) * m
        outputs = (MIXED_DECODE_OUTPUT_TOKENS,) * b + (4,) * m
        runs.append(DesignRun("mixed", prompts, outputs, held_out=i == 1, late=m))
    return runs


def _num_blocks(runs: list[DesignRun]) -> int:
    need = max(sum(ceil_div(p + o, BLOCK_SIZE) for p, o in zip(r.prompts, r.outputs, strict=True)) for r in runs)
    return math.ceil(need * 1.3) + 8  # transformers' FIFO keeps 15 % of the blocks free for decodes


def _late_arrival_s(run: DesignRun, budget: int, predict: Callable[[BatchShape], float]) -> float:
    """When the newcomers should arrive: after the decoders' prefill and MIXED_AFTER_STEPS decode steps."""
    b = len(run.prompts) - run.late
    prompt = run.prompts[0]
    t, left = 0.0, b * prompt
    while left > 0:  # the decoders' prefill, in budget-sized steps
        n = min(budget, left)
        t += predict(BatchShape((n,), (0,), num_sampled_tokens=1))
        left -= n
    decode = BatchShape(num_decode_seqs=b, decode_context_tokens=b * (prompt + 1), num_sampled_tokens=b)
    return t + (MIXED_AFTER_STEPS + 0.5) * predict(decode)


def calibrate_engine(
    profile: CalibrationProfile,
    engine_name: str,
    device: Device,
    seed: int = 0,
    progress: ProgressFn | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> EngineCalibration:
    """Run ``engine_name`` over the designed batches and fit its step model against ``profile``'s op times.

    ``sleep`` waits before the prefill runs (a test's synthetic engine passes a no-op).
    """
    started = time.perf_counter()
    policy = HfFifoParams.model_validate(default_policy(profile))
    budget, max_seqs = policy.max_num_batched_tokens, policy.max_num_seqs
    max_len = profile.model.max_context_tokens
    runs = design(budget, max_seqs, max_len, device.kind)
    engine = make_engine(
        engine_name, profile.model, profile.dtype, device, policy, _num_blocks(runs), BLOCK_SIZE, max_len, seed
    )
    vocab = profile.model.vocab_size
    engine.start()
    recorded: list[tuple[StepRecord, bool]] = []
    ingest: list[float] = []
    try:
        engine.run(make_requests([0.0] * 4, [budget // 4] * 4, [4] * 4, vocab, seed))  # one-off costs
        attention = engine.attention
        predict: Callable[[BatchShape], float] | None = None
        for i, run in enumerate(runs):
            if run.kind == "mixed" and predict is None:
                predict = _preliminary(profile, attention, recorded)
            n = len(run.prompts)
            arrivals = [0.0] * n
            if run.late:
                assert predict is not None
                late_s = _late_arrival_s(run, budget, predict)
                arrivals = [0.0] * (n - run.late) + [late_s] * run.late
            reqs = make_requests(arrivals, run.prompts, run.outputs, vocab, seed + 1 + i)
            if run.kind in ("prefill", "cached"):
                sleep(IDLE_BEFORE_PREFILL_S)
            steps = engine.run(reqs)
            recorded += [(s, run.held_out) for s in steps]
            scheduled = [r.first_scheduled_s for r, a in zip(reqs, arrivals, strict=True) if a == 0.0]
            if scheduled and None not in scheduled:
                ingest.append(min(scheduled))  # type: ignore[type-var]
            if progress is not None:
                progress(i + 1, len(runs))
    finally:
        engine.stop()
    if not recorded:
        raise ValueError(f"--engine {engine_name}: the engine's steps could not be recorded (see hf_engine.py)")
    shapes = [s.shape() for s, _ in recorded]
    measured = [max(s.end_s - s.start_s, 1e-9) for s, _ in recorded]
    held = np.array([h for _, h in recorded], dtype=bool)
    data = step_data(shapes, measured, profile, attention)
    train, test = data.subset(~held), data.subset(held)
    model = fit_step_model(train)
    return EngineCalibration(
        engine=engine_name,  # type: ignore[arg-type]
        engine_version=engine.version,
        attention=attention,  # type: ignore[arg-type]
        attn_implementation=engine.attn_implementation,
        num_threads=device.num_threads,
        policy=policy.kind,
        max_num_seqs=max_seqs,
        max_num_batched_tokens=budget,
        block_size=BLOCK_SIZE,
        time_scale=max(model.time_scale, MIN_TIME_SCALE),
        step_overhead_s=model.step_overhead_s,
        per_seq_overhead_s=model.per_seq_overhead_s,
        per_token_overhead_s=model.per_token_overhead_s,
        per_kv_token_overhead_s=model.per_kv_token_overhead_s,
        ingest_delay_s=max(0.0, float(np.median(ingest))) if ingest else 0.0,
        loss=DEFAULT_LOSS,
        loss_scale=DEFAULT_LOSS_SCALE,
        fit_error=kind_errors(model.predict(train), train.measured_s, train.kinds),
        held_out_error=kind_errors(model.predict(test), test.measured_s, test.kinds) if len(test) else {},
        steps=tuple(
            EngineStep(
                prefill_new_tokens=s.prefill_new_tokens,
                prefill_cached_tokens=s.prefill_cached_tokens,
                num_decode_seqs=s.num_decode_seqs,
                decode_context_tokens=s.decode_context_tokens,
                num_sampled_tokens=s.num_sampled_tokens,
                seconds=m,
                held_out=bool(h),
            )
            for (s, h), m in zip(recorded, measured, strict=True)
        ),
        wall_s=time.perf_counter() - started,
    )


def _preliminary(
    profile: CalibrationProfile, attention: str, recorded: list[tuple[StepRecord, bool]]
) -> Callable[[BatchShape], float]:
    """A quick fit of the steps so far, to time the mixed runs' late arrivals."""
    shapes = [s.shape() for s, _ in recorded]
    data = step_data(shapes, [max(s.end_s - s.start_s, 1e-9) for s, _ in recorded], profile, attention)
    model = fit_step_model(data, loss="linear")

    def predict(shape: BatchShape) -> float:
        return float(model.predict(step_data([shape], [1.0], profile, attention))[0])

    return predict
