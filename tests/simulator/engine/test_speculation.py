"""Speculative decoding: accepted lengths follow theory, tokens and KV are conserved, the ladder holds."""

import numpy as np
import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.engine.speculation import Speculation, acceptance_probabilities, expected_tokens_per_step
from tests.conftest import make_config, run_checked

SPEC = {"method": "mtp", "num_tokens": 3, "acceptance_rate": 0.7}


@pytest.mark.parametrize(("rate", "k"), [(0.7, 3), (0.5, 1), (0.9, 5), (0.0, 2), (1.0, 4)])
def test_tokens_per_step_follow_the_independent_acceptance_model(rate, k):
    probs = acceptance_probabilities(k, rate, None)
    assert probs.sum() == pytest.approx(1.0)
    # Leviathan et al. 2023, eq. 1: (1 - a^(K+1)) / (1 - a) tokens a step (K + 1 when every proposal is kept)
    theory = k + 1 if rate == 1.0 else (1 - rate ** (k + 1)) / (1 - rate)
    assert expected_tokens_per_step(probs) == pytest.approx(theory)
    draws = Speculation(k, probs, np.random.default_rng(3))
    sample = np.array([draws.accepted() for _ in range(60_000)])
    assert sample.min() >= 0 and sample.max() <= k
    assert 1 + sample.mean() == pytest.approx(theory, rel=0.02)


def test_a_measured_distribution_is_drawn_as_given():
    probs = acceptance_probabilities(2, None, (0.2, 0.3, 0.5))
    draws = Speculation(2, probs, np.random.default_rng(0))
    counts = np.bincount([draws.accepted() for _ in range(50_000)], minlength=3) / 50_000
    assert counts == pytest.approx([0.2, 0.3, 0.5], abs=0.01)


def test_a_lone_request_takes_fewer_steps_by_the_expected_tokens_per_step():
    """Constant 1 s steps: a 600-token output alone needs about 600 / E[tokens per step] decode steps."""
    stream_cfg = {"num_requests": 1, "arrival": {"kind": "constant", "rate_per_s": 1.0}}
    lengths = {
        "kind": "independent",
        "prompt": {"kind": "fixed", "tokens": 32},
        "output": {"kind": "fixed", "tokens": 601},
    }
    plain = run_checked(make_config(workload=stream_cfg | {"lengths": lengths}, kv_cache={"num_blocks": 64}))
    spec = run_checked(
        make_config(workload=stream_cfg | {"lengths": lengths}, kv_cache={"num_blocks": 64}, speculative=SPEC)
    )
    per_step = expected_tokens_per_step(acceptance_probabilities(3, 0.7, None))
    decode_steps = spec.requests["finished_s"].iloc[0] - spec.requests["first_token_s"].iloc[0]
    assert plain.requests["finished_s"].iloc[0] - plain.requests["first_token_s"].iloc[0] == pytest.approx(600)
    assert decode_steps == pytest.approx(600 / per_step, rel=0.08)
    assert spec.requests["num_generated_tokens"].iloc[0] == 601  # never more than asked
    assert spec.summary["mean_tpot_ms"] == pytest.approx(1000 * decode_steps / 600)


def test_tokens_and_blocks_are_conserved_and_the_seed_decides():
    cfg = make_config(
        seed=4,
        speculative={"method": "mtp", "num_tokens": 4, "acceptance_lengths": (0.1, 0.2, 0.3, 0.2, 0.2)},
        kv_cache={"num_blocks": 40},  # tight: proposals must fit the free blocks, preemptions happen
        workload={"num_requests": 60, "arrival": {"kind": "poisson", "rate_per_s": 2.0}},
    )
    sim = build(cfg, check_invariants=True)
    result = sim.run()
    done = result.requests[result.requests["status"] == "finished"]
    assert (done["num_generated_tokens"] == done["num_output_tokens"]).all()
    _, counts = sim.recorder.token_emissions()
    assert int(counts.sum()) + result.summary["completed"] == result.summary["total_output_tokens"]
    again = build(cfg, check_invariants=True).run()
    assert again.summary == result.summary
    # the fast path is off under speculation: both paths are the same run
    plain = build(cfg, fast_forward=False).run()
    assert plain.summary == result.summary
    other = build(cfg.model_copy(update={"seed": 5}), check_invariants=True).run()
    assert other.summary != result.summary


