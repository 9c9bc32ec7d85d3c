"""Attention data parallelism inside a replica: which rank a request goes to, and the settings each rank runs.

A replica with ``parallelism.dp_attention`` N holds N lockstep engines (``simulator/engine/lockstep.py``); the
engine's own controller places each request on one of them, where it stays (queue, KV, decoding):

- SGLang (``sglang``): its data-parallel controller's ``load_balance_method`` defaults to ``auto``, which is
  ``round_robin`` except for a prefill server of a disaggregated deployment (``follow_bootstrap_room``, a hash of
  a random room id: spread as evenly, not modelled apart) (``ServerArgs._handle_load_balance_method``,
  python/sglang/srt/server_args.py; python/sglang/srt/managers/data_parallel_controller.py);
- TensorRT-LLM (``trtllm``): the attention-DP request queue gives each new request to the rank with the fewest
  active tokens (the prompt lengths of its active requests), then the fewest active requests
  (``_balance_requests_across_ranks``, a heap keyed so, tensorrt_llm/_torch/pyexecutor/executor_request_queue.py);
  its cap of ``expected_num_active_requests`` per rank is not modelled;
- vLLM and the generic policies: the API server's ``DPLBAsyncMPClient`` picks the engine of least
  ``4 x waiting + running``, ties to the lowest rank (vllm/v1/engine/core_client.py
  ``get_core_engine_for_request``), here with the counts as they are (vLLM's lag up to 100 ms).

Per-rank settings (``rank_policy``): SGLang divides ``chunked_prefill_size`` and ``max_running_requests`` by the
DP size and multiplies ``schedule_conservativeness`` by 0.3 under ``--enable-dp-attention``
(``ServerArgs._handle_data_parallelism``; ``max_running_requests // dp_size`` per worker in
python/sglang/srt/model_executor/pool_configurator.py); TensorRT-LLM's ``max_batch_size`` and ``max_num_tokens``
and vLLM's ``max_num_seqs`` and ``max_num_batched_tokens`` are each rank's own already.

TensorRT-LLM's context balancing (``attention_dp_config.enable_balance``, ``AttentionDpBalance``): every step each
rank schedules as usual, the ranks all-gather how many context and generation requests they scheduled, and every
rank holds its contexts back (runs its generation requests alone) unless all ranks have a context to run
(``PyExecutor._balance_adp_requests`` in tensorrt_llm/_torch/pyexecutor/py_executor.py, 1.1/1.2; the same rule in
``_balance_adp_context_requests`` of the scheduler after 1.2). A rank with no generation request, or a wait of
``timeout_iters`` steps, releases them. The ranks' prefills then run in the same steps instead of each stalling
everyone's decodes in turn (a step holding a prefill on any rank is a prefill step for all: the MoE layers run every
rank's tokens together), at the price of a later first token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from simulator.config.specs import ModelSpec
from simulator.engine.loop import Engine
from simulator.request import Request

ChooseEngine = Callable[[Sequence[Engine], Request], Engine]
"""Picks, among candidate engines of a replica, the one a request goes to."""

SGLANG_DP_CONSERVATIVENESS_FACTOR = 0.3
"""``schedule_conservativeness * 0.3`` under ``--enable-dp-attention`` (``_handle_data_parallelism``)."""


class RoundRobin:
    """SGLang's ``round_robin``: the ranks in turn (skipping ones not among the candidates)."""

    def __init__(self, engines: Sequence[Engine]) -> None:
        self.engines = list(engines)
        self._next = 0

    def __call__(self, candidates: Sequence[Engine], req: Request) -> Engine:
        n = len(self.engines)
        for i in range(n):
            engine = self.engines[(self._next + i) % n]
            if engine in candidates:
                self._next = (self._next + i + 1) % n
                return engine
        raise AssertionError("no candidate engine belongs to this replica")


def _active_prompt_tokens(engine: Engine) -> int:
    """Prompt tokens of the requests waiting, running, queued or leased for their KV on ``engine``, or in its input
    queue (the executor keeps its own count: ``StepExecutor.active_prompt_tokens``)."""
    return engine.executor.active_prompt_tokens + sum(r.num_prompt_tokens for r in engine._inbox)


def fewest_active_tokens(candidates: Sequence[Engine], req: Request) -> Engine:
    """TensorRT-LLM's attention-DP balance: fewest active prompt tokens, then fewest requests, then lowest rank."""
    return min(candidates, key=lambda e: (_active_prompt_tokens(e), e.num_outstanding))


