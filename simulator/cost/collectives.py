"""Tensor-parallel all-reduce time: an alpha-beta model fitted to measured tables, and the tables.

What vLLM runs for a tensor-parallel all-reduce (facts from ``vllm-project/vllm``, read with the
``search`` tool; no code copied):

- ``CudaCommunicator.all_reduce`` (vllm/distributed/device_communicators/cuda_communicator.py)
  tries quick all-reduce first (ROCm MI300 only), then the custom all-reduce when its
  ``should_custom_ar`` accepts the tensor, and falls back to pynccl (NCCL) otherwise.
- ``CustomAllreduce`` (device_communicators/custom_all_reduce.py) supports world sizes 2, 4, 6
  and 8, within one node; its ``max_size`` defaults to 8192 x 1024 bytes = 8 MiB, and
  ``should_custom_ar`` accepts a tensor when its size is a multiple of 16 bytes and strictly
  below ``max_size``, on 2 GPUs or on fully NVLink-connected GPUs only: on more than two
  PCIe-only GPUs the custom all-reduce is disabled and NCCL runs at every size.
- Newer versions add a torch symmetric-memory all-reduce (device_communicators/symm_mem.py,
  ``SymmMemCommunicator``: multimem on 4/6/8 GPUs of sm 9.0, two-shot otherwise), tried after the
  custom all-reduce and before pynccl, for messages up to ``SYMM_MEM_ALL_REDUCE_MAX_SIZES``
  (all_reduce_utils.py; sm 9.0: 64 MiB on 2, 6 and 8 GPUs, 32 MiB on 4). With it enabled the
  custom all-reduce's cap shrinks to ``CUSTOM_ALL_REDUCE_MAX_SIZES`` (sm 9.0: 64/32 MiB on 2/4
  GPUs, 512/256 KiB on 6/8; sm 10.0: 2 MiB on 2/4, 1 MiB on 6/8; never above ``max_size``).
- The kernel (csrc/custom_all_reduce.cuh, ``CustomAllreduce::allreduce``) is one-shot
  (``cross_device_reduce_1stage``: every rank reads all peers' buffers and reduces) on 2 GPUs
  always, and on NVLink for messages under 512 KiB (4 GPUs) or 256 KiB (8 GPUs); two-shot
  (``cross_device_reduce_2stage``: reduce-scatter then all-gather through peer buffers) above.
  At most 36 blocks of 512 threads, so its bandwidth is SM-limited, not link-limited.
- CUDA graph vs eager: inside a captured graph the input buffers are IPC-registered at capture;
  eagerly each call first copies the input into a pre-registered buffer (a device memcpy) and
  pays the host-side dispatch, which is why the eager tables have a ~20-90 us floor.

The measured tables (ai-dynamo/aiconfigurator collector/collect_all_reduce.py times vLLM's
``tensor_model_parallel_all_reduce``, i.e. the whole dispatch above, in a replayed CUDA graph and
eagerly on a fresh clone of the input; and nccl-tests all_reduce) show a
flat few microseconds up to ~64 KiB on NVLink, barely growing with the number of GPUs: one
round of peer reads, not ``2(tp-1)`` ring hops.

``AllReduceLatencyModel`` (the roofline's all-reduce): per number of GPUs ``n``, below the
custom all-reduce cap ``min(one-shot, two-shot)``, above it NCCL's ring::

    one-shot  alpha_1 + (n-1) x bytes / bw_1
    two-shot  alpha_2 + 2(n-1)/n x bytes / bw_2
    NCCL      alpha_3 + 2(n-1)/n x bytes / bw_3          (bytes >= 8 MiB)

fitted by least squares in log-time (relative error) to each GPU's tables
(``benchmarks/fit_collectives.py`` prints the constants below and the errors). Without a fit the
constants come from the datasheet: alpha_1 = one interconnect latency, alpha_2 = two (two
barrier rounds), bw = interconnect bandwidth x efficiency, at every size and number of GPUs.

``MeasuredAllReduce``: the tables themselves, interpolated in log-log.

Across nodes (``ScaleOut``): a tensor-parallel group of more GPUs than one interconnect domain
joins (``HardwareSpec.gpus_per_node``, 8 on an HGX board) reduces within each node over NVLink and
between the nodes over the network, each GPU's NIC carrying its 1/g share of the message
(NCCL's hierarchical algorithms: within the node, then a ring or tree over the nodes)::

    across  intra-node all-reduce on g GPUs
            + 2(m-1) x scale-out latency + 2(m-1)/m x (bytes / g) / scale-out bandwidth    (m nodes)

The tables above stop at 8 GPUs, so a 16-GPU H100 group was priced as if one NVLink domain held it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pathlib import Path

    from simulator.config.specs import HardwareSpec

MiB = 1 << 20
CUSTOM_AR_MAX_BYTES = 8 * MiB
"""vLLM's custom all-reduce ``max_size`` default (8192 x 1024 bytes); messages of this size and up go to NCCL."""