def scenario(rate: float | None, speculative=None) -> dict:
    """Llama-3.1-8B on an H100, 256-token prompts and outputs; ``rate`` None: every request at once."""
    fixed = {"kind": "fixed", "tokens": 256}
    arrival = {"kind": "offline"} if rate is None else {"kind": "poisson", "rate_per_s": rate}
    data = {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "policy": {"kind": "vllm", "max_num_seqs": 256},
        "workload": {
            "num_requests": 400,
            "arrival": arrival,
            "lengths": {"kind": "independent", "prompt": fixed, "output": fixed},
        },
    }
    return data | ({"speculative": speculative} if speculative else {})


def test_speculation_lowers_tpot_at_low_load_and_loses_its_edge_at_high_load():
    """K = 3 at acceptance 0.7 (2.53 tokens a step): alone, a step costs little more than a decode, so
    TPOT falls by a third; 256 sequences at once make the verification's (K + 1) x 256 rows compute-bound,
    and most of the gain goes."""
    draft = {"method": "draft", "num_tokens": 3, "acceptance_rate": 0.7, "draft_model": "llama-3.2-1b"}
    ratio = {}
    for rate in (1.0, None):
        base = build(validate_scenario(scenario(rate))).run().summary
        spec = build(validate_scenario(scenario(rate, draft))).run().summary
        ratio[rate] = spec["mean_tpot_ms"] / base["mean_tpot_ms"]
    assert ratio[1.0] < 0.75
    assert ratio[None] > ratio[1.0] + 0.15


def test_the_proposer_takes_memory_from_the_kv_cache():
    def blocks(spec):
        return build(validate_scenario(scenario(1.0, spec))).resolved_config["kv_cache"]["num_blocks"]

    none = blocks(None)
    mtp = blocks(SPEC)
    draft = blocks({"method": "draft", "num_tokens": 3, "acceptance_rate": 0.7, "draft_model": "llama-3.2-1b"})
    assert draft < mtp < none


@pytest.mark.parametrize(
    ("speculative", "message"),
    [
        ({"method": "draft", "num_tokens": 3, "acceptance_rate": 0.7}, "method draft needs draft_model"),
        ({"method": "mtp", "num_tokens": 3, "acceptance_rate": 0.7, "draft_model": "llama-3.2-1b"}, "remove draft"),
        ({"method": "mtp", "num_tokens": 3}, "one of acceptance_rate or acceptance_lengths"),
        ({"method": "mtp", "num_tokens": 2, "acceptance_lengths": [0.5, 0.5]}, "needs 3"),
        ({"method": "mtp", "num_tokens": 1, "acceptance_lengths": [0.5, 0.4]}, "sum to 0.9"),
        ({"method": "mtp", "num_tokens": 0, "acceptance_rate": 0.7}, "num_tokens"),
    ],
)
def test_bad_speculative_settings_are_one_clear_line(speculative, message):
    with pytest.raises(ValueError, match=message):
        validate_scenario(scenario(1.0, speculative), "s.yaml")


def test_pipeline_parallelism_is_refused_with_speculation():
    cfg = validate_scenario(scenario(1.0, SPEC) | {"parallelism": {"pp": 2}})
    with pytest.raises(ValueError, match="without pipeline parallelism"):
        build(cfg)


def test_an_unknown_draft_model_names_the_field():
    cfg = validate_scenario(
        scenario(1.0, {"method": "draft", "num_tokens": 2, "acceptance_rate": 0.5, "draft_model": "x"})
    )
    with pytest.raises(ValueError, match=r"speculative\.draft_model: unknown model 'x'"):
        build(cfg)
