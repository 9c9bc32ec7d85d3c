"""Regressions of the failure families random valid scenarios found (issue 33), each on a scenario of its own.

- A request preempted for recompute whose prompt plus generated tokens outgrew the step budget ends FINISHED,
  short, with a reason (vLLM V0's FINISHED_IGNORED), never a state-machine crash.
- ``priority`` refuses a token budget below ``max_num_seqs`` as vLLM does, and no step of an unchunked
  policy exceeds its budget (an unset one is vLLM V0's default, max(max_model_len, 2048)).
- A closed-loop user or a session sends its next request only once the answer has reached it (stream delay).
- The README's list of policies refused in disaggregated groups is the registry's.
- Every scenario of ../shared/cases/fuzz (the minimal cases the issue came with) runs clean or is refused in one
  line, as it should be.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import policies
from benchmarks.fuzzing.checks import check_scenario
from simulator.build import build
from simulator.config.scenario import read_scenario_dict, validate_scenario
from tests.conftest import ROOT
from tests.servesim.test_cli import servesim

SHARED_FUZZ = ROOT.parent / "shared" / "cases" / "fuzz"
FIXED = {"kind": "independent"}
CONSTANT = {"kind": "constant", "step_time_s": 0.01, "per_token_s": 1e-5}


def lengths(prompt: int, output: int) -> dict:
    return FIXED | {"prompt": {"kind": "fixed", "tokens": prompt}, "output": {"kind": "fixed", "tokens": output}}


def offline(n: int, prompt: int, output: int) -> dict:
    return {"num_requests": n, "arrival": {"kind": "offline"}, "lengths": lengths(prompt, output)}


def run(data: dict):
    """Run with every invariant checked (benchmarks/fuzzing/checks.py) and return the request table."""
    cfg = validate_scenario(data)
    assert check_scenario(data).refused is None
    return build(cfg, check_invariants=True).run().requests.set_index("request_id")


# -- a recompute over the budget ends short ----------------------------------------------------------------


def test_no_kv_cache_sequence_outgrowing_the_budget_finishes_short_with_its_tokens():
    # every step recomputes prompt + generated: 80 + 10 fits a 90-token budget, 80 + 11 does not
    r = run(
        {
            "model": "llama-3.2-1b",
            "cost_model": CONSTANT,
            "policy": {"kind": "no_kv_cache", "max_num_batched_tokens": 90},
            "workload": offline(1, 80, 30),
        }
    )
    row = r.loc[0]
    assert row["status"] == "finished" and row["num_generated_tokens"] == 11 and row["num_preemptions"] == 1
    assert row["reject_reason"] == ""
    assert row["finish_reason"].startswith("ignored: recompute (prompt + generated) of 91 tokens")
    assert "max_num_batched_tokens (90)" in row["finish_reason"] and "11 of 30 tokens" in row["finish_reason"]


@pytest.mark.parametrize("kind", ["vllm_v0", "priority"])
def test_preempted_request_whose_recompute_outgrew_the_budget_finishes_short(kind):
    # 2 x (48 + 40) tokens need 12 blocks of 16; 9 are there: the newer is preempted while decoding, and its
    # recompute (48 prompt + at least 17 generated) no longer fits the 64-token step
    r = run(
        {
            "model": "llama-3.2-1b",
            "cost_model": CONSTANT,
            "policy": {"kind": kind, "max_num_seqs": 2, "max_num_batched_tokens": 64},
            "kv_cache": {"num_blocks": 9, "block_size": 16},
            "workload": offline(2, 48, 40),
        }
    )
    assert r.loc[0, "status"] == "finished" and r.loc[0, "num_generated_tokens"] == 40
    assert r.loc[0, "finish_reason"] == ""
    short = r.loc[1]
    assert short["status"] == "finished" and short["num_preemptions"] >= 1
    assert 0 < short["num_generated_tokens"] < 40 and "exceeds max_num_batched_tokens (64)" in short["finish_reason"]


def test_a_request_ended_short_frees_its_user_for_the_next_turn():
    data = {
        "model": "llama-3.2-1b",
        "cost_model": CONSTANT,
        "policy": {"kind": "no_kv_cache", "max_num_batched_tokens": 40},
        "workload": {"kind": "closed_loop", "concurrency": 1, "num_requests": 3, "lengths": lengths(30, 20)},
    }
    r = run(data)
    assert (r["status"] == "finished").all() and (r["num_generated_tokens"] == 11).all()
    assert (r["finish_reason"] != "").all()


# -- token budgets --------------------------------------------------------------------------------------------


def test_priority_refuses_a_budget_below_max_num_seqs_like_vllm():
    data = {"policy": {"kind": "priority", "max_num_seqs": 8, "max_num_batched_tokens": 4}}
    with pytest.raises(ValueError, match=r"max_num_batched_tokens \(4\) must be at least max_num_seqs \(8\)"):
        validate_scenario(data)


def test_priority_budget_refusal_is_one_line_and_status_2(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"policy": {"kind": "priority", "max_num_batched_tokens": 3}}))
    proc = servesim("run", "s.yaml", "--no-report", "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "max_num_batched_tokens (3) must be at least" in proc.stderr


@pytest.mark.parametrize("kind", ["priority", "vllm_v0"])
def test_no_step_over_a_small_budget_with_swap_and_pipeline_engines(kind):
    data = {
        "model": "llama-3.2-1b",
        "cost_model": CONSTANT,
        "parallelism": {"pp": 2},
        "policy": {"kind": kind, "max_num_seqs": 6, "max_num_batched_tokens": 6, "preemption_mode": "swap"},
        "kv_cache": {"num_blocks": 16, "block_size": 4, "swap_space_bytes": 2**20},
        "workload": {
            "num_requests": 40,
            "arrival": {"kind": "poisson", "rate_per_s": 200.0},
            "lengths": lengths(5, 12),
        },
    }
    steps = build(validate_scenario(data), check_invariants=True).run().steps
    assert (steps["num_prefill_tokens"] + steps["num_decode_tokens"]).max() <= 6
    assert check_scenario(data).refused is None  # the plans too, on every engine


@pytest.mark.parametrize("kind", ["priority", "vllm_v0"])
def test_unset_budget_is_vllm_v0_default_not_the_short_max_model_len(kind):
    # vLLM V0 without chunked prefill: max_num_batched_tokens = max(max_model_len, 2048); 300 requests of 20
    # tokens on a 32-token max_model_len decoded 256 a step over a "budget" of 32 before
    data = {
        "model": "llama-3.2-1b",
        "cost_model": CONSTANT,
        "max_model_len": 32,
        "policy": {"kind": kind},
        "workload": offline(300, 10, 10),
    }
    steps = build(validate_scenario(data), check_invariants=True).run().steps
    per_step = steps["num_prefill_tokens"] + steps["num_decode_tokens"]
    assert per_step.max() <= 2048 and steps["num_prefill_tokens"].max() > 32
    assert check_scenario(data).refused is None


# -- the client's view of a user's turns -------------------------------------------------------------------


def test_closed_loop_user_waits_for_the_answer_to_reach_it():
    data = {
        "model": "llama-3.2-1b",
        "cost_model": CONSTANT,
        "client": {"stream_delay_s": 0.2, "ingest_delay_s": 0.0},
        "workload": {
            "kind": "closed_loop",
            "concurrency": 2,
            "num_requests": 6,
            "lengths": lengths(20, 5),
            "think_s": {"kind": "fixed", "seconds": 0.3},
        },
    }
    r = run(data)
    for i in range(2, 6):  # request i follows i - 2, same user: finish + stream delay + think
        assert r.loc[i, "arrival_s"] == pytest.approx(r.loc[i - 2, "finished_s"] + 0.5, rel=1e-12)


def test_session_turn_is_sent_after_the_previous_answer_arrived():
    data = {
        "model": "llama-3.2-1b",
        "cost_model": CONSTANT,
        "client": {"stream_delay_s": 0.15},
        "workload": {
            "kind": "sessions",
            "num_sessions": 3,
            "arrival": {"kind": "poisson", "rate_per_s": 5.0},
            "turns": {"kind": "fixed", "count": 3},
            "user_tokens": {"kind": "fixed", "tokens": 12},
            "output_tokens": {"kind": "fixed", "tokens": 4},
        },
    }
    cfg = validate_scenario(data)
    sim = build(cfg)
    r = sim.run().requests.set_index("request_id")
    parent = sim.stream.parent
    children = [i for i in range(len(parent)) if parent[i] >= 0]
    assert children
    for i in children:
        assert r.loc[i, "arrival_s"] >= r.loc[parent[i], "finished_s"] + 0.15 - 1e-12
    assert check_scenario(data).refused is None


# -- the README ------------------------------------------------------------------------------------------------


def test_readme_names_the_policies_refused_in_disaggregated_groups():
    """The sentence (README.md, or the docs/ pages it moves to) names exactly the registry's refused policies."""
    refused = {k for k in policies.BATCH_POLICIES.names() if not policies.BATCH_POLICIES.entry(k).traits.kv_transfer}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    said = []
    for page in pages:
        text = " ".join(page.read_text().split()) if page.is_file() else ""
        for names in re.findall(r"Policies that cannot receive KV \(([^)]*)\) are refused in such groups", text):
            said.append((page.name, set(re.findall(r"`([a-z_0-9]+)`", names))))
    assert said, "neither README.md nor docs/ says which policies are refused in disaggregated groups"
    for page, named in said:
        assert named == refused, page


