"""What the recipes of InferenceX's SGLang disaggregated points set on their servers that the file does not record.

InferenceX launched its SGLang disaggregated DeepSeek points from srt-slurm recipes whose prefill and decode servers
set their own scheduler limits and memory: a GB200 FP8 8k/1k ``mid-curve`` prefill server takes
``chunked-prefill-size`` 131072 (16384 tokens a step on each of its 8 attention-DP ranks) where SGLang's default
on GB200 is 16384 for the server (2048 a rank), and its decode server ``max-running-requests`` 8192. The file
records none of them. ``SGLANG_SERVERS`` maps a point's id to ``{role: {"policy": ..., "kv_cache": ...}}`` (its
recipe's, ``SGLANG_RECIPE_OF``; each recipe read once in ``SGLANG_RECIPES``, by the repository, commit and path
read: InferenceX's copies under ``benchmarks/multi_node/srt-slurm-recipes/``, NVIDIA/srt-slurm's under
``recipies/``): the
``chunked_prefill_size``, ``max_prefill_tokens`` and ``max_running_requests`` of the sglang policy and the
``mem_fraction_static`` of the KV cache that the recipe gives each role's servers (the server's values: servesim
divides the chunk and the requests by the attention-DP size as SGLang does).

Derived by ``python -m benchmarks.inferencex_sglang_disagg_derive`` from the recipe nvidia-master.yaml names for the
point's load on the day it was measured, as InferenceX keeps it under ``benchmarks/multi_node/srt-slurm-recipes/``
(copies tracked from 2026-04-28, after the points of February and March were measured: the recipes may have
changed in between, which InferenceX did not record): 56 points. The GB200 points measured before their precision
moved to srtctl (FP4 2026-02-07, FP8 2026-02-09: ``inferencex_points.DYNAMO_CLIENTS``) ran
Dynamo's SGLang ``slurm_jobs`` scripts, which name no recipe: they take NVIDIA/srt-slurm's recipe of the day whose
worker counts, GPUs a worker and concurrency list are the point's (``recipies/gb200-{fp4,fp8}/{1k1k,8k1k}/``, the
scripts' flags as NVIDIA published them on 2025-12-20): 17 points. Left out, their servers keep the generic
settings: those two entries of the day share, and the earlier points no recipe's layout and concurrency matches.
"""

