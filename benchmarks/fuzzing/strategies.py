"""Hypothesis strategies for random valid small scenarios: what a user combining features at random would write.

``scenarios()`` draws a scenario mapping (as a YAML file would hold it) over every registered batch policy with
random parameters, every workload kind (synthetic, trace, sessions, closed loop; priority classes), and the
cluster features: replicas behind each router, tensor and pipeline parallelism, prefix caching with a host tier,
swap space, small KV caches, disaggregated prefill/decode groups, speculative decoding, client delays and a short
``max_model_len``. Scenarios are small (tens of requests, a constant or roofline cost model) so hundreds run in a
few minutes. Drawn values stay inside the schema's bounds; what the schema or the build refuses (a policy that
cannot serve a disaggregated group, a KV cache too small for a request...) is a refusal, which the checks accept
when it is one line.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import policies

# Qwen3.5-27B: a hybrid model (48 of its 64 layers Gated DeltaNet), its recurrent states beside the KV cache;
# gpt-oss-20b: 12 of its 24 layers sliding-window, held per window under vllm (simulator/kv/window.py)
MODELS = ("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "Qwen/Qwen3.5-27B", "openai/gpt-oss-20b")
HARDWARE = ("h100-sxm", "a100-80gb", "l40s", "h200")
TRACES = ("azure-conv", "azure-code", "bwb", "sharegpt-8k-multiturn")
UNTIMED = ("bwb", "sharegpt-8k-multiturn")  # lengths only: replayed at an arrival process's times


def _fields(kind: str) -> dict[str, Any]:
    return policies.BATCH_POLICIES.entry(kind).params.model_fields


@st.composite
def policy_params(draw, kind: str | None = None) -> dict[str, Any]:
    """A batch policy with random parameters (budgets at least the sequence limit where the policy requires it)."""
    kind = kind or draw(st.sampled_from(sorted(policies.BATCH_POLICIES.names())))
    fields = _fields(kind)
    params: dict[str, Any] = {"kind": kind}
    seqs = draw(st.integers(1, 12))
    cap = next((c for c in ("max_num_seqs", "max_batch_size", "max_running_requests") if c in fields), None)
    if cap is not None and draw(st.integers(0, 5)):  # mostly set: the defaults run hundreds at once
        params[cap] = seqs
    budget = draw(st.one_of(st.none(), st.integers(seqs, 160)))
    if cap is not None and cap not in params and draw(st.integers(0, 3)):
        budget = None  # a budget below the default sequence limit is refused (vLLM refuses it): now and then
    for name in ("max_num_batched_tokens", "token_budget", "max_num_tokens"):
        if name in fields and budget is not None:
            params[name] = budget
    if kind == "vllm" and (cap in params) != (budget is not None):  # vllm resolves both or neither
        params.pop(cap, None)
        params.pop("max_num_batched_tokens", None)
    if "preemption_mode" in fields:
        params["preemption_mode"] = draw(st.sampled_from(["recompute", "swap"]))
    if "watermark" in fields:
        params["watermark"] = draw(st.sampled_from([0.0, 0.01, 0.1]))
    if kind == "priority":
        params["mode"] = draw(st.sampled_from(["strict", "aging"]))
        if params["mode"] == "aging":  # (read with aging only: refused beside strict classes)
            params["aging_s"] = draw(st.sampled_from([0.05, 1.0]))
        params["preempt_for_admission"] = draw(st.booleans())
    if kind == "dynamic":
        params["max_wait_s"] = draw(st.sampled_from([0.0, 0.01, 0.2]))
    if kind == "vllm":
        params["long_prefill_token_threshold"] = draw(st.sampled_from([0, 0, 8, 64]))
    if kind == "sglang":
        params["chunked_prefill_size"] = draw(st.sampled_from([None, -1, 16, 64, 256]))
        params["max_prefill_tokens"] = draw(st.sampled_from([64, 512, 16384]))
        params["schedule_policy"] = draw(st.sampled_from(["fcfs", "lpm"]))
        params["enable_mixed_chunk"] = draw(st.booleans())
        params["scheduler_recv_interval"] = draw(st.sampled_from([1, 1, 4]))
    if kind == "trtllm":
        params["capacity_scheduler_policy"] = draw(st.sampled_from(["GUARANTEED_NO_EVICT", "MAX_UTILIZATION"]))
        params["enable_chunked_prefill"] = draw(st.booleans())
    return {k: v for k, v in params.items() if k == "kind" or k in fields}


@st.composite
def token_lengths(draw, low: int = 1, high: int = 120) -> dict[str, Any]:
    kind = draw(st.sampled_from(["fixed", "uniform", "lognormal"]))
    if kind == "fixed":
        return {"kind": "fixed", "tokens": draw(st.integers(low, high))}
    if kind == "uniform":
        a, b = sorted(draw(st.lists(st.integers(low, high), min_size=2, max_size=2)))
        return {"kind": "uniform", "min_tokens": a, "max_tokens": b}
    return {"kind": "lognormal", "median_tokens": float(draw(st.integers(low, high))), "sigma": 0.5, "max_tokens": high}


@st.composite
def lengths(draw) -> dict[str, Any]:
    if draw(st.integers(0, 7)) == 0:  # an empirical data set's output column
        return {
            "kind": "independent",
            "prompt": draw(token_lengths(1, 200)),
            "output": {"kind": "empirical", "source": draw(st.sampled_from(TRACES[:3])), "column": "output"},
        }
    return {"kind": "independent", "prompt": draw(token_lengths(1, 200)), "output": draw(token_lengths(1, 60))}


@st.composite
def seconds(draw) -> dict[str, Any]:
    return draw(
        st.sampled_from(
            [
                {"kind": "fixed", "seconds": 0.0},
                {"kind": "fixed", "seconds": 0.05},
                {"kind": "exponential", "mean_s": 0.1},
            ]
        )
    )


@st.composite
def arrival(draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(["poisson", "gamma", "constant", "offline"]))
    rate = draw(st.sampled_from([2.0, 20.0, 200.0]))
    if kind == "offline":
        return {"kind": "offline"}
    if kind == "gamma":
        return {"kind": "gamma", "rate_per_s": rate, "burstiness": draw(st.sampled_from([0.3, 1.0, 3.0]))}
    return {"kind": kind, "rate_per_s": rate}


@st.composite
def workload(draw, priorities: bool, max_requests: int = 24) -> dict[str, Any]:
    kind = draw(st.sampled_from(["synthetic", "trace", "sessions", "closed_loop"]))
    n = draw(st.integers(1, max_requests))
    if kind == "synthetic":
        out = {"kind": kind, "num_requests": n, "arrival": draw(arrival()), "lengths": draw(lengths())}
    elif kind == "trace":
        out = {
            "kind": kind,
            "source": draw(st.sampled_from(TRACES)),
            "num_requests": n,
            "sample": draw(st.sampled_from(["first", "random"])),
            "time_scale": draw(st.sampled_from([0.01, 0.1, 1.0])),
            "max_prompt_tokens": draw(st.sampled_from([64, 300])),
            "max_output_tokens": draw(st.sampled_from([16, 64])),
        }
        if out["source"] in UNTIMED:
            out["arrival"] = draw(arrival())
    elif kind == "sessions":
        out = {
            "kind": kind,
            "num_sessions": draw(st.integers(1, max(1, max_requests // 4))),
            "arrival": draw(arrival()),
            "turns": {"kind": "uniform", "min_count": 1, "max_count": draw(st.integers(1, 4))},
            "user_tokens": draw(token_lengths(1, 60)),
            "output_tokens": draw(token_lengths(1, 30)),
            "think_s": draw(seconds()),
            "system_prompt_tokens": draw(st.sampled_from([0, 0, 40])),
            "hash_block_tokens": draw(st.sampled_from([4, 16])),
            "max_context_tokens": draw(st.sampled_from([None, 400])),
        }
        if draw(st.booleans()):
            out["tool_calls"] = {"kind": "uniform", "min_count": 0, "max_count": 2}
            out["tool_tokens"] = draw(token_lengths(1, 40))
            out["tool_s"] = draw(seconds())
    else:
        out = {
            "kind": kind,
            "concurrency": draw(st.integers(1, min(4, n))),  # (each user sends at least one request)
            "num_requests": n,
            "think_s": draw(seconds()),
            "lengths": draw(lengths()),
        }
    if priorities and kind != "trace":
        out["classes"] = [{"weight": 1.0, "priority": 0}, {"weight": 1.0, "priority": draw(st.integers(1, 3))}]
    return out


@st.composite
def scenarios(draw, kind: str | None = None, max_requests: int = 24) -> dict[str, Any]:
    """A random valid small scenario mapping (``kind``: this batch policy, else any; at most about ``max_requests``
    requests: a session workload has up to ``max_requests // 4`` sessions of a few calls each)."""
    policy = draw(policy_params(kind))
    traits = policies.BATCH_POLICIES.entry(policy["kind"]).traits
    data: dict[str, Any] = {
        "seed": draw(st.integers(0, 2**16)),
        "model": draw(st.sampled_from(MODELS)),
        "hardware": draw(st.sampled_from(HARDWARE)),
        "policy": policy,
        "workload": draw(workload(priorities=policy["kind"] == "priority", max_requests=max_requests)),
        "client": {
            "ingest_delay_s": draw(st.sampled_from([0.0, 0.004])),
            "stream_delay_s": draw(st.sampled_from([0.0, 0.0, 0.01, 0.3])),
        },
    }
    if draw(st.integers(0, 4)):  # mostly the constant cost model: quick, and ties on round numbers
        step = draw(st.sampled_from([0.001, 0.01, 0.25]))
        data["cost_model"] = {"kind": "constant", "step_time_s": step, "per_token_s": draw(st.sampled_from([0, 1e-5]))}
    else:
        data["cost_model"] = {"kind": "roofline"}
    kv: dict[str, Any] = {"block_size": draw(st.sampled_from([1, 4, 16]))}
    if draw(st.integers(0, 3)):
        kv["num_blocks"] = draw(st.integers(2, 200))
    if draw(st.booleans()):
        kv["swap_space_bytes"] = draw(st.sampled_from([2**16, 2**24, 2**30]))
    if traits.prefix_caching and draw(st.booleans()):
        kv["prefix_caching"] = True
        kv["host_cache_bytes"] = draw(st.sampled_from([0, 2**20, 2**28]))
        # a prefix cache's invariant check walks every block after every step: a memory-sized pool (10^5 blocks
        # and more) made such scenarios 20 times slower than the rest
        kv.setdefault("num_blocks", draw(st.integers(2, 400)))
    data["kv_cache"] = kv
    if draw(st.integers(0, 4)) == 0:
        data["max_model_len"] = draw(st.sampled_from([64, 256, 1024]))
    # (a policy that cannot hand KV over is refused in prefill and decode groups: no draw is spent on that)
    layouts = ["single", "replicas", "parallel"] + (["disaggregated"] if traits.kv_transfer else [])
    layout = draw(st.sampled_from(layouts))
    if layout == "replicas":
        data["replicas"] = draw(st.integers(2, 3))
        data["router"] = {"kind": draw(st.sampled_from(sorted(policies.ROUTERS.names())))}
    elif layout == "parallel":
        data["parallelism"] = {"tp": draw(st.sampled_from([1, 2])), "pp": draw(st.sampled_from([1, 2]))}
    elif layout == "disaggregated":
        data["groups"] = [
            {"role": "prefill", "count": draw(st.integers(1, 2))},
            {"role": "decode", "count": draw(st.integers(1, 2))},
        ]
        data["router"] = {"kind": draw(st.sampled_from(sorted(policies.ROUTERS.names())))}
    if draw(st.integers(0, 5)) == 0 and layout != "parallel":
        data["speculative"] = {
            "method": "draft",
            "draft_model": "llama-3.2-1b",
            "num_tokens": draw(st.integers(1, 4)),
            "acceptance_rate": draw(st.sampled_from([0.0, 0.5, 0.9])),
        }
    return data
