"""Generated workloads match their parameters within sampling error."""

import numpy as np
import pytest
from pydantic import ValidationError

from workloads import WorkloadConfig, generate
from workloads.datasets import load_length_dataset


def _gen(**fields):
    return generate(WorkloadConfig.model_validate(fields), seed=7)


def test_poisson_rate_and_cv():
    s = _gen(num_requests=20000, arrival={"kind": "poisson", "rate_per_s": 8.0, "normalize": False})
    gaps = np.diff(np.concatenate([[0.0], s.arrival_s]))
    assert gaps.mean() == pytest.approx(1 / 8.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_cv_follows_vllm_convention(burstiness):
    s = _gen(num_requests=20000, arrival={"kind": "gamma", "rate_per_s": 5.0, "burstiness": burstiness})
    gaps = np.diff(np.concatenate([[0.0], s.arrival_s]))
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.001)  # normalized
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)


def test_normalize_puts_last_arrival_at_n_over_rate():
    s = _gen(num_requests=500, arrival={"kind": "poisson", "rate_per_s": 4.0})
    assert s.arrival_s[-1] == pytest.approx(500 / 4.0)
    assert s.arrival_s[0] > 0  # the first request waits one gap, as in vllm bench serve


def test_duration_bounded_workload():
    s = _gen(duration_s=1000.0, arrival={"kind": "poisson", "rate_per_s": 3.0})
    assert s.arrival_s.max() <= 1000.0
    assert len(s) == pytest.approx(3000, rel=0.06)


def test_num_requests_and_duration_are_exclusive():
    with pytest.raises(ValidationError, match="not both"):
        WorkloadConfig.model_validate({"num_requests": 5, "duration_s": 3})


def test_independent_length_distributions():
    s = _gen(
        num_requests=20000,
        lengths={
            "kind": "independent",
            "prompt": {"kind": "lognormal", "median_tokens": 500, "sigma": 0.5},
            "output": {"kind": "uniform", "min_tokens": 10, "max_tokens": 30},
        },
    )
    assert np.median(s.num_prompt_tokens) == pytest.approx(500, rel=0.03)
    assert np.log(s.num_prompt_tokens).std() == pytest.approx(0.5, rel=0.03)
    assert s.num_output_tokens.min() == 10 and s.num_output_tokens.max() == 30
    assert s.num_output_tokens.mean() == pytest.approx(20, rel=0.02)


def test_fixed_lengths():
    s = _gen(
        num_requests=10,
        lengths={
            "kind": "independent",
            "prompt": {"kind": "fixed", "tokens": 7},
            "output": {"kind": "fixed", "tokens": 3},
        },
    )
    assert set(s.num_prompt_tokens) == {7} and set(s.num_output_tokens) == {3}


def test_sharegpt_dataset_ships_with_published_statistics():
    prompt, output = load_length_dataset("sharegpt-8k-multiturn")
    assert len(prompt) == 30731
    assert prompt.mean() == pytest.approx(2340, abs=1) and prompt.max() == 8141
    assert output.mean() == pytest.approx(439, abs=1) and output.max() == 1024


def test_sharegpt_sampling_is_joint_and_matches_moments():
    s = _gen(num_requests=20000, lengths={"kind": "dataset", "name": "sharegpt-8k-multiturn"})
    prompt, output = load_length_dataset("sharegpt-8k-multiturn")
    assert s.num_prompt_tokens.mean() == pytest.approx(prompt.mean(), rel=0.03)
    assert s.num_output_tokens.mean() == pytest.approx(output.mean(), rel=0.03)
    pairs = set(zip(prompt.tolist(), output.tolist(), strict=True))
    assert all((p, o) in pairs for p, o in zip(s.num_prompt_tokens[:200], s.num_output_tokens[:200], strict=True))


def test_default_lengths_need_no_data_and_match_the_sharegpt_set(tmp_path, monkeypatch):
    """The default workload's lengths follow the ShareGPT set's percentiles: no file is read, and they keep its
    means, p10s, medians and p90s (README: prompt 2,340 / 74 / 1,730 / 5,696, output 439 / 84 / 415 / 834) and
    bounds."""
    monkeypatch.setenv("SERVESIM_DATA_DIR", str(tmp_path))  # an empty folder; tests never download
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    s = _gen(num_requests=20000)
    prompt, output = s.num_prompt_tokens, s.num_output_tokens
    assert prompt.mean() == pytest.approx(2340, rel=0.03) and np.median(prompt) == pytest.approx(1730, rel=0.03)
    assert output.mean() == pytest.approx(439, rel=0.03) and np.median(output) == pytest.approx(415, rel=0.03)
    assert np.quantile(prompt, [0.1, 0.9]) == pytest.approx([74, 5696], rel=0.05)
    assert np.quantile(output, [0.1, 0.9]) == pytest.approx([84, 834], rel=0.05)
    assert prompt.min() >= 1 and prompt.max() <= 8141 and output.min() >= 2 and output.max() <= 1024
    assert not (tmp_path / "cache").exists()
    again = _gen(num_requests=20000)
    assert np.array_equal(again.num_prompt_tokens, prompt) and np.array_equal(again.num_output_tokens, output)


def test_same_seed_same_stream():
    cfg = WorkloadConfig(num_requests=100)
    a, b = generate(cfg, 3), generate(cfg, 3)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.num_prompt_tokens, b.num_prompt_tokens)
    c = generate(cfg, 4)
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_unknown_dataset_lists_the_named_ones():
    with pytest.raises(ValueError, match="unknown length dataset 'nope'; named: sharegpt-8k-multiturn"):
        _gen(num_requests=3, lengths={"kind": "dataset", "name": "nope"})


def test_empirical_lengths_capped_in_total():
    s = _gen(num_requests=5000, lengths={"kind": "empirical", "source": "azure-conv", "max_total_tokens": 4096})
    assert (s.num_prompt_tokens + s.num_output_tokens).max() <= 4096
    assert s.num_prompt_tokens.max() <= 4095 and s.num_output_tokens.min() >= 1
