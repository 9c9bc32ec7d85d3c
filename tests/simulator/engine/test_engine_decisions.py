"""The builtin torch engine and the simulated engine make the same decisions, by construction.

Both drive ``simulator.engine.executor.StepExecutor``. One workload runs through the
simulator (plain path, constant 1 s steps) and through the builtin engine with a clock
that a step advances by the same 1 s; their decision logs (every plan's scheduled tokens,
preemptions and rejections, every end with its reason) must be equal, for every policy,
ties included (whole-second arrivals land exactly on step ends).
"""

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import policies
from calibration.engine import BuiltinEngine, EngineRequest
from simulator.build import build
from simulator.engine.executor import DecisionLog
from tests.conftest import make_config, make_stream

STEP_S = 1.0


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class _Pages:
    """What the engine reads of a model besides its forward pass."""

    def __init__(self, num_kv_blocks: int, block_size: int) -> None:
        self.num_kv_blocks = num_kv_blocks
        self.block_size = block_size


class TimedEngine(BuiltinEngine):
    """The builtin engine with a forward pass that takes STEP_S on the fake clock and samples token 0."""

    def __init__(self, clock: FakeClock, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock

    def forward(self, scheduled):
        self.clock.t += STEP_S
        return {r.request_id: 0 for r, n in scheduled if r.num_computed_tokens + n == r.num_tokens}


def _policy_params(policy: str, draw) -> dict:
    fields = policies.BATCH_POLICIES.entry(policy).params.model_fields
    cap = next(c for c in ("max_num_seqs", "max_batch_size", "max_running_requests") if c in fields)
    seqs = draw(st.integers(1, 6))
    params = {"kind": policy, cap: seqs}
    if "token_budget" in fields:
        params["token_budget"] = draw(st.integers(seqs, 48))
    if policy == "vllm_v0":
        params["max_num_batched_tokens"] = draw(st.sampled_from([None, 32, 64]))
    if policy == "vllm":  # V1: chunks under a small budget, or the hardware's default
        params["max_num_batched_tokens"] = draw(st.sampled_from([None, 8, 32]))
        params["long_prefill_token_threshold"] = draw(st.sampled_from([0, 5]))
    if policy == "hf_fifo":
        params["max_num_batched_tokens"] = draw(st.sampled_from([32, 64]))
    if policy == "priority":
        params["mode"] = draw(st.sampled_from(["strict", "aging"]))
    if policy == "dynamic":
        params["max_wait_s"] = draw(st.sampled_from([0.0, 1.0, 2.5]))
    return params


@st.composite
def workloads(draw):
    policy = draw(st.sampled_from(policies.BATCH_POLICIES.names()))
    n = draw(st.integers(1, 14))
    arrivals = np.cumsum(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))).astype(float).tolist()
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))
    params = _policy_params(policy, draw)
    kv = {"num_blocks": draw(st.integers(4, 40)), "block_size": draw(st.sampled_from([2, 4, 16]))}
    cfg = make_config(policy=params, kv_cache=kv, max_model_len=draw(st.integers(24, 56)))
    return cfg, arrivals, prompts, outputs


def simulated_log(cfg, arrivals, prompts, outputs) -> list[tuple]:
    sim = build(cfg, stream=make_stream(arrivals, prompts, outputs), fast_forward=False)
    (engine,) = sim.engines
    log = engine.executor.log = DecisionLog()
    sim.run()
    return log.rows


def builtin_log(cfg, arrivals, prompts, outputs) -> tuple[list[tuple], list[EngineRequest]]:
    max_model_len = build(cfg, stream=make_stream(arrivals, prompts, outputs)).engines[0].executor.max_model_len
    clock = FakeClock()
    log = DecisionLog()
    policy = policies.BATCH_POLICIES.get(cfg.policy.kind)(cfg.policy)
    pages = _Pages(cfg.kv_cache.num_blocks, cfg.kv_cache.block_size)
    engine = TimedEngine(clock, pages, policy, max_model_len, log=log)
    requests = [
        EngineRequest(i, a, p, o, [1] * p) for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))
    ]
    engine.run(requests, clock=clock, sleep=clock.sleep)
    return log.rows, requests


# A request preempted, then refused as it no longer fits (vLLM V0's FINISHED_IGNORED): it ends finished, short
IGNORED_AFTER_PREEMPTION = (
    make_config(
        policy={"kind": "vllm_v0", "max_num_seqs": 2, "max_num_batched_tokens": 32},
        kv_cache={"num_blocks": 9, "block_size": 4},
        max_model_len=34,
    ),
    [0.0] * 13,
    [1, 1, 1, 1, 1, 32, 1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1],
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
@example(IGNORED_AFTER_PREEMPTION)
def test_builtin_and_simulated_engines_decide_alike(case):
    cfg, arrivals, prompts, outputs = case
    simulated = simulated_log(cfg, arrivals, prompts, outputs)
    builtin, requests = builtin_log(cfg, arrivals, prompts, outputs)
    assert builtin == simulated
    ends = [row for row in builtin if row[0] == "end"]
    assert sorted(row[1] for row in ends) == list(range(len(arrivals)))  # every request ended exactly once
    for r in requests:
        assert r.status in ("finished", "rejected")
        if r.status == "finished":
            assert len(r.token_times_s) == r.num_generated_tokens
            # short only when refused after a preemption (its client keeps the tokens it had)
            assert r.num_generated_tokens == r.num_output_tokens or r.num_preemptions > 0


def test_the_logs_see_a_preemption_and_a_rejection():
    """A case where decisions matter: KV runs out (a preemption) and one request can never fit (a rejection)."""
    cfg = make_config(policy={"kind": "vllm_v0", "max_num_seqs": 4}, kv_cache={"num_blocks": 6, "block_size": 4})
    arrivals, prompts, outputs = [0.0, 0.0, 1.0, 2.0], [8, 8, 6, 30], [8, 8, 4, 2]
    simulated = simulated_log(cfg, arrivals, prompts, outputs)
    builtin, _ = builtin_log(cfg, arrivals, prompts, outputs)
    assert builtin == simulated
    assert any(row[0] == "plan" and row[2] for row in simulated), "no preemption in the log"
    assert any(row[0] == "end" and row[2] == "REJECTED" for row in simulated), "no rejection in the log"


def test_a_policy_asking_to_wake_later_is_woken_on_the_fake_clock():
    """dynamic waits for a fuller batch (wake_at_s): the builtin engine sleeps until then, as the simulator does."""
    cfg = make_config(policy={"kind": "dynamic", "max_batch_size": 4, "max_wait_s": 2.5})
    arrivals, prompts, outputs = [0.0, 1.0], [5, 5], [3, 3]
    builtin, requests = builtin_log(cfg, arrivals, prompts, outputs)
    assert builtin == simulated_log(cfg, arrivals, prompts, outputs)
    assert requests[0].first_scheduled_s == 2.5
