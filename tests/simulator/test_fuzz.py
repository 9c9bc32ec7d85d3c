"""Random valid scenarios never crash, never break an invariant, and model the client right (issue 33).

Each example is a small scenario drawn by ``benchmarks/fuzzing/strategies.py`` (every batch policy, every
workload kind, replicas with each router, TP/PP, prefix caching with a host tier, swap, small KV caches,
disaggregated groups, speculative decoding) and run by ``benchmarks/fuzzing/checks.py``: three runs (plain with
the engine invariants after every step and every plan logged, plain again, fast) and the checks after them:
every request accounted for, finished requests emitted exactly their output tokens (or ended short with a
reason), arrival <= first token <= finish, no user with two requests in flight as its client sees them, KV never
over a pool, no step over its policy's token budget or sequence limit, identical tables for the same seed, the
same decisions on the fast path. A scenario the project cannot run must be refused in one line (a ValueError);
any other exception fails the test. Derandomized: the same examples on every run (``benchmarks/fuzz.py`` runs
the same generator at scale with random seeds).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import policies
from benchmarks.fuzzing.checks import check_scenario
from benchmarks.fuzzing.strategies import scenarios

POLICIES = sorted(policies.BATCH_POLICIES.names())
EXAMPLES_PER_POLICY = 30  # 11 policies: 330 scenarios, about a minute on two cores


@pytest.mark.parametrize("kind", POLICIES)
def test_random_valid_scenarios_keep_every_invariant(kind):
    ran = []

    @settings(
        max_examples=EXAMPLES_PER_POLICY,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scenarios(kind))
    def scenario_keeps_every_invariant(data):
        verdict = check_scenario(data)
        ran.append(verdict.refused is None)
        if verdict.refused is not None:
            refusals.append(verdict.refused)

    refusals: list[str] = []
    scenario_keeps_every_invariant()
    assert sum(ran) >= EXAMPLES_PER_POLICY // 2, (
        f"{kind}: only {sum(ran)} of {len(ran)} scenarios ran (not refused); the refusals: {refusals}"
    )
