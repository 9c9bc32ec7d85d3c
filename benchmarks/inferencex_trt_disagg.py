"""What the recipes of InferenceX's TensorRT-LLM disaggregated points set that the file does not record: the
generation servers' ``max_batch_size``, each server's MoE backend, scheduler limits and KV memory, and the context
servers' overlap scheduler.

TensorRT-LLM's generation server seats a request (``max_batch_size`` at most, running or receiving) before its
KV is sent, so a point whose clients outnumber its servers' seats measures the wait for a seat as TTFT
(``policies/batching/trtllm.py``, ``decode_seats``). The file of measured points does not record the seats: its
``decode_batch_size`` is the concurrency over the generation servers. InferenceX's recipes often give fewer seats
than clients: on H100 three servers of ``max_batch_size`` 1 served 6 users (``ctx1_gen3_tep16_batch1_eplb0_mtp0``),
and the point measured 12.3 s of TTFT, the 12.9 s a request takes to decode.

``DECODE_SEATS`` maps a point's id to ``backend.trtllm_config.decode.max_batch_size`` of the srt-slurm recipe
InferenceX's ``.github/configs/nvidia-master.yaml`` names for its load on the day it was measured (NVIDIA/srt-slurm
75f6e32a, 94903bdb and 5063eb43 hold the recipes read; the recipe's file name's ``batchN`` where srt-slurm does not
hold the path). ``MOE_KERNELS`` maps it to the kernel family of its (context, generation) servers'
``moe_config.backend`` (TRTLLM: trtllm_gen, CUTLASS: cutlass, DEEPGEMM: deepgemm; None for CUTEDSL, WIDEEP or none
set, where servesim keeps the fastest kernel measured), read by ``SiliconParams.moe_kernel`` from any engine's
measurement of that family: Kimi-K2.5's generation servers run TRTLLM, whose kernels aiconfigurator measured for
its 384 experts under SGLang (flashinfer_trtllm, 19 us a layer at one token on 8 GB200 GPUs) and not under
TensorRT-LLM, which it measured with CUTLASS (40 us).

``TRT_SERVERS`` maps it to the rest of the recipe's server settings (``TrtServers``): the context servers'
``max_batch_size``, each server's ``max_num_tokens``, ``enable_chunked_prefill`` and
``kv_cache_config.free_gpu_memory_fraction``, and whether its overlap scheduler runs (every context server of these
recipes sets ``disable_overlap_scheduler: true``: servesim's ``cpu_overlap: false`` for that group's cost model).

``ALL_TO_ALL`` maps it to the all-to-all its (context, generation) servers' MoE runs (the derive's ``all_to_all``):
the method their environment forces (``ENABLE_CONFIGURABLE_MOE: "1"`` with ``TRTLLM_FORCE_COMM_METHOD:
NVLINK_TWO_SIDED``: every GB200 and GB300 FP8 generation server's), or, for a CUTEDSL server in TensorRT-LLM 1.2.0rc6's
image, ConfigurableMoE's first choice, NVLinkOneSided; servesim's ``expert_all_to_all`` with that
``all_to_all_kernel`` where the server runs attention DP with the experts' TP 1 (simulator/cost/silicon/nvlink_a2a.py);
the others keep the all-gather and reduce-scatter.

``EXPERT_SLOTS`` maps it to the slots of its (context, generation) servers' expert load balancer
(``moe_config.load_balancer.num_slots``, with ``layer_updates_per_iter: 1``: TensorRT-LLM's online EPLB, which copies
the hottest experts into the slots beyond the 256 and places the slots over the ranks by the load it counts);
servesim's ``eplb_slots``, the MoE layer read from aiconfigurator's measurement of TensorRT-LLM's wide-EP MoE under
that balancer at those slots.

Derived by ``python -m benchmarks.inferencex_trt_disagg_derive``: 116 points with seats, 116 with a kernel, 116 with
server settings, 31 with an all-to-all, 5 with a load balancer.
Left out, their servers keep the generic ``max_batch_size`` of the concurrency and the fastest kernel: the GB200 FP4
configurations of 2025 (launched without a recipe file) and the H200 ones whose loads (concurrency and worker
counts) no entry of the day's dsr1-fp8-h200-dynamo-trt lists.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class TrtServers(NamedTuple):
    """A point's context (prefill) and generation (decode) servers as its recipe launched them (None: not set, the
    trtllm policy's default; ``*_overlap``: the overlap scheduler runs, ``disable_overlap_scheduler`` unset)."""

    prefill_max_batch_size: int | None
    prefill_max_num_tokens: int | None
    prefill_chunked: bool | None
    prefill_free_fraction: float | None
    prefill_overlap: bool
    decode_max_num_tokens: int | None
    decode_free_fraction: float | None
    decode_overlap: bool

    def role(self, role: str) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """The ``role`` server's trtllm policy fields and kv_cache fields (those the recipe sets), and whether its
        overlap scheduler runs."""
        if role == "prefill":
            policy = {
                "max_batch_size": self.prefill_max_batch_size,
                "max_num_tokens": self.prefill_max_num_tokens,
                "enable_chunked_prefill": self.prefill_chunked,
            }
            fraction, overlap = self.prefill_free_fraction, self.prefill_overlap
        else:
            policy = {"max_num_tokens": self.decode_max_num_tokens}
            fraction, overlap = self.decode_free_fraction, self.decode_overlap
        kv_cache = {"free_gpu_memory_fraction": fraction}
        return _set(policy), _set(kv_cache), overlap