BACKENDS = ("vllm_graph", "vllm_eager", "nccl")
"""Table keys ``allreduce/<backend>/<num_gpus>``: vLLM's all-reduce in a CUDA graph, eagerly, and nccl-tests."""


@dataclass(frozen=True, slots=True)
class Regime:
    """One algorithm's alpha-beta constants: fixed seconds and bus bandwidth (bytes/s)."""

    alpha_s: float
    bus_bytes_per_s: float


@dataclass(frozen=True, slots=True)
class AllReduceFit:
    """The regimes of one number of GPUs: the custom all-reduce's one-shot and two-shot (either
    may be absent where the other fits every size) and NCCL's ring above the custom cap."""

    one_shot: Regime | None
    two_shot: Regime | None
    nccl: Regime

    def custom_s(self, message_bytes: float, n: int) -> float:
        t = math.inf
        if self.one_shot is not None:
            t = self.one_shot.alpha_s + (n - 1) * message_bytes / self.one_shot.bus_bytes_per_s
        if self.two_shot is not None:
            t = min(t, self.two_shot.alpha_s + 2 * (n - 1) / n * message_bytes / self.two_shot.bus_bytes_per_s)
        return t

    def nccl_s(self, message_bytes: float, n: int) -> float:
        return self.nccl.alpha_s + 2 * (n - 1) / n * message_bytes / self.nccl.bus_bytes_per_s


