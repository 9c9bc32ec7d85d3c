"""Settings the rest of a scenario would leave unread are refused in one line naming them, not run silently.

Each case was accepted before and ran as if the setting were absent (a review of the scenario fields and the command
line found them): a group's kv_cache, parallelism, policy or cost model replaces the top-level one whole; a flag sets
the top-level value a group with its own does not read; memory settings beside kv_cache.num_blocks; a host tier
without prefix caching; a KV link without disaggregation; priorities under a policy that serves arrival order; a
profile timed on another GPU; an engine fit that replaces explicit overheads.
"""

from __future__ import annotations

import pytest

from simulator.build import build
from simulator.config.scenario import validate_scenario
from simulator.cost.profiled import ProfiledParams
from tests.simulator.config.test_bad_numbers import run_refused


def refused(scenario: dict, at_build: bool = False) -> str:
    """The one-line error the scenario is refused with (by validation, or by ``build`` with ``at_build``)."""
    with pytest.raises(ValueError) as err:
        cfg = validate_scenario(scenario)
        if at_build:
            build(cfg)
    return str(err.value)


def test_a_group_object_must_not_drop_a_top_level_field():
    message = refused(
        {
            "kv_cache": {"dtype": "fp8", "prefix_caching": True},
            "groups": [{"kv_cache": {"gpu_memory_utilization": 0.8}}],
        }
    )
    assert "groups[0].kv_cache replaces the top-level kv_cache whole" in message
    assert "kv_cache.dtype ('fp8')" in message
    message = refused({"parallelism": {"tp": 2}, "groups": [{"count": 2}, {"parallelism": {"pp": 1}}]})
    assert "groups[1].parallelism" in message and "parallelism.tp (2)" in message
    message = refused(
        {
            "policy": {"kind": "vllm", "max_num_seqs": 64},
            "groups": [{"policy": {"kind": "vllm", "max_num_batched_tokens": 4096}}],
        }
    )
    assert "groups[0].policy" in message and "policy.max_num_seqs (64)" in message
    # a group that sets the field itself means its own value; another policy kind has parameters of its own; a field
    # equal to the top level's is not lost
    cfg = validate_scenario(
        {"policy": {"kind": "vllm", "max_num_seqs": 64}, "groups": [{"policy": {"kind": "vllm", "max_num_seqs": 8}}]}
    )
    assert cfg.groups[0].policy.max_num_seqs == 8
    cfg = validate_scenario({"policy": {"kind": "vllm", "max_num_seqs": 64}, "groups": [{"policy": "sglang"}]})
    assert cfg.groups[0].policy.kind == "sglang"
    cfg = validate_scenario(
        {"kv_cache": {"dtype": "fp8"}, "groups": [{"kv_cache": {"dtype": "fp8", "block_size": 32}}]}
    )
    assert cfg.groups[0].kv_cache.dtype == "fp8"


def test_a_disaggregated_cluster_serves_one_model_and_one_kv_layout():
    message = refused({"groups": [{"role": "prefill"}, {"role": "decode", "model": "llama-2-7b"}]})
    assert "groups[1].model" in message and "serves one model" in message
    message = refused({"groups": [{"role": "prefill"}, {"role": "decode", "kv_cache": {"dtype": "fp8"}}]})
    assert "groups[1].kv_cache.dtype" in message


def test_a_kv_link_needs_prefill_and_decode_groups():
    message = refused({"kv_transfer": {"bandwidth_bytes_per_s": 1e9}})
    assert "kv_transfer:" in message and "prefill and decode" in message
    # the defaults (a full dump carries them)
    assert validate_scenario({"kv_transfer": {"layerwise_overlap": False}}).groups is None
    disagg = {"groups": [{"role": "prefill"}, {"role": "decode"}]}
    assert validate_scenario(disagg | {"kv_transfer": {"bandwidth_bytes_per_s": 1e9}}).kv_transfer.bandwidth_bytes_per_s
    # two prefill GPUs with their own links, and no link given: the first one's was used for both
    mixed = {"groups": [{"role": "prefill"}, {"role": "prefill", "hardware": "a100-80gb"}, {"role": "decode"}]}
    message = refused(mixed, at_build=True)
    assert "kv_transfer:" in message and "A100-SXM4-80GB" in message
    sim = build(validate_scenario(mixed | {"kv_transfer": {"bandwidth_bytes_per_s": 50e9, "latency_s": 1e-5}}))
    assert len(sim.replicas) == 3


