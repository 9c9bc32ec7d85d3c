"""The serving engine's own time per step, and the CUDA-graph batch a decode step runs at.

**Engine time per step.** Besides the model's kernels, every iteration of a serving engine
spends CPU time scheduling, preparing the inputs, sampling and processing the outputs. servesim
charges it as one op, ``cpu_overhead = step_s + per_seq_s x sequences (+ tp_step_s when tp > 1)``.

Source: Vidur's measured per-iteration CPU overheads, ``vidur/profiling/cpu_overheads/a100/
cpu_overheads.csv`` (microsoft/vidur ``data/profiling/``, commit 6d98aa8; MIT). Vidur's
``vidur/profiling/cpu_overhead/benchmark_runner.py`` (commit 6e2138f) runs its Sarathi-Serve/vLLM
engine on A100s with ``max_num_seqs = batch_size`` (8 .. 128), that many requests of 256 prompt
tokens and ``3 x batch_size`` output tokens each, for six models at tp 1, 2 and 4, and records
each timer's mean and median in ms over the iterations. The worker of the vLLM fork those columns
come from times, in ``execute_model``

- ``schedule``: the scheduler choosing the step's sequences;
- ``prepare_inputs_e2e``: building the input tensors and copying them to the GPU (with a
  ``torch.cuda.synchronize()`` at the end; ``_launch`` is the part before it);
- ``model_execution_e2e``: the forward pass, ``_launch`` (enqueueing the kernels or replaying
  the CUDA graph, 0.07-0.10 ms) plus the ``synchronize()`` that waits for the GPU;
- ``sampler_e2e``: ``Sampler(lm_head.weight, hidden_states)``, i.e. the LM-head GEMM, softmax
  and sampling on the GPU and the sampled tokens' Python bookkeeping, then ``synchronize()``;
- ``process_model_outputs``: appending tokens, detokenising, stop checks, freeing finished
  sequences;
- ``ray_comm_time_mean`` (computed by the runner): wall time per iteration minus the five timed
  parts, i.e. the Ray RPC between the engine and its workers and anything untimed.

What servesim takes (``benchmarks/fit_overheads.py`` fits each component on its own rows,
``t = step + per_seq x batch_size + tp_step x [tp > 1]``, least squares on the medians):

- schedule, prepare_inputs_e2e and process_model_outputs as measured;
- sampler_e2e minus its LM-head GEMM, whose time at each row's shape is NVIDIA aiconfigurator's
  A100 measurement (``aiconfigurator/a100_sxm/gemm/vllm/0.14.0/gemm_perf.parquet``; 0.10-0.45 ms
  of the 0.5-2.5 ms): the roofline charges ``lm_head`` as its own op;
- not model_execution_e2e: it is GPU time, which the cost model computes op by op (its launch
  part overlaps the GPU; kernel launch gaps are ``RooflineParams.kernel_launch_s``). Vidur's
  own predictor leaves it out too: ``vidur/execution_time_predictor/
  sklearn_execution_time_predictor.py`` models exactly schedule, sampler_e2e,
  prepare_inputs_e2e, process_model_outputs and ray_comm_time;
- not ray_comm_time (5.7 ms more per step at tp > 1): it is the cost of Vidur's engine driving
  every worker over Ray. vLLM V1 on one node runs its workers as processes fed over shared memory
  (``ParallelConfig.distributed_executor_backend`` "mp", vLLM's default when the GPUs are on one
  node); Ray is for multi-node or on request. ``VIDUR_A100["ray_comm"]`` keeps the fit for a Ray
  deployment.

The data shows no dependence on the model beyond the sampler's vocabulary (Qwen-72B's sampler,
152k vocab, grows 2-3x faster per sequence than the 32k-vocab models: most of the sampler fit's
error) and a step of about 0.85 ms more at tp > 1 than at tp 1, nearly all of it in input
preparation (likely the inputs going to the other ranks) and sampling (likely gathering the
logits), the same at tp 2 and 4. Hence three numbers, ``EngineOverheadParams``.

**Which figures the ``vllm``-family engines use by default.** The ones above, summed (the
``VIDUR_A100`` components marked ``DEFAULT_COMPONENTS``). They are the only per-component
measurement of a vLLM-style engine's step found. vLLM V1 (the default engine since 0.8) was
rebuilt to cut exactly this time, but publishes no per-step figure: its announcement ("vLLM
V1: A Major Upgrade to vLLM's Core Architecture", blog.vllm.ai, 2025-01-27) states "near-zero
CPU overhead" as a goal, moves detokenisation and output processing to the API-server process
and keeps a persistent batch that applies diffs instead of rebuilding inputs; the V0 figures
it reacted to are fractions ("vLLM v0.6.0: 2.7x Throughput Improvement", blog.vllm.ai,
2024-09-05: for Llama 3 8B on one H100, 33 % of the time in the API server, 29 % in scheduling)
or a gap (vllm-project/vllm#6854: about 4 ms of GPU idle per decode step). Async scheduling
(vllm-project/vllm#19970; on by default in recent releases: ``SchedulerConfig.async_scheduling
= None`` resolves to on in ``vllm/config/vllm.py`` unless a feature in use rules it out) plans
step N+1 while step N runs, and vllm-project/vllm#23569 also overlaps input preparation and
sampling with the forward pass. So for V1 these figures are an upper bound, furthest off at
large batches (43.7 us per sequence is V0's Python per-sequence work).

**Overlapped or serial.** Where the engine runs this CPU work beside the GPU's (vLLM V1's async
scheduling, SGLang's and TensorRT-LLM's overlap schedulers: ``BatchTraits.overlaps_cpu``, the cost
models' ``cpu_overlap``), a step takes the longer of its GPU time and this CPU time
(``overlap_total``); for vLLM V0 and the generic policies it adds to the GPU time. Overlapped, the
V0 figures' excess only shows where the CPU time exceeds the GPU's (small models at large
batches). Set ``step_overhead_s``, ``per_seq_overhead_s`` and ``tp_step_overhead_s`` of the
cost model to your engine's (``servesim validate`` fits step and per-sequence overhead
against a real run). All of it was measured on one host's CPU; a faster core runs it
proportionally faster.

**CUDA-graph padding.** vLLM V1 captures CUDA graphs at fixed batch sizes and runs a batch at
the smallest captured size that holds it (``vllm_config.pad_for_cudagraph`` in
``vllm/v1/worker/gpu_model_runner.py``), eagerly beyond the largest. The sizes, when not given,
follow ``[1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_cudagraph_capture_size + 1,
16))`` with ``max_cudagraph_capture_size = min(2 x max_num_seqs, 512)`` (``CompilationConfig.
max_cudagraph_capture_size`` in ``vllm/config/compilation.py``, vllm-project/vllm commit 002284d):
``VLLM_CAPTURE_SIZES`` for ``max_num_seqs`` >= 256, ``vllm_capture_sizes(2 * max_num_seqs)`` for
fewer. The roofline pads decode-only steps (a mixed step in V1 is padded too when it has at most
``max_cudagraph_capture_size`` tokens, with piecewise graphs; servesim leaves mixed steps
unpadded).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field


class ComponentFit(NamedTuple):
    """One component's fit ``step_s + per_seq_s x sequences + tp_step_s x [tp > 1]`` and its error."""

    step_s: float
    per_seq_s: float
    tp_step_s: float
    rms_rel_error: float
    max_rel_error: float
    max_abs_error_s: float