# Fitted by benchmarks/fit_collectives.py: {silicon_tables: {num_gpus: (one_shot, two_shot, nccl, max_rel_error)}},
# each regime (alpha_s, bus_bytes_per_s) or None. Target: aiconfigurator's vllm_graph rows below 8 MiB
# (comm/vllm/<ver>/custom_allreduce_perf.parquet) and nccl all_reduce half rows from 8 MiB
# (comm/nccl/<ver>/nccl_perf.parquet); least squares in log-time. max_rel_error: the largest
# |model / measured - 1| over the table points from 8 KiB to 512 MiB (decode and prefill messages).
_Pair = tuple[float, float]
# FITTED-BEGIN (generated)
_FITTED: dict[str, dict[int, tuple[_Pair | None, _Pair | None, _Pair, float]]] = {
    # aiconfigurator/a100_sxm/comm/vllm/0.14.0/custom_allreduce_perf.parquet (vllm_graph rows < 8 MiB)
    # + aiconfigurator/a100_sxm/comm/nccl/2.27.3/nccl_perf.parquet (all_reduce half rows >= 8 MiB)
    "a100_sxm": {
        # 2 GPUs: decode sizes median 2.8% max 3.9%, prefill 1.0% max 2.9%
        2: ((5.052e-06, 1.998e11), None, (4.359e-05, 1.928e11), 0.039),
        # 4 GPUs: decode sizes median 1.3% max 6.8%, prefill 1.3% max 3.1%
        4: ((5.29e-06, 1.624e11), (1.068e-05, 2.046e11), (5.611e-05, 2.135e11), 0.069),
        # 8 GPUs: decode sizes median 5.3% max 11.5%, prefill 2.5% max 7.5%
        8: ((6.469e-06, 1.863e11), (1.472e-05, 2.521e11), (6.885e-05, 2.17e11), 0.116),
    },
    # aiconfigurator/h100_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet (vllm_graph rows < 8 MiB)
    # + aiconfigurator/h100_sxm/comm/nccl/2.29.2/nccl_perf.parquet (all_reduce half rows >= 8 MiB)
    "h100_sxm": {
        # 2 GPUs: decode sizes median 0.7% max 6.6%, prefill 3.9% max 6.9%
        2: ((4.276e-06, 2.61e11), None, (2.267e-05, 3.023e11), 0.069),
        # 4 GPUs: decode sizes median 1.6% max 8.3%, prefill 1.6% max 3.5%
        4: ((4.567e-06, 2.671e11), (7.694e-06, 2.847e11), (2.669e-05, 3.444e11), 0.083),
        # 8 GPUs: decode sizes median 1.6% max 6.5%, prefill 2.6% max 7.7%
        8: ((4.817e-06, 2.927e11), (9.453e-06, 3.502e11), (5.064e-05, 4.391e11), 0.078),
    },
    # aiconfigurator/h200_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet (vllm_graph rows < 8 MiB)
    # + aiconfigurator/h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet (all_reduce half rows >= 8 MiB)
    "h200_sxm": {
        # 2 GPUs: decode sizes median 1.4% max 4.7%, prefill 2.9% max 6.2%
        2: ((4.443e-06, 2.646e11), None, (1.963e-05, 3.029e11), 0.063),
        # 4 GPUs: decode sizes median 2.4% max 5.4%, prefill 1.1% max 2.2%
        4: ((4.546e-06, 2.932e11), (7.178e-06, 2.877e11), (2.442e-05, 3.445e11), 0.055),
        # 8 GPUs: decode sizes median 2.0% max 7.5%, prefill 3.4% max 8.1%
        8: ((4.763e-06, 2.754e11), (8.848e-06, 3.788e11), (5.18e-05, 4.533e11), 0.082),
    },
    # aiconfigurator/b200_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet (vllm_graph rows < 8 MiB)
    # + aiconfigurator/b200_sxm/comm/nccl/2.29.2/nccl_perf.parquet (all_reduce half rows >= 8 MiB)
    "b200_sxm": {
        # 2 GPUs: decode sizes median 3.8% max 16.8%, prefill 0.7% max 3.0%
        2: ((6.702e-06, 1.459e11), None, (2.476e-05, 5.501e11), 0.169),
        # 4 GPUs: decode sizes median 4.2% max 25.2%, prefill 6.0% max 11.4%
        4: ((6.803e-06, 1.968e11), (1.497e-05, 4.041e11), (6.08e-05, 7.104e11), 0.252),
        # 8 GPUs: decode sizes median 9.4% max 38.9%, prefill 10.2% max 16.0%
        8: ((7.279e-06, 1.602e11), (2.036e-05, 1.787e12), (5.713e-05, 6.645e11), 0.39),
    },
    # aiconfigurator/l40s/comm/vllm/0.22.0/custom_allreduce_perf.parquet (vllm_graph rows < 8 MiB)
    # + aiconfigurator/l40s/comm/nccl/2.27.3/nccl_perf.parquet (all_reduce half rows >= 8 MiB)
    "l40s": {
        # 2 GPUs: decode sizes median 1.8% max 11.3%, prefill 0.2% max 0.3%
        2: ((5.332e-06, 1.92e10), None, (1.137e-05, 2.005e10), 0.114),
        # 4 GPUs: decode sizes median 4.0% max 12.5%, prefill 0.2% max 0.6%
        4: (None, (1.273e-05, 4.005e09), (1.08e-05, 5.132e09), 0.125),
        # 8 GPUs: decode sizes median 6.5% max 39.0%, prefill 7.9% max 35.5%
        8: ((2.333e-05, 9.33e09), None, (0.0004986, 1.575e09), 0.391),
    },
}
# FITTED-END


