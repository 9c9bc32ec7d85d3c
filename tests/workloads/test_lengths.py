"""Length distributions: moments within sampling error, empirical columns, joint resampling."""

import json

import numpy as np
import pytest
from pydantic import ValidationError

from workloads import WorkloadConfig, generate
from workloads.lengths import ZipfTokens
from workloads.traces import read_trace


def _lengths(prompt: dict, output: dict | None = None, n: int = 40_000, base_dir=None):
    lengths = {"kind": "independent", "prompt": prompt, "output": output or {"kind": "fixed", "tokens": 1}}
    s = generate(WorkloadConfig.model_validate({"num_requests": n, "lengths": lengths}), seed=3, base_dir=base_dir)
    return s.num_prompt_tokens, s.num_output_tokens


def test_normal_moments():
    p, _ = _lengths({"kind": "normal", "mean_tokens": 1000, "std_tokens": 150})
    assert p.mean() == pytest.approx(1000, abs=4 * 150 / np.sqrt(len(p)))
    assert p.std() == pytest.approx(150, rel=0.02)
    assert p.dtype == np.int64


def test_normal_is_clipped_to_its_bounds():
    p, _ = _lengths({"kind": "normal", "mean_tokens": 50, "std_tokens": 100, "min_tokens": 10, "max_tokens": 120})
    assert p.min() == 10 and p.max() == 120


def test_quantiles_hit_their_knots_and_interpolate_log_linearly():
    knots = {"kind": "quantiles", "probabilities": [0, 0.5, 0.9, 1], "tokens": [10, 100, 1000, 4000]}
    p, _ = _lengths(knots)
    assert p.min() >= 10 and p.max() <= 4000 and p.dtype == np.int64
    assert np.quantile(p, [0.5, 0.9]) == pytest.approx([100, 1000], rel=0.03)
    # between 0 and 0.5 the log length is uniform: a quarter of the draws lie below 10 x 10^(1/2)
    assert (p < np.sqrt(10 * 100)).mean() == pytest.approx(0.25, abs=0.01)


@pytest.mark.parametrize(
    ("knots", "message"),
    [
        ({"probabilities": [0, 1], "tokens": [1, 2, 3]}, "must have as many entries"),
        ({"probabilities": [0.1, 1], "tokens": [1, 2]}, "must run from 0 to 1"),
        ({"probabilities": [0, 0.5, 0.5, 1], "tokens": [1, 2, 3, 4]}, "probabilities must increase"),
        ({"probabilities": [0, 0.5, 1], "tokens": [1, 3, 2]}, "tokens must not decrease"),
        ({"probabilities": [0, 1], "tokens": [0, 2]}, "greater than or equal to 1"),
    ],
)
def test_quantiles_refuse_bad_knots(knots, message):
    with pytest.raises(ValidationError, match=message):
        _lengths({"kind": "quantiles", **knots}, n=1)


def test_zipf_matches_its_probabilities():
    dist = {"kind": "zipf", "exponent": 1.3, "min_tokens": 1, "max_tokens": 2000}
    p, _ = _lengths(dist)
    support, prob = ZipfTokens.model_validate(dist).pmf()
    mean = float((support * prob).sum())
    std = float(np.sqrt((support**2 * prob).sum() - mean**2))
    assert p.mean() == pytest.approx(mean, abs=4 * std / np.sqrt(len(p)))
    for k in (1, 2, 10):  # frequencies of single values
        se = np.sqrt(prob[k - 1] * (1 - prob[k - 1]) / len(p))
        assert np.mean(p == k) == pytest.approx(prob[k - 1], abs=4 * se)
    assert p.min() >= 1 and p.max() <= 2000


def test_zipf_rejects_reversed_bounds():
    with pytest.raises(ValidationError, match="min_tokens"):
        ZipfTokens.model_validate({"exponent": 1, "min_tokens": 10, "max_tokens": 5})


def test_empirical_column_of_a_shipped_trace():
    p, o = _lengths(
        {"kind": "empirical", "source": "azure-conv", "column": "prompt"},
        {"kind": "empirical", "source": "azure-conv", "column": "output"},
    )
    trace = read_trace("azure-conv")
    assert set(np.unique(p)) <= set(np.unique(trace.num_prompt_tokens))
    se = trace.num_prompt_tokens.std() / np.sqrt(len(p))
    assert p.mean() == pytest.approx(trace.num_prompt_tokens.mean(), abs=4 * se)
    assert o.mean() == pytest.approx(
        trace.num_output_tokens.mean(), abs=4 * trace.num_output_tokens.std() / np.sqrt(len(o))
    )
    # drawn independently: the joint pairs of the trace are not preserved
    assert abs(np.corrcoef(p, o)[0, 1]) < 0.03


def test_empirical_named_column_of_any_file(tmp_path):
    (tmp_path / "mine.csv").write_text("id,words,tokens\n1,3,17\n2,9,40\n3,5,17\n")
    p, _ = _lengths({"kind": "empirical", "source": "mine.csv", "column": "tokens"}, n=3000, base_dir=tmp_path)
    assert set(p.tolist()) == {17, 40}
    assert np.mean(p == 17) == pytest.approx(2 / 3, abs=0.04)
    (tmp_path / "mine.jsonl").write_text("\n".join(json.dumps({"n": v}) for v in (5, 6)) + "\n")
    p, _ = _lengths({"kind": "empirical", "source": "mine.jsonl", "column": "n"}, n=100, base_dir=tmp_path)
    assert set(p.tolist()) == {5, 6}
    with pytest.raises(ValueError, match=r"mine.csv: line 1: no column 'tokenz' \(found id, words, tokens\)"):
        _lengths({"kind": "empirical", "source": "mine.csv", "column": "tokenz"}, n=5, base_dir=tmp_path)
    (tmp_path / "bad.csv").write_text("tokens\n5\n-3\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 3: tokens: negative \(-3\)"):
        _lengths({"kind": "empirical", "source": "bad.csv", "column": "tokens"}, n=5, base_dir=tmp_path)


@pytest.mark.parametrize("name", ["arxiv", "bwb", "azure-code", "mooncake-conversation"])
def test_joint_resampling_keeps_pairs(name):
    s = generate(
        WorkloadConfig.model_validate({"num_requests": 2000, "lengths": {"kind": "empirical", "source": name}}), 1
    )
    trace = read_trace(name)
    pairs = set(zip(trace.num_prompt_tokens.tolist(), trace.num_output_tokens.tolist(), strict=True))
    assert all(pair in pairs for pair in zip(s.num_prompt_tokens.tolist(), s.num_output_tokens.tolist(), strict=True))
    d = generate(WorkloadConfig.model_validate({"num_requests": 2000, "lengths": {"kind": "dataset", "name": name}}), 1)
    assert np.array_equal(d.num_prompt_tokens, s.num_prompt_tokens)  # same rows, same draws


def test_joint_resampling_from_a_user_trace(tmp_path):
    (tmp_path / "t.csv").write_text("prompt_tokens,output_tokens\n100,7\n300,9\n")
    cfg = WorkloadConfig.model_validate({"num_requests": 500, "lengths": {"kind": "empirical", "source": "t.csv"}})
    s = generate(cfg, 2, base_dir=tmp_path)
    assert set(zip(s.num_prompt_tokens.tolist(), s.num_output_tokens.tolist(), strict=True)) == {(100, 7), (300, 9)}