def test_memory_settings_beside_num_blocks_and_a_host_tier_without_prefix_caching():
    message = refused({"kv_cache": {"num_blocks": 2000, "gpu_memory_utilization": 0.3}})
    assert "gpu_memory_utilization:" in message and "num_blocks" in message
    assert "reserve_bytes:" in refused({"kv_cache": {"num_blocks": 2000, "reserve_bytes": 5e9}})
    message = refused({"policy": "sglang", "kv_cache": {"num_blocks": 2000, "mem_fraction_static": 0.5}})
    assert "mem_fraction_static:" in message
    assert validate_scenario({"kv_cache": {"num_blocks": 2000}}).kv_cache.num_blocks == 2000
    message = refused({"kv_cache": {"host_cache_bytes": 1e10}})
    assert "host_cache_bytes:" in message and "prefix caching" in message
    cfg = validate_scenario({"kv_cache": {"host_cache_bytes": 1e10, "prefix_caching": True}})
    assert cfg.kv_cache.host_cache_bytes == 1e10


def test_priorities_need_a_policy_that_schedules_by_them():
    classes = [{"priority": 0, "weight": 1}, {"priority": 5, "weight": 1}]
    workload = {"num_requests": 20, "classes": classes}
    message = refused({"workload": workload}, at_build=True)
    assert "priorities" in message and "policy vllm" in message
    assert "policy sglang" in refused({"workload": workload, "policy": "sglang"}, at_build=True)
    assert build(validate_scenario({"workload": workload, "policy": "priority"})).stream.priority.any()
    # classes that only label requests (priority 0 throughout) run under any policy
    sim = build(validate_scenario({"workload": {"num_requests": 20, "classes": [{"weight": 1, "slo_class": "chat"}]}}))
    assert len(sim.stream) == 20


def test_an_engine_fit_replaces_the_overheads_it_holds():
    with pytest.raises(ValueError, match="time_scale: the profile's hf engine fit"):
        ProfiledParams(engine="hf", time_scale=5.0)
    with pytest.raises(ValueError, match="step_overhead_s"):
        ProfiledParams(engine="builtin", step_overhead_s=0.05)
    assert ProfiledParams(engine="hf", time_scale=1.0).time_scale == 1.0  # the default: nothing is lost
    assert ProfiledParams(time_scale=5.0).time_scale == 5.0  # no fit: the field is read


GROUPS_YAML = """
groups:
  - {role: prefill, parallelism: {tp: 1}, kv_cache: {gpu_memory_utilization: 0.9}}
  - {role: decode, parallelism: {tp: 1}, kv_cache: {gpu_memory_utilization: 0.9}}
workload: {num_requests: 5}
"""


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (("--tp", "2"), ("--tp:", "groups[0] sets its own parallelism")),
        (("--kv-cache-dtype", "fp8"), ("--kv-cache-dtype:", "groups[0] sets its own kv_cache")),
        (("--prefix-caching",), ("--prefix-caching:", "kv_cache")),
        (("--disaggregate", "2:1"), ("--disaggregate:", "already has groups")),
    ],
)
def test_a_flag_a_group_does_not_read_is_refused(tmp_path, capsys, flags, needles):
    stderr = run_refused(tmp_path, GROUPS_YAML, *flags, needles=needles, capsys=capsys)
    assert all(needle in stderr for needle in needles) and stderr.count("\n") == 1


def test_rate_flags_that_would_be_read_otherwise(tmp_path, capsys):
    sessions = "workload: {kind: sessions, num_sessions: 5}\n"
    run_refused(tmp_path, sessions, "--rate", "2", needles=("--rate:", "sessions per second"), capsys=capsys)
    from tests.simulator.config.test_bad_numbers import assert_refused, cli

    proc = cli(["compare", "--policies", "vllm", "--rate", "1", "--rates", "2", "--num-requests", "5"], capsys)
    assert_refused(proc, "--rate: not with --rates")


def test_a_profile_is_read_on_its_own_gpu_and_times_its_own_kernels(tmp_path, capsys):
    from simulator.cost.profile import save_profile
    from tests.simulator.config.test_bad_numbers import assert_refused, cli
    from tests.simulator.cost.test_profiled import make_profile

    path = save_profile(make_profile(), tmp_path / "p.json")  # timed on an H200
    run_refused(
        tmp_path, None, "--profile", path, "--hardware", "l4", needles=("measured on H200", "L4"), capsys=capsys
    )
    for flag, value in (("--framework", "sglang"), ("--version", "0.0.1")):
        proc = cli(["estimate", "--profile", path, "--decode", "8:1000", flag, value], capsys)
        assert_refused(proc, f"{flag}: a profile times its own kernels")


