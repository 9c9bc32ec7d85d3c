"""The host time of a forward pass the engine runs without a CUDA graph (eagerly).

Kernel tables time each kernel on the GPU; a decode step replays a captured CUDA graph, so the GPU runs
those kernels back to back. A step that holds a prefill is not captured by SGLang's or TensorRT-LLM's
defaults: the Python model code launches every kernel from the host, one after another, and the GPU
cannot run ahead of the launches. Such a step takes the longer of its kernels' GPU time and the host's
time to launch them (``eager_step_s``); for a short prefill of a model with many small kernels per layer
the host's time is the longer, and it is in every TTFT at low load.

**Which steps run eagerly** (the batch policy's ``BatchTraits.eager_prefill``):

- SGLang (0.5.x): CUDA graphs replay only DECODE, TARGET_VERIFY and IDLE batches
  (``ForwardMode.is_cuda_graph`` in ``python/sglang/srt/model_executor/forward_batch_info.py``); an EXTEND
  batch takes the piecewise CUDA-graph runner only with ``--enable-piecewise-cuda-graph``, off by default
  in 0.5.9 (``ServerArgs.enable_piecewise_cuda_graph = False``, ``srt/server_args.py``; made the default
  only by sgl-project/sglang#16331, March 2026, after the InferenceX runs servesim is checked against).
- TensorRT-LLM (PyTorch backend, 1.1/1.2): a batch replays a CUDA graph only without context requests
  (``ScheduledRequests.can_run_cuda_graph`` is ``not self.context_requests``; under attention DP the flag
  is all-gathered, so one rank's context request makes every rank eager); the context phase's piecewise
  graphs need ``torch_compile_config.enable_piecewise_cuda_graph``, off by default
  (docs/source/features/torch_compile_and_piecewise_cuda_graph.md). With it on, a context or mixed step of
  at most the largest ``capture_num_tokens`` tokens replays the captured pieces (the model between its
  attention ops) and only the attention runs eagerly ("to reduce context-phase launch overhead", same page);
  the engine drops the capture sizes above ``max_num_tokens`` (``PyTorchModelEngine``'s
  ``_piecewise_cuda_graph_num_tokens``) and pads a step to the next captured size. servesim takes such a step
  as launched from its graphs, with no eager host time (``piecewise_graph_max_tokens`` of the cost model, from
  the ``trtllm`` policy's ``piecewise_cuda_graph_max_tokens``); the attention ops' own launches between the
  pieces (one a layer) and the padding are left out. Under attention DP servesim compares the ranks' tokens
  together (the gathered step it prices the shared part of) with the largest capture, where each rank runs its
  own tokens: such a step is taken as launched eagerly more often than it may be.
- vLLM V1 (``vllm``): a step of more tokens than its largest CUDA-graph capture size runs torch.compile's generated
  code without a graph (the ``CudagraphDispatcher`` picks ``CUDAGraphMode.NONE`` above
  ``max_cudagraph_capture_size``, default ``min(2 x max_num_seqs, 512)``: ``largest_cudagraph_size`` in
  policies/batching/vllm.py); with ``--max-num-seqs CONC`` at a few users, as InferenceX's recipes run, that is every
  step holding a prompt. Smaller steps replay the piecewise (or full) graphs. servesim prices a larger step holding a
  prompt as launched eagerly (``piecewise_graph_max_tokens``: the policy's largest capture size) with the figure
  below: no measurement of vLLM's own per-layer host time without graphs was found, and Inductor fuses the
  elementwise kernels between the custom ops (attention, MoE, quantization, collectives) that SGLang's eager forward
  launches one by one, so for vLLM the figure is an upper estimate. The one public measurement of vLLM's no-graph
  steps is of the same order: vllm-project/vllm#56975 (GLM-5.3-Flash FP8 on 4 x GB200, TP 4, vLLM 0.28, steps of
  1,024-4,096 tokens) logs 177.4 ms a step without a graph against 103.9 ms with piecewise graphs, about 1.6 ms a
  layer over its 45 layers, on a Grace CPU. Decode-only steps above the capture size (more than 512 decodes) are not
  priced so. With ``--enforce-eager`` (``enforce_eager``, allowed on a disaggregated prefill group) every step
  holding a prompt is launched eagerly.

**The host time per layer** (``eager_host_s_per_layer``), where it was measured:

- An MLA + MoE decoder layer (DeepSeek-V3/R1 and the models built like it: Kimi-K2, GLM-5):
  sgl-project/sglang#12160 logs SGLang's forward of a DeepSeek-V3 EXTEND batch of one new token at
  82.64 ms eagerly and 23.10 ms replayed from a CUDA graph, the same batch on the same machine. One token's
  kernels take at most the 23.10 ms of the replay, so the eager forward's 82.64 ms is the host launching
  them: 82.64 ms / 61 layers = 1.355 ms per layer. The machine's CPU is not stated; a faster core launches
  proportionally faster. TensorRT-LLM's PyTorch DeepSeek-V3 model launches the same kinds of kernels (MLA
  projections, RoPE, the router, the grouped expert GEMMs) from Python; no measurement of its own eager
  forward was found, so the same figure is used for it.
- A hybrid Gated DeltaNet + MoE decoder layer (Qwen3-Next, Qwen3.5: three Gated DeltaNet layers to one gated
  full-attention layer, routed experts with a shared expert): sgl-project/sglang#13081 measured SGLang's mean TTFT
  of Qwen3-Next-80B-A3B on 2 x H200 (TP 2) at one user, one output token, without piecewise CUDA graphs (every
  EXTEND batch launched eagerly): 99.17 ms at 1,024 prompt tokens and 101.52 ms at 2,048. Twice the prompt adds
  2.35 ms, so the forward is bound by its launches, not its kernels. Less the request's way in and its
  tokenisation, as ``ClientConfig`` prices them (4 ms and 1.1 us a token), the launches of its 48 layers take
  94.0 ms: 1.959 ms per layer. With piecewise graphs the same TTFT was 67.83 ms (its Gated DeltaNet layers
  still launched eagerly then). Qwen3.5 is served by SGLang without piecewise graphs: 0.5.9 does not enable them
  by default, and 0.5.10 turns them off for a multimodal architecture (``ServerArgs._handle_piecewise_cuda_graph``,
  ``is_multimodal``), which Qwen3.5's ``Qwen3_5MoeForConditionalGeneration`` is. Like the MLA figure it is read
  for every engine's eagerly launched steps (vLLM above its largest capture size, TensorRT-LLM's context steps),
  whose own host times were not found.
- A grouped-query attention + MoE decoder layer (gpt-oss, MiniMax-M2, Qwen3-MoE, Mixtral and the models built like
  them: no MLA, no linear-attention layers): sgl-project/sglang#33293 logs SGLang's ``bench_one_batch`` of
  ibm-granite/granite-3.1-3b-a800m-instruct (32 layers; 24 query and 8 KV heads; 40 experts, 8 a token; FlashInfer
  attention, Triton MoE; BF16, TP 1, one H200) launched eagerly, batch 1: a 128-token prefill in 23.55 ms (median of
  five warmed runs, before that PR's fusion) and a decode step in 26.49 ms, where the same decode step replayed from a
  CUDA graph takes 2.67 ms. 128 prompt tokens cost no more than one decode token, so the eager forward is bound by
  its launches: 23.55 ms / 32 layers = 0.736 ms per layer (bench_one_batch times the forward and sampling alone, no
  request path). Granite scales its residuals by a constant (one more elementwise kernel a layer than a plain layer,
  the kernels that PR fuses), so the figure is somewhat high for a plain layer.
- Other architectures (dense decoders among them): no measurement of a host-bound eager forward found; their eager
  host time is taken as hidden under the GPU's (0).

Set ``eager_host_s_per_layer`` of the cost model (``roofline`` or ``silicon``'s nested ``roofline``) to
your engine's (e.g. a profiled eager forward of one token divided by the layers) or to 0 to leave it out.
"""

