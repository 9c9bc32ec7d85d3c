"""The tensor-parallel all-reduce models of simulator/cost/collectives.py."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from simulator.build import make_cost_model
from simulator.config.presets import hardware_presets, model_presets
from simulator.cost import BatchShape
from simulator.cost.collectives import (
    CUSTOM_AR_MAX_BYTES,
    AllReduceLatencyModel,
    MeasuredAllReduce,
    arrays_from_parquet,
    fitted_max_rel_error,
    fitted_tables,
)
from simulator.cost.roofline import RooflineParams

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
SIZES = (16 * KiB, 1 * MiB, 4 * MiB, 32 * MiB, 256 * MiB)
# Measured seconds at SIZES, copied (4 significant digits) from aiconfigurator's tables in
# ../shared/data/silicon/aiconfigurator/<gpu>/comm/: vllm/<ver>/custom_allreduce_perf.parquet
# (vllm_graph) below 8 MiB, nccl/<ver>/nccl_perf.parquet (all_reduce, half) from 8 MiB.
MEASURED = {
    "a100_sxm": {
        2: (5.337e-06, 1.07e-05, 2.524e-05, 0.0002242, 0.00143),
        4: (6.002e-06, 1.834e-05, 4.148e-05, 0.000288, 0.001927),
        8: (6.537e-06, 2.171e-05, 4.537e-05, 0.000367, 0.002182),
    },
    "h100_sxm": {
        2: (4.493e-06, 8.34e-06, 2.024e-05, 0.0001436, 0.0008813),
        4: (4.832e-06, 1.276e-05, 3.025e-05, 0.0001757, 0.001181),
        8: (5.31e-06, 1.497e-05, 3.081e-05, 0.0001998, 0.001092),
    },
    "h200_sxm": {
        2: (4.553e-06, 8.429e-06, 2.049e-05, 0.0001391, 0.0008858),
        4: (4.816e-06, 1.21e-05, 2.983e-05, 0.0001716, 0.00118),
        8: (5.154e-06, 1.407e-05, 2.843e-05, 0.0001973, 0.001053),
    },
    "b200_sxm": {
        2: (7.098e-06, 1.312e-05, 3.367e-05, 8.325e-05, 0.0005213),
        4: (7.363e-06, 1.842e-05, 2.996e-05, 0.0001228, 0.0006591),
        8: (8.073e-06, 1.717e-05, 2.631e-05, 0.0001678, 0.0007154),
    },
    "l40s": {
        2: (6.222e-06, 6.025e-05, 0.0002294, 0.001689, 0.01337),
        4: (1.751e-05, 0.0003606, 0.001649, 0.009837, 0.07836),
        8: (2.737e-05, 0.0005826, 0.004014, 0.03885, 0.3239),
    },
}

HW = hardware_presets()
LLAMA_70B = model_presets()["llama-3.1-70b"]
DECODE_1 = BatchShape(num_decode_seqs=1, decode_context_tokens=1000, num_sampled_tokens=1)


# -- the fitted alpha-beta model -------------------------------------------------------


@pytest.mark.parametrize("gpu", sorted(MEASURED))
def test_fit_is_within_its_stated_error_at_table_points(gpu):
    model = AllReduceLatencyModel.fitted(gpu)
    stated = fitted_max_rel_error(gpu)
    for n, measured in MEASURED[gpu].items():
        assert stated[n] <= 0.4  # the module's stated fit error stays in a sane range
        for b, t in zip(SIZES, measured, strict=True):
            err = abs(model.seconds(b, n) / t - 1)
            assert err <= stated[n] + 1e-3, (gpu, n, b, err, stated[n])


def test_every_fit_belongs_to_a_preset_and_presets_without_one_derive_it_from_their_links():
    by_tables = {hw.silicon_tables: hw for hw in HW.values() if hw.silicon_tables is not None}
    assert set(fitted_tables()) == set(MEASURED) <= set(by_tables)  # the GPUs it was fitted on
    for name, hw in by_tables.items():
        model = AllReduceLatencyModel.for_hardware(hw)
        if name in fitted_tables():
            assert model.source == f"fitted:{name}"
            continue
        # measured GPUs fitted later (b300_sxm, gb200, rtx_pro_6000_server, ...): the datasheet model, which
        # at a large message is the link's bytes at 80% of its bandwidth
        assert model.source == "derived"
        n, b = 8, 256 * MiB
        assert model.seconds(b, n) == pytest.approx(
            2 * hw.interconnect_latency_s + 2 * (n - 1) / n * b / (0.8 * hw.interconnect_bandwidth_bytes_per_s)
        )
    assert any(name not in fitted_tables() for name in by_tables)  # the derived path above is exercised


def test_decode_size_all_reduce_on_nvlink_is_a_few_microseconds_flat_in_tp():
    model = AllReduceLatencyModel.for_hardware(HW["h100-sxm"])
    msg = 2 * 8192  # one token of a 70B model's hidden state in bf16
    times = [model.seconds(msg, n) for n in (2, 4, 8)]
    assert all(3e-6 < t < 7e-6 for t in times)
    assert times[2] < 1.3 * times[0]


def test_unfitted_tp_uses_the_nearest_fitted_constants():
    model = AllReduceLatencyModel.fitted("h100_sxm")
    fit8 = model.fits[8]
    b = 64 * KiB
    assert model.seconds(b, 6) == fit8.custom_s(b, 6)  # 6 is as near 4 as 8: the larger
    assert model.seconds(64 * MiB, 16) == fit8.nccl_s(64 * MiB, 16)
    assert model.seconds(b, 1) == 0.0
    assert model.seconds(0, 8) == 0.0


def test_custom_cap_switches_to_nccl():
    model = AllReduceLatencyModel.fitted("h100_sxm")
    fit = model.fits[4]
    below, at = CUSTOM_AR_MAX_BYTES - 16, CUSTOM_AR_MAX_BYTES
    assert model.seconds(below, 4) == fit.custom_s(below, 4)
    assert model.seconds(at, 4) == fit.nccl_s(at, 4)


def test_a_group_spanning_nodes_reduces_within_each_node_then_between_them():
    # H100 boards of 8 GPUs, one 400 Gb/s NIC per GPU, 10 us a message between nodes
    model = AllReduceLatencyModel.for_hardware(HW["h100-sxm"])
    out = model.scale_out
    assert (out.gpus_per_node, out.bandwidth_bytes_per_s, out.latency_s) == (8, 50e9, 10e-6)
    msg = 2 * 7168  # one token of DeepSeek-V3's hidden state in bf16
    within = model.seconds(msg, 8)
    assert model.seconds(msg, 4) == AllReduceLatencyModel.fitted("h100_sxm").seconds(msg, 4)  # one node: as before
    # 16 GPUs on 2 nodes: one round trip between them, and each NIC carries 1/8 of the message
    assert model.seconds(msg, 16) == pytest.approx(within + 2 * 10e-6 + (msg / 8) / 50e9)
    # 32 GPUs on 4 nodes: a ring of 4 nodes, 6 messages
    assert model.seconds(msg, 32) == pytest.approx(within + 6 * 10e-6 + 2 * 3 / 4 * (msg / 8) / 50e9)
    big = 256 * MiB  # bandwidth-bound: each NIC's 1/8 share at the network's 50 GB/s, on top of NVLink's
    assert model.seconds(big, 16) == pytest.approx(model.seconds(big, 8) + 2 * 10e-6 + (big / 8) / 50e9)
    # a GB200 NVL72 rack joins 72 GPUs over NVLink: 16 or 64 of them never leave it
    rack = AllReduceLatencyModel.for_hardware(HW["gb200"])
    assert rack.scale_out.gpus_per_node == 72
    gb200 = HW["gb200"]
    nvlink = AllReduceLatencyModel.derived(gb200.interconnect_bandwidth_bytes_per_s, gb200.interconnect_latency_s)
    assert rack.scale_out.between_nodes_s(msg, 64) == 0.0
    assert rack.seconds(msg, 64) == nvlink.seconds(msg, 64)


# -- the roofline with it --------------------------------------------------------------


@pytest.mark.parametrize("hw", ["h100-sxm", "mi300x"])
def test_tp8_70b_decode_is_faster_than_tp4(hw):
    def step(tp):
        return make_cost_model(RooflineParams(), LLAMA_70B, HW[hw], tp).step_time(DECODE_1).total_s

    assert step(8) < step(4) < step(2)


def test_roofline_all_reduce_is_the_latency_model_times_two_per_layer():
    h = HW["h100-sxm"]
    cm = make_cost_model(RooflineParams(), LLAMA_70B, h, 8)
    ops = cm.breakdown(DECODE_1).ops
    one = AllReduceLatencyModel.for_hardware(h).seconds(2 * LLAMA_70B.hidden_size, 8)
    assert ops["all_reduce"].seconds == pytest.approx(2 * LLAMA_70B.num_layers * one)
    assert ops["all_reduce"].flops == 0.0


# -- the derived model (no tables) -----------------------------------------------------


def test_derived_model_latency_does_not_grow_linearly_with_tp():
    mi = HW["mi300x"]
    assert mi.silicon_tables is None
    model = AllReduceLatencyModel.for_hardware(mi)
    assert model.source == "derived"
    for b in np.geomspace(8 * KiB, 256 * MiB, 30):
        t2 = model.seconds(b, 2)
        for n in (4, 6, 8):  # within one node of 8 (16 GPUs span two: the network's time comes on top)
            assert model.seconds(b, n) <= 2 * t2  # the byte term is at most 2x, the fixed cost flat
    small = 16 * KiB
    assert model.seconds(small, 8) < 1.1 * model.seconds(small, 2)  # the old ring model: 7x
    assert model.seconds(small, 2) == pytest.approx(mi.interconnect_latency_s, rel=0.02)
    # bandwidth-bound: 2(n-1)/n x bytes at efficiency x the link bandwidth
    big = 256 * MiB
    bw = mi.interconnect_bandwidth_bytes_per_s * 0.8
    assert model.seconds(big, 8) == pytest.approx(2 * mi.interconnect_latency_s + 1.75 * big / bw)


def test_derived_efficiency_scales_bandwidth_only():
    slow = AllReduceLatencyModel.derived(100e9, 5e-6, efficiency=0.5)
    fast = AllReduceLatencyModel.derived(100e9, 5e-6, efficiency=1.0)
    b = 64 * MiB
    assert slow.seconds(b, 4) - 1e-5 == pytest.approx(2 * (fast.seconds(b, 4) - 1e-5))


# -- the measured tables ---------------------------------------------------------------


def tables():
    graph2 = np.array([[1 * KiB, 16 * KiB, 1 * MiB, 4 * MiB, 8 * MiB], [4e-6, 4.5e-6, 8e-6, 20e-6, 45e-6]])
    eager2 = np.array([[1 * KiB, 1 * MiB, 8 * MiB], [20e-6, 20e-6, 50e-6]])
    nccl2 = np.array([[1 * KiB, 8 * MiB, 64 * MiB, 512 * MiB], [6e-6, 47e-6, 250e-6, 1.7e-3]])
    nccl8 = np.array([[1 * KiB, 1 * MiB, 64 * MiB], [16e-6, 25e-6, 320e-6]])
    return {
        "allreduce/vllm_graph/2": graph2,
        "allreduce/vllm_eager/2": eager2,
        "allreduce/nccl/2": nccl2,
        "allreduce/nccl/8": nccl8,
        "gemm/h100": np.zeros((3, 3)),  # other tables in the same mapping are ignored
    }


def test_measured_is_exact_on_table_points():
    arrays = tables()
    m = MeasuredAllReduce.from_arrays(arrays)
    for b, t in arrays["allreduce/vllm_graph/2"].T:
        if b < CUSTOM_AR_MAX_BYTES:
            assert m.seconds(b, 2, cuda_graph=True) == t
    for b, t in arrays["allreduce/vllm_eager/2"].T:
        if b < CUSTOM_AR_MAX_BYTES:
            assert m.seconds(b, 2, cuda_graph=False) == t
    for b, t in arrays["allreduce/nccl/2"].T:
        if b >= CUSTOM_AR_MAX_BYTES:
            assert m.seconds(b, 2, cuda_graph=True) == t
            assert m.seconds(b, 2, cuda_graph=False) == t
    for b, t in arrays["allreduce/nccl/8"].T:  # no vLLM table for 8 GPUs: NCCL at every size
        assert m.seconds(b, 8) == t


def test_measured_interpolates_log_log_and_is_monotone_between_points():
    m = MeasuredAllReduce.from_arrays(tables())
    # halfway in log bytes between 1 MiB (8 us) and 4 MiB (20 us): the geometric mean
    assert m.seconds(2 * MiB, 2) == pytest.approx(math.sqrt(8e-6 * 20e-6))
    for lo, hi, t_lo, t_hi, cuda_graph in [
        (1 * KiB, 16 * KiB, 4e-6, 4.5e-6, True),
        (16 * KiB, 1 * MiB, 4.5e-6, 8e-6, True),
        (1 * MiB, 4 * MiB, 8e-6, 20e-6, True),
        (1 * KiB, 1 * MiB, 20e-6, 20e-6, False),
        (8 * MiB, 64 * MiB, 47e-6, 250e-6, True),
    ]:
        xs = np.geomspace(lo, hi, 50)
        ys = [m.seconds(x, 2, cuda_graph) for x in xs]
        assert all(a <= b for a, b in itertools.pairwise(ys))
        assert all(t_lo * (1 - 1e-12) <= y <= t_hi * (1 + 1e-12) for y in ys)


def test_measured_is_none_outside_the_range_or_for_unmeasured_gpus():
    m = MeasuredAllReduce.from_arrays(tables())
    assert m.seconds(512, 2) is None  # below the smallest measured size
    assert m.seconds(1 * GiB, 2) is None  # above NCCL's largest
    assert m.seconds(128 * MiB, 8) is None
    assert m.seconds(1 * MiB, 4) is None  # 4 GPUs not measured
    assert m.seconds(1 * MiB, 1) == 0.0
    assert m.num_gpus() == (2, 8)


def test_measured_custom_cap_none_uses_vllm_tables_everywhere():
    m = MeasuredAllReduce.from_arrays(tables(), custom_max_bytes=None)
    assert m.seconds(8 * MiB, 2) == 45e-6  # the vllm_graph row, not NCCL's 47 us
    assert m.seconds(64 * MiB, 2) is None  # beyond vLLM's table: NCCL is not consulted
    assert MeasuredAllReduce.from_arrays(tables()).seconds(8 * MiB, 2) == 47e-6


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("allreduce/vllm_graph", np.ones((2, 2)), "allreduce/<backend>/<num_gpus>"),
        ("allreduce/vllm_graph/2", np.ones((3, 2)), "shape"),
        ("allreduce/vllm_graph/2", np.array([[2.0, 1.0], [1e-6, 2e-6]]), "strictly increasing"),
        ("allreduce/vllm_graph/2", np.array([[1.0, 2.0], [0.0, 2e-6]]), "positive"),
        ("allreduce/mpi/2", np.array([[1.0, 2.0], [1e-6, 2e-6]]), "unknown backend"),
    ],
)
def test_from_arrays_rejects_bad_tables(key, value, match):
    with pytest.raises(ValueError, match=match):
        MeasuredAllReduce.from_arrays({key: value})


def test_arrays_from_parquet_converts_elements_and_milliseconds(tmp_path):
    custom = pd.DataFrame(
        {
            "backend": ["vllm_graph", "vllm_graph", "vllm_eager", "vllm_graph"],
            "allreduce_dtype": ["bfloat16"] * 4,
            "num_gpus": [2, 2, 2, 4],
            "message_size": [256, 128, 128, 128],
            "latency": [0.005, 0.004, 0.02, 0.0],  # the last was not run
        }
    )
    nccl = pd.DataFrame(
        {
            "op_name": ["all_reduce", "all_reduce", "all_gather", "all_reduce"],
            "nccl_dtype": ["half", "int8", "half", "half"],
            "num_gpus": [2, 2, 2, 2],
            "message_size": [4096, 4096, 4096, 8192],
            "latency": [0.01, 0.02, 0.03, 0.012],
        }
    )
    custom.to_parquet(tmp_path / "c.parquet")
    nccl.to_parquet(tmp_path / "n.parquet")
    arrays = arrays_from_parquet(tmp_path / "c.parquet", tmp_path / "n.parquet")
    assert sorted(arrays) == ["allreduce/nccl/2", "allreduce/vllm_eager/2", "allreduce/vllm_graph/2"]
    np.testing.assert_array_equal(arrays["allreduce/vllm_graph/2"], [[256.0, 512.0], [4e-6, 5e-6]])
    np.testing.assert_array_equal(arrays["allreduce/vllm_eager/2"], [[256.0], [2e-5]])
    np.testing.assert_array_equal(arrays["allreduce/nccl/2"], [[8192.0, 16384.0], [1e-5, 1.2e-5]])
    assert all(a.dtype == np.float64 and a.shape[0] == 2 for a in arrays.values())
    m = MeasuredAllReduce.from_arrays(arrays)
    assert m.seconds(256, 2) == 4e-6


def test_measured_all_gather_and_reduce_scatter_are_read_as_measured():
    """NCCL's all-gather and reduce-scatter tables (nccl-tests' whole-buffer bytes) on B200: a measured size reads
    its time; below the smallest, the smallest's time; above the largest, the largest's scaled by the bytes; an
    unmeasured number of GPUs reads the nearest (the larger on a tie); a group spanning nodes adds half an
    all-reduce's network term."""
    from simulator.cost.collectives import MeasuredCollective, ScaleOut
    from simulator.cost.silicon.tables import load_tables

    arrays = load_tables("b200_sxm", "trtllm").nccl_arrays("all_gather")
    assert sorted(arrays) == [2, 4, 8]
    x, s = arrays[8]
    gather = MeasuredCollective(arrays)
    assert gather.seconds(float(x[5]), 8) == float(s[5])
    assert gather.seconds(float(x[0]) / 10, 8) == float(s[0])
    assert gather.seconds(float(x[-1]) * 3, 8) == pytest.approx(float(s[-1]) * 3)
    assert gather.seconds(float(x[5]), 6) == float(arrays[8][1][5])  # 6 -> 8 (4 and 8 are as near: the larger)
    assert gather.seconds(float(x[5]), 1) == 0.0 and gather.seconds(0.0, 8) == 0.0
    nodes = ScaleOut(8, 50e9, 5e-6)
    spanning = MeasuredCollective(arrays, nodes)
    b = float(x[10])
    assert spanning.seconds(b, 16) == pytest.approx(float(s[10]) + nodes.between_nodes_s(b, 16) / 2)
    assert spanning.seconds(b, 8) == float(s[10])
    # above every measured count (one NVLink domain of 32): the largest's time by each GPU's share of the buffer
    assert gather.seconds(b, 32) == pytest.approx(float(s[10]) * (31 / 32) / (7 / 8))