# -- the shared minimal cases ----------------------------------------------------------------------------------

# priority with a budget below max_num_seqs: refused, as vLLM refuses it
REFUSED = {"min-priority-budget", "00013-invariant-budget"}


def shared_cases() -> list[Path]:
    if not SHARED_FUZZ.is_dir():
        pytest.fail(
            f"{SHARED_FUZZ} is missing: fetch the shared folder (cases/fuzz/, issue 33's minimal scenarios) beside "
            "the repository"
        )
    return sorted(SHARED_FUZZ.glob("*/*.yaml"))


def test_every_shared_fuzz_case_runs_clean_or_is_refused_in_one_line():
    cases = shared_cases()
    assert len(cases) >= 6, f"expected the six scenarios of {SHARED_FUZZ}, found {len(cases)}"
    for path in cases:
        verdict = check_scenario(read_scenario_dict(path), base_dir=path.parent)
        if path.parent.name in REFUSED:
            assert verdict.refused and "must be at least max_num_seqs" in verdict.refused, path
        else:
            assert verdict.refused is None and verdict.num_requests > 0, (path, verdict)


# -- found by the fuzz test: the fast path against the plain path ----------------------------------------------


def test_next_turn_counts_from_the_recorded_end_on_the_fast_path():
    # a fast-forward window stamps its last finish from its own clock sums, an ulp past SimPy's clock: the next
    # turn was sent (arrival_s) before the recorded end, and max_concurrent_requests read 2 for one user
    data = {"seed": 7455, "model": "llama-3.2-1b", "hardware": "l40s", "policy": {"kind": "continuous"},
            "cost_model": {"kind": "roofline"}, "kv_cache": {"block_size": 1},
            "client": {"ingest_delay_s": 0.0, "stream_delay_s": 0.0},
            "workload": {"kind": "sessions", "num_sessions": 1, "arrival": {"kind": "poisson", "rate_per_s": 20.0},
                         "turns": {"kind": "uniform", "min_count": 1, "max_count": 3},
                         "user_tokens": {"kind": "uniform", "min_tokens": 1, "max_tokens": 2},
                         "output_tokens": {"kind": "uniform", "min_tokens": 1, "max_tokens": 22},
                         "think_s": {"kind": "fixed", "seconds": 0.0}, "hash_block_tokens": 4}}  # fmt: skip
    cfg = validate_scenario(data)
    for fast_forward in (False, True):
        sim = build(cfg, fast_forward=fast_forward)
        result = sim.run()
        r = result.requests.set_index("request_id")
        parent = sim.stream.parent
        for i in range(1, len(parent)):
            assert r.loc[i, "arrival_s"] >= r.loc[parent[i], "finished_s"]
        assert result.summary["max_concurrent_requests"] == 1
    assert check_scenario(data).refused is None


