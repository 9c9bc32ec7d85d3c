"""One InferenceX point taken apart: its scenario, where its predicted TTFT goes, and what its prompt step costs.

    python -m benchmarks.inferencex --explain POINT_ID [--seed 0]

For finding the mechanism behind a gap (docs/accuracy.md), without writing a probe each time:

- the scenario servesim wrote for the point (``scenario_for``) and the launch script its settings come from;
- measured and predicted mean TTFT and TPOT;
- the predicted TTFT split: the first wave (the first CONC requests, sent together: ``first_wave_ttft``) and the
  rest, and the rest's mean split into its way in (from the client's send to the engine's queue: the request path,
  tokenising, and a step's wait in the input queue of an engine that plans one step ahead), its wait in the queue
  (to the step that first schedules it) and its prompt (from that step's start to the first token); on a
  disaggregated point into the way to the prefill step, prefilling and waiting for a decode engine's lease, the KV
  transfer, and from its landing to the first token (``ttft_parts``);
- the step of one prompt of the point's mean prompt length and nothing else on the first engine of each role that
  runs prompts (mixed, prefill), op by op, with where each op's time comes from (the cost model's ``breakdown``, and
  its ``sources`` where it has them);
- where the predicted TPOT goes, on the first engine of each role that decodes (mixed, decode): its simulated steps
  split into decode-only steps and steps holding a prompt (how many, their mean time, their share of the engine's
  busy time: a TPOT above the decode step is the prompt steps' stalls), and the decode-only step at the run's
  median number of running requests and their mean context (prompt plus half the output, the mean over a
  request's decode steps), op by op (on an attention-DP rank: every rank at that shape, ``breakdown_ranks``), beside
  the decode-only step the measured TPOT implies at the same split of the time (the TPOT x the decode-only share).
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from typing import Any

import pandas as pd

from benchmarks.inferencex_points import first_wave_mask, first_wave_ttft, recipe_label, scenario_for
from simulator.cost.shape import BatchShape


def ttft_parts(requests: pd.DataFrame) -> dict[str, float]:
    """The mean TTFT, ms, of the requests after the first wave (all of them outside a closed loop), and its parts,
    which sum to it request by request. On one engine: ``way in`` (client send to the engine's queue), ``queued``
    (the queue to the first step scheduling it), ``prompt`` (that step's start to the first token). Prefilled on
    one engine and decoded on another: ``to prefill`` (send to the first prefill step), ``prefill and lease``
    (prefilling, then waiting for a decode engine to lease blocks for the KV), ``transfer`` (the KV's way) and
    ``after`` (its landing to the first token)."""
    done = requests[requests["ttft_s"].notna()]
    first_wave = first_wave_mask(done)
    if first_wave is not None:
        done = done[~first_wave]
    moved = "transfer_start_s" in done and bool(done["transfer_start_s"].notna().all()) and not done.empty
    if moved:
        bounds = ["arrival_s", "first_scheduled_s", "transfer_start_s", "transfer_end_s", "first_token_s"]
        names = ["to prefill", "prefill and lease", "transfer", "after"]
    else:
        bounds = ["arrival_s", "enqueued_s", "first_scheduled_s", "first_token_s"]
        names = ["way in", "queued", "prompt"]
    out = {"requests": float(len(done)), "ttft": float(done["ttft_s"].mean()) * 1e3}
    for name, (start, end) in zip(names, pairwise(bounds), strict=True):
        out[name] = float((done[end] - done[start]).mean()) * 1e3
    return out


def first_engines(sim: Any, skip: str) -> list[Any]:
    """The first engine of each role but ``skip`` (a decode engine runs no prompt, a prefill engine decodes
    nothing), in the simulation's order."""
    out, seen = [], {skip}
    for engine in sim.engines:
        if engine.executor.role not in seen:
            seen.add(engine.executor.role)
            out.append(engine)
    return out


def _ops_ms(step: Any, sources: dict[str, str]) -> list[tuple[str, float, str]]:
    """A breakdown's ops as (op, ms, source)."""
    return [(name, op.seconds * 1e3, sources.get(name, "")) for name, op in (step.ops or {}).items()]


def prompt_step_ops(sim: Any, prompt_tokens: int) -> list[tuple[str, list[tuple[str, float, str]], float]]:
    """For the first engine of each role that runs prompts (mixed, prefill): a step of one prompt of
    ``prompt_tokens`` tokens and nothing else, as (role, [(op, ms, source)], total ms); a cost model without
    ``sources`` leaves each op's source empty."""
    shape = BatchShape((prompt_tokens,), (0,), 0, 0, 1)
    out = []
    for engine in first_engines(sim, skip="decode"):
        model = engine.cost_model
        step = model.breakdown(shape)
        sources_of = getattr(model, "sources", None)
        out.append((engine.executor.role, _ops_ms(step, sources_of(shape) if sources_of else {}), step.total_s * 1e3))
    return out


def step_split(steps: pd.DataFrame) -> dict[str, float]:
    """One engine's simulated steps split into decode-only steps and steps holding a prompt (``num_prefill_tokens``
    > 0): how many, their mean ms, their share of the engine's busy time; and the decode-only steps' median number
    of running requests (0 where there are none)."""
    prompt = steps["num_prefill_tokens"] > 0
    busy = float(steps["duration_s"].sum())
    out: dict[str, float] = {}
    for name, rows in (("decode", steps[~prompt]), ("prompt", steps[prompt])):
        out[f"{name} steps"] = float(len(rows))
        out[f"{name} mean ms"] = float(rows["duration_s"].mean()) * 1e3 if len(rows) else math.nan
        out[f"{name} share"] = float(rows["duration_s"].sum()) / busy if busy else math.nan
    decodes = steps.loc[~prompt, "num_running"]
    out["decode running"] = float(decodes.median()) if len(decodes) else 0.0
    return out


def decode_step_ops(model: Any, num_seqs: int, context_tokens: int) -> tuple[list[tuple[str, float, str]], float]:
    """The decode-only step of ``num_seqs`` requests of ``context_tokens`` tokens each, as ([(op, ms, source)], total
    ms); on an attention-DP rank's model, every rank at that shape (``breakdown_ranks``)."""
    shape = BatchShape((), (), num_seqs, num_seqs * context_tokens, num_seqs)
    ranks = getattr(model, "dp_attention", None)
    step = model.breakdown_ranks((shape,) * ranks) if ranks else model.breakdown(shape)
    sources_of = None if ranks else getattr(model, "sources", None)
    return _ops_ms(step, sources_of(shape) if sources_of else {}), step.total_s * 1e3


def _steps_text(split: dict[str, float], kind: str) -> str:
    """One kind of ``step_split``'s steps in words: how many, and where there are any their mean and share."""
    name = {"decode": "decode-only", "prompt": "holding a prompt"}[kind]
    text = f"{split[f'{kind} steps']:.0f} {name}"
    if split[f"{kind} steps"]:
        text += f", mean {split[f'{kind} mean ms']:.2f} ms, {split[f'{kind} share']:.1%} of the busy time"
    return text


def _op_lines(ops: list[tuple[str, float, str]]) -> list[str]:
    return [f"  {name:<16} {ms:9.3f} ms  {source}" for name, ms, source in ops]


def explain(row: pd.Series, seed: int = 0) -> str:
    """The report on measured point ``row`` (see the module doc), as text."""
    from simulator.build import build
    from simulator.config.scenario import validate_scenario

    scenario = scenario_for(row, seed)
    sim = build(validate_scenario(scenario), record_steps=True)
    run = sim.run()
    summary = run.summary
    lines = [
        f"point {row['id']} ({row['engine']}, {row['system']}, {row['precision']}, {row['mode']}, "
        f"ISL {row['isl']}, OSL {row['osl']})",
        f"settings: {recipe_label(row)}",
        "scenario: " + json.dumps(scenario, default=str),
        "",
        "| | measured | servesim | error |",
        "| --- | --- | --- | --- |",
    ]
    for metric, measured in (("ttft", row["silicon_ttft_ms"]), ("tpot", row["silicon_tpot_ms"])):
        pred = summary[f"mean_{metric}_ms"]
        lines.append(f"| mean {metric.upper()}, ms | {measured:.1f} | {pred:.1f} | {pred / measured - 1:+.1%} |")
    first_ms, share = first_wave_ttft(run.requests)
    parts = ttft_parts(run.requests)
    count, ttft = parts.pop("requests"), parts.pop("ttft")
    lines += [
        "",
        f"first wave: mean TTFT {first_ms:.1f} ms, {share:.1%} of the predicted TTFTs' sum",
        f"the other {count:.0f} requests: mean TTFT {ttft:.1f} ms = "
        + " + ".join(f"{name} {ms:.1f}" for name, ms in parts.items()),
    ]
    prompt_tokens = round(float(run.requests["num_prompt_tokens"].mean()))
    for role, ops, total_ms in prompt_step_ops(sim, prompt_tokens):
        lines += ["", f"{role} engine, a step of one {prompt_tokens}-token prompt alone: {total_ms:.2f} ms"]
        lines += _op_lines(ops)
    requests = run.requests
    context = round(float(requests["num_prompt_tokens"].mean() + requests["num_output_tokens"].mean() / 2))
    steps = run.steps
    for engine in first_engines(sim, skip="prefill"):
        ex = engine.executor
        split = step_split(steps[(steps["replica_id"] == ex.replica_id) & (steps["engine_id"] == ex.engine_id)])
        lines += ["", f"{ex.role} engine's steps: {_steps_text(split, 'decode')}; {_steps_text(split, 'prompt')}"]
        running = round(split["decode running"])
        if running:
            ops, total_ms = decode_step_ops(engine.cost_model, running, context)
            lines.append(
                f"a decode-only step of {running} requests of {context} tokens each: {total_ms:.2f} ms; the measured "
                f"TPOT at this split of the time means decode-only steps of about "
                f"{row['silicon_tpot_ms'] * split['decode share']:.2f} ms"
            )
            lines += _op_lines(ops)
    return "\n".join(lines) + "\n"
