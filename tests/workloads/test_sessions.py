"""Sessions (chat and agent loops), closed-loop users and request classes."""

import numpy as np
import pytest
from pydantic import ValidationError

from tests.conftest import make_config, run_checked
from workloads import WorkloadConfig, generate
from workloads.describe import describe


def _sessions(seed: int = 1, **fields):
    base = {
        "kind": "sessions",
        "num_sessions": 50,
        "turns": {"kind": "uniform", "min_count": 1, "max_count": 6},
        "user_tokens": {"kind": "uniform", "min_tokens": 5, "max_tokens": 60},
        "output_tokens": {"kind": "uniform", "min_tokens": 1, "max_tokens": 40},
    }
    return generate(WorkloadConfig.model_validate(base | fields), seed)


def _common_blocks(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def test_each_prompt_is_the_whole_previous_context_plus_new_tokens():
    s = _sessions(
        num_sessions=3,
        turns={"kind": "fixed", "count": 4},
        user_tokens={"kind": "fixed", "tokens": 50},
        output_tokens={"kind": "fixed", "tokens": 20},
        system_prompt_tokens=100,
        think_s={"kind": "fixed", "seconds": 7.0},
    )
    assert len(s) == 12
    assert s.num_prompt_tokens.tolist() == [150, 220, 290, 360] * 3
    assert s.parent.tolist() == [-1, 0, 1, 2, -1, 4, 5, 6, -1, 8, 9, 10]
    assert s.think_s.tolist() == [0.0, 7.0, 7.0, 7.0] * 3
    assert s.session_id.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    roots = s.parent < 0
    assert np.all(np.isnan(s.arrival_s[~roots])) and np.all(np.diff(s.arrival_s[roots]) > 0)


def test_random_sessions_grow_by_the_previous_answer_and_share_its_full_blocks():
    s = _sessions(hash_block_tokens=8, system_prompt_tokens=30)
    for i in np.flatnonzero(s.parent >= 0):
        p = s.parent[i]
        new = s.num_prompt_tokens[i] - s.num_prompt_tokens[p] - s.num_output_tokens[p]
        assert 5 <= new <= 60  # the user's new message, drawn from user_tokens
        # the child repeats every full block of the parent's prompt, and nothing more
        assert _common_blocks(s.prefix_hashes(i), s.prefix_hashes(p)) == s.num_prompt_tokens[p] // 8


def test_hashes_equal_exactly_when_token_prefixes_are_equal():
    # Rebuild every prompt as explicit tokens and check hash equality against prefix equality.
    s = _sessions(num_sessions=15, hash_block_tokens=8, system_prompt_tokens=20, seed=3)
    block = 8
    prefix_of: dict[int, tuple] = {}
    for i in range(len(s)):
        session = int(s.session_id[i])
        tokens = [("system", k) for k in range(20)] + [
            ("session", session, k) for k in range(s.num_prompt_tokens[i] - 20)
        ]
        for j, h in enumerate(s.prefix_hashes(i).tolist()):
            prefix = tuple(tokens[: min((j + 1) * block, len(tokens))])
            assert prefix_of.setdefault(h, prefix) == prefix
    num_distinct_prefixes = len(set(prefix_of.values()))
    assert len(prefix_of) == num_distinct_prefixes  # and distinct prefixes never share a hash
    stats = describe(s)["prefix_blocks"]
    assert stats["num_distinct_blocks"] == num_distinct_prefixes
    assert stats["repeat_fraction"] == pytest.approx(1 - num_distinct_prefixes / stats["num_blocks"])


def test_system_prompts_are_shared_across_sessions():
    s = _sessions(num_sessions=200, system_prompt_tokens=100, num_system_prompts=3, hash_block_tokens=16)
    roots = np.flatnonzero(s.parent < 0)
    first = np.array([s.prefix_hashes(i)[0] for i in roots])
    groups = np.unique(first)
    assert len(groups) == 3
    counts = np.array([np.sum(first == g) for g in groups])
    assert np.all(np.abs(counts - 200 / 3) < 4 * np.sqrt(200 * (1 / 3) * (2 / 3)))
    a, b = (roots[first == groups[0]][:2]).tolist()
    assert _common_blocks(s.prefix_hashes(a), s.prefix_hashes(b)) == 100 // 16  # the 6 full system blocks
    c = int(roots[first == groups[1]][0])
    assert _common_blocks(s.prefix_hashes(a), s.prefix_hashes(c)) == 0


def test_agent_loop_tool_calls_tool_time_and_think_time():
    s = _sessions(
        num_sessions=400,
        turns={"kind": "fixed", "count": 2},
        tool_calls={"kind": "uniform", "min_count": 0, "max_count": 3},
        tool_tokens={"kind": "fixed", "tokens": 300},
        tool_s={"kind": "fixed", "seconds": 1.5},
        think_s={"kind": "fixed", "seconds": 9.0},
    )
    calls = np.bincount(s.session_id)
    assert calls.min() >= 2 and calls.max() <= 8
    assert calls.mean() == pytest.approx(2 * 2.5, abs=4 * np.sqrt(2 * 1.25 / 400))
    dependent = s.parent >= 0
    assert set(np.unique(s.think_s[dependent]).tolist()) == {1.5, 9.0}
    tool = dependent & (s.think_s == 1.5)
    p = s.parent[tool]
    assert np.all(s.num_prompt_tokens[tool] == s.num_prompt_tokens[p] + s.num_output_tokens[p] + 300)
    assert np.sum(s.think_s[dependent] == 9.0) == 400  # one user turn after the first, per session


def test_turn_counts_and_think_times_match_their_distributions():
    s = _sessions(
        num_sessions=4000,
        turns={"kind": "geometric", "mean_count": 4.0},
        think_s={"kind": "exponential", "mean_s": 12.0},
    )
    turns = np.bincount(s.session_id)
    assert turns.min() == 1 and turns.mean() == pytest.approx(4.0, abs=4 * np.sqrt(12 / 4000))
    think = s.think_s[s.parent >= 0]
    assert think.mean() == pytest.approx(12.0, abs=4 * 12 / np.sqrt(len(think)))
    assert think.std() / think.mean() == pytest.approx(1.0, abs=0.05)


def test_max_context_ends_sessions():
    s = _sessions(
        num_sessions=100,
        turns={"kind": "fixed", "count": 30},
        user_tokens={"kind": "fixed", "tokens": 100},
        output_tokens={"kind": "fixed", "tokens": 100},
        system_prompt_tokens=500,
        max_context_tokens=2000,
    )
    assert np.all(s.num_prompt_tokens + s.num_output_tokens <= 2000)
    # call c: prompt 500 + 200 c + 100, plus 100 output: 700 + 200 c <= 2000 for c = 0..6
    assert np.all(np.bincount(s.session_id) == 7)
    assert s.meta["num_sessions_ended_by_max_context"] == 100


def test_session_config_rejects_inconsistent_settings():
    base = {
        "kind": "sessions",
        "user_tokens": {"kind": "fixed", "tokens": 5},
        "output_tokens": {"kind": "fixed", "tokens": 5},
    }
    with pytest.raises(ValidationError, match="at least one turn"):
        WorkloadConfig.model_validate(base | {"turns": {"kind": "uniform", "min_count": 0, "max_count": 3}})
    with pytest.raises(ValidationError, match="give tool_tokens"):
        WorkloadConfig.model_validate(
            base | {"turns": {"kind": "fixed", "count": 2}, "tool_calls": {"kind": "fixed", "count": 1}}
        )
    with pytest.raises(ValidationError, match="num_sessions or duration_s, not both"):
        WorkloadConfig.model_validate(
            base | {"turns": {"kind": "fixed", "count": 2}, "num_sessions": 3, "duration_s": 9}
        )


def test_sessions_by_duration_and_reproducibility():
    a = _sessions(num_sessions=None, duration_s=100.0, arrival={"kind": "poisson", "rate_per_s": 2.0})
    roots = a.parent < 0
    assert np.all(a.arrival_s[roots] <= 100.0) and abs(roots.sum() - 200) < 4 * np.sqrt(200)
    b = _sessions(num_sessions=None, duration_s=100.0, arrival={"kind": "poisson", "rate_per_s": 2.0})
    assert np.array_equal(a.hash_values, b.hash_values) and np.array_equal(a.num_output_tokens, b.num_output_tokens)
    c = _sessions(seed=2, num_sessions=None, duration_s=100.0, arrival={"kind": "poisson", "rate_per_s": 2.0})
    assert not np.array_equal(a.num_prompt_tokens[:20], c.num_prompt_tokens[:20])


def test_simulated_session_turns_wait_for_the_previous_answer(by_id):
    cfg = make_config(
        workload={
            "kind": "sessions",
            "num_sessions": 4,
            "arrival": {"kind": "constant", "rate_per_s": 0.1},
            "turns": {"kind": "fixed", "count": 3},
            "user_tokens": {"kind": "fixed", "tokens": 10},
            "output_tokens": {"kind": "fixed", "tokens": 3},
            "think_s": {"kind": "fixed", "seconds": 2.0},
        },
        kv_cache={"num_blocks": 256},
    )
    r = by_id(run_checked(cfg))
    for _, row in r.iterrows():
        if row["parent"] >= 0:
            assert row["arrival_s"] == pytest.approx(r.loc[row["parent"], "finished_s"] + 2.0)
    assert (r["status"] == "finished").all() and len(r) == 12


def test_closed_loop_structure():
    s = generate(
        WorkloadConfig.model_validate(
            {
                "kind": "closed_loop",
                "concurrency": 4,
                "num_requests": 10,
                "ramp_s": 2.0,
                "think_s": {"kind": "fixed", "seconds": 0.5},
            }
        ),
        0,
    )
    assert s.parent.tolist() == [-1, -1, -1, -1, 0, 1, 2, 3, 4, 5]
    assert s.arrival_s[:4].tolist() == [0.0, 0.5, 1.0, 1.5] and np.all(np.isnan(s.arrival_s[4:]))
    assert s.think_s.tolist() == [0.0] * 4 + [0.5] * 6 and s.meta["concurrency"] == 4


def test_closed_loop_never_exceeds_its_users(by_id):
    cfg = make_config(
        workload={
            "kind": "closed_loop",
            "concurrency": 3,
            "num_requests": 30,
            "think_s": {"kind": "uniform", "min_s": 0.0, "max_s": 2.0},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "uniform", "min_tokens": 4, "max_tokens": 40},
                "output": {"kind": "uniform", "min_tokens": 1, "max_tokens": 6},
            },
        },
        kv_cache={"num_blocks": 256},
    )
    r = by_id(run_checked(cfg))
    events = sorted([(t, 1) for t in r["arrival_s"]] + [(t, -1) for t in r["finished_s"]], key=lambda e: (e[0], e[1]))
    assert max(np.cumsum([d for _, d in events])) == 3
    for i in range(3, 30):
        assert r.loc[i, "arrival_s"] >= r.loc[i - 3, "finished_s"]