def test_a_fast_forward_window_polls_the_input_queue_as_the_plain_plan_would():
    # SGLang's scheduler_recv_interval: the plan that starts a window restarts a due counter, as the plain path's
    # plan does; without it a request arriving mid-window joined the queue decode steps early (0.0044 s, not 0.0080 s)
    data = {"model": "llama-3.2-1b", "hardware": "h100-sxm", "cost_model": {"kind": "roofline"},
            "policy": {"kind": "sglang", "max_running_requests": 2, "max_prefill_tokens": 64,
                       "scheduler_recv_interval": 4},
            "client": {"ingest_delay_s": 0.0, "stream_delay_s": 0.0}, "kv_cache": {"block_size": 1},
            "workload": {"num_requests": 2, "arrival": {"kind": "constant", "rate_per_s": 500.0},
                         "lengths": lengths(1, 60)}}  # fmt: skip
    cfg = validate_scenario(data)
    plain, fast = build(cfg, fast_forward=False).run().requests, build(cfg).run().requests
    assert plain["enqueued_s"].tolist() == fast["enqueued_s"].tolist()
    assert check_scenario(data).refused is None


def test_users_answered_at_one_instant_are_routed_in_request_order_on_both_paths():
    # two users' requests end at one instant on two replicas; the paths reported the ends in different orders,
    # so round robin sent the users' next requests to different replicas
    few = {"kind": "uniform", "min_tokens": 1, "max_tokens": 3}
    data = {"model": "mistral-7b", "hardware": "h200", "replicas": 2, "router": {"kind": "round_robin"},
            "policy": {"kind": "vllm", "max_num_seqs": 9, "max_num_batched_tokens": 512},
            "cost_model": {"kind": "constant", "step_time_s": 0.01, "per_token_s": 0.0},
            "client": {"ingest_delay_s": 0.0, "stream_delay_s": 0.3}, "kv_cache": {"block_size": 16, "num_blocks": 129},
            "workload": {"kind": "closed_loop", "concurrency": 2, "num_requests": 40,
                         "think_s": {"kind": "fixed", "seconds": 0.05},
                         "lengths": FIXED | {"prompt": {"kind": "fixed", "tokens": 140}, "output": few}}}  # fmt: skip
    cfg = validate_scenario(data)
    plain, fast = build(cfg, fast_forward=False).run().requests, build(cfg).run().requests
    assert plain["replica_id"].tolist() == fast["replica_id"].tolist()
    assert check_scenario(data).refused is None


