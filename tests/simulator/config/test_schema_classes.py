"""Classes of bad input across every field of the scenario schema (issue 32).

Walks every pydantic model a scenario can hold (its own, the workload kinds, and every
registered policy, router and cost model's parameters) and checks, field by field:

- a boolean where a number belongs is refused, naming the field (``tp: true`` once ran as tp 1);
- inf and nan where a float belongs are refused in one line naming the field;
- a number written as a whole float (``tp: 1.0``) and the bool fields still validate as before.

The fields are reached through a few scenarios that between them set every numeric field;
``test_the_scenarios_reach_every_numeric_field`` fails when a new field or model is not reached,
so the checks cannot silently miss it.
"""

from __future__ import annotations

import math
import types
import typing
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

import policies
from simulator.config.scenario import validate_scenario
from simulator.config.schema import TAGGED_FIELDS, ScenarioConfig
from simulator.cost import COST_MODELS
from tests.simulator.config.test_bad_numbers import H100

DEEPSEEK_LIKE = {
    "name": "MLA-MoE",
    "num_layers": 4,
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "num_kv_heads": 16,
    "head_dim": 96,
    "intermediate_size": 512,
    "num_experts": 8,
    "num_experts_per_token": 2,
    "vocab_size": 32000,
    "weight_bytes": 2.0,
    "kv_cache_bytes": 2.0,
    "max_context_tokens": 8192,
    "num_shared_experts": 1,
    "shared_expert_intermediate_size": 512,
    "num_dense_layers": 1,
    "dense_intermediate_size": 2048,
    "kv_lora_rank": 128,
    "q_lora_rank": 256,
    "qk_rope_head_dim": 32,
    "qk_nope_head_dim": 64,
    "v_head_dim": 64,
    "index_n_heads": 4,
    "index_head_dim": 64,
    "index_topk": 256,
}
LENGTHS = {
    "kind": "independent",
    "prompt": {"kind": "lognormal", "median_tokens": 200, "sigma": 0.5, "min_tokens": 2, "max_tokens": 4000},
    "output": {"kind": "normal", "mean_tokens": 100, "std_tokens": 20, "min_tokens": 1, "max_tokens": 400},
}
SCENARIOS: dict[str, dict[str, Any]] = {
    "inline specs, vllm, everything optional set": {
        "seed": 3,
        "model": DEEPSEEK_LIKE,
        "hardware": H100
        | {
            "fp8_flops_per_s": 1.9e15,
            "fp4_flops_per_s": 3.8e15,
            "price_per_hour_usd": 2.5,
            "gpus_per_node": 8,
            "scale_out_bandwidth_bytes_per_s": 50e9,
            "scale_out_latency_s": 10e-6,
        },
        "max_model_len": 4096,
        "policy": {
            "kind": "vllm",
            "max_num_seqs": 64,
            "max_num_batched_tokens": 2048,
            "max_cudagraph_capture_size": 64,
        },
        "cost_model": {"kind": "roofline", "eager_host_s_per_layer": 1e-3},
        "kv_cache": {"reserve_bytes": 1e9, "prefix_caching": True, "host_cache_bytes": 1e9},
        "replicas": 2,
        "router": {"kind": "prefix_aware"},
        "slo": {"ttft_ms": 500, "tpot_ms": 50, "e2el_ms": 20000},
        "client": {"ingest_delay_s": 0.004, "tokenize_s_per_token": 1e-6, "stream_delay_s": 0.001},
        "speculative": {"method": "mtp", "num_tokens": 2, "acceptance_rate": 0.7},
        "workload": {
            "num_requests": 50,
            "arrival": {"kind": "gamma", "rate_per_s": 4.0, "burstiness": 0.5},
            "lengths": LENGTHS,
            "classes": [
                {"weight": 1.0, "priority": 1, "slo_class": "a"},
                {"weight": 2.0, "priority": 0, "slo_class": "b"},
            ],
        },
    },
    "disaggregated groups, sarathi, aiconfigurator": {
        "policy": {"kind": "sarathi", "max_num_seqs": 32, "token_budget": 512},
        "cost_model": {"kind": "aiconfigurator"},
        "groups": [
            {"role": "prefill", "count": 1, "parallelism": {"tp": 2, "pp": 1, "ep": 2, "dp_attention": 2}},
            {"role": "decode", "count": 2, "parallelism": {"tp": 1, "pp": 2}},
        ],
        "kv_transfer": {"bandwidth_bytes_per_s": 5e10, "latency_s": 1e-5},
        "kv_cache": {"num_blocks": 5000},  # (memory settings beside it are refused: the first scenario has them)
        "router": {"kind": "session_affinity"},
        "speculative": {"method": "mtp", "num_tokens": 1, "acceptance_lengths": [0.25, 0.75]},
        "workload": {"duration_s": 10.0, "arrival": {"kind": "constant", "rate_per_s": 2.0}},
    },
    "sessions, sglang, constant": {
        "policy": {
            "kind": "sglang",
            "max_running_requests": 16,
            "chunked_prefill_size": 1024,
            "max_prefill_tokens": 4096,
        },
        "kv_cache": {"mem_fraction_static": 0.8},
        "cost_model": {"kind": "constant", "step_time_s": 0.01, "per_token_s": 1e-5},
        "workload": {
            "kind": "sessions",
            "num_sessions": 10,
            "arrival": {"kind": "periodic", "rate_per_s": 1.0, "amplitude": 0.5, "period_s": 60.0, "phase_s": 1.0},
            "turns": {"kind": "geometric", "mean_count": 3.0, "min_count": 1},
            "user_tokens": {"kind": "zipf", "exponent": 1.5, "min_tokens": 5, "max_tokens": 500},
            "output_tokens": {"kind": "uniform", "min_tokens": 5, "max_tokens": 50},
            "think_s": {"kind": "lognormal", "median_s": 2.0, "sigma": 0.5},
            "tool_calls": {"kind": "uniform", "min_count": 0, "max_count": 2},
            "tool_tokens": {"kind": "fixed", "tokens": 30},
            "tool_s": {"kind": "exponential", "mean_s": 1.0},
            "system_prompt_tokens": 100,
            "num_system_prompts": 2,
            "max_context_tokens": 4000,
            "hash_block_tokens": 16,
        },
    },
    "sessions by duration, trtllm, profiled": {
        "policy": {"kind": "trtllm", "max_batch_size": 16, "max_num_tokens": 2048},
        "kv_cache": {"free_gpu_memory_fraction": 0.85},
        "cost_model": {"kind": "profiled", "profile": "p.json", "step_overhead_s": 1e-3, "per_seq_overhead_s": 1e-5},
        "workload": {
            "kind": "sessions",
            "duration_s": 30.0,
            "turns": {"kind": "fixed", "count": 2},
            "user_tokens": {"kind": "fixed", "tokens": 10},
            "output_tokens": {"kind": "fixed", "tokens": 10},
            "think_s": {"kind": "uniform", "min_s": 0.5, "max_s": 2.0},
        },
    },
    "trtllm, silicon, expert load balancer": {
        "model": "deepseek-ai/DeepSeek-V3",
        "hardware": "gb200",
        "quantization": "nvfp4",
        "parallelism": {"tp": 8, "ep": 8},
        "policy": {"kind": "trtllm"},
        "cost_model": {"kind": "silicon", "eplb_slots": 288},
        "workload": {"num_requests": 10},
    },
    "closed loop, vllm_v0": {
        "policy": {"kind": "vllm_v0", "max_num_seqs": 8, "max_num_batched_tokens": 4096},
        "workload": {
            "kind": "closed_loop",
            "concurrency": 4,
            "num_requests": 20,
            "ramp_s": 2.0,
            "think_s": {"kind": "fixed", "seconds": 0.5},
            "lengths": {
                "kind": "independent",
                "prompt": {"kind": "quantiles", "probabilities": [0.0, 0.5, 1.0], "tokens": [10, 100, 1000]},
                "output": {"kind": "fixed", "tokens": 20},
            },
        },
    },
    "trace, dynamic": {
        "policy": {"kind": "dynamic", "max_batch_size": 8, "max_num_batched_tokens": 4096, "max_wait_s": 0.05},
        "workload": {
            "kind": "trace",
            "source": "t.csv",
            "window_s": [0.0, 100.0],
            "num_requests": 10,
            "time_scale": 2.0,
            "max_prompt_tokens": 1000,
            "max_output_tokens": 100,
            "hash_block_tokens": 16,
            "sessions_from_prefix_blocks": 2,
        },
    },
    "trace by duration, lengths only, static": {
        "policy": {"kind": "static", "max_batch_size": 8, "max_num_batched_tokens": 4096},
        "workload": {
            "kind": "trace",
            "source": "t.csv",
            "duration_s": 50.0,
            "arrival": {"kind": "piecewise", "segments": [{"duration_s": 10.0, "rate_per_s": 2.0}]},
        },
    },
    "empirical lengths, priority": {
        "policy": {"kind": "priority", "max_num_seqs": 8, "max_num_batched_tokens": 4096},
        "workload": {
            "num_requests": 10,
            "arrival": {"kind": "poisson", "rate_per_s": 2.0},
            "lengths": {"kind": "empirical", "source": "l.csv", "max_total_tokens": 4000},
        },
    },
    "continuous, a sliding-window model": {
        "model": {k: v for k, v in DEEPSEEK_LIKE.items() if not k.startswith(("kv_", "q_", "qk_", "v_", "index_"))}
        | {"sliding_window": 64, "num_sliding_layers": 2},
        "policy": {"kind": "continuous", "max_num_seqs": 8, "max_num_batched_tokens": 4096},
    },
    "sglang, a Gated DeltaNet hybrid": {
        "model": {k: v for k, v in DEEPSEEK_LIKE.items() if not k.startswith(("kv_", "q_", "qk_", "v_", "index_"))}
        | {
            "num_linear_layers": 3,
            "linear_num_key_heads": 4,
            "linear_num_value_heads": 8,
            "linear_key_head_dim": 64,
            "linear_value_head_dim": 64,
            "linear_conv_kernel_dim": 4,
            "linear_state_bytes": 2.0,
        },
        "policy": {"kind": "sglang", "max_mamba_cache_size": 6},
    },
    "no_kv_cache": {"policy": {"kind": "no_kv_cache", "max_num_seqs": 8, "max_num_batched_tokens": 4096}},
    "hf_fifo": {"policy": {"kind": "hf_fifo", "max_num_seqs": 8, "max_num_batched_tokens": 4096}},
}