from __future__ import annotations

from simulator.config.client_defaults import INGEST_DELAY_S, TOKENIZE_S_PER_TOKEN
from simulator.config.specs import ModelSpec

SGLANG_DEEPSEEK_V3_EAGER_FORWARD_S = 82.64e-3
"""SGLang's eager forward of a 1-new-token DeepSeek-V3 EXTEND batch (sgl-project/sglang#12160)."""
SGLANG_DEEPSEEK_V3_GRAPH_FORWARD_S = 23.10e-3
"""The same batch replayed from a CUDA graph (sgl-project/sglang#12160): a bound on its kernels' GPU time."""
DEEPSEEK_V3_LAYERS = 61

MLA_MOE_EAGER_HOST_S_PER_LAYER = SGLANG_DEEPSEEK_V3_EAGER_FORWARD_S / DEEPSEEK_V3_LAYERS  # 1.355 ms

SGLANG_QWEN3_NEXT_EAGER_TTFT_S = 99.17e-3
"""SGLang's mean TTFT of Qwen3-Next-80B-A3B, one user, 1,024 prompt tokens, one output token, 2 x H200, without
piecewise CUDA graphs (sgl-project/sglang#13081)."""
QWEN3_NEXT_PROMPT_TOKENS = 1024
QWEN3_NEXT_LAYERS = 48
REQUEST_PATH_S = INGEST_DELAY_S + QWEN3_NEXT_PROMPT_TOKENS * TOKENIZE_S_PER_TOKEN
"""The request's way to the engine and its tokenisation at ``ClientConfig``'s defaults."""

HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER = (
    SGLANG_QWEN3_NEXT_EAGER_TTFT_S - REQUEST_PATH_S
) / QWEN3_NEXT_LAYERS  # 1.959 ms


SGLANG_GRANITE_MOE_EAGER_PREFILL_S = 23.55e-3
"""SGLang's eager forward of a 128-token prefill of granite-3.1-3b-a800m-instruct, batch 1, one H200
(``bench_one_batch``, median of five: sgl-project/sglang#33293)."""
GRANITE_MOE_LAYERS = 32

GQA_MOE_EAGER_HOST_S_PER_LAYER = SGLANG_GRANITE_MOE_EAGER_PREFILL_S / GRANITE_MOE_LAYERS  # 0.736 ms


def measured_eager_host_s_per_layer(model: ModelSpec) -> float:
    """The measured host time to launch one decoder layer of ``model`` eagerly, seconds; 0 where none was found."""
    if model.is_mla and model.is_moe:
        return MLA_MOE_EAGER_HOST_S_PER_LAYER
    if model.num_linear_layers and model.is_moe:
        return HYBRID_GDN_MOE_EAGER_HOST_S_PER_LAYER
    if model.is_moe:
        return GQA_MOE_EAGER_HOST_S_PER_LAYER
    return 0.0


def launched_eagerly(step_tokens: int, piecewise_graph_max_tokens: int) -> bool:
    """Whether a step holding a prefill, of ``step_tokens`` tokens, is launched eagerly: always, unless the engine
    replays piecewise CUDA graphs captured for steps of up to ``piecewise_graph_max_tokens`` tokens and it is one."""
    return step_tokens > piecewise_graph_max_tokens


def eager_step_s(gpu_s: float, eager_host_s: float) -> float:
    """A step launched eagerly: the GPU runs each kernel once the host has launched it and the host does not
    wait for the GPU, so the step ends with the later of the two."""
    return gpu_s if gpu_s >= eager_host_s else eager_host_s