SGLANG_RECIPES: dict[str, dict[str, dict[str, dict[str, float]]]] = {
    "InferenceX@80d98084f:b200-fp8/8k1k_stp_lowlat_1.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 8192, "max_running_requests": 8},
            "kv_cache": {"mem_fraction_static": 0.6},
        },
        "decode": {"policy": {"max_running_requests": 32}, "kv_cache": {"mem_fraction_static": 0.75}},
    },
    "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_0.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 8192, "max_running_requests": 8},
            "kv_cache": {"mem_fraction_static": 0.6},
        },
        "decode": {"policy": {"max_running_requests": 128}, "kv_cache": {"mem_fraction_static": 0.75}},
    },
    "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_1.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 8192, "max_running_requests": 8},
            "kv_cache": {"mem_fraction_static": 0.6},
        },
        "decode": {"policy": {"max_running_requests": 256}, "kv_cache": {"mem_fraction_static": 0.75}},
    },
    "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_2.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 8192, "max_running_requests": 8},
            "kv_cache": {"mem_fraction_static": 0.6},
        },
        "decode": {"policy": {"max_running_requests": 512}, "kv_cache": {"mem_fraction_static": 0.75}},
    },
    "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_3.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 8192, "max_running_requests": 8},
            "kv_cache": {"mem_fraction_static": 0.6},
        },
        "decode": {"policy": {"max_running_requests": 1024}, "kv_cache": {"mem_fraction_static": 0.75}},
    },
    "InferenceX@80d98084f:gb200-fp4/1k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {"policy": {"chunked_prefill_size": 8192}, "kv_cache": {"mem_fraction_static": 0.95}},
    },
    "InferenceX@80d98084f:gb200-fp4/1k1k/mid-curve.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 32768, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.84},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 786432, "max_running_requests": 67584},
            "kv_cache": {"mem_fraction_static": 0.83},
        },
    },
    "InferenceX@80d98084f:gb200-fp4/8k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {"policy": {"chunked_prefill_size": 8192}, "kv_cache": {"mem_fraction_static": 0.95}},
    },
    "InferenceX@80d98084f:gb200-fp4/8k1k/max-tpt.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_prefill_tokens": 524288, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 16384},
            "kv_cache": {"mem_fraction_static": 0.83},
        },
    },
    "InferenceX@80d98084f:gb200-fp8/1k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 128},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
    },
    "InferenceX@80d98084f:gb200-fp8/1k1k/max-tpt.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 45000},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "InferenceX@80d98084f:gb200-fp8/1k1k/ultra-tpt.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 8192},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 5120},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "InferenceX@80d98084f:gb200-fp8/8k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.8},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.8},
        },
    },
    "InferenceX@80d98084f:gb200-fp8/8k1k/mid-curve.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.8},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 8192},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "InferenceX@80d98084f:gb300-fp4/1k1k/low_latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {"policy": {"chunked_prefill_size": 8192}, "kv_cache": {"mem_fraction_static": 0.95}},
    },
    "InferenceX@80d98084f:gb300-fp4/8k1k/low_latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {"policy": {"chunked_prefill_size": 8192}, "kv_cache": {"mem_fraction_static": 0.95}},
    },
    "InferenceX@80d98084f:gb300-fp4/8k1k/max_tpt.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_prefill_tokens": 524288, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 16384},
            "kv_cache": {"mem_fraction_static": 0.83},
        },
    },
    "InferenceX@80d98084f:gb300-fp8/1k1k/stp/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 8192, "max_prefill_tokens": 8192, "max_running_requests": 128},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": -1, "max_running_requests": 128},
            "kv_cache": {"mem_fraction_static": 0.85},
        },
    },
    "InferenceX@80d98084f:gb300-fp8/1k1k/stp/max.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 45000},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "InferenceX@80d98084f:gb300-fp8/1k1k/stp/mid.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 45000},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "InferenceX@80d98084f:gb300-fp8/8k1k/stp/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 32768, "max_prefill_tokens": 32768, "max_running_requests": 128},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": -1, "max_running_requests": 128},
            "kv_cache": {"mem_fraction_static": 0.85},
        },
    },
    "InferenceX@80d98084f:gb300-fp8/8k1k/stp/mid.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 45000},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "InferenceX@80d98084f:h200/8k1k/bs128-1p1d-dep.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 163840, "max_prefill_tokens": 163840, "max_running_requests": 16},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {"policy": {"max_running_requests": 256}, "kv_cache": {"mem_fraction_static": 0.88}},
    },
    "srt-slurm@0fff67b0:gb200-fp4/1k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {"policy": {"chunked_prefill_size": 8192}, "kv_cache": {"mem_fraction_static": 0.95}},
    },
    "srt-slurm@0fff67b0:gb200-fp4/1k1k/mid-curve.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 65536, "max_prefill_tokens": 32768, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.84},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 786432, "max_running_requests": 67584},
            "kv_cache": {"mem_fraction_static": 0.83},
        },
    },
    "srt-slurm@1f19bece:gb200-fp4/8k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {"policy": {"chunked_prefill_size": 8192}, "kv_cache": {"mem_fraction_static": 0.95}},
    },
    "srt-slurm@1f19bece:gb200-fp4/8k1k/max-tpt.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_prefill_tokens": 524288, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 24576, "max_running_requests": 16384},
            "kv_cache": {"mem_fraction_static": 0.83},
        },
    },
    "srt-slurm@4f942835:gb200-fp8/1k1k/low-latency.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 8192, "max_running_requests": 512},
            "kv_cache": {"mem_fraction_static": 0.95},
        },
    },
    "srt-slurm@4f942835:gb200-fp8/1k1k/max-tpt-2p1d.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.75},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 45000},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
    "srt-slurm@b88a9e95:gb200-fp8/8k1k/mid-curve-5p1d.yaml": {
        "prefill": {
            "policy": {"chunked_prefill_size": 131072, "max_running_requests": 30000},
            "kv_cache": {"mem_fraction_static": 0.8},
        },
        "decode": {
            "policy": {"chunked_prefill_size": 36864, "max_running_requests": 8192},
            "kv_cache": {"mem_fraction_static": 0.82},
        },
    },
}