def _leaves(annotation: Any):
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _leaves(get_args(annotation)[0])
    elif origin in (Union, types.UnionType, list, tuple, dict, typing.Sequence):
        for arg in get_args(annotation):
            if arg is not Ellipsis:
                yield from _leaves(arg)
    else:
        yield annotation


@cache
def numeric_fields() -> frozenset[tuple[str, str]]:
    """(model, field) of every int or float field of every model a scenario can hold."""
    stack: list[type[BaseModel]] = [ScenarioConfig]
    for registry in (policies.BATCH_POLICIES, policies.ROUTERS, COST_MODELS):
        stack += [registry.entry(name).params for name in registry if registry.entry(name).params is not None]
    seen: set[type[BaseModel]] = set()
    out: set[tuple[str, str]] = set()
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            leaves = set(_leaves(field.annotation))
            if leaves & {int, float}:
                out.add((model.__name__, name))
            stack += [t for t in leaves if isinstance(t, type) and issubclass(t, BaseModel) and t is not BaseModel]
    return frozenset(out)


def _numbers(raw: Any, value: Any, path: tuple = ()):
    """(path, number, owning model, field) of every number in the raw dump ``raw`` of ``value``."""
    while hasattr(value, "root") and isinstance(value, BaseModel):
        value = value.root
    if isinstance(raw, dict):
        for key, item in raw.items():
            child = getattr(value, key, None) if isinstance(value, BaseModel) else None
            if isinstance(item, (int, float)) and not isinstance(item, bool) and isinstance(value, BaseModel):
                yield (*path, key), item, type(value).__name__, key
            elif isinstance(item, list) and isinstance(value, BaseModel):
                for i, element in enumerate(item):
                    if isinstance(element, (int, float)) and not isinstance(element, bool):
                        yield (*path, key, i), element, type(value).__name__, key
                    else:
                        yield from _numbers(element, child[i], (*path, key, i))
            else:
                yield from _numbers(item, child, (*path, key))


