"""The analytic capacity bound: closed forms on the constant cost model, and never below a simulated max rate."""

import itertools
from typing import Any

import numpy as np
import pytest

from simulator.config.schema import ScenarioConfig
from simulator.planning.search.bound import capacity_bound, decode_block_steps, kv_seq_cap
from simulator.planning.search.evaluate import CandidateRun, SearchTask, rate_config, search_task
from simulator.planning.search.maxima import GRID_RATIO, geometric_grid, interval_max
from simulator.planning.search.settings import SearchSettings
from simulator.planning.search.steady import SloTargets
from workloads import generate

GROWTH = 0.05  # SearchSettings' default max_growth_fraction
LOOSE = SloTargets(ttft_p99_ms=1e7, tpot_p99_ms=None, attainment=0.5)  # only the stability test binds
TIGHT = SloTargets(ttft_p99_ms=2000.0, tpot_p99_ms=60.0, attainment=0.9)


def _bound(data: dict[str, Any], slo: SloTargets = LOOSE):
    cfg = ScenarioConfig.model_validate(data)
    return capacity_bound(cfg, None, generate(cfg.workload, cfg.seed, None), slo, GROWTH)


def _constant(max_num_seqs: int, num_blocks: int, step_time_s: float = 0.01, per_token_s: float = 0.0) -> dict:
    """Fixed 31-token prompts (2 blocks of 16 at the first decode) and 11-token outputs (10 decodes)."""
    fixed = lambda n: {"kind": "fixed", "tokens": n}  # noqa: E731
    return {
        "policy": {"kind": "vllm_v0", "max_num_seqs": max_num_seqs, "max_num_batched_tokens": 2048},
        "cost_model": {"kind": "constant", "step_time_s": step_time_s, "per_token_s": per_token_s},
        "kv_cache": {"num_blocks": num_blocks, "block_size": 16},
        "workload": {
            "num_requests": 200,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "lengths": {"kind": "independent", "prompt": fixed(31), "output": fixed(11)},
        },
    }


# -- the arithmetic ---------------------------------------------------------------------------------


def test_kv_cap_counts_the_smallest_first_decodes():
    # first decodes need ceil((p + 1) / 16) = 1, 2, 2, 7 blocks; cumulative 1, 3, 5, 12
    prompt = np.array([100, 16, 15, 31])
    assert [kv_seq_cap(prompt, 16, b) for b in (0, 1, 2, 4, 5, 11, 12, 99)] == [0, 1, 1, 2, 3, 3, 4, 4]


def test_decode_block_steps_sums_each_decode_steps_blocks():
    prompt, output = np.array([1, 5, 16, 17, 100]), np.array([1, 2, 20, 5, 300])
    expect = [sum(-(-(p + k) // 16) for k in range(1, o)) for p, o in zip(prompt, output, strict=True)]
    assert decode_block_steps(prompt, output, 16).tolist() == expect


def test_grid_covers_every_interval_within_the_ratio():
    for hi in (1, 2, 7, 23, 1000, 131_072):
        g = geometric_grid(hi)
        assert g[0] == 1 and g[-1] == hi and all(a < b for a, b in itertools.pairwise(g))
        assert all(b <= max(a + 1, a * GRID_RATIO) for a, b in itertools.pairwise(g))


def test_interval_argument_brackets_the_exact_maximum():
    # t(n) = a + b n: n / t(n) increases to N / (a + b N); the grid's bound is within one interval of it
    a, b, n_max = 0.01, 1e-4, 1000
    grid = geometric_grid(n_max)
    found, _ = interval_max(grid, [a + b * n for n in grid])
    exact = n_max / (a + b * n_max)
    assert exact <= found <= exact * GRID_RATIO
    # a dip seen at a grid point counts for every interval before it: t = 1, 1, 0.5, 2 at n = 1..4
    found, at = interval_max([1, 2, 3, 4], [1.0, 1.0, 0.5, 2.0])
    assert (found, at) == (8.0, 4)  # 4 / 0.5 >= the exact 3 / 0.5


def test_seq_cap_binds_in_closed_form():
    # 4 decodes a step at 10 ms: 400 decode tokens/s over 10 decodes a request = 40/s; the KV bound
    # (4 x 3 blocks at the last decodes over 2 + 9 x 3 = 29 block-steps a request: 41.4/s) and the
    # prefill (a step of <= 4 x 42 tokens at 10 ms over 31-token prompts) are looser
    b = _bound(_constant(max_num_seqs=4, num_blocks=100))
    assert b.upper_rate_per_s == pytest.approx(40.0 / (1 - GROWTH))
    assert b.reason.startswith("decode 400 tok/s at <= 4 seqs (the policy's cap)")
    assert 0 < b.estimate_rate_per_s <= b.upper_rate_per_s


def test_kv_cache_binds_in_closed_form():
    # 20 blocks: 10 first decodes fit (2 blocks each), 10 x 100 steps/s / 10 decodes = 100/s; over time the
    # cache holds 20 blocks x 100 steps/s = 2000 block-steps/s, 29 a request: 69.0/s
    b = _bound(_constant(max_num_seqs=64, num_blocks=20))
    assert b.upper_rate_per_s == pytest.approx(2000 / 29 / (1 - GROWTH))
    assert b.reason.startswith("KV cache 20 blocks x 100 steps/s")


def test_per_token_cost_stays_within_one_grid_interval():
    # t = 10 ms + 1 ms a token: a step holds at most 8 x 42 = 336 tokens (8 sequences, each its prompt and
    # output at most), so at most 336 / 346 ms of the 31 + 10 tokens a request computes: 23.7/s
    b = _bound(_constant(max_num_seqs=8, num_blocks=100, per_token_s=1e-3))
    exact = 336 / 0.346 / 41 / (1 - GROWTH)
    assert exact <= b.upper_rate_per_s <= exact * GRID_RATIO
    assert b.reason.startswith("compute")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"groups": [{"role": "prefill"}, {"role": "decode"}]}, "disaggregated"),
        (
            {
                "speculative": {
                    "method": "draft",
                    "num_tokens": 3,
                    "acceptance_rate": 0.7,
                    "draft_model": "llama-3.2-1b",
                }
            },
            "speculative",
        ),
        ({"parallelism": {"pp": 2}}, "pipeline"),
        ({"cost_model": {"kind": "profiled", "profile": "no-such-profile.json"}}, "no bound"),
    ],
)
def test_what_it_cannot_bound_gets_none_with_a_reason(change, why):
    data = {"model": "llama-3.1-8b", "hardware": "h100-sxm"} | _constant(8, 100) | change
    if "cost_model" not in change:
        data.pop("cost_model")
    b = _bound(data)
    assert b.upper_rate_per_s is None and b.estimate_rate_per_s is None
    assert why in b.reason