@dataclass(frozen=True, slots=True)
class ScaleOut:
    """The network between nodes: GPUs per interconnect domain, bandwidth per GPU and direction, one message's
    latency (``HardwareSpec.gpus_per_node``, ``scale_out_bandwidth_bytes_per_s``, ``scale_out_latency_s``)."""

    gpus_per_node: int
    bandwidth_bytes_per_s: float
    latency_s: float

    @classmethod
    def of(cls, hardware: HardwareSpec) -> ScaleOut:
        return cls(hardware.gpus_per_node, hardware.scale_out_bandwidth_bytes_per_s, hardware.scale_out_latency_s)

    def spans(self, num_gpus: int) -> bool:
        """Whether a group of ``num_gpus`` spans more than one node."""
        return num_gpus > self.gpus_per_node

    def between_nodes_s(self, message_bytes: float, num_gpus: int) -> float:
        """The part of an all-reduce over ``num_gpus`` GPUs spent between the nodes: each GPU's NIC carries its
        1/g share of the message around a ring of the nodes (0 within one node)."""
        if not self.spans(num_gpus) or message_bytes <= 0:
            return 0.0
        nodes = math.ceil(num_gpus / self.gpus_per_node)
        share = message_bytes / self.gpus_per_node
        return 2 * (nodes - 1) * self.latency_s + 2 * (nodes - 1) / nodes * share / self.bandwidth_bytes_per_s


class AllReduceLatencyModel:
    """Seconds of one all-reduce of ``message_bytes`` over ``num_gpus`` GPUs (alpha-beta, see the module doc).

    ``fits`` holds constants per number of GPUs; a number not among them uses the nearest one's
    constants (the larger on a tie) with its own ``n`` in the byte terms. Messages of
    ``custom_max_bytes`` and up take the NCCL regime. With ``scale_out``, a group spanning nodes
    reduces within a node's GPUs, then between the nodes (``ScaleOut.between_nodes_s``).
    """

    __slots__ = ("_cache", "custom_max_bytes", "fits", "scale_out", "source")

    def __init__(
        self,
        fits: Mapping[int, AllReduceFit],
        custom_max_bytes: float = CUSTOM_AR_MAX_BYTES,
        source: str = "",
        scale_out: ScaleOut | None = None,
    ):
        if not fits:
            raise ValueError("AllReduceLatencyModel needs constants for at least one number of GPUs")
        self.fits = dict(fits)
        self.custom_max_bytes = custom_max_bytes
        self.source = source
        self.scale_out = scale_out
        self._cache: dict[int, AllReduceFit] = {}

    @classmethod
    def fitted(cls, silicon_tables: str | None) -> AllReduceLatencyModel | None:
        """The model fitted to the named GPU's tables, or None when there is no fit for it."""
        entry = _FITTED.get(silicon_tables) if silicon_tables is not None else None
        if entry is None:
            return None
        fits = {
            n: AllReduceFit(
                Regime(*one) if one is not None else None, Regime(*two) if two is not None else None, Regime(*nccl)
            )
            for n, (one, two, nccl, _err) in entry.items()
        }
        return cls(fits, source=f"fitted:{silicon_tables}")

    @classmethod
    def derived(cls, bandwidth_bytes_per_s: float, latency_s: float, efficiency: float = 0.8) -> AllReduceLatencyModel:
        """From datasheet figures: one-shot costs one link latency, two-shot two, both at ``efficiency`` x bandwidth.

        The fixed cost does not grow with the number of GPUs: a one-shot all-reduce is one round
        of peer reads, and the two-shot's two rounds (reduce-scatter, all-gather) run in parallel
        over all peers. The two-shot regime serves all large messages (NCCL's ring has the same
        byte term), so there is no custom/NCCL switch.
        """
        bw = bandwidth_bytes_per_s * efficiency
        two = Regime(2 * latency_s, bw)
        fit = AllReduceFit(Regime(latency_s, bw), two, two)
        return cls({2: fit}, custom_max_bytes=math.inf, source="derived")

    @classmethod
    def for_hardware(cls, hardware: HardwareSpec, efficiency: float = 0.8) -> AllReduceLatencyModel:
        """The fitted model when ``hardware.silicon_tables`` has a fit, else one derived from its
        interconnect figures (``efficiency`` applies to the derived model only)."""
        model = cls.fitted(hardware.silicon_tables)
        if model is None:
            model = cls.derived(
                hardware.interconnect_bandwidth_bytes_per_s, hardware.interconnect_latency_s, efficiency
            )
        model.scale_out = ScaleOut.of(hardware)
        return model

    def _fit(self, n: int) -> AllReduceFit:
        fit = self._cache.get(n)
        if fit is None:
            fit = self.fits.get(n)
            if fit is None:
                nearest = min(self.fits, key=lambda k: (abs(k - n), -k))
                fit = self.fits[nearest]
            self._cache[n] = fit
        return fit

    def seconds(self, message_bytes: float, num_gpus: int) -> float:
        """Seconds of one all-reduce; 0 on one GPU or for an empty message."""
        if num_gpus <= 1 or message_bytes <= 0:
            return 0.0
        out = self.scale_out
        if out is not None and out.spans(num_gpus):
            return self.seconds(message_bytes, out.gpus_per_node) + out.between_nodes_s(message_bytes, num_gpus)
        fit = self._fit(num_gpus)
        if message_bytes < self.custom_max_bytes:
            return fit.custom_s(message_bytes, num_gpus)
        return fit.nccl_s(message_bytes, num_gpus)