def least_vllm_score(candidates: Sequence[Engine], req: Request) -> Engine:
    """vLLM's DP load balance: least ``4 x waiting + running`` (its waiting counts the engine's input queue and the
    requests whose KV is on its way: ``Engine.num_waiting``)."""
    return min(candidates, key=lambda e: 4 * e.num_waiting + e.num_running)


class AttentionDpBalance:
    """TensorRT-LLM's ``_balance_adp_requests`` (module docstring): whether this step's context requests wait, from
    every rank's count of scheduled contexts and generation requests; its counters are the executor's, identical on
    every rank, so one object serves the group."""

    def __init__(self, timeout_iters: int, batching_wait_iters: int, max_batch_size: int) -> None:
        self.timeout_iters = timeout_iters
        self.batching_wait_iters = batching_wait_iters
        self.max_batch_size = max_batch_size
        self.waiting_iters = 0  # adp_ctx_waiting_iters_count
        self.batching_iters = 0  # adp_ctx_batching_wait_iters_count

    def hold_contexts(self, counts: Sequence[tuple[int, int]]) -> bool:
        """Whether the ranks hold their contexts back this step, given each rank's (contexts, generation requests)
        scheduled before balancing; called once a step, as the executor calls it every iteration."""
        all_have_room = all(gen < self.max_batch_size for _, gen in counts)
        all_have_contexts = all(ctx > 0 for ctx, _ in counts)
        all_have_generation = all(gen > 0 for _, gen in counts)
        if all_have_room and all_have_contexts:
            self.waiting_iters = 0
            if all_have_generation:
                if self.batching_iters < self.batching_wait_iters:
                    self.batching_iters += 1
                    return True
                self.batching_iters = 0
            return False
        self.waiting_iters += 1
        if self.waiting_iters >= self.timeout_iters or not all_have_generation:
            self.waiting_iters = 0
            return False
        return True


def context_balance(params: Any, engine_kind: str, dp_attention: int) -> AttentionDpBalance | None:
    """The group's context balancing: TensorRT-LLM's with ``attention_dp_config.enable_balance`` under attention
    DP; None otherwise (each rank runs its contexts when its own scheduler does)."""
    config = getattr(params, "attention_dp_config", None)
    if dp_attention == 1 or engine_kind != "trtllm" or config is None or not config.enable_balance:
        return None
    return AttentionDpBalance(config.timeout_iters, config.batching_wait_iters, params.max_batch_size)


def rank_chooser(engine_kind: str, engines: Sequence[Engine]) -> ChooseEngine:
    """The rule the serving engine (a policy's ``BatchTraits.engine``) places requests on its DP ranks with."""
    if engine_kind == "sglang":
        return RoundRobin(engines)
    if engine_kind == "trtllm":
        return fewest_active_tokens
    return least_vllm_score


def rank_policy(params: Any, engine_kind: str, dp_attention: int) -> Any:
    """The batch policy's parameters as each of ``dp_attention`` ranks runs them (module docstring)."""
    if dp_attention == 1:
        return params
    if engine_kind == "trtllm":
        # PyExecutor._schedule waits for a batch only `if not self.enable_attention_dp` (py_executor.py)
        return params.model_copy(update={"batch_wait_timeout_iters": 0, "batch_wait_max_tokens_ratio": 0.0})
    if engine_kind != "sglang":
        return params
    update: dict[str, Any] = {
        "schedule_conservativeness": params.schedule_conservativeness * SGLANG_DP_CONSERVATIVENESS_FACTOR
    }
    chunk = params.chunked_prefill_size
    if chunk is not None and chunk > 0:
        update["chunked_prefill_size"] = max(1, chunk // dp_attention)
    if params.max_running_requests is not None:
        update["max_running_requests"] = max(1, params.max_running_requests // dp_attention)
    return params.model_copy(update=update)


def check_dp_attention(model: ModelSpec, tp: int, dp_attention: int, *, speculative: bool) -> None:
    """Refuse, naming the field, what attention data parallelism is not modelled with (ValueError): attention
    heads that tp/dp_attention GPUs cannot split, and speculative decoding."""
    if dp_attention == 1:
        return
    try:
        model.check_tensor_parallel(tp // dp_attention)
    except ValueError as exc:
        raise ValueError(
            f"parallelism.dp_attention={dp_attention}: each rank's attention runs on tp/dp_attention GPUs: {exc}"
        ) from None
    if speculative:
        raise ValueError(
            f"parallelism.dp_attention={dp_attention}: speculative decoding is modelled without attention data "
            "parallelism"
        )