def test_workload_describe_of_a_scenario_refuses_the_trace_flags(tmp_path, capsys):
    from tests.simulator.config.test_bad_numbers import assert_refused, cli

    scenario = tmp_path / "s.yaml"
    scenario.write_text("workload: {num_requests: 5}\n")
    for flags in (("--format", "mooncake"), ("--hash-block-tokens", "7"), ("--skip-bad-rows",)):
        proc = cli(["workload", "describe", scenario, *flags], capsys)
        assert_refused(proc, f"{flags[0]}: {scenario} is a scenario")
    assert cli(["workload", "describe", scenario], capsys).returncode == 0


def test_an_override_a_group_does_not_read_is_refused():
    from simulator.planning.points.overrides import apply_overrides

    base = {"groups": [{"count": 1, "hardware": "h100-sxm", "parallelism": {"tp": 1}}]}
    for path, value in (("hardware", "a100-80gb"), ("parallelism.tp", 2)):
        with pytest.raises(ValueError, match=rf"^{path}: groups\[0\] sets its own"):
            apply_overrides(base, {path: value})
    assert apply_overrides(base, {"quantization": "fp8"})["quantization"] == "fp8"  # no group sets it: all read it
    assert apply_overrides(base, {"hardware": "l40s", "groups": None})["hardware"] == "l40s"  # the groups replaced


def test_a_closed_loop_has_no_more_users_than_requests():
    message = refused({"workload": {"kind": "closed_loop", "concurrency": 80, "num_requests": 40}})
    assert "workload.concurrency" in message and "80 users for 40 requests" in message
    cfg = validate_scenario({"workload": {"kind": "closed_loop", "concurrency": 40, "num_requests": 40}})
    assert cfg.workload.concurrency == 40


PLAN_YAML = "workload: {num_requests: 50, arrival: {kind: poisson, rate_per_s: 2}}\nslo: {ttft_ms: 2000}\n"


@pytest.mark.parametrize(
    ("scenario", "flags", "needle"),
    [
        ("groups: [{count: 2, hardware: l40s}]\n", ("--gpus", "2"), "--gpus lays the N GPUs out itself"),
        ("policy: {kind: vllm, long_prefill_token_threshold: 16}\n", ("--gpus", "2"), "policy.long_prefill_token"),
        ("", ("--gpus", "2", "--attainment", "0.5"), "--attainment: not with --gpus"),
        ("", ("--gpus", "2", "--pareto-latency", "e2el"), "--pareto-latency: not with --gpus"),
        ("", ("--target-rate", "2", "--confidence", "0.5"), "--confidence: intervals need --replicates 2"),
        ("", ("--target-rate", "2", "--requests-per-point", "50", "--price", "h100=1"), "no candidate runs on h100"),
    ],
)
def test_plan_flags_a_question_does_not_read_are_refused(tmp_path, capsys, scenario, flags, needle):
    from tests.simulator.config.test_bad_numbers import assert_refused, cli

    path = tmp_path / "s.yaml"
    path.write_text(PLAN_YAML + scenario)
    out = tmp_path / "out"
    proc = cli(["plan", path, *flags, "--out", out, "--no-report", "--quiet"], capsys)
    assert_refused(proc, needle, out=out)


def test_compare_refuses_policies_a_group_does_not_read(tmp_path, capsys):
    from tests.simulator.config.test_bad_numbers import assert_refused, cli

    path = tmp_path / "g.yaml"
    path.write_text("groups: [{count: 1, policy: {kind: vllm, max_num_seqs: 64}}]\nworkload: {num_requests: 5}\n")
    out = tmp_path / "out"
    proc = cli(["compare", path, "--policies", "static,vllm", "--out", out, "--no-report", "--quiet"], capsys)
    assert_refused(proc, "groups[0] sets its own policy", out=out)


def test_policy_parameters_another_one_makes_unread():
    message = refused({"policy": {"kind": "priority", "aging_s": 30}})
    assert "aging_s" in message and "mode aging" in message
    assert validate_scenario({"policy": {"kind": "priority", "mode": "aging", "aging_s": 30}}).policy.aging_s == 30
    message = refused({"policy": {"kind": "vllm", "enforce_eager": True, "max_cudagraph_capture_size": 64}})
    assert "max_cudagraph_capture_size" in message and "enforce_eager" in message
    cfg = validate_scenario({"policy": {"kind": "vllm", "max_cudagraph_capture_size": 64}})
    assert cfg.policy.max_cudagraph_capture_size == 64
