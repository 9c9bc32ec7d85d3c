"""Sliding-window layers' KV held per window, as vLLM V1's hybrid KV cache manager holds it (simulator/kv/window.py)."""

import pytest

from simulator.build import build, setup_group, windowed_kv
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.config.schema import KvCacheConfig
from simulator.kv.memory import plan_memory
from simulator.kv.window import SlidingWindowBlocks, WindowedBlockManager
from simulator.request import Request
from tests.simulator.engine.test_fast_forward import assert_same_run

# gpt-oss-120b on 2 GPUs in bf16: 18 sliding layers (window 128) and 18 full ones, 4 KV heads of 64 a GPU
GPT_OSS_LAYER_BYTES = 2 * 4 * 64 * 2  # keys and values of one token, one layer, per GPU
GPT_OSS = SlidingWindowBlocks(128, 16, 18 * GPT_OSS_LAYER_BYTES, 18 * GPT_OSS_LAYER_BYTES)

SLIDING_MODEL = {
    "name": "sliding-4L",
    "num_layers": 4,
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "num_kv_heads": 4,
    "head_dim": 64,
    "intermediate_size": 2048,
    "vocab_size": 32000,
    "weight_bytes": 2.0,
    "kv_cache_bytes": 2.0,
    "max_context_tokens": 8192,
    "sliding_window": 64,
    "num_sliding_layers": 2,
}


def test_window_blocks_follow_vllm_sliding_window_manager():
    # decode: the newest 128 tokens span ceil(128 / 16) + 1 blocks at most (SlidingWindowManager frees the rest)
    assert GPT_OSS.per_seq == 9
    # a first chunk holds its own span (nothing computed before it to skip): 8192 tokens, 512 blocks
    assert GPT_OSS.during(0, 8192) == 512
    # a later chunk holds the window before it and the chunk, at most ceil((127 + 2048) / 16) + 1 blocks (vLLM:
    # ceil(6144 / 16) - floor((4096 - 127) / 16) = 136 here, 137 where the window starts later in its block)
    assert GPT_OSS.during(4096, 2048) == 136 + 1
    # never below the decode bound, which a request keeps between steps
    assert GPT_OSS.during(0, 50) == GPT_OSS.per_seq
    # sliding layers five times as wide as the pool's blocks take five times the pool blocks (Gemma 3: 5 to 1)
    assert SlidingWindowBlocks(128, 16, 5, 1).per_seq == 45


def _request(prompt, output, rid=0):
    return Request(request_id=rid, arrival_s=0.0, num_prompt_tokens=prompt, num_output_tokens=output)


def test_a_prompt_chunk_holds_its_span_until_its_step_ends():
    kv = WindowedBlockManager(2000, 16, GPT_OSS)
    req = _request(1000, 10)
    assert kv.num_new_blocks(req, 1000) == 63 + 63  # 1,000 tokens of full layers, their span of sliding ones
    kv.allocate_step([(req, 1000)])
    assert kv.num_used_blocks == 126
    req.num_computed_tokens = 1000
    kv.end_step()  # the step ended: the chunk's sliding blocks outside the window go back
    assert kv.num_used_blocks == 63 + 9
    kv.check([req], [])
    assert kv.num_new_blocks(req, 1001) == 0  # a decode step: the 63rd full block has room, the window is held
    assert kv.num_freeable_blocks(req) == 72
    assert kv.free(req) == 72
    assert kv.num_free_blocks == 2000
    kv.check([], [])


def test_blocks_for_charges_the_span_of_a_longest_chunk():
    # without a budget a sequence's one chunk may be all of it: its blocks and their span
    assert WindowedBlockManager(2000, 16, GPT_OSS).blocks_for(1000) == 63 + 63
    # chunks of at most 256 tokens span at most ceil((127 + 256) / 16) + 1 blocks, as vLLM's start-up check charges
    # min(window - 1 + max_num_batched_tokens, max_model_len) (SlidingWindowSpec.max_memory_usage_bytes)
    assert WindowedBlockManager(2000, 16, GPT_OSS, max_chunk_tokens=256).blocks_for(1000) == 63 + 25
    assert GPT_OSS.most_blocks(100, 256) == 7 + GPT_OSS.per_seq  # a short sequence: its decode window


def test_a_recompute_chunk_holds_its_span_too():
    # preempted by recompute after 400 outputs: its prompt and outputs are computed again in chunks, each holding
    # its span of sliding blocks as a prompt chunk does
    kv = WindowedBlockManager(2000, 16, GPT_OSS)
    req = _request(100, 500)
    req.num_generated_tokens = 400
    req.num_computed_tokens = 256
    kv.allocate(req, 256)
    kv.end_step()
    assert kv.num_new_blocks(req, 500) == (32 - 16) + (GPT_OSS.during(256, 244) - GPT_OSS.per_seq)


