"""Engine-level calibration: an engine's own time per step, fitted once and kept in the profile.

The op tables time kernels; a real engine's step also pays its scheduling, the gathering of
paged K/V, Python. ``calibrate_engine`` runs the engine (servesim's builtin one or
transformers') over a designed set of batches: a request alone, batches whose prompts are
prefilled in one step, long prompts split over several steps, each followed by decode steps
over growing contexts (batches of 1 to 16), and requests arriving one by one while others
decode (steps mixing a whole prompt with decodes, under the engine's token budget); it takes
the builtin engine's own step records and reconstructs transformers' steps from its tokens'
times (``calibration.validate.token_steps``), and fits

    step = time_scale x ops + step_overhead_s + per_seq_overhead_s x sequences + per_kv_token_overhead_s x keys

by non-negative least squares in relative terms (``calibration.validate.fit_engine``), plus
the ingest delay (send to first sight). Steps of separate runs of other shapes, never fitted,
give the held-out error. The result is the profile's ``engines[name]``, which
``servesim run --profile`` applies and ``servesim validate`` uses as it is.
"""

from __future__ import annotations

import numpy as np

from calibration.device import resolve_device
from calibration.engine import StepRecord, make_requests
from calibration.quality import HELD_OUT_BOUND
from calibration.validate import (
    ENGINES,
    WARMUP_PROMPT_TOKENS,
    Staggered,
    _Builtin,
    _Hf,
    collect_warmup,
    engine_steps,
    fit_engine,
    predict,
    staggered_requests,
    validation_scenario,
)
from simulator.config.schema import ScenarioConfig
from simulator.cost.profile import CalibrationProfile, EngineCalibration


def _held_out_runs(cfg: ScenarioConfig) -> list[tuple[int, int, int]]:
    """(sequences, prompt tokens, output tokens) of shapes the fit never sees, within the policy's limits."""
    budget = getattr(cfg.policy, "max_num_batched_tokens", None) or 512
    seqs = getattr(cfg.policy, "max_num_seqs", 8)
    runs = []
    for b, prompt, output in ((2, 3 * WARMUP_PROMPT_TOKENS // 2, 12), (6, WARMUP_PROMPT_TOKENS, 10)):
        b = min(b, seqs)
        runs.append((b, max(8, min(prompt, budget // b)), output))
    return runs


def _held_out_staggered(cfg: ScenarioConfig) -> list[Staggered]:
    """Mixed steps of other prompt lengths and spacing than the fitted ones."""
    budget = getattr(cfg.policy, "max_num_batched_tokens", None) or 512
    seqs = getattr(cfg.policy, "max_num_seqs", 8)
    b = min(2, seqs - 1)
    prompts = tuple(p for p in (48, 128) if p <= budget - seqs)[: seqs - b]
    return [Staggered(b, 3 * WARMUP_PROMPT_TOKENS // 2, prompts, 4)] if b >= 1 and prompts else []


def calibrate_engine(profile: CalibrationProfile, engine_name: str, seed: int = 0) -> EngineCalibration:
    """Run ``engine_name`` on the profile's device and fit its step time (module docstring)."""
    if engine_name not in ENGINES:
        raise ValueError(f"--engine: unknown engine {engine_name!r}; one of {', '.join(ENGINES)}")
    device = resolve_device(profile.device.kind, profile.device.num_threads)
    cfg = validation_scenario(profile, None, engine_name, None, None)  # the profile is not a file yet
    engine = (_Hf if engine_name == "hf" else _Builtin)(profile, cfg, device, seed)
    engine.start()
    try:
        steps, ingest, step_s = collect_warmup(engine, profile, cfg, seed)
        held: list[StepRecord] = []
        vocab = profile.model.vocab_size
        for b, prompt, output in _held_out_runs(cfg):
            held += engine_steps(
                engine, make_requests([0.0] * b, [prompt] * b, [output] * b, vocab, seed + 100 + b), cfg
            )
        for j, run in enumerate(_held_out_staggered(cfg)):
            held += engine_steps(engine, staggered_requests(run, step_s, vocab, seed + 150 + j), cfg)
    finally:
        engine.stop()
    fit = fit_engine(steps, ingest, engine.attention, profile)
    if not fit.fitted:
        raise ValueError(
            f"--engine {engine_name}: its {len(steps)} measured steps did not tell op time from overhead "
            "(the fitted op-time scale was degenerate); calibrate again on a quiet machine"
        )
    held_error = None
    if held:
        measured = np.array([s.end_s - s.start_s for s in held])
        held_error = float(np.mean(np.abs(predict(fit, held, engine.attention, profile) - measured) / measured))
    return EngineCalibration(
        engine=engine_name,  # type: ignore[arg-type]
        engine_version=engine.version,
        attention=engine.attention,  # type: ignore[arg-type]
        num_threads=device.num_threads,
        time_scale=fit.time_scale,
        step_overhead_s=fit.step_overhead_s,
        per_seq_overhead_s=fit.per_seq_overhead_s,
        per_kv_token_overhead_s=fit.per_kv_token_overhead_s,
        ingest_delay_s=fit.ingest_delay_s,
        num_steps=fit.num_steps,
        fit_mean_rel_error=fit.mean_rel_error,
        num_held_out=len(held),
        held_out_mean_rel_error=held_error,
    )


def with_engine(profile: CalibrationProfile, calibration: EngineCalibration) -> CalibrationProfile:
    """``profile`` with ``calibration`` as its fit for that engine; a held-out error above ``HELD_OUT_BOUND``
    joins the profile's warnings."""
    engines = {**profile.engines, calibration.engine: calibration}
    data = profile.model_dump() | {"engines": {k: v.model_dump() for k, v in engines.items()}}
    held = calibration.held_out_mean_rel_error
    if held is not None and held > HELD_OUT_BOUND and profile.quality is not None:
        warning = (
            f"engine {calibration.engine}: its step-time fit misses held-out steps by {held:.0%} on average "
            f"(above {HELD_OUT_BOUND:.0%})"
        )
        data["quality"] = profile.quality.model_dump() | {"warnings": (*profile.quality.warnings, warning)}
    return CalibrationProfile.model_validate(data)