# benchmarks/fit_overheads.py on vidur/profiling/cpu_overheads/a100/cpu_overheads.csv (medians; 76
# rows: six models, batch 8..128, tp 1/2/4; Qwen-72B at batch 112 and 128 dropped, its KV cache
# could not hold that batch). Errors are over those rows. "sampler" is sampler_e2e_median minus the
# LM-head GEMM (aiconfigurator a100_sxm gemm_perf); "ray_comm" is ray_comm_time_mean (no median).
VIDUR_A100: dict[str, ComponentFit] = {
    "schedule": ComponentFit(2.7017e-05, 1.5495e-05, 1.2679e-05, 0.047, 0.192, 6.24e-05),
    "prepare_inputs": ComponentFit(2.5449e-04, 5.8577e-06, 4.5690e-04, 0.032, 0.105, 6.40e-05),
    "sampler": ComponentFit(2.2795e-04, 6.3610e-06, 2.4479e-04, 0.228, 0.488, 9.68e-04),
    "process_model_outputs": ComponentFit(3.1342e-05, 1.6003e-05, 1.3842e-04, 0.080, 0.312, 8.09e-05),
    "ray_comm": ComponentFit(4.2940e-04, 1.7213e-06, 5.7317e-03, 0.262, 1.127, 9.86e-04),
}
DEFAULT_COMPONENTS = ("schedule", "prepare_inputs", "sampler", "process_model_outputs")
# The default's error against the same rows with those four components summed (fit_overheads.py):
# rms 6.0 %, max 16.3 % (1.09 ms, Qwen-72B's sampler at batch 96).
DEFAULT_RMS_REL_ERROR = 0.060
DEFAULT_MAX_REL_ERROR = 0.163

