"""Bytes per element of the precisions a scenario names, and the MoE kernel families it can name (a module of its
own, so the command line's parsers can list them without importing the simulator)."""

from typing import Literal, get_args

# Bytes per cached K or V element of each kv_cache.dtype ("auto" keeps the model's).
KV_CACHE_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0}
STATE_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0}  # a recurrent state's (--mamba-ssm-dtype)


class Quantization:
    """One weight format a deployment can serve: the bytes each linear-layer weight takes, and the tensor-core
    precision its GEMMs run at (None: weight-only, the GEMMs at the 16-bit rate after dequantizing)."""

    __slots__ = ("description", "experts_only", "tensor_cores", "weight_bytes")

    def __init__(self, weight_bytes: float, tensor_cores: str | None, description: str, experts_only: bool = False):
        self.weight_bytes = weight_bytes
        self.tensor_cores = tensor_cores
        self.description = description
        # True: only the routed experts are stored in this format; attention, dense and shared-expert linears stay
        # 16-bit (a checkpoint's quantization_config.modules_to_not_convert)
        self.experts_only = experts_only


# The quantizations servesim models (``quantization:`` and ``--quantization``); the embedding and LM head stay 16-bit
# in each (vLLM quantizes the decoder's linear layers only).
QuantizationName = Literal["fp8", "fp8_block", "nvfp4", "mxfp4", "mxfp4_mxfp8", "int4_wo"]
QUANTIZATIONS: dict[str, Quantization] = {
    "fp8": Quantization(
        1.0,
        "fp8",
        "FP8 weights and activations, per-tensor scales (vLLM's --quantization fp8; W8A8 on FP8 tensor "
        "cores, weight-only FP8 Marlin kernels on Ampere)",
    ),
    # one fp32 scale per 128 x 128 block adds 4 / 16,384 bytes a weight (0.02 %), left out
    "fp8_block": Quantization(
        1.0,
        "fp8",
        "FP8 with 128 x 128 block scales (DeepSeek-V3's checkpoints, weight_block_size [128, 128]): "
        "DeepGEMM / CUTLASS block-scaled GEMMs",
    ),
    # 4-bit E2M1 values and one FP8 (E4M3) scale per 16: 4.5 bits a weight (NVIDIA's NVFP4, ModelOpt)
    "nvfp4": Quantization(
        0.5625,
        "fp4",
        "NVFP4 weights and activations on FP4 tensor cores (Blackwell); elsewhere weight-only "
        "(vLLM's FP4 Marlin kernels)",
    ),
    # 4-bit E2M1 values and one E8M0 scale per 32: 4.25 bits a weight (OCP Microscaling spec v1.0). gpt-oss stores
    # its routed experts only in MXFP4: its config.json's quantization_config keeps self_attn, the router, the
    # embedding and the LM head in bf16 (modules_to_not_convert). vLLM runs the experts weight-only (W4A16) by
    # default; TensorRT-LLM and SGLang on Blackwell with MXFP8 activations (simulator/cost/silicon/model.py)
    "mxfp4": Quantization(
        0.53125, None, "MXFP4 routed experts, bf16 attention (gpt-oss; W4A16 or W4A8 by engine)", experts_only=True
    ),
    # the same checkpoint with the experts' activations quantized to MXFP8 on Blackwell: vLLM's
    # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (FlashInfer's TRT-LLM W4A8 MoE), TensorRT-LLM's TRTLLM MoE backend
    "mxfp4_mxfp8": Quantization(
        0.53125, None, "MXFP4 routed experts, MXFP8 activations (W4A8, Blackwell), bf16 attention", experts_only=True
    ),
    # 4-bit integers and one bf16 scale per group of 32: 4.5 bits a weight. Kimi-K2-Thinking / Kimi-K2.5 ship their
    # routed experts so (compressed-tensors "pack-quantized", weights {type: int, num_bits: 4, group_size: 32},
    # attention, shared experts and dense MLPs in the ignore list); engines run them weight-only (W4A16: Marlin,
    # CUTLASS or FlashInfer kernels, the measured tables' int4_wo)
    "int4_wo": Quantization(
        0.5625, None, "INT4 routed experts, group-32 bf16 scales, bf16 attention (Kimi-K2.5; W4A16)", experts_only=True
    ),
}

EXCHANGED_QUANTIZED = frozenset(("nvfp4", "fp8"))
"""The formats whose MoE kernels take the activations quantized, so the tokens travel to the experts' GPUs in them
(TensorRT-LLM's fused-MoE ``quantize_input(..., post_quant_comm=True)``: NVFP4, FP8 per-tensor); the others (DeepSeek's
FP8 block scales, quantized inside the kernels; weight-only formats) send the activation dtype."""


# The MoE kernel families a deployment can name (``cost_model.moe_kernel``, ``servesim estimate --moe-kernel``); each
# is recognised in the measured tables by simulator/cost/silicon/convert.py's ``MOE_KERNEL_FAMILIES``.
MoeKernelName = Literal["trtllm_gen", "deepgemm", "marlin", "cutlass", "triton_kernels", "triton"]
MOE_KERNELS: tuple[str, ...] = get_args(MoeKernelName)


# Engines that store a DeepSeek-sparse-attention model's FP8 MLA cache in DeepSeek's scaled format (FlashMLA's sparse
# FP8 layout: FP8 latent, a float32 scale per 128 elements, bf16 rotary key; ModelSpec.mla_scaled_fp8_cache). vLLM maps
# any FP8 cache dtype of DeepseekV32ForCausalLM to its fp8_ds_mla format (vllm/model_executor/models/config.py,
# DeepseekV32ForCausalLM.verify_and_update_config); SGLang sizes its DSA pool's FP8 entry as the FP8 latent, the
# scales and the bf16 rope (calculate_mla_kv_cache_dim). TensorRT-LLM keeps a per-tensor FP8 cache ("Sparse MLA, KV
# cache: Per-tensor FP8": TensorRT-LLM's tech blog 15, Optimizing DeepSeek-V3.2 on NVIDIA Blackwell GPUs).
SCALED_FP8_MLA_ENGINES = frozenset(("vllm", "sglang"))


def served_kv_cache_dtype(requested: str, engine: str, sparse_mla: bool, compute_major: int | None) -> str:
    """The ``kv_cache.dtype`` an engine allocates when the scenario asks for ``requested``.

    SGLang resolves ``auto`` itself for a DeepSeek-sparse-attention model (DeepSeek-V3.2, GLM-5: MLA with an
    indexer) on a CUDA or ROCm GPU before it reads the checkpoint: ``fp8_e4m3`` at compute capability 10 and above
    (Blackwell), ``bfloat16`` below (``ServerArgs._set_default_nsa_kv_cache_dtype``, python/sglang/srt/
    server_args.py, for the DeepSeek-family architectures that include GlmMoeDsaForCausalLM; its comment: "for
    Blackwell, we support fp8 only currently"). So there a declared FP8 cache is bf16 on Hopper, and a bf16
    checkpoint's cache is FP8 on Blackwell. Everything else keeps ``requested`` (``auto``: the model's own bytes).
    ``compute_major`` None (a GPU whose capability is not known) leaves it too.
    """
    if requested == "auto" and engine == "sglang" and sparse_mla and compute_major is not None:
        return "fp8" if compute_major >= 10 else "bfloat16"
    return requested
