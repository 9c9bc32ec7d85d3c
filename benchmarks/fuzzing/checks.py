"""What every run of a valid scenario must satisfy, checked from the outside (tables, decision logs, a rerun).

``check_scenario(data)`` validates and builds a scenario mapping and runs it three times: on the plain path
(every step planned) with the engine invariants asserted after each step (KV never over the pool, free + used ==
total, no request in two queues) and every plan logged, again on the plain path (same seed: identical tables),
and on the fast path (the same decisions; times equal to 1e-9 relative, as tests/simulator/engine/
test_fast_forward.py compares them). It returns a ``Verdict``: the scenario was refused in one line (a
``ValueError`` from validation or build: the project's clean error type), or it ran and broke nothing, or the
first broken invariant (``Failure``, with its message). Any other exception propagates: that is a failure too,
the caller records it with its traceback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from policies.batching.common import unchunked_budget
from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.engine.executor import DecisionLog
from simulator.metrics.results import RunResult


class Failure(AssertionError):
    """A valid scenario broke an invariant."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a scenario fared: ``refused`` holds the one-line refusal, else ``num_requests`` were simulated."""

    refused: str | None = None
    num_requests: int = 0


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def step_limits(policy: Mapping[str, Any], max_model_len: int) -> tuple[int | None, int | None, bool]:
    """(token budget, sequence limit, whether the budget bounds decode-only steps) of one engine's resolved policy.

    None: that limit is not the policy's (SGLang's prefill budget lets the first request exceed it and its decode
    batches have none; static batching's budget bounds the prompts that start a batch).
    """
    kind = policy["kind"]
    if kind in ("vllm_v0", "priority"):
        tokens = unchunked_budget(policy["max_num_batched_tokens"], max_model_len)
        return tokens, min(policy["max_num_seqs"], tokens), True
    if kind in ("vllm", "hf_fifo", "continuous", "no_kv_cache"):
        return policy.get("max_num_batched_tokens"), policy["max_num_seqs"], True
    if kind == "sarathi":
        return policy["token_budget"], policy["max_num_seqs"], True
    if kind == "trtllm":
        return policy["max_num_tokens"], policy["max_batch_size"], True
    if kind in ("static", "dynamic"):
        return policy.get("max_num_batched_tokens"), policy["max_batch_size"], False
    if kind == "sglang":
        return None, policy.get("max_running_requests"), False
    raise Failure(f"no step limits known for policy {kind}: add them to benchmarks/fuzzing/checks.py")


def refusal(exc: ValueError) -> str:
    """The one line a refused scenario gives (a Failure when it is not one line)."""
    text = str(exc).strip()
    check(bool(text) and "\n" not in text and "Traceback" not in text, f"a refusal of more than one line: {text!r}")
    return text


def check_scenario(data: Mapping[str, Any], base_dir: Path | None = None) -> Verdict:
    """Run ``data`` (a scenario mapping) and check every invariant; see the module docstring."""
    try:
        cfg = validate_scenario(data)
        sim = build(cfg, base_dir, check_invariants=True, fast_forward=False)
    except ValueError as exc:
        return Verdict(refused=refusal(exc))
    logs = []
    for engine in sim.engines:
        engine.executor.log = DecisionLog()
        logs.append((engine, engine.executor.log))
    plain = sim.run()
    check_result(plain, sim.stream, cfg.client.stream_delay_s, sim.engines)
    groups = {g["name"]: g for g in plain.config["resolved_groups"]}
    for replica in sim.replicas:
        group = groups[replica.group]
        for engine in replica.engines:
            log = next(log for e, log in logs if e is engine)
            check_plans(log, group["policy"], group["max_model_len"], f"replica {replica.replica_id}")
    again = build(cfg, base_dir, fast_forward=False).run()
    check_identical(plain, again)
    fast = build(cfg, base_dir).run()
    check_same_decisions(plain, fast)
    return Verdict(num_requests=len(plain.requests))


