"""TensorRT-LLM's NVLink all-to-all under attention DP: measured on GB200, read for GB300, priced per MoE layer at a
rank's tokens in place of the all-gather and reduce-scatter."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.build import build
from simulator.config.presets import resolve_hardware, resolve_model
from simulator.config.scenario import validate_scenario
from simulator.cost.roofline import RooflineParams
from simulator.cost.shape import BatchShape
from simulator.cost.silicon import SiliconParams, database
from simulator.cost.silicon.model import SiliconCostModel
from simulator.cost.silicon.nvlink_a2a import TABLE, nvlink_all_to_all

DSV3 = resolve_model("deepseek-ai/DeepSeek-V3")
SHAPE = (7168, 8, 256)


def _table() -> pd.DataFrame:
    root = database.dependency_root()
    assert root is not None
    paths = sorted(
        (root / "gb200" / "comm" / "trtllm").glob(f"*/{TABLE}"), key=lambda p: database.version_key(p.parent.name)
    )
    assert paths, "aiconfigurator-core ships GB200's NVLink all-to-all table"
    return pd.read_parquet(paths[-1])


def test_two_sided_reads_prepare_dispatch_and_combine_as_measured():
    frame = _table()
    curves, source = nvlink_all_to_all("gb200", "nvlink_two_sided", "bfloat16", *SHAPE, 32)
    assert "NVLinkTwoSided" in source and "measured on gb200" in source
    rows = frame[
        (frame.kernel_source == "NVLinkTwoSided") & (frame.moe_dtype == "bfloat16") & (frame.moe_ep_size == 32)
    ]
    for curve, op in zip(curves, ("alltoall_prepare", "alltoall_dispatch", "alltoall_combine"), strict=True):
        ms = float(rows[(rows.op_name == op) & (rows.num_tokens == 128)].latency.median())
        assert curve(128) == pytest.approx(ms * 1e-3)
    # the table's milliseconds read as seconds: 128 tokens of 7168 bf16 values to up to 8 of 32 GPUs over NVLink 5 take
    # tens of microseconds (about 15 MB at 900 GB/s a direction is 16 us), not milliseconds or nanoseconds
    assert 10e-6 < curves[1](128) < 100e-6
    # one-sided: dispatch and combine only, measured with NVFP4 tokens alone
    one, _ = nvlink_all_to_all("gb200", "nvlink_one_sided", "nvfp4", *SHAPE, 32)
    assert len(one) == 2
    assert nvlink_all_to_all("gb200", "nvlink_one_sided", "bfloat16", *SHAPE, 32) is None
    assert nvlink_all_to_all("gb200", "nvlink_two_sided", "bfloat16", 4096, 8, 256, 32) is None  # another shape


def test_gb300_reads_gb200s_measurement_and_no_other_gpu_has_one():
    mine, _ = nvlink_all_to_all("gb200", "nvlink_two_sided", "bfloat16", *SHAPE, 8)
    theirs, source = nvlink_all_to_all("gb300", "nvlink_two_sided", "bfloat16", *SHAPE, 8)
    assert [c.times_s for c in theirs] == [c.times_s for c in mine]
    assert "read for gb300" in source
    assert nvlink_all_to_all("h200_sxm", "nvlink_two_sided", "bfloat16", *SHAPE, 8) is None


def test_the_silicon_model_prices_a_layer_at_a_ranks_tokens():
    gb300 = resolve_hardware("gb300")
    params = SiliconParams(roofline=RooflineParams(expert_all_to_all=True, all_to_all_kernel="nvlink_two_sided"))
    cost = SiliconCostModel(params, DSV3, gb300, tp=32, ep=32)
    step = BatchShape(num_decode_seqs=32 * 16, decode_context_tokens=32 * 16 * 4000, num_sampled_tokens=32 * 16)
    curves, _ = nvlink_all_to_all("gb300", "nvlink_two_sided", "bfloat16", *SHAPE, 32)
    per_layer = sum(c(16) for c in curves)  # 512 rows over 32 GPUs: 16 tokens a rank, bf16 (FP8 block scales)
    assert cost.breakdown(step).ops["all_to_all"].seconds == pytest.approx(per_layer * DSV3.num_moe_layers)
    assert "NVLinkTwoSided" in cost.sources(step)["all_to_all"]
    # where none was measured, one line naming the setting
    with pytest.raises(ValueError, match=r"all_to_all_kernel: no measurement .* nvlink_one_sided .* bfloat16"):
        SiliconCostModel(
            SiliconParams(roofline=RooflineParams(expert_all_to_all=True, all_to_all_kernel="nvlink_one_sided")),
            DSV3,
            gb300,
            tp=32,
            ep=32,
        )


def test_attention_dp_ranks_exchange_by_the_all_to_all_instead_of_gathering():
    """TensorRT-LLM's local layout on 32 GB300s, 16 requests a rank: the same step, its exchange by the gather and
    reduce-scatter, then by the NVLink all-to-all the GB300 FP8 recipes force (TRTLLM_FORCE_COMM_METHOD)."""

    def decode_step(roofline: dict) -> tuple[float, float]:
        scenario = {
            "model": "deepseek-ai/DeepSeek-V3",
            "hardware": "gb300",
            "parallelism": {"tp": 32, "ep": 32, "dp_attention": 32},
            "policy": {"kind": "trtllm"},
            "cost_model": {"kind": "silicon", "roofline": roofline},
            "workload": {"num_requests": 4},
        }
        engine = build(validate_scenario(scenario)).engines[0]
        shape = BatchShape(num_decode_seqs=16, decode_context_tokens=16 * 4000, num_sampled_tokens=16)
        step = engine.cost_model.breakdown_ranks((shape,) * 32)
        return step.total_s, step.ops["all_to_all"].seconds

    gathered_s, gather_s = decode_step({})
    a2a_s, a2a_exchange_s = decode_step({"expert_all_to_all": True, "all_to_all_kernel": "nvlink_two_sided"})
    curves, _ = nvlink_all_to_all("gb300", "nvlink_two_sided", "bfloat16", *SHAPE, 32)
    assert a2a_exchange_s == pytest.approx(sum(c(16) for c in curves) * DSV3.num_moe_layers)
    assert a2a_exchange_s < gather_s  # each token to its experts' ranks, not every rank's tokens to every rank
    assert a2a_s == pytest.approx(gathered_s - gather_s + a2a_exchange_s)


@pytest.mark.parametrize(
    ("policy", "roofline", "message"),
    [
        ("trtllm", {"all_to_all_kernel": "nvlink_two_sided"}, "needs expert_all_to_all: true"),
        ("sglang", {"expert_all_to_all": True, "all_to_all_kernel": "nvlink_two_sided"}, "the sglang engine runs"),
    ],
)
def test_asking_for_it_where_it_would_not_be_read_is_one_line(policy, roofline, message):
    scenario = {
        "model": "deepseek-ai/DeepSeek-V3",
        "hardware": "gb200",
        "parallelism": {"tp": 8, "ep": 8, "dp_attention": 8},
        "policy": {"kind": policy},
        "cost_model": {"kind": "silicon", "roofline": roofline},
        "workload": {"num_requests": 4},
    }
    with pytest.raises(ValueError, match=f"all_to_all_kernel: nvlink_two_sided .*{message}"):
        build(validate_scenario(scenario))
    scenario["cost_model"] = {"kind": "roofline", "all_to_all_kernel": "nvlink_two_sided"}
    with pytest.raises(ValueError, match="only the silicon cost model reads"):
        build(validate_scenario(scenario))


def test_a_table_without_a_column_is_one_line_naming_it(tmp_path, monkeypatch):
    from simulator.cost.silicon import nvlink_a2a

    folder = tmp_path / "gb200" / "comm" / "trtllm" / "9.9"
    folder.mkdir(parents=True)
    pd.DataFrame({"op_name": ["alltoall_dispatch"], "latency": [0.01]}).to_parquet(folder / TABLE)
    monkeypatch.setattr(database, "dependency_root", lambda: tmp_path)
    with pytest.raises(ValueError, match=r"trtllm_alltoall_perf\.parquet: no column kernel_source, moe_dtype"):
        nvlink_a2a._frame.__wrapped__("gb200")