def test_a_prompt_done_as_a_decode_step_ends_is_offered_after_that_step_on_both_paths():
    # a prefill step and a decode step end at one instant: the plain path recorded the decode step's row (and planned
    # its next step) before the prefilled request leased its blocks there, the fast path's window after (66 blocks
    # in use and one transfer queued where the plain row said 18 and none); offers now come last at an instant
    data = {"policy": {"kind": "continuous"},
            "cost_model": {"kind": "constant", "step_time_s": 0.001, "per_token_s": 0},
            "kv_cache": {"block_size": 1, "num_blocks": 109, "swap_space_bytes": 1 << 30, "prefix_caching": True,
                         "host_cache_bytes": 1 << 20},
            "groups": [{"role": "prefill", "count": 1}, {"role": "decode", "count": 1}],
            "workload": {"kind": "closed_loop", "concurrency": 2, "think_s": {"kind": "fixed", "seconds": 0.003125},
                         "lengths": FIXED | {"prompt": {"kind": "fixed", "tokens": 10}, "output": {
                             "kind": "lognormal", "median_tokens": 22.0, "sigma": 0.5}}}}  # fmt: skip
    cfg = validate_scenario(data)
    plain, fast = build(cfg, fast_forward=False).run().steps, build(cfg).run().steps
    for column in ("num_kv_blocks_used", "num_transfer_queue", "num_running", "num_waiting"):
        assert plain[column].tolist() == fast[column].tolist(), column
    assert check_scenario(data).refused is None