def fitted_max_rel_error(silicon_tables: str) -> dict[int, float]:
    """The stated fit error per number of GPUs (max relative error, 8 KiB .. 512 MiB table points)."""
    return {n: entry[3] for n, entry in _FITTED[silicon_tables].items()}


def fitted_tables() -> tuple[str, ...]:
    """The silicon_tables names with a fitted all-reduce model."""
    return tuple(_FITTED)


class _Table:
    __slots__ = ("log_s", "log_x", "s", "x")

    def __init__(self, x: np.ndarray, s: np.ndarray) -> None:
        self.x = [float(v) for v in x]
        self.s = [float(v) for v in s]
        self.log_x = [math.log(v) for v in self.x]
        self.log_s = [math.log(v) for v in self.s]

    def at(self, b: float) -> float | None:
        x = self.x
        if not x[0] <= b <= x[-1]:
            return None
        i = bisect_left(x, b)
        if x[i] == b:
            return self.s[i]
        lx, ls = self.log_x, self.log_s
        f = (math.log(b) - lx[i - 1]) / (lx[i] - lx[i - 1])
        t = math.exp(ls[i - 1] + f * (ls[i] - ls[i - 1]))
        lo, hi = self.s[i - 1], self.s[i]
        if lo > hi:
            lo, hi = hi, lo
        return min(max(t, lo), hi)  # within the neighbours despite rounding: monotone where the data is