@cache
def _dumped(name: str) -> tuple[dict[str, Any], list]:
    cfg = validate_scenario(SCENARIOS[name], name)
    raw = cfg.model_dump(mode="json")
    return raw, list(_numbers(raw, cfg))


def _set(data: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    out = list(data) if isinstance(data, list) else dict(data)
    out[path[0]] = _set(data[path[0]], path[1:], value)
    return out


def _cases(kind: str):
    for name in SCENARIOS:
        for path, number, _, _ in _dumped(name)[1]:
            if kind == "bool" or isinstance(number, float):
                yield pytest.param(name, path, id=f"{name}:{'.'.join(map(str, path))}")


def test_the_scenarios_reach_every_numeric_field():
    reached = {(model, field) for name in SCENARIOS for *_, model, field in _dumped(name)[1]}
    missing = sorted(numeric_fields() - reached)
    assert not missing, f"numeric fields no scenario of this test sets (add them to SCENARIOS): {missing}"


def _message(raw: dict[str, Any], source: str) -> str:
    with pytest.raises(ValueError) as info:
        validate_scenario(raw, source)
    text = str(info.value)
    assert "\n" not in text, text
    return text


def _where(path: tuple) -> str:
    return ".".join(str(p) for p in path)


@pytest.mark.parametrize(("name", "path"), list(_cases("bool")))
def test_a_boolean_is_refused_wherever_a_number_belongs(name, path):
    raw, _ = _dumped(name)
    for flag in (True, False):
        text = _message(_set(raw, path, flag), "s.yaml")
        # a parameter of a policy, router or cost model is named after its field: "s.yaml: policy: max_num_seqs: "
        where = _where(path) if path[0] not in TAGGED_FIELDS else f"{path[0]}: {_where(path[1:])}"
        assert text == f"s.yaml: {where}: Input should be a number, not a boolean (got {flag})"


@pytest.mark.parametrize(("name", "path"), list(_cases("float")))
def test_inf_and_nan_are_refused_wherever_a_float_belongs(name, path):
    raw, _ = _dumped(name)
    for number in (math.inf, -math.inf, math.nan):
        text = _message(_set(raw, path, number), "s.yaml")
        assert "finite number" in text and str(path[-1]) in text, text


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_whole_floats_and_bool_fields_validate_as_before(name):
    raw, numbers = _dumped(name)
    assert validate_scenario(raw, name).model_dump(mode="json") == raw
    for path, number, _, _ in numbers:
        if isinstance(number, int) and not isinstance(number, bool):
            assert validate_scenario(_set(raw, path, float(number)), name).model_dump(mode="json") == raw, path
