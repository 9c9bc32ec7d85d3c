"""A MoE kernel a GPU's tables never timed at a model's shape, carried over from the GPUs that did.

A deployment names the MoE kernel family its engine runs (``SiliconParams.moe_kernel``). Where the dependency timed
that family at the model's shape on other GPUs but not on this one, the silicon model reads the other GPUs' curve
scaled by how this GPU and each of them ran the same family on the shapes both timed:

    t_here(T) = t_donor(T) x geometric mean over those shapes s of t_here,s(T) / t_donor,s(T)

at each token count ``T`` the donor timed and every such shape's curves cover on both GPUs (log-log between their
counts); with several donor GPUs, the geometric mean of their estimates at the counts all of them give. Every curve
comes from the same engine's collector at the same release on both GPUs (the release this GPU's MoE table is read
at), at the same layout (moe_tp, moe_ep) and token distribution, the family's fastest kernel at each count (as
``convert._moe_kernels`` keeps it).

What it rests on: the family's kernel is the same code on both GPUs, so what sets one GPU's time apart from
another's at a token count (clocks, bandwidth, SM count) acts alike on shapes of one family. The case it was built
for, and its checks:

- InferenceX's gpt-oss-120b vLLM scripts for H100 and H200 export ``VLLM_MXFP4_USE_MARLIN=1``: Marlin's W4A16 MoE
  (vLLM 0.18.0's ``get_mxfp4_backend``, quantization/mxfp4.py, takes Marlin when it is set). aiconfigurator-core
  0.12 times Marlin at gpt-oss's shape on RTX PRO 6000 and L40S only (vLLM 0.24.0); H100 and H200 have it at
  Kimi-K2's INT4 shape, which those two timed too, and at another MXFP4 model's (hidden 3584, 896 experts), which
  they did not.
- Held out: L40S's own Marlin curves at gpt-oss-120b's shape, estimated from RTX PRO 6000's through the Marlin
  shapes both timed (Kimi-K2's INT4 experts, gpt-oss-20b's), come within 9.7 % on average over the tensor-parallel
  layouts at 16 tokens and more (median 6.5 %), 18 % below 16 tokens, where a kernel's launch and a few experts'
  weights set its time (tests/simulator/cost/test_moe_borrow.py).
- The carried curve never falls as the token count grows (its running maximum): a kernel given more tokens reads
  at least the same experts' weights. Its ratios can make it fall where the reference shape leaves a donor's L2 and
  the model's shape does not: the collectors replay one layer's weights without flushing L2 (aiconfigurator's
  ``collector/helper.py`` ``benchmark_with_power``), and Kimi-K2's 32 to 64 touched INT4 experts (2.75 MB each at
  TP 8) outgrow L40S's 96 MB between 4 and 8 tokens (33 -> 113 -> 296 us at 1, 4 and 8 tokens) while gpt-oss's
  1.8 MB experts stay inside it (27 -> 33 -> 60 us). Both curves the estimate rests on rise with the tokens, yet
  the raw carry-over to H200 at gpt-oss's TP 8 layout gave 41, 32 and 25 us at 2, 4 and 8 tokens. Held out, the
  running maximum moves the estimates below 16 tokens of L40S's own curves from RTX PRO 6000's from 17.9 % to
  17.7 % mean error, and of RTX PRO 6000's from L40S's from 16.1 % to 14.6 %.
- vllm-project/vllm#27523 measured ``vllm bench latency`` of gpt-oss-120b on one SM90 GPU (batch 8, 32 prompt and
  128 output tokens): 1.17 s with Marlin, 1.58 s with the Triton kernel. That vLLM ran its scheduler between the
  steps (async scheduling came on by default later, vllm-project/vllm#27614). With the carried-over Marlin curve an
  H100 gives 1.135 s (-3 %), with the Triton table measured there 1.304 s (-17 %: the table's Triton kernel, vLLM
  0.24.0's, is faster than the one that run used).
"""

from __future__ import annotations

import math
from functools import cache
from itertools import accumulate

import numpy as np
import pandas as pd

from simulator.cost.silicon import database
from simulator.cost.silicon.convert import MOE_DTYPES, REQUIRED_COLUMNS, moe_kernel_family
from simulator.cost.silicon.database import Selection
from simulator.cost.silicon.tables import Curve

_COLUMNS = [*REQUIRED_COLUMNS["moe_perf.parquet"], "kernel_source"]
Shape = tuple[str, int, int, int, int]  # dtype, hidden, inter, topk, experts
Layout = tuple[str, int, int]  # distribution, moe_tp, moe_ep
Curves = dict[tuple[Shape, Layout], pd.Series]  # latency (ms) by token count