@pytest.mark.parametrize(
    ("policy", "prefix_caching", "role", "windowed"),
    [
        ("vllm", False, "mixed", True),
        ("vllm", True, "mixed", False),  # a prefix cache over sliding groups is not modelled: every layer counts
        ("vllm", False, "decode", False),  # a KV transfer sends every layer's keys
        ("vllm_v0", False, "mixed", False),
        ("sglang", False, "mixed", False),  # SGLang's separate window pool is not modelled
        ("trtllm", False, "mixed", False),  # TensorRT-LLM 1.0-1.2 windows only with max_attention_window set
    ],
)
def test_only_vllm_v1_holds_sliding_layers_per_window(policy, prefix_caching, role, windowed):
    model = resolve_model("openai/gpt-oss-120b")
    assert windowed_kv(policy, model, KvCacheConfig(prefix_caching=prefix_caching), role) is windowed
    dense = resolve_model("llama-3.1-8b")
    assert not windowed_kv(policy, dense, KvCacheConfig(prefix_caching=prefix_caching), role)


def test_vllm_blocks_for_gpt_oss_are_its_full_groups_pages():
    # vLLM's get_num_blocks: memory / page bytes / group size, a page one layer's 16 tokens, a group 18 layers
    model, h100 = resolve_model("openai/gpt-oss-120b"), resolve_hardware("h100-sxm")
    whole = plan_memory(model, h100, 2, 16, 0.9, None, 1, max_seqs=512)
    windowed = plan_memory(model, h100, 2, 16, 0.9, None, 1, max_seqs=512, windowed=True)
    page = 16 * GPT_OSS_LAYER_BYTES
    assert windowed.block_bytes == 18 * page
    assert windowed.num_blocks == int(windowed.kv_bytes // (18 * page))
    assert whole.block_bytes == 36 * page and whole.kv_bytes == windowed.kv_bytes


def test_setup_of_a_vllm_group_with_sliding_layers_is_windowed():
    cfg = validate_scenario({"model": "openai/gpt-oss-120b", "hardware": "h100-sxm", "parallelism": {"tp": 2}})
    setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert setup.windowed
    sglang = validate_scenario(
        {"model": "openai/gpt-oss-120b", "hardware": "h100-sxm", "parallelism": {"tp": 2}, "policy": "sglang"}
    )
    assert not setup_group(sglang, sglang.replica_groups()[0], 0, None).windowed


def _windowed_scenario(num_blocks, num_requests=120, **workload):
    return validate_scenario(
        {
            "model": SLIDING_MODEL,
            "policy": {"kind": "vllm", "max_num_seqs": 32, "max_num_batched_tokens": 1024},
            "kv_cache": {"num_blocks": num_blocks},
            "workload": {
                "num_requests": num_requests,
                "arrival": {"kind": "poisson", "rate_per_s": 40.0},
                "lengths": {
                    "kind": "independent",
                    "prompt": {"kind": "uniform", "min_tokens": 20, "max_tokens": 1500},
                    "output": {"kind": "uniform", "min_tokens": 1, "max_tokens": 300},
                },
            }
            | workload,
        }
    )


def test_windowed_pool_under_pressure_conserves_requests_and_blocks():
    cfg = _windowed_scenario(400)
    result = build(cfg, check_invariants=True).run()  # the pool and executor invariants checked after every step
    assert result.summary["preemptions"] > 0
    assert result.summary["max_kv_usage"] <= 1.0
    assert result.summary["completed"] + result.summary["rejected"] == 120
    finished = result.requests[result.requests["status"] == "finished"]
    assert (finished["num_generated_tokens"] == finished["num_output_tokens"]).all()


def test_fast_path_equals_plain_path_with_window_blocks():
    plain, _ = assert_same_run(_windowed_scenario(400))
    assert plain.summary["preemptions"] > 0
    assert_same_run(_windowed_scenario(100_000, num_requests=200))


def test_a_request_whose_prompt_chunk_cannot_fit_is_refused_not_left_waiting():
    # 60 blocks: a prompt of 600-700 tokens with a few outputs fits as a decoding sequence (at most 45 full blocks
    # and a window of 5) but not while its one chunk is computed (45 full blocks and the chunk's 44 sliding ones)
    cfg = _windowed_scenario(
        60,
        num_requests=30,
        lengths={
            "kind": "independent",
            "prompt": {"kind": "uniform", "min_tokens": 600, "max_tokens": 700},
            "output": {"kind": "uniform", "min_tokens": 1, "max_tokens": 5},
        },
    )
    result = build(cfg, check_invariants=True).run()
    assert (result.requests["status"] == "rejected").all()
    assert result.requests["reject_reason"].str.contains("KV blocks").all()


def test_pipeline_stages_hold_their_share_of_the_sliding_layers():
    # 1 sliding layer of 4 over 2 stages: the fullest stage holds ceil(1 / 2) sliding and ceil(3 / 2) full layers
    model = SLIDING_MODEL | {"num_sliding_layers": 1}
    base = _windowed_scenario(400, num_requests=60).model_dump(exclude_none=True)
    cfg = validate_scenario(base | {"model": model, "parallelism": {"pp": 2}})
    setup = setup_group(cfg, cfg.replica_groups()[0], 0, None)
    assert setup.windowed
    result = build(cfg, check_invariants=True).run()
    assert result.summary["completed"] + result.summary["rejected"] == 60
    assert_same_run(cfg)