SGLANG_RECIPE_OF: dict[str, str] = {
    "dsr1_b200_sglang_fp8_disagg_8192x1024_c1024_cfg655": "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_3.yaml",
    "dsr1_b200_sglang_fp8_disagg_8192x1024_c128_cfg639": "InferenceX@80d98084f:b200-fp8/8k1k_stp_lowlat_1.yaml",
    "dsr1_b200_sglang_fp8_disagg_8192x1024_c160_cfg641": "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_1.yaml",
    "dsr1_b200_sglang_fp8_disagg_8192x1024_c288_cfg641": "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_1.yaml",
    "dsr1_b200_sglang_fp8_disagg_8192x1024_c288_cfg649": "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_0.yaml",
    "dsr1_b200_sglang_fp8_disagg_8192x1024_c512_cfg654": "InferenceX@80d98084f:b200-fp8/8k1k_stp_maxtpt_2.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c12000_cfg259": "srt-slurm@0fff67b0:gb200-fp4/1k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c32_cfg252": "srt-slurm@0fff67b0:gb200-fp4/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c32_cfg486": "InferenceX@80d98084f:gb200-fp4/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c4_cfg486": "InferenceX@80d98084f:gb200-fp4/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c512_cfg483": "InferenceX@80d98084f:gb200-fp4/1k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c64_cfg252": "srt-slurm@0fff67b0:gb200-fp4/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c8192_cfg259": "srt-slurm@0fff67b0:gb200-fp4/1k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c8192_cfg483": "InferenceX@80d98084f:gb200-fp4/1k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c8_cfg252": "srt-slurm@0fff67b0:gb200-fp4/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_1024x1024_c8_cfg486": "InferenceX@80d98084f:gb200-fp4/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c1024_cfg254": "srt-slurm@1f19bece:gb200-fp4/8k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c2048_cfg254": "srt-slurm@1f19bece:gb200-fp4/8k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c2048_cfg489": "InferenceX@80d98084f:gb200-fp4/8k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c32_cfg255": "srt-slurm@1f19bece:gb200-fp4/8k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c4_cfg481": "InferenceX@80d98084f:gb200-fp4/8k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c64_cfg255": "srt-slurm@1f19bece:gb200-fp4/8k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c8192_cfg254": "srt-slurm@1f19bece:gb200-fp4/8k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp4_disagg_8192x1024_c8_cfg481": "InferenceX@80d98084f:gb200-fp4/8k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c1024_cfg523": "InferenceX@80d98084f:gb200-fp8/1k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c128_cfg227": "srt-slurm@4f942835:gb200-fp8/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c2048_cfg523": "InferenceX@80d98084f:gb200-fp8/1k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c4096_cfg236": "srt-slurm@4f942835:gb200-fp8/1k1k/max-tpt-2p1d.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c4096_cfg508": "InferenceX@80d98084f:gb200-fp8/1k1k/ultra-tpt.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c4096_cfg523": "InferenceX@80d98084f:gb200-fp8/1k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c4_cfg502": "InferenceX@80d98084f:gb200-fp8/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c6144_cfg523": "InferenceX@80d98084f:gb200-fp8/1k1k/max-tpt.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c64_cfg227": "srt-slurm@4f942835:gb200-fp8/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_1024x1024_c8_cfg502": "InferenceX@80d98084f:gb200-fp8/1k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c1024_cfg253": "srt-slurm@b88a9e95:gb200-fp8/8k1k/mid-curve-5p1d.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c1024_cfg533": "InferenceX@80d98084f:gb200-fp8/8k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c16_cfg536": "InferenceX@80d98084f:gb200-fp8/8k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c2048_cfg253": "srt-slurm@b88a9e95:gb200-fp8/8k1k/mid-curve-5p1d.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c2048_cfg533": "InferenceX@80d98084f:gb200-fp8/8k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c4_cfg536": "InferenceX@80d98084f:gb200-fp8/8k1k/low-latency.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c512_cfg253": "srt-slurm@b88a9e95:gb200-fp8/8k1k/mid-curve-5p1d.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c512_cfg533": "InferenceX@80d98084f:gb200-fp8/8k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c6144_cfg253": "srt-slurm@b88a9e95:gb200-fp8/8k1k/mid-curve-5p1d.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c6144_cfg533": "InferenceX@80d98084f:gb200-fp8/8k1k/mid-curve.yaml",
    "dsr1_gb200_sglang_fp8_disagg_8192x1024_c8_cfg536": "InferenceX@80d98084f:gb200-fp8/8k1k/low-latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_1024x1024_c32_cfg571": "InferenceX@80d98084f:gb300-fp4/1k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_1024x1024_c4_cfg571": "InferenceX@80d98084f:gb300-fp4/1k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_1024x1024_c8_cfg571": "InferenceX@80d98084f:gb300-fp4/1k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_8192x1024_c2048_cfg575": "InferenceX@80d98084f:gb300-fp4/8k1k/max_tpt.yaml",
    "dsr1_gb300_sglang_fp4_disagg_8192x1024_c32_cfg569": "InferenceX@80d98084f:gb300-fp4/8k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_8192x1024_c4_cfg569": "InferenceX@80d98084f:gb300-fp4/8k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_8192x1024_c64_cfg569": "InferenceX@80d98084f:gb300-fp4/8k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp4_disagg_8192x1024_c8_cfg569": "InferenceX@80d98084f:gb300-fp4/8k1k/low_latency.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c1024_cfg528": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c16_cfg517": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/low-latency.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c2048_cfg528": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c32_cfg517": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/low-latency.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c4096_cfg526": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/max.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c4096_cfg528": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c4_cfg517": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/low-latency.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c6144_cfg528": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c7168_cfg526": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/max.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c7680_cfg526": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/max.yaml",
    "dsr1_gb300_sglang_fp8_disagg_1024x1024_c8_cfg517": "InferenceX@80d98084f:gb300-fp8/1k1k/stp/low-latency.yaml",
    "dsr1_gb300_sglang_fp8_disagg_8192x1024_c1024_cfg505": "InferenceX@80d98084f:gb300-fp8/8k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_8192x1024_c128_cfg505": "InferenceX@80d98084f:gb300-fp8/8k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_8192x1024_c256_cfg505": "InferenceX@80d98084f:gb300-fp8/8k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_8192x1024_c4_cfg519": "InferenceX@80d98084f:gb300-fp8/8k1k/stp/low-latency.yaml",
    "dsr1_gb300_sglang_fp8_disagg_8192x1024_c512_cfg505": "InferenceX@80d98084f:gb300-fp8/8k1k/stp/mid.yaml",
    "dsr1_gb300_sglang_fp8_disagg_8192x1024_c8_cfg519": "InferenceX@80d98084f:gb300-fp8/8k1k/stp/low-latency.yaml",
    "dsr1_h200_sglang_fp8_disagg_8192x1024_c128_cfg434": "InferenceX@80d98084f:h200/8k1k/bs128-1p1d-dep.yaml",
    "dsr1_h200_sglang_fp8_disagg_8192x1024_c256_cfg434": "InferenceX@80d98084f:h200/8k1k/bs128-1p1d-dep.yaml",
    "dsr1_h200_sglang_fp8_disagg_8192x1024_c64_cfg434": "InferenceX@80d98084f:h200/8k1k/bs128-1p1d-dep.yaml",
}

SGLANG_SERVERS = {point: SGLANG_RECIPES[recipe] for point, recipe in SGLANG_RECIPE_OF.items()}
