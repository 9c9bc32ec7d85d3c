"""Hugging Face transformers' own continuous batching as the engine under test.

A ``LlamaForCausalLM`` built from a config with random weights (no download) runs under
``init_continuous_batching`` with every size explicit (KV blocks, block size, token
budget, batch cap; its defaults size the cache from free memory, gigabytes), prefix
sharing, async batching, CUDA graphs and CPU offloading off, and its FIFO scheduler,
which ``policies.batching.hf_fifo`` mirrors. A client thread sends requests on the
arrival schedule with ``add_request(record_timestamps=True)``; the engine's per-token
timestamps (taken in its loop as each token is produced) are the measured token times.

Pinned to the transformers version of the ``calibrate`` extra; other versions with the
same API (5.x) are accepted, older ones are refused with the version to install.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from calibration.device import Device, import_torch, torch_dtype
from calibration.engine import EngineRequest
from calibration.model import RMS_EPS, ROPE_THETA
from policies.batching.hf_fifo import HfFifoParams
from simulator.config.specs import ModelSpec

PINNED_TRANSFORMERS = "5.17.0"
RESULT_TIMEOUT_S = 600.0


def import_transformers() -> Any:
    """transformers with continuous batching, or a ValueError naming the version to install."""
    try:
        import transformers
    except ImportError:
        raise ValueError(
            f"--engine hf needs transformers: pip install 'servesim[calibrate]' (transformers=={PINNED_TRANSFORMERS})"
        ) from None
    try:
        from transformers.generation.configuration_utils import ContinuousBatchingConfig  # noqa: F401
    except ImportError:
        raise ValueError(
            f"transformers {transformers.__version__} has no ContinuousBatchingConfig; "
            f"install transformers=={PINNED_TRANSFORMERS}"
        ) from None
    return transformers


def llama_config(spec: ModelSpec) -> Any:
    """A transformers LlamaConfig with ``spec``'s shapes."""
    transformers = import_transformers()
    if not spec.gated_mlp or spec.is_moe or spec.num_linear_layers:
        raise ValueError(f"{spec.name}: --engine hf builds Llama-style models (gated MLP, dense, full attention)")
    return transformers.LlamaConfig(
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        vocab_size=spec.vocab_size,
        max_position_embeddings=spec.max_context_tokens,
        tie_word_embeddings=spec.tie_word_embeddings,
        attention_bias=spec.qkv_bias,
        rope_theta=ROPE_THETA,  # the harness's own, so both time the same model
        rms_norm_eps=RMS_EPS,
    )


class HfEngine:
    """transformers' ContinuousBatchingManager over a random-weight Llama, kept alive across runs."""

    def __init__(
        self,
        spec: ModelSpec,
        device: Device,
        dtype: str,
        params: HfFifoParams,
        num_blocks: int,
        block_size: int,
        seed: int = 0,
    ) -> None:
        transformers = import_transformers()
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        torch = import_torch()
        torch.manual_seed(seed)
        self.version = str(transformers.__version__)
        # built on the device in its dtype: an 8B model first built in fp32 on the host would take minutes
        with torch.device(device.torch_device):
            model = transformers.LlamaForCausalLM._from_config(llama_config(spec), dtype=torch_dtype(dtype))
        self.model = model.to(device=device.torch_device, dtype=torch_dtype(dtype)).eval()
        self.generation_config = transformers.GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0)
        self.cb_config = ContinuousBatchingConfig(
            block_size=block_size,
            num_blocks=num_blocks,
            max_batch_tokens=params.max_num_batched_tokens,
            max_requests_per_batch=params.max_num_seqs,
            allow_block_sharing=False,
            use_async_batching=False,
            use_cuda_graph=False,
            scheduler_type="fifo",
            safety_margin=params.safety_margin,
            cpu_offload_space=0.0,
        )
        self._manager: Any = None

    def start(self) -> None:
        self._manager = self.model.init_continuous_batching(
            generation_config=self.generation_config, continuous_batching_config=self.cb_config
        )
        self._manager.start()

    @property
    def attention_layout(self) -> str:
        """``per_sequence`` for flash-attention kernels, ``packed`` for paged|sdpa and paged|eager.

        The manager picks the implementation when it starts; sdpa and eager attend with
        every token of the step against every key under one mask.
        """
        impl = str(self.model.config._attn_implementation)
        return "per_sequence" if "flash" in impl else "packed"

    def stop(self) -> None:
        if self._manager is not None:
            self._manager.stop(block=True, timeout=60)
            self._manager = None

    def run(
        self,
        requests: Sequence[EngineRequest],
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Send ``requests`` on their schedule, wait for all; stamps their times (seconds since the start)."""
        assert self._manager is not None, "start() the engine first"
        manager = self._manager
        by_id = {str(r.request_id): r for r in requests}
        clock = time.perf_counter
        t0 = clock()
        for req in sorted(requests, key=lambda r: r.arrival_s):
            wait = t0 + req.arrival_s - clock()
            if wait > 0:
                time.sleep(wait)
            req.admitted_s = clock() - t0
            req.status = "waiting"
            manager.add_request(
                req.token_ids[: req.num_prompt_tokens],
                request_id=str(req.request_id),
                max_new_tokens=req.num_output_tokens,
                record_timestamps=True,
                eos_token_id=-1,
            )
        num_done = 0
        while num_done < len(requests):
            result = manager.get_result(timeout=RESULT_TIMEOUT_S)
            if result is None:
                raise RuntimeError(f"transformers' engine stopped with {len(requests) - num_done} requests unfinished")
            if not result.is_finished():
                continue
            req = by_id[result.request_id]
            if result.error is not None:
                raise RuntimeError(f"transformers' engine failed request {result.request_id}: {result.error}")
            times = [t - t0 for t in (result.timestamps or [])]
            req.token_times_s = times
            req.num_generated_tokens = len(result.generated_tokens)
            req.first_scheduled_s = result.lifespan[0] - t0
            req.finished_s = times[-1] if times else result.lifespan[1] - t0
            req.status = "finished"
            # a soft reset (recompute preemption) restarts the request and drops its earlier timestamps
            req.num_preemptions = int(len(times) < req.num_generated_tokens)
            num_done += 1
            if progress is not None:
                progress(num_done, len(requests))