def test_prefix_caching_keeps_only_the_decode_bound():
    data = _constant(max_num_seqs=4, num_blocks=20) | {"kv_cache": {"num_blocks": 20, "prefix_caching": True}}
    data["policy"] = {"kind": "vllm", "max_num_seqs": 4, "max_num_batched_tokens": 2048}
    b = _bound(data)
    assert b.upper_rate_per_s == pytest.approx(40.0 / (1 - GROWTH))  # no KV cap: shared blocks fit more


# -- against the simulation --------------------------------------------------------------------------


def _uniform(lo: int, hi: int) -> dict:
    return {"kind": "uniform", "min_tokens": lo, "max_tokens": hi}


SHORT = {"prompt": _uniform(50, 400), "output": _uniform(20, 200)}
LONG = {"prompt": _uniform(1000, 6000), "output": _uniform(50, 400)}


def _scenario(model: str, hardware: str, policy: dict, lengths: dict, **extra) -> dict:
    return {
        "model": model,
        "hardware": hardware,
        "parallelism": {"tp": 4},
        "policy": policy,
        "workload": {
            "num_requests": 300,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "lengths": {"kind": "independent"} | lengths,
        },
    } | extra


SMALL_KV = {"num_blocks": 200, "block_size": 16}
CASES = {
    "8b-h100-vllm-short": (_scenario("llama-3.1-8b", "h100-sxm", {"kind": "vllm"}, SHORT), LOOSE),
    "8b-h100-vllm-short-tight": (_scenario("llama-3.1-8b", "h100-sxm", {"kind": "vllm"}, SHORT), TIGHT),
    "8b-h100-vllm_v0-long": (_scenario("llama-3.1-8b", "h100-sxm", {"kind": "vllm_v0"}, LONG), LOOSE),
    "70b-a100-sarathi-long": (_scenario("llama-3.1-70b", "a100-80gb", {"kind": "sarathi"}, LONG), LOOSE),
    "70b-h100-sglang-long": (_scenario("llama-3.1-70b", "h100-sxm", {"kind": "sglang"}, LONG), LOOSE),
    "8b-l40s-vllm-long": (_scenario("llama-3.1-8b", "l40s", {"kind": "vllm"}, LONG), LOOSE),
    "8b-l40s-sglang-short": (_scenario("llama-3.1-8b", "l40s", {"kind": "sglang"}, SHORT), LOOSE),
    "8b-h100-vllm-8seqs": (_scenario("llama-3.1-8b", "h100-sxm", {"kind": "vllm", "max_num_seqs": 8}, SHORT), LOOSE),
    "8b-h100-sarathi-8seqs": (
        _scenario("llama-3.1-8b", "h100-sxm", {"kind": "sarathi", "max_num_seqs": 8}, SHORT),
        LOOSE,
    ),
    "8b-h100-vllm_v0-200blocks": (
        _scenario("llama-3.1-8b", "h100-sxm", {"kind": "vllm_v0"}, SHORT, kv_cache=SMALL_KV),
        LOOSE,
    ),
    "8b-h100-sglang-200blocks": (
        _scenario("llama-3.1-8b", "h100-sxm", {"kind": "sglang"}, SHORT, kv_cache=SMALL_KV),
        LOOSE,
    ),
    "constant-4seqs": (_constant(max_num_seqs=4, num_blocks=100), LOOSE),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bound_is_never_below_the_simulated_max_rate(name):
    data, slo = CASES[name]
    run = CandidateRun(0, 0, data, None, 7, slo, SearchSettings(requests_per_point=300, rel_tol=0.05, curve_points=0))
    cfg = rate_config(run, 1.0)  # the plan's point: its size, seed and SLOs (lengths do not depend on the rate)
    b = capacity_bound(cfg, None, generate(cfg.workload, cfg.seed, None), slo, run.search.max_growth_fraction)
    assert b.upper_rate_per_s is not None and b.estimate_rate_per_s is not None, b.reason
    assert 0 < b.estimate_rate_per_s <= b.upper_rate_per_s
    found = search_task(SearchTask(run, b.estimate_rate_per_s, b.estimate_rate_per_s))
    assert found["error"] is None and found["max_rate_per_s"] > 0
    ratio = b.upper_rate_per_s / found["max_rate_per_s"]
    print(f"{name}: bound {b.upper_rate_per_s:.3f}/s, simulated {found['max_rate_per_s']:.3f}/s ({ratio:.2f}x)")
    assert found["max_rate_per_s"] <= b.upper_rate_per_s


def test_shared_cost_models_give_the_same_bounds():
    """A plan's bounds share one cost model per deployment (``costs.CostModels``): every bound, in any order
    and across seeds, equals the one made with its own cost model, and each deployment builds one model."""
    from simulator.planning.search.costs import CostModels

    lognormal = {"kind": "lognormal", "median_tokens": 300, "sigma": 0.8, "max_tokens": 3000}
    base = {
        "model": "llama-3.1-8b",
        "workload": {
            "num_requests": 300,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "lengths": {"kind": "independent", "prompt": lognormal, "output": lognormal},
        },
    }
    variants = [
        base | {"hardware": hw, "policy": {"kind": kind}, "seed": seed}
        for seed in (1, 2)
        for hw in ("h100-sxm", "l40s")
        for kind in ("vllm", "vllm_v0")
    ]
    shared = CostModels()
    for data in variants:
        cfg = ScenarioConfig.model_validate(data)
        stream = generate(cfg.workload, cfg.seed, None)
        alone = capacity_bound(cfg, None, stream, TIGHT, GROWTH)
        together = capacity_bound(cfg, None, stream, TIGHT, GROWTH, shared)
        assert alone.upper_rate_per_s is not None
        assert (together.upper_rate_per_s, together.estimate_rate_per_s, together.reason) == (
            alone.upper_rate_per_s,
            alone.estimate_rate_per_s,
            alone.reason,
        )
    assert len(shared._models) == 4  # 2 GPUs x V1's and V0's CPU overlap


def test_a_step_overlapping_its_cpu_time_is_bounded_by_the_longer_not_the_sum():
    """vLLM V1 (and SGLang, TensorRT-LLM) run the engine's CPU time beside the GPU's: a step takes the longer of
    the two, so the prefill bound's step time is max(token rows, CPU), never their sum (which overshoots the step
    and is no lower bound)."""
    from simulator.config.presets import resolve_hardware, resolve_model
    from simulator.cost.roofline import RooflineCostModel, RooflineParams
    from simulator.cost.shape import BatchShape
    from simulator.planning.search.bound import _rows_lower_bounds

    params = RooflineParams(cpu_overlap=True, step_overhead_s=0.004)
    cost = RooflineCostModel(params, resolve_model("llama-3.1-8b"), resolve_hardware("h100-sxm"), 1)
    grid = geometric_grid(4096)
    rows, rest = _rows_lower_bounds(cost, grid)
    steps = [cost.step_time(BatchShape((t,), (0,), 0, 0, 0)).total_s for t in grid]
    assert all(max(r, c) <= s * (1 + 1e-12) for r, c, s in zip(rows, rest, steps, strict=True))
    assert any(r + c > s for r, c, s in zip(rows, rest, steps, strict=True))  # the sum is not a lower bound


def test_a_windowed_group_may_refuse_what_its_pool_refuses():
    from simulator.build import setup_group
    from simulator.config.scenario import validate_scenario
    from simulator.planning.search.bound import _possibly_refused

    cfg = validate_scenario(
        {"model": "openai/gpt-oss-120b", "hardware": "h200", "parallelism": {"tp": 2}, "kv_cache": {"num_blocks": 100}}
    )
    s = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert s.windowed  # vLLM V1: the pool's blocks are the full layers', the sliding ones held per window
    # 710 tokens: 45 blocks and a 45-block chunk span fit 100; 910 tokens: 57 + 57 do not (the engine refuses it)
    refused = _possibly_refused(s, np.array([700, 900]), np.array([10, 10]), 16)
    assert refused.tolist() == [False, True]