@cache
def family_curves(system: str, framework: str, family: str, version: str) -> Curves | None:
    """The ``family``'s fastest curve of each (shape, layout) ``framework``'s collector timed on ``system`` at
    ``version``; None where that table is absent. Cached per process and shared: read it, never change it."""
    path = database.table_set(system).root / "moe" / framework / version / "moe_perf.parquet"
    if not path.is_file():
        return None
    frame = pd.read_parquet(path, columns=_COLUMNS)
    frame = frame[(frame.latency > 0) & frame.moe_dtype.isin(list(MOE_DTYPES))]
    frame = frame[frame.kernel_source.astype(str).map(moe_kernel_family) == family]
    curves: Curves = {}
    keys = ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "distribution", "moe_tp_size"]
    for (dtype, h, inter, k, e, dist, tp, ep), part in frame.groupby([*keys, "moe_ep_size"]):
        fastest = part.groupby("num_tokens").latency.min().sort_index()
        if len(fastest) >= 2:
            curves[((MOE_DTYPES[dtype], int(h), int(inter), int(k), int(e)), (str(dist), int(tp), int(ep)))] = fastest
    return curves


def _log_at(curve: pd.Series, x: float) -> float | None:
    """log(ms) of ``curve`` at ``x`` tokens, log-log between its counts; None outside them."""
    xs = curve.index.to_numpy(np.float64)
    if not xs[0] <= x <= xs[-1]:
        return None
    return float(np.interp(math.log(x), np.log(xs), np.log(curve.to_numpy(np.float64))))


def transfer(donor: pd.Series, ratios: list[tuple[pd.Series, pd.Series]]) -> dict[float, float]:
    """log(ms) at each of ``donor``'s token counts that every (here, there) pair of ``ratios`` covers: the donor's
    time times the geometric mean of here / there."""
    out = {}
    for tokens, ms in donor.items():
        logs = [(_log_at(here, tokens), _log_at(there, tokens)) for here, there in ratios]
        if any(a is None or b is None for a, b in logs):
            continue
        shift = sum(a - b for a, b in logs) / len(logs)  # type: ignore[operator]
        out[float(tokens)] = math.log(float(ms)) + shift
    return out


def borrowed_moe(
    sel: Selection, family: str, dtypes: tuple[str, ...], shape: tuple[int, int, int, int], layout: Layout
) -> tuple[Curve, str] | None:
    """``family``'s fused-MoE curve (seconds by token count) at ``shape`` (hidden, inter, topk, experts) and
    ``layout`` on ``sel``'s GPU, carried over from the dependency's other GPUs (module docstring), with a line
    saying from where; None where this GPU's tables are a folder, or no GPU gives one."""
    if not sel.tables.source.startswith(database.DEPENDENCY):
        return None
    table = sel.table("moe", "moe_perf.parquet")
    if table is None or table.framework != sel.base:
        return None
    version = table.version  # the release this GPU's own MoE table is read at: every donor's must be the same
    mine = family_curves(sel.tables.name, sel.base, family, version)
    if not mine:
        return None
    donors = {}
    for system in database.systems():
        theirs = family_curves(system, sel.base, family, version) if system != sel.tables.name else None
        if theirs and any(key[1] == layout and key[0][1:] == shape for key in theirs):
            donors[system] = theirs
    # one dtype for every donor: the first of ``dtypes`` any of them timed at the shape
    dtype = next((d for d in dtypes for theirs in donors.values() if ((d, *shape), layout) in theirs), None)
    estimates: dict[str, dict[float, float]] = {}
    for system, theirs in donors.items():
        donor = theirs.get(((dtype, *shape), layout))
        common = [key for key in mine.keys() & theirs.keys() if key[1] == layout and key[0][1:] != shape]
        if donor is None or not common:
            continue
        logs = transfer(donor, [(mine[key], theirs[key]) for key in sorted(common)])
        if len(logs) >= 2:
            estimates[system] = logs
    if not estimates:
        return None
    counts = sorted(set.intersection(*(set(e) for e in estimates.values())))
    if len(counts) < 2:
        return None
    seconds = [math.exp(sum(e[t] for e in estimates.values()) / len(estimates)) * 1e-3 for t in counts]
    seconds = list(accumulate(seconds, max))  # never faster with more tokens (module docstring)
    names = ", ".join(sorted(estimates))
    note = (
        f"{sel.base} {version}, {family} timed at this shape on {names} only, scaled by {sel.tables.name}'s time "
        f"over theirs on the {family} shapes both timed (cost/silicon/borrow.py)"
    )
    return Curve(counts, seconds), note
