"""Pieces of the harness and of validate that need no timing: grids, fits, step reconstruction, comparison."""

import itertools

import numpy as np
import pytest

from calibration.engine import EngineRequest, StepRecord
from calibration.grid import grid_spec, held_out_pairs, held_out_values
from calibration.harness import fit_overhead, rotation_copies
from calibration.validate import compare, measured_frame, measured_itl, token_steps
from simulator.cost.profiled import ProfiledCostModel, ProfiledParams
from simulator.cost.shape import BatchShape
from simulator.metrics.summary import summarize
from tests.simulator.cost.test_profiled import HW, MODEL, make_profile


def test_grids_stop_at_the_model_context_and_held_out_points_lie_between():
    grid = grid_spec("quick", "cpu", max_context_tokens=512)
    assert max(grid.decode_context_tokens) <= 512 and max(grid.prefill_new_tokens) <= 512
    assert max(grid.prefill_cached_tokens) + max(grid.prefill_new_tokens) <= 512
    values = (1, 4, 16, 64, 256)
    middles = held_out_values(values)
    assert middles == sorted(middles) and all(m not in values for m in middles)
    assert all(any(a < m < b for a, b in itertools.pairwise(values)) for m in middles)
    assert all(len(p) == 2 for p in held_out_pairs(values, (0, 64, 256)))
    with pytest.raises(ValueError, match="unknown grid 'huge'"):
        grid_spec("huge", "cpu", 100)


def test_rotation_copies_cover_twice_the_cache():
    assert rotation_copies(1e6, 32e6) == 16  # capped
    assert rotation_copies(16e6, 32e6) == 4
    assert rotation_copies(1e9, 50e6) == 1


def steps_with(model, a, b):
    """Decode steps whose time is exactly the model's op time + a + b x seqs."""
    out, t = [], 0.0
    for seqs in (1, 2, 4, 8, 16):
        for ctx in (100, 400):
            dur = model.step_time(BatchShape((), (), seqs, seqs * ctx, seqs)).total_s + a + b * seqs
            out.append(StepRecord(t, t + dur, (), (), seqs, seqs * ctx, seqs, 0))
            t += dur
    return out


def test_fit_overhead_recovers_a_known_overhead():
    bare = ProfiledCostModel(
        ProfiledParams(step_overhead_s=0, per_seq_overhead_s=0), MODEL, HW, 1, profile=make_profile()
    )
    a, b, _measured, _predicted = fit_overhead(bare, steps_with(bare, 3e-3, 2e-5))
    assert a == pytest.approx(3e-3, rel=1e-6) and b == pytest.approx(2e-5, rel=1e-6)
    a, b, *_ = fit_overhead(bare, steps_with(bare, 0.0, 0.0))
    assert a == pytest.approx(0, abs=1e-9) and b == pytest.approx(0, abs=1e-9)


def request(rid, prompt, times, scheduled=0.0):
    r = EngineRequest(rid, 0.0, prompt, len(times), list(range(prompt)))
    r.first_scheduled_s, r.token_times_s, r.num_generated_tokens = scheduled, list(times), len(times)
    r.finished_s, r.status, r.admitted_s = times[-1], "finished", 0.0
    return r


def test_steps_are_reconstructed_from_token_times():
    times = [0.5, 0.6, 0.72, 0.85]
    reqs = [request(0, 64, times), request(1, 64, times)]
    steps = token_steps(reqs)
    assert steps[0].prefill_new_tokens == (64, 64) and steps[0].end_s - steps[0].start_s == pytest.approx(0.5)
    assert [round(s.end_s - s.start_s, 6) for s in steps[1:]] == [0.1, 0.12, 0.13]
    assert [s.decode_context_tokens for s in steps[1:]] == [2 * 65, 2 * 66, 2 * 67]
    straggler = [request(0, 64, times), request(1, 64, [0.5, 0.6, 0.8, 0.85])]
    assert len(token_steps(straggler)) == 2  # the steps around the tokens that do not line up are left out
    # a split prefill: request 1 starts decoding a step later; steps where both emit still count
    split = [request(0, 64, [0.3, 0.4, 0.5, 0.6]), request(1, 64, [0.4, 0.5, 0.6], scheduled=0.1)]
    steps = token_steps(split)
    assert [(s.start_s, s.end_s, s.decode_context_tokens) for s in steps] == [(0.4, 0.5, 66 + 65), (0.5, 0.6, 67 + 66)]


def test_a_prompt_arriving_during_decodes_gives_a_mixed_step():
    # request 0 decodes; request 1, scheduled after the step ending at 0.4, is prefilled whole beside it
    reqs = [request(0, 32, [0.2, 0.3, 0.4, 0.55, 0.65]), request(1, 48, [0.55, 0.65], scheduled=0.4)]
    reqs[1].arrival_s = reqs[1].admitted_s = 0.35
    by_end = {round(s.end_s, 6): s for s in token_steps(reqs)}
    mixed = by_end[0.55]
    assert (mixed.start_s, mixed.prefill_new_tokens, mixed.num_decode_seqs) == (0.4, (48,), 1)
    assert mixed.decode_context_tokens == 32 + 3 and mixed.num_sampled_tokens == 2
    assert by_end[0.65].num_decode_seqs == 2 and by_end[0.65].decode_context_tokens == 32 + 4 + 48 + 1
    # scheduled before the step ending at 0.4: its prompt ran in part then (chunked), so neither step is kept
    reqs[1].first_scheduled_s = 0.35
    assert {round(s.end_s, 6) for s in token_steps(reqs)} == {0.2, 0.3, 0.65}


def test_measured_metrics_follow_the_simulator_definitions():
    reqs = [request(0, 10, [0.2, 0.3, 0.5]), request(1, 10, [0.4])]
    reqs[1].arrival_s = 0.1
    frame = measured_frame(reqs)
    itl = measured_itl(reqs)
    summary = summarize(frame, itl, np.ones(len(itl), dtype=np.int64))
    assert summary["mean_ttft_ms"] == pytest.approx((200 + 300) / 2)
    assert summary["mean_tpot_ms"] == pytest.approx(150)  # (0.5 - 0.2) / 2, the one-token request has none
    assert sorted(itl.round(6)) == [0.1, 0.2]
    table = compare(summary, summary | {"mean_ttft_ms": 275.0})
    assert table["mean_ttft_ms"]["rel_error"] == pytest.approx(0.1) and table["mean_tpot_ms"]["rel_error"] == 0


def test_a_prompt_over_the_budget_is_not_taken_for_one_prefill_step():
    """A lone 1,024-token prompt under a 512-token budget ran in two chunk steps that emitted nothing."""
    reqs = [request(0, 1024, [0.2, 0.25, 0.3, 0.35])]
    assert token_steps(reqs)[0].prefill_new_tokens == (1024,)  # without the budget it looks like one step
    steps = token_steps(reqs, budget=512)
    assert all(not s.prefill_new_tokens for s in steps) and len(steps) == 3


def test_validation_resolves_the_policy_for_the_profiles_device():
    """A vllm policy without max_num_seqs takes vLLM's defaults for the device, on both sides and in the warm-ups."""
    from calibration.validate import _staggered_runs, _warmup_runs, validation_scenario

    profile = make_profile()
    cfg = validation_scenario(profile, None, "builtin", {"policy": {"kind": "vllm"}}, 8)
    assert cfg.policy.max_num_seqs is not None and cfg.policy.max_num_batched_tokens is not None
    assert _warmup_runs(cfg) and _staggered_runs(cfg)