class MeasuredAllReduce:
    """Measured all-reduce times per backend and number of GPUs, interpolated piecewise-linearly in log-log.

    ``seconds`` uses vLLM's all-reduce table (CUDA-graph or eager) below ``custom_max_bytes``
    (vLLM's custom all-reduce cap; those rows time vLLM's whole dispatch, so they already
    show NCCL where vLLM falls back to it, e.g. on more than two PCIe GPUs) and nccl-tests'
    table from it up: above the cap vLLM calls NCCL, and the eager rows there add the
    benchmark's own input copy. With no vLLM table for that number of GPUs the NCCL table
    serves every size. ``custom_max_bytes=None`` uses vLLM's tables over their whole range.
    """

    __slots__ = ("_tables", "custom_max_bytes")

    def __init__(
        self,
        tables: Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]],
        custom_max_bytes: float | None = CUSTOM_AR_MAX_BYTES,
    ) -> None:
        self._tables = {}
        for (backend, n), (x, s) in tables.items():
            name = f"allreduce/{backend}/{n}"
            if backend not in BACKENDS:
                raise ValueError(f"{name}: unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
            x = np.asarray(x, dtype=np.float64)
            s = np.asarray(s, dtype=np.float64)
            if x.ndim != 1 or x.shape != s.shape or x.size == 0:
                raise ValueError(f"{name}: message bytes and seconds must be two 1-d arrays of the same nonzero length")
            if not (np.all(np.isfinite(x)) and np.all(np.isfinite(s)) and np.all(x > 0) and np.all(s > 0)):
                raise ValueError(f"{name}: message bytes and seconds must be finite and positive")
            if np.any(np.diff(x) <= 0):
                raise ValueError(f"{name}: message bytes must be strictly increasing")
            self._tables[backend, int(n)] = _Table(x, s)
        self.custom_max_bytes = math.inf if custom_max_bytes is None else custom_max_bytes

    @classmethod
    def from_arrays(
        cls, mapping: Mapping[str, np.ndarray], custom_max_bytes: float | None = CUSTOM_AR_MAX_BYTES
    ) -> MeasuredAllReduce:
        """From ``{"allreduce/<backend>/<n>": array of shape (2, K)}`` (row 0 message bytes, row 1 seconds);
        keys outside ``allreduce/`` are ignored."""
        tables: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        for key, value in mapping.items():
            if not key.startswith("allreduce/"):
                continue
            parts = key.split("/")
            if len(parts) != 3 or not parts[2].isdigit():
                raise ValueError(f"{key}: expected a key allreduce/<backend>/<num_gpus>")
            arr = np.asarray(value, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[0] != 2:
                raise ValueError(f"{key}: expected an array of shape (2, K), got {arr.shape}")
            tables[parts[1], int(parts[2])] = (arr[0], arr[1])
        return cls(tables, custom_max_bytes)

    def num_gpus(self) -> tuple[int, ...]:
        """The numbers of GPUs with at least one table."""
        return tuple(sorted({n for _, n in self._tables}))

    def points(self, backend: str, num_gpus: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The stored (message bytes, seconds) of one table, or None."""
        t = self._tables.get((backend, num_gpus))
        return None if t is None else (np.array(t.x), np.array(t.s))

    def _table(self, message_bytes: float, num_gpus: int, cuda_graph: bool) -> _Table | None:
        """The table that times a message: vLLM's (graph or eager) below ``custom_max_bytes``, else NCCL's."""
        table = None
        if message_bytes < self.custom_max_bytes:
            table = self._tables.get(("vllm_graph" if cuda_graph else "vllm_eager", num_gpus))
        return table if table is not None else self._tables.get(("nccl", num_gpus))

    def seconds(self, message_bytes: float, num_gpus: int, cuda_graph: bool = True) -> float | None:
        """Seconds of one all-reduce; None outside the measured sizes or for an unmeasured number of GPUs."""
        if num_gpus <= 1:
            return 0.0
        table = self._table(message_bytes, num_gpus, cuda_graph)
        return None if table is None else table.at(message_bytes)

    def tiny_seconds(self, message_bytes: float, num_gpus: int, cuda_graph: bool = True) -> float | None:
        """``seconds`` of a message that may be smaller than any measured: below the smallest measured size, that
        size's time (so small an all-reduce is its latency: one-shot, every size below a few KB alike)."""
        if num_gpus <= 1:
            return 0.0
        table = self._table(message_bytes, num_gpus, cuda_graph)
        return None if table is None else table.at(max(message_bytes, table.x[0]))


class MeasuredCollective:
    """One NCCL collective's measured times (``nccl/<op>/<gpus>`` tables: nccl-tests' message bytes, seconds) by
    number of GPUs, read as ``MeasuredAllReduce`` reads its tables (log-log between sizes). A message below the
    smallest size measured takes that size's time (the collective's latency); above the largest, the largest's
    time scaled by the bytes (bandwidth-bound there). A number of GPUs between measured ones reads the nearest (the
    larger on a tie) at the same message bytes; one above every measured count reads the largest's time scaled by
    the share of the buffer each GPU sends and receives, (n - 1)/n against (m - 1)/m: a lower bound, the ring's
    steps (and NCCL's latency) growing with n too (B200's 8-GPU tables take 1.25-1.58x the 4-GPU ones at 64 KB to
    1 MB, where that share grows 1.17x). With ``scale_out``, a group spanning nodes runs within each node's GPUs,
    then between the nodes: half an all-reduce's network term (``ScaleOut.between_nodes_s``), an all-reduce being
    a reduce-scatter then an all-gather."""

    __slots__ = ("_tables", "scale_out")

    def __init__(self, tables: Mapping[int, np.ndarray], scale_out: ScaleOut | None = None) -> None:
        if not tables:
            raise ValueError("MeasuredCollective needs a table for at least one number of GPUs")
        self._tables = {
            int(n): _Table(np.asarray(a[0], np.float64), np.asarray(a[1], np.float64)) for n, a in tables.items()
        }
        self.scale_out = scale_out

    def seconds(self, message_bytes: float, num_gpus: int) -> float:
        """Seconds of one collective of ``message_bytes`` over ``num_gpus`` GPUs (0 on one GPU or for no bytes)."""
        if num_gpus <= 1 or message_bytes <= 0:
            return 0.0
        out = self.scale_out
        if out is not None and out.spans(num_gpus):
            return self.seconds(message_bytes, out.gpus_per_node) + out.between_nodes_s(message_bytes, num_gpus) / 2
        share = 1.0
        table = self._tables.get(num_gpus)
        if table is None:
            largest = max(self._tables)
            if num_gpus > largest:
                table, share = self._tables[largest], (num_gpus - 1) / num_gpus * largest / (largest - 1)
            else:
                table = self._tables[min(self._tables, key=lambda k: (abs(k - num_gpus), -k))]
        lo, hi = table.x[0], table.x[-1]
        if message_bytes <= lo:
            return table.s[0] * share
        if message_bytes >= hi:
            return table.s[-1] * message_bytes / hi * share
        found = table.at(message_bytes)
        assert found is not None
        return found * share


_ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "fp16": 2, "bf16": 2, "float32": 4, "float": 4, "int8": 1}


def arrays_from_parquet(
    custom_path: str | Path, nccl_path: str | Path, nccl_dtype: str = "half"
) -> dict[str, np.ndarray]:
    """aiconfigurator's ``custom_allreduce_perf.parquet`` and ``nccl_perf.parquet`` as ``from_arrays`` takes them.

    ``message_size`` is in elements of ``allreduce_dtype`` / ``nccl_dtype`` (converted to bytes),
    ``latency`` in milliseconds (converted to seconds); rows with latency <= 0 (not run) are
    dropped, repeated sizes averaged. Only NCCL's ``all_reduce`` rows of ``nccl_dtype`` are kept.
    """
    import pandas as pd  # only the table converter needs it

    def element_bytes(dtype: str) -> int:
        try:
            return _ELEMENT_BYTES[str(dtype).lower()]
        except KeyError:
            raise ValueError(f"unknown all-reduce dtype {dtype!r}; known: {', '.join(_ELEMENT_BYTES)}") from None

    out: dict[str, np.ndarray] = {}

    def add(frame: pd.DataFrame, backend: str, dtype_col: str) -> None:
        frame = frame[frame["latency"] > 0]
        for n, rows in frame.groupby("num_gpus"):
            nbytes = rows["message_size"].to_numpy(np.float64) * rows[dtype_col].map(element_bytes).to_numpy(np.float64)
            s = rows["latency"].to_numpy(np.float64) / 1e3
            table = pd.DataFrame({"b": nbytes, "s": s}).groupby("b")["s"].mean().sort_index()
            out[f"allreduce/{backend}/{int(n)}"] = np.vstack([table.index.to_numpy(np.float64), table.to_numpy()])

    custom = pd.read_parquet(custom_path)
    for backend in ("vllm_graph", "vllm_eager"):
        add(custom[custom["backend"] == backend], backend, "allreduce_dtype")
    nccl = pd.read_parquet(nccl_path)
    add(nccl[(nccl["op_name"] == "all_reduce") & (nccl["nccl_dtype"] == nccl_dtype)], "nccl", "nccl_dtype")
    return dict(sorted(out.items()))
