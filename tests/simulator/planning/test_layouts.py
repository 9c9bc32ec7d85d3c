"""The N-GPU question: its layouts, its analytic operating points by hand, its Pareto front, its answer."""

import itertools
import math
from types import SimpleNamespace

import pytest

from simulator.planning.layouts.analytic import Lengths, Replica, aggregated_points, disaggregated_points
from simulator.planning.layouts.best import GpusQuestion, best_on_gpus, operating_points
from simulator.planning.layouts.space import TOKEN_BUDGETS, Layout, layouts, seqs_limit
from simulator.planning.points.executors import InProcessExecutor
from simulator.planning.search.settings import PlanRequest


def test_every_layout_uses_every_gpu_and_none_is_missed():
    tps = (2, 4, 8)
    found = layouts(8, tps)
    assert all(layout.num_gpus == 8 for layout in found) and len(set(found)) == len(found)
    # by brute force: every (tp, count) aggregated and every (prefill tp, count, decode tp, count) summing to 8
    agg = {(tp, 8 // tp) for tp in tps if 8 % tp == 0}
    dis = {
        (p, pn, d, dn)
        for p, d in itertools.product(tps, tps)
        for pn, dn in itertools.product(range(1, 9), range(1, 9))
        if p * pn + d * dn == 8
    }
    assert len(agg) == 3 and len(dis) == 6  # 2x4 | 4x2 | 8x1; P1x2+D3x2, P1x2+D1x4, P2x2+D2x2, P3x2+D1x2, ...
    assert {(x.tp, x.count) for x in found if not x.disaggregated} == agg
    assert {(x.tp, x.count, x.decode_tp, x.decode_count) for x in found if x.disaggregated} == dis
    assert len(found) == (len(agg) + len(dis)) * len(TOKEN_BUDGETS)
    assert layouts(3, (2, 4)) == [] and not any(x.disaggregated for x in layouts(8, tps, disaggregated=False))


def test_seqs_limit_holds_the_running_count_and_its_fluctuation():
    # n + 3 sqrt(n), rounded up to a power of two: 1 -> 4, 9 -> 18 -> 32, 64 -> 88 -> 128, 5000 -> the largest
    assert [seqs_limit(n) for n in (1, 9, 64, 5000)] == [4, 32, 128, 1024]


class LinearCost:
    """A step costs ``a`` plus ``b`` per token computed: every figure can be worked out by hand."""

    def __init__(self, a: float, b: float) -> None:
        self.a, self.b = a, b

    def step_time(self, shape):
        return SimpleNamespace(total_s=self.a + self.b * (sum(shape.prefill_new_tokens) + shape.num_decode_seqs))


def test_aggregated_points_by_hand():
    # prompt 300, output 11 (10 decode tokens), budget 128: at n decodes a prompt takes chunks of 128 - n;
    # each chunk step costs b x chunk more than the decode-only step a + b n; n / 10 prompts per step
    a, b, w = 0.01, 1e-5, Lengths(300.0, 11.0)
    layout = Layout(tp=2, count=3, budget_tokens=128)
    points = aggregated_points(layout, Replica(2, LinearCost(a, b), num_blocks=100, block_size=16), w)
    # the KV room: 100 blocks, ceil(305.5 / 16) = 20 each at the mid-output context 306: 5 requests
    assert [p.concurrency for p in points] == [1, 2, 3, 4, 5]
    for p in points:
        n = p.concurrency
        tau = a + b * n + n / 10 * b * 300
        assert p.tpot_ms == pytest.approx(tau * 1e3)
        chunks = [128 - n, 128 - n, 300 - 2 * (128 - n)]
        alone = sum(a + b * (c + n) for c in chunks)
        rate = n / (10 * tau)  # per replica
        rho = rate * alone  # prompts served one after another, each in ``alone`` seconds (M/M/1's p99 wait)
        wait = math.inf if rho >= 1 else 0.0 if rho <= 0.01 else math.log(rho / 0.01) / ((1 - rho) / alone)
        assert p.ttft_ms == pytest.approx((alone + wait) * 1e3)
        assert p.rate_per_s == pytest.approx(3 * rate)
        assert p.tokens_per_s_per_gpu == pytest.approx(p.rate_per_s * 11 / 6)
        assert p.tokens_per_s_per_user == pytest.approx(1 / tau)


def test_disaggregated_points_by_hand():
    # prefill: budget 1000 holds 3 prompts of 300 (a step of 900 tokens: 0.01 + 0.009 s), 3 / 0.019 req/s per
    # replica; decode: n decodes step in a + b n; the pools' lesser rate
    a, b, w = 0.01, 1e-5, Lengths(300.0, 11.0)
    layout = Layout(tp=1, count=2, budget_tokens=1000, decode_tp=2, decode_count=1)
    cost = LinearCost(a, b)
    points = disaggregated_points(layout, Replica(1, cost, 10**6, 16), Replica(2, cost, 10**6, 16), w, None)
    prefill = 2 * 3 / (a + b * 900)
    for p in points:
        tau = a + b * p.concurrency
        rate = p.concurrency / (10 * tau)
        rho = rate / prefill
        wait = 0.0 if rho <= 0.01 else math.log(rho / 0.01) / (prefill * (1 - rho))
        assert p.ttft_ms == pytest.approx((a + b * 900 + wait) * 1e3) and p.tpot_ms == pytest.approx(tau * 1e3)
        assert p.rate_per_s == pytest.approx(rate) and rate < prefill
    # it stops before the prefill pool's capacity: more decodes would only slow each user
    grid = [p.concurrency for p in points]
    assert grid[:8] == list(range(1, 9)) and grid == sorted(set(grid))
    tau = a + b * (grid[-1] + 1)
    assert (grid[-1] + 1) / (10 * tau) > 0.9 * prefill  # the grid's next point is near the capacity
    # a TTFT bound below one prompt's step leaves no prefill batch: no point
    assert disaggregated_points(layout, Replica(1, cost, 10**6, 16), Replica(2, cost, 10**6, 16), w, 5.0) == []


SMALL = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "policy": {"kind": "vllm"},
    "workload": {
        "num_requests": 200,
        "arrival": {"kind": "poisson", "rate_per_s": 10.0},
        "lengths": {"kind": "independent", "prompt": {"kind": "fixed", "tokens": 1000},
                    "output": {"kind": "fixed", "tokens": 100}},
    },
}  # fmt: skip


def _request() -> PlanRequest:
    return PlanRequest.model_validate(
        {"slo_ttft_p99_ms": 500, "slo_tpot_p99_ms": 25, "search": {"requests_per_point": 600}}
    )


@pytest.mark.slow
def test_best_on_two_gpus_front_and_choice():
    q = GpusQuestion(2, _request())
    result = best_on_gpus(SMALL, None, "small", q, InProcessExecutor())
    plan, table = result.plan, result.points
    assert plan["layouts"] == 3 * len(TOKEN_BUDGETS)  # 2x tp1, 1x tp2; P 1x tp1 + D 1x tp1
    assert set(table["layout"].str.replace(r" b\d+", "", regex=True)) == {"2x tp1", "1x tp2", "P 1x tp1 + D 1x tp1"}
    meeting = table[table["meets_slo"]]
    assert (meeting["ttft_ms"] <= 500).all() and (meeting["tpot_ms"] <= 25).all()
    # the front, against an exhaustive comparison: a point is on it iff no other meeting point is at least as
    # good in both figures and better in one
    pairs = list(zip(meeting["tokens_per_s_per_gpu"], meeting["tokens_per_s_per_user"], strict=True))
    dominated = [any(g >= x and u >= y and (g > x or u > y) for g, u in pairs) for x, y in pairs]
    assert list(meeting["pareto"]) == [not d for d in dominated]
    front = plan["pareto_front"]
    on_front = meeting[meeting["pareto"]]
    pairs_on_front = set(zip(on_front["tokens_per_s_per_gpu"], on_front["tokens_per_s_per_user"], strict=True))
    assert {(r["tokens_per_s_per_gpu"], r["tokens_per_s_per_user"]) for r in front} == pairs_on_front
    assert len(front) == len(pairs_on_front)  # one row per pair of figures
    # the choice: the first point checked, in order of tokens/s/GPU, whose simulation met the SLOs
    checked = plan["checked"]
    chosen = plan["chosen"]
    first = next(i for i, c in enumerate(checked) if c["sim_meets_slo"])
    assert chosen is not None and chosen == checked[first] | {"chosen": True}
    assert all(not c["sim_meets_slo"] for c in checked[:first])
    assert chosen["sim_p99_ttft_ms"] <= 500 and chosen["sim_p99_tpot_ms"] <= 25
    gpus = [c["tokens_per_s_per_gpu"] for c in checked]
    assert gpus == sorted(gpus, reverse=True) and gpus[0] == meeting["tokens_per_s_per_gpu"].max()
    # same seed, same answer
    again = best_on_gpus(SMALL, None, "small", q, InProcessExecutor())
    assert again.plan == plan


@pytest.mark.parametrize(
    ("base", "gpus", "message"),
    [
        (SMALL, 0, "--gpus 0: expected 1 to 64 GPUs"),
        (SMALL | {"model": "llama-3.1-70b"}, 1, "fits no layout on 1 x h100-sxm"),
        (SMALL | {"policy": {"kind": "sarathi"}}, 2, "the scenario's policy is 'sarathi'"),
        (
            SMALL | {"workload": {"kind": "closed_loop", "concurrency": 4}},
            2,
            "--gpus sizes layouts for an arrival rate",
        ),
    ],
)
def test_bad_questions_are_one_line(base, gpus, message):
    with pytest.raises(ValueError, match=message) as exc:
        operating_points(base, None, "small", GpusQuestion(gpus, _request()))
    assert "\n" not in str(exc.value)


def test_kv_cap_counts_a_sequences_sliding_window_blocks():
    from simulator.planning.layouts.analytic import Replica

    # a 1,600-token context takes 100 full-layer blocks; vLLM V1 holds gpt-oss's sliding layers' window beside them
    assert Replica(1, None, 1000, 16).kv_cap(1600) == 10
    assert Replica(1, None, 1000, 16, window_blocks=9).kv_cap(1600) == 9  # 1000 // 109