def _set(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


DECODE_SEATS: dict[str, int] = {
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c10_cfg320": 32,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c15_cfg320": 32,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c180_cfg320": 32,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c2192_cfg346": 128,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c25_cfg320": 32,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c4096_cfg309": 512,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c450_cfg335": 64,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c45_cfg320": 32,
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c90_cfg320": 32,
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c100_cfg320": 16,
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c10_cfg320": 16,
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c15_cfg320": 16,
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c25_cfg320": 16,
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c370_cfg315": 64,
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c50_cfg320": 16,
    "dsr1_b200_trtllm_fp8_disagg_1024x1024_c1920_cfg564": 48,
    "dsr1_b200_trtllm_fp8_disagg_1024x1024_c4096_cfg549": 512,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg549": 128,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg553": 32,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg566": 64,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg661": 32,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg666": 128,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg670": 64,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c1_cfg556": 1,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c1_cfg662": 1,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c256_cfg549": 256,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c256_cfg666": 256,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c32_cfg553": 32,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c32_cfg661": 8,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c640_cfg555": 640,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c640_cfg667": 640,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c96_cfg554": 16,
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c96_cfg669": 16,
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c12_cfg388": 32,
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg388": 32,
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c24_cfg388": 32,
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c48_cfg388": 32,
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c6144_cfg411": 768,
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c96_cfg388": 32,
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c135_cfg374": 8,
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c2048_cfg239": 64,
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c4096_cfg239": 128,
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c60_cfg374": 4,
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c8192_cfg239": 256,
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c12_cfg388": 16,
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c4096_cfg362": 256,
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c44_cfg388": 16,
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c76_cfg388": 16,
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c256_cfg375": 8,
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c27_cfg386": 8,
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c3_cfg386": 1,
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c6144_cfg416": 768,
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375": 64,
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c36_cfg378": 8,
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c4_cfg378": 1,
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c8192_cfg435": 256,
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c18_cfg386": 4,
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c63_cfg386": 16,
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c6_cfg386": 1,
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c12_cfg417": 32,
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c192_cfg417": 32,
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c48_cfg417": 32,
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c8192_cfg387": 1024,
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c96_cfg417": 32,
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c1024_cfg373": 32,
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c245_cfg404": 32,
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c4096_cfg373": 128,
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c60_cfg421": 4,
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c7_cfg404": 1,
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c8192_cfg373": 256,
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c12_cfg417": 2,
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c15_cfg437": 4,
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c30_cfg437": 4,
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c3228_cfg412": 256,
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c5_cfg437": 4,
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c72_cfg385": 16,
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c12288_cfg418": 768,
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c24_cfg392": 4,
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c4_cfg392": 1,
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c84_cfg392": 16,
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c1024_cfg462": 32,
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c36_cfg392": 8,
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4096_cfg488": 128,
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4_cfg392": 1,
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c8192_cfg488": 256,
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c24_cfg392": 4,
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c36_cfg392": 8,
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c4_cfg392": 1,
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c512_cfg436": 16,
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c30_cfg494": 8,
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c60_cfg494": 16,
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494": 1,
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c9_cfg494": 2,
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c154_cfg503": 64,
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c30_cfg494": 8,
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c6_cfg494": 1,
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c9_cfg494": 2,
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c128_cfg291": 256,
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c128_cfg675": 256,
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c512_cfg334": 512,
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c512_cfg673": 512,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c15_cfg763": 8,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg759": 128,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c30_cfg763": 8,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c360_cfg759": 128,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759": 128,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c55_cfg763": 8,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c5_cfg763": 8,
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c668_cfg759": 128,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c105_cfg763": 16,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c156_cfg760": 32,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c15_cfg763": 16,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c30_cfg763": 16,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c4_cfg759": 1,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c5_cfg763": 16,
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c60_cfg763": 16,
}

MOE_KERNELS: dict[str, tuple[str | None, str | None]] = {
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c10_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c15_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c180_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c2192_cfg346": ("trtllm_gen", "cutlass"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c25_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c4096_cfg309": ("trtllm_gen", "cutlass"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c450_cfg335": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c45_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c90_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c100_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c10_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c15_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c25_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c370_cfg315": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c50_cfg320": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_1024x1024_c1920_cfg564": ("deepgemm", "deepgemm"),
    "dsr1_b200_trtllm_fp8_disagg_1024x1024_c4096_cfg549": ("deepgemm", "deepgemm"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg549": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg553": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg566": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg661": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg666": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg670": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c1_cfg556": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c1_cfg662": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c256_cfg549": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c256_cfg666": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c32_cfg553": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c32_cfg661": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c640_cfg555": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c640_cfg667": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c96_cfg554": ("trtllm_gen", "trtllm_gen"),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c96_cfg669": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c12_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c24_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c48_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c6144_cfg411": ("trtllm_gen", "cutlass"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c96_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c135_cfg374": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c2048_cfg239": ("trtllm_gen", None),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c4096_cfg239": ("trtllm_gen", None),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c60_cfg374": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c8192_cfg239": ("trtllm_gen", None),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c12_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c4096_cfg362": ("trtllm_gen", None),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c44_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c76_cfg388": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c256_cfg375": ("deepgemm", "deepgemm"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c27_cfg386": ("deepgemm", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c3_cfg386": ("deepgemm", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c6144_cfg416": ("deepgemm", "deepgemm"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375": ("deepgemm", "deepgemm"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c36_cfg378": ("deepgemm", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c4_cfg378": ("deepgemm", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c8192_cfg435": ("deepgemm", "deepgemm"),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c18_cfg386": ("deepgemm", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c63_cfg386": ("deepgemm", "trtllm_gen"),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c6_cfg386": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c12_cfg417": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c192_cfg417": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c48_cfg417": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c8192_cfg387": ("trtllm_gen", "cutlass"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c96_cfg417": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c1024_cfg373": ("trtllm_gen", None),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c245_cfg404": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c4096_cfg373": ("trtllm_gen", None),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c60_cfg421": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c7_cfg404": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c8192_cfg373": ("trtllm_gen", None),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c12_cfg417": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c15_cfg437": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c30_cfg437": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c3228_cfg412": ("trtllm_gen", "cutlass"),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c5_cfg437": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c72_cfg385": ("trtllm_gen", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c12288_cfg418": ("deepgemm", "deepgemm"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c24_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c4_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c84_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c1024_cfg462": ("deepgemm", "deepgemm"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c36_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4096_cfg488": ("deepgemm", "deepgemm"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c8192_cfg488": ("deepgemm", "deepgemm"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c24_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c36_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c4_cfg392": ("deepgemm", "trtllm_gen"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c512_cfg436": ("deepgemm", "deepgemm"),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c30_cfg494": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c60_cfg494": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c9_cfg494": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c154_cfg503": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c30_cfg494": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c6_cfg494": (None, "cutlass"),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c9_cfg494": (None, "cutlass"),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c128_cfg291": ("cutlass", "cutlass"),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c128_cfg675": ("cutlass", "cutlass"),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c512_cfg334": ("cutlass", "cutlass"),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c512_cfg673": ("cutlass", "cutlass"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c15_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg759": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c30_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c360_cfg759": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c55_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c5_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c668_cfg759": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c105_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c156_cfg760": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c15_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c30_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c4_cfg759": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c5_cfg763": ("trtllm_gen", "trtllm_gen"),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c60_cfg763": ("trtllm_gen", "trtllm_gen"),
}

TRT_SERVERS: dict[str, TrtServers] = {
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c10_cfg320": TrtServers(8, 10240, None, 0.75, False, 32, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c15_cfg320": TrtServers(8, 10240, None, 0.75, False, 32, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c180_cfg320": TrtServers(8, 10240, None, 0.75, False, 32, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c2192_cfg346": TrtServers(8, 10240, None, 0.75, False, 128, 0.8, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c25_cfg320": TrtServers(8, 10240, None, 0.75, False, 32, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c4096_cfg309": TrtServers(8, 10240, None, 0.75, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c450_cfg335": TrtServers(8, 10240, None, 0.75, False, 64, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c45_cfg320": TrtServers(8, 10240, None, 0.75, False, 32, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_1024x1024_c90_cfg320": TrtServers(8, 10240, None, 0.75, False, 32, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c100_cfg320": TrtServers(2, 16896, None, 0.75, False, 16, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c10_cfg320": TrtServers(2, 16896, None, 0.75, False, 16, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c15_cfg320": TrtServers(2, 16896, None, 0.75, False, 16, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c25_cfg320": TrtServers(2, 16896, None, 0.75, False, 16, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c370_cfg315": TrtServers(2, 16896, None, 0.75, False, 64, 0.9, True),
    "dsr1_b200_trtllm_fp4_disagg_8192x1024_c50_cfg320": TrtServers(2, 16896, None, 0.75, False, 16, 0.9, True),
    "dsr1_b200_trtllm_fp8_disagg_1024x1024_c1920_cfg564": TrtServers(16, 16384, None, 0.4, False, 4096, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_1024x1024_c4096_cfg549": TrtServers(16, 16384, None, 0.2, False, 4096, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg549": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg553": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg566": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg661": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg666": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg670": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c1_cfg556": TrtServers(64, 8320, None, 0.8, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c1_cfg662": TrtServers(64, 8320, None, 0.8, False, 1, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c256_cfg549": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c256_cfg666": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c32_cfg553": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c32_cfg661": TrtServers(1, 8320, None, 0.2, False, 8, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c640_cfg555": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c640_cfg667": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c96_cfg554": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_b200_trtllm_fp8_disagg_8192x1024_c96_cfg669": TrtServers(1, 8320, None, 0.2, False, 512, 0.8, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c12_cfg388": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg388": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c24_cfg388": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c48_cfg388": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c6144_cfg411": TrtServers(16, 16384, None, 0.6, False, 768, 0.8, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x1024_c96_cfg388": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c135_cfg374": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c2048_cfg239": TrtServers(16, 16384, None, 0.6, False, 256, 0.7, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c4096_cfg239": TrtServers(16, 16384, None, 0.6, False, 512, 0.7, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c60_cfg374": TrtServers(16, 16384, None, 0.6, False, 16, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c8192_cfg239": TrtServers(16, 16384, None, 0.6, False, 1024, 0.7, True),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c12_cfg388": TrtServers(2, 16640, None, 0.6, False, 16, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c4096_cfg362": TrtServers(2, 16640, None, 0.6, False, 256, 0.8, True),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c44_cfg388": TrtServers(2, 16640, None, 0.6, False, 16, 0.9, True),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c76_cfg388": TrtServers(2, 16640, None, 0.6, False, 16, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c256_cfg375": TrtServers(16, 16384, None, 0.5, False, 8, 0.7, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c27_cfg386": TrtServers(16, 16384, None, 0.5, False, 8, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c3_cfg386": TrtServers(16, 16384, None, 0.5, False, 1, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c6144_cfg416": TrtServers(16, 16384, None, 0.5, False, 768, 0.8, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375": TrtServers(16, 16384, None, 0.4, False, 64, 0.75, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c36_cfg378": TrtServers(16, 16384, None, 0.4, False, 8, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c4_cfg378": TrtServers(16, 16384, None, 0.4, False, 1, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c8192_cfg435": TrtServers(16, 16384, None, 0.4, False, 256, 0.8, True),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c18_cfg386": TrtServers(2, 16384, None, 0.4, False, 4, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c63_cfg386": TrtServers(2, 16384, None, 0.4, False, 16, 0.9, True),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c6_cfg386": TrtServers(2, 16384, None, 0.4, False, 1, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c12_cfg417": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c192_cfg417": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c48_cfg417": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c8192_cfg387": TrtServers(16, 16384, None, 0.6, False, 1024, 0.8, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x1024_c96_cfg417": TrtServers(16, 16384, None, 0.6, False, 32, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c1024_cfg373": TrtServers(16, 16384, None, 0.6, False, 128, 0.7, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c245_cfg404": TrtServers(16, 16384, None, 0.6, False, 128, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c4096_cfg373": TrtServers(16, 16384, None, 0.6, False, 512, 0.7, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c60_cfg421": TrtServers(16, 16384, None, 0.6, False, 16, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c7_cfg404": TrtServers(16, 16384, None, 0.6, False, 4, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c8192_cfg373": TrtServers(16, 16384, None, 0.6, False, 1024, 0.7, True),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c12_cfg417": TrtServers(2, 16640, None, 0.6, False, 2, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c15_cfg437": TrtServers(2, 16640, None, 0.6, False, 4, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c30_cfg437": TrtServers(2, 16640, None, 0.6, False, 4, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c3228_cfg412": TrtServers(2, 16640, None, 0.6, False, 256, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c5_cfg437": TrtServers(2, 16640, None, 0.6, False, 4, 0.9, True),
    "dsr1_gb300_trtllm_fp4_disagg_8192x1024_c72_cfg385": TrtServers(2, 16640, None, 0.6, False, 16, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c12288_cfg418": TrtServers(16, 16384, None, 0.4, False, 768, 0.8, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c24_cfg392": TrtServers(16, 16384, None, 0.5, False, 4, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c4_cfg392": TrtServers(16, 16384, None, 0.5, False, 1, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c84_cfg392": TrtServers(16, 16384, None, 0.5, False, 16, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c1024_cfg462": TrtServers(16, 16384, None, 0.4, False, 32, 0.75, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c36_cfg392": TrtServers(16, 16384, None, 0.4, False, 8, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4096_cfg488": TrtServers(16, 16384, None, 0.4, False, 128, 0.8, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4_cfg392": TrtServers(16, 16384, None, 0.4, False, 1, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c8192_cfg488": TrtServers(16, 16384, None, 0.4, False, 256, 0.8, True),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c24_cfg392": TrtServers(2, 16384, None, 0.4, False, 4, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c36_cfg392": TrtServers(2, 16384, None, 0.4, False, 8, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c4_cfg392": TrtServers(2, 16384, None, 0.4, False, 1, 0.9, True),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c512_cfg436": TrtServers(2, 16384, None, 0.3, False, 16, 0.75, True),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c30_cfg494": TrtServers(2, 2048, True, 0.6, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c60_cfg494": TrtServers(2, 2048, False, 0.6, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c6_cfg494": TrtServers(2, 2048, True, 0.6, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_1024x1024_c9_cfg494": TrtServers(2, 2048, True, 0.6, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c154_cfg503": TrtServers(1, 8224, False, 0.3, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c30_cfg494": TrtServers(1, 8224, True, 0.3, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c6_cfg494": TrtServers(1, 8224, False, 0.3, False, 256, 0.9, True),
    "dsr1_h100_trtllm_fp8_disagg_8192x1024_c9_cfg494": TrtServers(1, 8224, False, 0.3, False, 256, 0.9, True),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c128_cfg291": TrtServers(2, 16640, False, 0.85, False, 256, 0.85, True),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c128_cfg675": TrtServers(2, 16640, False, 0.85, False, 256, 0.85, True),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c512_cfg334": TrtServers(2, 16640, False, 0.85, False, 512, 0.85, True),
    "dsr1_h200_trtllm_fp8_disagg_8192x1024_c512_cfg673": TrtServers(2, 16640, False, 0.85, False, 512, 0.85, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c15_cfg763": TrtServers(16, 16384, None, 0.4, False, 8, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c192_cfg759": TrtServers(16, 16384, None, 0.4, False, 128, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c30_cfg763": TrtServers(16, 16384, None, 0.4, False, 8, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c360_cfg759": TrtServers(16, 16384, None, 0.4, False, 128, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c4_cfg759": TrtServers(16, 16384, None, 0.4, False, 128, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c55_cfg763": TrtServers(16, 16384, None, 0.4, False, 8, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c5_cfg763": TrtServers(16, 16384, None, 0.4, False, 8, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_1024x1024_c668_cfg759": TrtServers(16, 16384, None, 0.4, False, 128, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c105_cfg763": TrtServers(2, 16384, None, 0.4, False, 16, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c156_cfg760": TrtServers(2, 16384, None, 0.4, False, 32, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c15_cfg763": TrtServers(2, 16384, None, 0.4, False, 16, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c30_cfg763": TrtServers(2, 16384, None, 0.4, False, 16, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c4_cfg759": TrtServers(2, 16384, None, 0.4, False, 1, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c5_cfg763": TrtServers(2, 16384, None, 0.4, False, 16, 0.9, True),
    "kimik2_5_gb200_trtllm_fp4_disagg_8192x1024_c60_cfg763": TrtServers(2, 16384, None, 0.4, False, 16, 0.9, True),
}


ALL_TO_ALL: dict[str, tuple[str | None, str | None]] = {
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c2048_cfg239": (None, "nvlink_one_sided"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c4096_cfg239": (None, "nvlink_one_sided"),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c8192_cfg239": (None, "nvlink_one_sided"),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c4096_cfg362": (None, "nvlink_one_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c256_cfg375": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c27_cfg386": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c3_cfg386": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c6144_cfg416": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c2048_cfg375": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c36_cfg378": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c4_cfg378": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c8192_cfg435": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c18_cfg386": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c63_cfg386": (None, "nvlink_two_sided"),
    "dsr1_gb200_trtllm_fp8_disagg_8192x1024_c6_cfg386": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c1024_cfg373": (None, "nvlink_one_sided"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c4096_cfg373": (None, "nvlink_one_sided"),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c8192_cfg373": (None, "nvlink_one_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c12288_cfg418": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c24_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c4_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x1024_c84_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c1024_cfg462": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c36_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4096_cfg488": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c4_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_1024x8192_c8192_cfg488": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c24_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c36_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c4_cfg392": (None, "nvlink_two_sided"),
    "dsr1_gb300_trtllm_fp8_disagg_8192x1024_c512_cfg436": (None, "nvlink_two_sided"),
}

EXPERT_SLOTS: dict[str, tuple[int | None, int | None]] = {
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c4096_cfg239": (None, 288),
    "dsr1_gb200_trtllm_fp4_disagg_1024x8192_c8192_cfg239": (None, 288),
    "dsr1_gb200_trtllm_fp4_disagg_8192x1024_c4096_cfg362": (None, 256),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c4096_cfg373": (None, 288),
    "dsr1_gb300_trtllm_fp4_disagg_1024x8192_c8192_cfg373": (None, 288),
}