DEFAULT_STEP_S = sum(VIDUR_A100[c].step_s for c in DEFAULT_COMPONENTS)  # 0.541 ms
DEFAULT_PER_SEQ_S = sum(VIDUR_A100[c].per_seq_s for c in DEFAULT_COMPONENTS)  # 43.7 us
DEFAULT_TP_STEP_S = sum(VIDUR_A100[c].tp_step_s for c in DEFAULT_COMPONENTS)  # 0.853 ms


class EngineOverheadParams(BaseModel):
    """The engine's CPU time per step: scheduling, input preparation, sampling, output processing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_s: float = Field(DEFAULT_STEP_S, ge=0, description="Seconds per engine step, whatever it holds.")
    per_seq_s: float = Field(DEFAULT_PER_SEQ_S, ge=0, description="Seconds per sequence scheduled in the step.")
    tp_step_s: float = Field(
        DEFAULT_TP_STEP_S, ge=0, description="Seconds more per step with tensor parallelism (tp > 1)."
    )


def engine_overhead_s(params: EngineOverheadParams, num_seqs: int, tp: int = 1) -> float:
    """The engine's CPU time for a step of ``num_seqs`` sequences on ``tp`` GPUs, seconds."""
    seconds = params.step_s + params.per_seq_s * num_seqs
    return seconds + params.tp_step_s if tp > 1 else seconds


def overlap_total(gpu_s: float, cpu_s: float) -> float:
    """A step whose CPU work (scheduling and preparing the next step, processing the last one's outputs) runs while
    the GPU computes: the longer of the two. vLLM V1 schedules step N+1 during step N with async scheduling
    (vllm/v1/engine/core.py, ``step_with_batch_queue``; vllm-project/vllm#19970), SGLang's overlap scheduler runs
    the next batch's CPU work during the current forward (python/sglang/srt/managers/scheduler.py,
    ``event_loop_overlap``), TensorRT-LLM's PyTorch executor likewise (``disable_overlap_scheduler`` False by
    default, tensorrt_llm/_torch/pyexecutor/py_executor.py ``_executor_loop_overlap``)."""
    return gpu_s if gpu_s >= cpu_s else cpu_s


def vllm_capture_sizes(max_size: int = 512) -> tuple[int, ...]:
    """vLLM V1's default CUDA-graph capture sizes up to ``max_size`` (module docstring)."""
    sizes = (1, 2, 4, *range(8, 256, 8), *range(256, max_size + 1, 16))
    return tuple(s for s in sizes if s <= max_size)


VLLM_CAPTURE_SIZES = vllm_capture_sizes(512)  # 1, 2, 4, 8, 16, ..., 248, 256, 272, ..., 512


def padded_batch_size(num_seqs: int, capture_sizes: Sequence[int] = VLLM_CAPTURE_SIZES) -> int:
    """The batch a step of ``num_seqs`` tokens runs at: the smallest captured size that holds it, or
    ``num_seqs`` itself (eager) beyond the largest. ``capture_sizes`` ascending."""
    i = bisect.bisect_left(capture_sizes, num_seqs)
    return capture_sizes[i] if i < len(capture_sizes) else num_seqs
