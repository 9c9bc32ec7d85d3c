"""TensorRT-LLM's NVLink all-to-all: the routed experts' tokens sent to their GPUs and back under attention DP.

With attention data parallelism TensorRT-LLM's MoE either all-gathers every rank's tokens before the experts and
reduce-scatters their output after (servesim's default for it, ``moe_exchange``), or sends each token only to the
ranks that hold its top-k experts and combines the results back: an all-to-all over NVLink. Which one runs depends on
the release and the MoE backend; a deployment can force it. InferenceX's GB200 and GB300 FP8 recipes do: every
DeepSeek-R1 generation server of NVIDIA/srt-slurm's ``recipes/trtllm/gb200-fp8`` and ``gb300-fp8`` (75f6e32a,
2026-01-27 onward) sets ``ENABLE_CONFIGURABLE_MOE: "1"`` and ``TRTLLM_FORCE_COMM_METHOD: "NVLINK_TWO_SIDED"``
(``decode_environment``), which TensorRT-LLM's ``ConfigurableMoE`` reads in
``tensorrt_llm/_torch/modules/fused_moe/communication/communication_factory.py``: the forced method runs where
attention DP has more than one rank and the experts' tensor parallelism is 1 (the factory gathers otherwise). Set it
with the cost model's ``roofline: {expert_all_to_all: true, all_to_all_kernel: nvlink_two_sided}`` (or
``nvlink_one_sided``, the method TensorRT-LLM 1.2's CUTLASS and TRTLLM backends pick on their own where NVLink
allows); the silicon model reads it, under the ``trtllm`` policy only.

**Measured** (aiconfigurator-core: ``comm/trtllm/<version>/trtllm_alltoall_perf.parquet``, TensorRT-LLM 1.2.0rc6 on
GB200 NVL72, balanced routing, DeepSeek-V3's shape: hidden 7168, 8 of 256 experts; expert-parallel sizes 2 to 64):
each kernel's time against the tokens a rank sends. ``NVLinkTwoSided`` runs ``alltoall_prepare``,
``alltoall_dispatch`` and ``alltoall_combine`` a MoE layer (dispatch measured with bf16, fp8 and nvfp4 tokens);
``NVLinkOneSided`` runs dispatch and combine (nvfp4 tokens). A layer's exchange is the sum at the rank's tokens;
past the largest count measured the time grows with the tokens (the bytes sent), below the smallest it is that
count's (the kernels' latency floor), as DeepEP's tables are read (``SiliconCostModel._all_to_all_lookup``).

**GB300** reads GB200's measurement (``DONORS``): both NVL72 racks join their 72 GPUs by the same fifth-generation
NVLink switch fabric, 1.8 TB/s a GPU (NVIDIA's GB200 NVL72 and GB300 NVL72 datasheets), and these kernels move
tokens over it with a few SMs each, so the fabric, not the GPU, sets their time. No other GPU's tables hold it.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import pandas as pd

from simulator.cost.silicon import database
from simulator.cost.silicon.tables import Curve

NvlinkKernel = Literal["nvlink_two_sided", "nvlink_one_sided"]
KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "nvlink_two_sided": ("NVLinkTwoSided", ("alltoall_prepare", "alltoall_dispatch", "alltoall_combine")),
    "nvlink_one_sided": ("NVLinkOneSided", ("alltoall_dispatch", "alltoall_combine")),
}
"""Each kernel's ``kernel_source`` in the table and the ops it runs a MoE layer."""
DONORS = {"gb300": "gb200"}
"""GPUs whose NVLink all-to-all is read from another's measurement (module docstring)."""
TABLE = "trtllm_alltoall_perf.parquet"
_COLUMNS = [
    "op_name",
    "kernel_source",
    "moe_dtype",
    "num_tokens",
    "hidden_size",
    "topk",
    "num_experts",
    "moe_ep_size",
    "distribution",
    "version",
    "latency",
]


@cache
def _frame(system: str) -> tuple[pd.DataFrame, str] | None:
    """The newest NVLink all-to-all table measured on ``system`` (or its donor), with a line naming it."""
    measured = DONORS.get(system, system)
    root = database.dependency_root()
    if root is None:
        return None
    folder = root / measured / "comm" / "trtllm"
    found = sorted(folder.glob(f"*/{TABLE}"), key=lambda p: database.version_key(p.parent.name))
    if not found:
        return None
    path = found[-1]
    frame = pd.read_parquet(path)
    missing = [c for c in _COLUMNS if c not in frame.columns]
    if missing:  # as convert._read says it of the tables it derives
        raise ValueError(f"{path}: no column {', '.join(missing)} (not a measured table in the database layout)")
    frame = frame[(frame.latency > 0) & (frame.distribution == "balanced")]  # the routing the curves stand for
    releases = ", ".join(sorted(map(str, frame.version.unique())))
    label = f"TensorRT-LLM {releases}'s NVLink all-to-all measured on {measured}"
    if measured != system:
        label += f", read for {system} (same NVLink 5 fabric: cost/silicon/nvlink_a2a.py)"
    return frame, label


def nvlink_all_to_all(
    system: str, kernel: NvlinkKernel, dtype: str, hidden: int, topk: int, experts: int, ep: int
) -> tuple[tuple[Curve, ...], str] | None:
    """One MoE layer's NVLink all-to-all on ``system``: a curve (seconds against a rank's tokens) for each op
    ``kernel`` runs, dispatching ``dtype`` tokens ("bfloat16", "fp8", "nvfp4") at the model's shape over ``ep`` GPUs,
    and where it was measured; None where no such measurement exists."""
    found = _frame(system)
    if found is None or kernel not in KERNELS:
        return None
    frame, label = found
    source, ops = KERNELS[kernel]
    part = frame[
        (frame.kernel_source == source)
        & (frame.moe_dtype == dtype)
        & (frame.hidden_size == hidden)
        & (frame.topk == topk)
        & (frame.num_experts == experts)
        & (frame.moe_ep_size == ep)
    ]
    curves = []
    for op in ops:
        times = part[part.op_name == op].groupby("num_tokens").latency.median().sort_index()  # ms
        if len(times) < 2:
            return None
        curves.append(Curve(times.index.to_numpy(float), (times.to_numpy(float) * 1e-3).tolist()))
    return tuple(curves), f"{label}: {source}, {dtype} tokens, ep {ep}"