def test_kv_transfers_leased_at_one_instant_start_in_request_order_on_both_paths():
    # two decode replicas lease at their step ends at one instant, in an order that differed between the paths, and
    # the prefill replica's one link sent the two requests' KV in that order
    data = {"policy": {"kind": "dynamic", "max_wait_s": 0.0}, "router": {"kind": "prefix_aware"},
            "cost_model": {"kind": "constant", "step_time_s": 0.001, "per_token_s": 0},
            "kv_cache": {"block_size": 16, "num_blocks": 69, "prefix_caching": True, "host_cache_bytes": 1 << 28},
            "groups": [{"role": "prefill", "count": 2}, {"role": "decode", "count": 2}],
            "workload": {"num_requests": 114, "arrival": {"kind": "offline"},
                         "lengths": FIXED | {"prompt": {"kind": "fixed", "tokens": 72},
                                             "output": {"kind": "lognormal", "median_tokens": 55.0, "sigma": 0.5,
                                                        "max_tokens": 60}}}}  # fmt: skip
    cfg = validate_scenario(data)
    plain, fast = build(cfg, fast_forward=False).run().requests, build(cfg).run().requests
    for column in ("transfer_start_s", "first_token_s", "replica_id"):
        assert plain[column].tolist() == fast[column].tolist(), column
    assert plain["transfer_start_s"].notna().all()  # every request's KV was sent
    assert check_scenario(data).refused is None


def test_a_window_planned_early_lands_on_its_last_step_end_exactly():
    # the first window (0.0033 s to 0.0453 s) was timed as now + (end - now), which rounds when the end is more than
    # twice now: SimPy's clock landed an ulp past the steps' sums, the closed loop carried the ulp into a KV transfer,
    # and a transfer landing exactly as a decode step ended (a tie on the plain path) came after it on the fast path:
    # the request's first token came a step later (0.502048 s against 0.501048 s)
    data = {"policy": {"kind": "vllm"}, "cost_model": {"kind": "constant", "step_time_s": 0.001},
            "client": {"ingest_delay_s": 0.0}, "groups": [{"role": "prefill"}, {"role": "decode"}],
            "workload": {"kind": "closed_loop", "concurrency": 2,
                         "lengths": FIXED | {"prompt": {"kind": "fixed", "tokens": 179},
                                             "output": {"kind": "fixed", "tokens": 44}}}}  # fmt: skip
    cfg = validate_scenario(data)
    plain, fast = build(cfg, fast_forward=False).run().requests, build(cfg).run().requests
    assert plain["first_token_s"].round(9).tolist() == fast["first_token_s"].round(9).tolist()
    assert check_scenario(data).refused is None


def test_timeout_at_fires_at_the_time_asked():
    import simpy

    from simulator.engine.fast_forward import timeout_at

    now, at = 0.003254037528888889, 0.04525403752888892
    assert now + (at - now) != at  # a timeout of the difference fires an ulp off
    env = simpy.Environment(initial_time=now)
    fired = []
    timeout_at(env, at).callbacks.append(lambda _: fired.append(env.now))
    env.run()
    assert fired == [at]