def test_class_mix_shares_and_labels():
    classes = [
        {"weight": 1, "priority": 0, "slo_class": "interactive", "tenant": "a"},
        {"weight": 3, "priority": 5, "slo_class": "batch", "tenant": "b"},
    ]
    s = generate(WorkloadConfig.model_validate({"num_requests": 8000, "classes": classes}), 0)
    assert s.slo_class_names == ("interactive", "batch") and s.tenant_names == ("a", "b")
    assert np.array_equal(s.priority == 5, s.slo_class == 1) and np.array_equal(s.slo_class, s.tenant)
    assert np.mean(s.slo_class == 1) == pytest.approx(0.75, abs=4 * np.sqrt(0.75 * 0.25 / 8000))
    sessions = _sessions(num_sessions=300, classes=classes)
    for k in range(300):  # one class per session
        assert len(np.unique(sessions.priority[sessions.session_id == k])) == 1
    with pytest.raises(ValidationError, match="give every class a tenant, or none"):
        WorkloadConfig.model_validate({"classes": [{"tenant": "a"}, {"priority": 1}]})


def test_no_session_starting_gives_an_empty_stream():
    s = _sessions(num_sessions=None, duration_s=0.001, arrival={"kind": "poisson", "rate_per_s": 0.01})
    assert len(s) == 0 and s.meta["num_sessions"] == 0 and len(s.hash_offsets) == 1
    assert describe(s)["prefix_blocks"]["repeat_fraction"] is None