def check_result(result: RunResult, stream, stream_delay_s: float, engines) -> None:
    """Accounting, tokens, timestamps, users' turns and the KV pools after a run."""
    req = result.requests
    n = len(stream)
    check(len(req) == n and req["request_id"].tolist() == list(range(n)), f"{len(req)} of {n} requests accounted for")
    summary = result.summary
    check(summary["completed"] + summary["rejected"] == n, "completed + rejected != generated")
    check(set(req["status"]) <= {"finished", "rejected"}, f"statuses {set(req['status'])}")
    done = req[req["status"] == "finished"]
    short = done["finish_reason"] != ""
    whole = done[~short]
    bad = whole[whole["num_generated_tokens"] != whole["num_output_tokens"]]
    check(bad.empty, f"finished requests {bad['request_id'].tolist()[:5]} emitted other than their output tokens")
    cut = done[short]
    ok = (cut["num_generated_tokens"] > 0) & (cut["num_generated_tokens"] < cut["num_output_tokens"])
    check(bool(ok.all()), f"requests {cut['request_id'][~ok].tolist()[:5]} ended short with no reason to")
    rejected = req[req["status"] == "rejected"]
    check(bool((rejected["reject_reason"] != "").all()), "a rejection without a reason")
    order = (done["arrival_s"] <= done["first_token_s"]) & (done["first_token_s"] <= done["finished_s"])
    check(bool(order.all()), f"requests {done['request_id'][~order].tolist()[:5]}: not arrival <= first <= finish")
    check(summary["total_output_tokens"] == int(done["num_generated_tokens"].sum()), "summary output tokens")
    if stream.parent is not None:
        check_users(req, stream.parent, stream_delay_s)
    for engine in engines:
        kv = engine.kv
        check(kv.num_free_blocks == kv.num_total_blocks, f"replica {engine.replica_id}: KV left held after the run")
        check(not engine.running and not engine.waiting, f"replica {engine.replica_id}: requests left queued")
    steps = result.steps
    if not steps.empty:
        pools = {(e.replica_id, e.executor.engine_id): e.kv.num_total_blocks for e in engines}
        total = np.array([pools[k] for k in zip(steps["replica_id"], steps["engine_id"], strict=True)])
        used = steps["num_kv_blocks_used"].to_numpy() + steps["num_kv_blocks_cached"].to_numpy()
        check(bool((used <= total).all()), "a step row with more KV blocks than the pool")


def check_users(req: pd.DataFrame, parent: np.ndarray, stream_delay_s: float) -> None:
    """A closed-loop user or a session sends a request only once the previous one's answer reached it."""
    child = np.flatnonzero(parent >= 0)
    if not len(child):
        return
    by_id = req.set_index("request_id")
    sent = by_id.loc[child, "arrival_s"].to_numpy()
    prev_end = by_id.loc[parent[child], "finished_s"].to_numpy() + stream_delay_s
    early = sent < prev_end - 1e-9 * np.maximum(1.0, np.abs(prev_end))
    check(not early.any(), f"requests {child[early].tolist()[:5]} sent before the previous answer reached the user")


def check_plans(log: DecisionLog, policy: Mapping[str, Any], max_model_len: int, where: str) -> None:
    """No plan over its policy's token budget or sequence limit."""
    tokens, seqs, bounds_decode = step_limits(policy, max_model_len)
    for row in log.rows:
        if row[0] != "plan" or not row[1]:
            continue
        counts = [k for _, k in row[1]]
        if seqs is not None:
            check(len(counts) <= seqs, f"{where}: a step of {len(counts)} requests over {policy['kind']}'s {seqs}")
        prefills = [k for k in counts if k > 1]
        if tokens is not None and (bounds_decode or prefills):
            used = sum(counts) if bounds_decode else sum(prefills)
            check(used <= tokens, f"{where}: a step of {used} tokens over {policy['kind']}'s budget of {tokens}")


def check_identical(a: RunResult, b: RunResult) -> None:
    """Same seed, same tables, bit for bit."""
    check(a.requests.equals(b.requests), "same seed, different request tables")
    check(a.steps.equals(b.steps), "same seed, different step tables")
    check(np.array_equal(a.itl_values_s, b.itl_values_s) and np.array_equal(a.itl_counts, b.itl_counts), "ITLs")
    check(_same_summary(a.summary, b.summary, exact=True), "same seed, different summaries")


def check_same_decisions(plain: RunResult, fast: RunResult) -> None:
    """The fast path decides as the plain path: the same outcome per request, times equal to rounding."""
    p, f = plain.requests, fast.requests
    for column in ("status", "replica_id", "num_generated_tokens", "num_preemptions", "num_cached_tokens"):
        differ = p[column].to_numpy() != f[column].to_numpy()
        check(not differ.any(), f"fast path: {column} differs for requests {p['request_id'][differ].tolist()[:5]}")
    for column in ("first_token_s", "finished_s"):
        a, b = p[column].to_numpy(), f[column].to_numpy()
        check(bool(np.allclose(a, b, rtol=1e-9, atol=1e-9, equal_nan=True)), f"fast path: {column} differs")
    check(_same_summary(plain.summary, fast.summary, exact=False), "fast path: summaries differ")


def _same_summary(a: Mapping[str, Any], b: Mapping[str, Any], exact: bool) -> bool:
    if a.keys() != b.keys():
        return False
    for key, x in a.items():
        y = b[key]
        if isinstance(x, float) and isinstance(y, float) and not exact:
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9) and not (math.isnan(x) and math.isnan(y)):
                return False
        elif x != y and not (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
            return False
    return True
