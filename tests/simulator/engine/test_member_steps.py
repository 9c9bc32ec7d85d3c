"""A plain step whose plan opens with every member of the decode batch steps them as the batch.

``schedule_running`` gives the members their decode tokens at once (the view's ``steady_decodes``),
and the executor counts them in the batch (``FastForward.step_members``); these tests check that the
shortcut is taken where it applies and gives the plain path's results bit for bit, and that the
policy's loop and the shortcut schedule the same.
"""

import pandas as pd
import pytest

from policies.batching.common import Budget, schedule_running
from policies.interface import StepPlan
from simulator.config.scenario import validate_scenario
from simulator.engine.fast_forward import FastForward
from tests.simulator.engine.test_fast_forward import assert_same_run


@pytest.mark.parametrize("policy", ["vllm", "sarathi", "trtllm", "sglang", "vllm_v0"])
def test_member_steps_give_the_plain_paths_results(policy, monkeypatch):
    taken = []
    step_members = FastForward.step_members

    def counted(self, now_s):
        taken.append(self._num_members)
        return step_members(self, now_s)

    monkeypatch.setattr(FastForward, "step_members", counted)
    cfg = validate_scenario({"policy": {"kind": policy}, "workload": {"num_requests": 300}})
    plain, fast = assert_same_run(cfg)
    pd.testing.assert_frame_equal(fast.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.steps, plain.steps, check_exact=True)
    if policy == "vllm":  # the default: nearly every prompt's step carries the running decodes
        assert len(taken) > 100 and sum(taken) > 1000


class View:
    """Requests that each want one token and need a block every fourth token, with or without the shortcut."""

    def __init__(self, requests, free_blocks, steady):
        self.requests = requests
        self.num_free_blocks = free_blocks
        if steady:
            self.steady_decodes = lambda order: (len(order), sum(map(self._needs, order)))

    @staticmethod
    def _needs(req):
        return int(req.num_computed_tokens % 4 == 0)

    def num_new_blocks(self, req, num_kv_tokens):
        return self._needs(req)

    def num_freeable_blocks(self, req):
        return 1


class Req:
    def __init__(self, i):
        self.request_id = i
        self.num_computed_tokens = 10 + i
        self.num_tokens = 11 + i


@pytest.mark.parametrize("tokens", [0, 3, 8, 100])
@pytest.mark.parametrize("free", [0, 2, 3, 100])
def test_the_shortcut_schedules_as_the_loop(tokens, free):
    requests = [Req(i) for i in range(8)]
    out = []
    for steady in (False, True):
        plan, budget = StepPlan(), Budget(tokens, 100, free)
        view = View(requests, free, steady)
        schedule_running(view, requests, plan, budget, lambda r: r.request_id, chunk=min)
        out.append((plan.scheduled, plan.preempt, budget))
        # the plan says the view's members open it where the shortcut scheduled them (every one fits), else not
        fits = steady and len(requests) <= tokens and sum(map(view._needs, requests)) <= free
        assert plan.num_lead_decodes == (len(requests) if fits else 0)
    assert out[0] == out[1]


def test_a_plan_that_already_schedules_does_not_say_the_members_open_it():
    requests = [Req(i) for i in range(4)]
    plan = StepPlan(scheduled=[(Req(9), 5)])
    schedule_running(View(requests, 100, True), requests, plan, Budget(100, 100, 100), lambda r: r.request_id)
    assert [r.request_id for r, _ in plan.scheduled] == [9, 0, 1, 2, 3] and plan.num_lead_decodes == 0


def _memory_tight(policy: str, num_blocks: int, num_requests: int) -> dict:
    """A scenario whose KV cache of ``num_blocks`` blocks keeps requests waiting for blocks (Poisson at 40/s, prompts
    of 100-900 tokens, outputs of 50-600)."""
    return {
        "policy": {"kind": policy},
        "kv_cache": {"num_blocks": num_blocks},
        "workload": {
            "num_requests": num_requests,
            "arrival": {"kind": "poisson", "rate_per_s": 40.0},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "uniform", "min_tokens": 100, "max_tokens": 900},
                "output": {"kind": "uniform", "min_tokens": 50, "max_tokens": 600},
            },
        },
    }


def test_trtllm_admission_from_the_batch_gives_the_plain_paths_results_with_memory_tight():
    """TensorRT-LLM's plan lists the members with their counters behind; GUARANTEED_NO_EVICT's admission test counts
    every running request's blocks to completion, the members' from the decode batch's total. With the KV cache tight
    enough for that test to turn requests away, the batch path gives the plain path's results."""
    plain, fast = assert_same_run(validate_scenario(_memory_tight("trtllm", 600, 200)))
    pd.testing.assert_frame_equal(fast.requests, plain.requests, check_exact=True)
    assert plain.summary["mean_ttft_ms"] > 1_000  # requests did wait for blocks


@pytest.mark.parametrize("dp_attention", [1, 2])
def test_sglang_plans_from_the_batch_give_the_plain_paths_results_with_memory_tight(dp_attention):
    """SGLang's plan lists the members with their counters behind and brings them current where it reads them (here
    the prefill batch's memory check, before which the retractions of this run come; a retraction on the batch path is
    the unit case's, tests/policies/test_unsynced_running.py): with the KV cache tight, alone and as attention-DP ranks
    (whose every step is a plain one), the batch path gives the plain path's results."""
    scenario = _memory_tight("sglang", 300, 120)
    if dp_attention > 1:
        scenario |= {"model": "mixtral-8x7b", "parallelism": {"tp": 2, "ep": 2, "dp_attention": dp_attention}}
    plain, fast = assert_same_run(validate_scenario(scenario))
    pd.testing.assert_frame_equal(fast.requests, plain.requests, check_exact=True)
    assert plain.summary["preemptions"] > 0
