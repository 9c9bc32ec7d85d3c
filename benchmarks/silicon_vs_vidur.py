"""The cost models' per-op times against an independent measurement: Vidur's A100 op profiles.

Vidur (microsoft/vidur, MIT) timed every non-attention op of a decoder layer on A100 80 GB for
eight models at 1..32,768 tokens and TP 1/2/4/8 (``profiling/compute/a100/<org>/<model>/mlp.csv``,
medians). Neither cost model was built from these numbers: the ``silicon`` model reads NVIDIA
aiconfigurator's A100 GEMM tables, the roofline reads the datasheet. Per op, this prints the
geometric-mean ratio predicted / measured and the median absolute error of each model:

    qkv_proj  = attn_pre_proj + attn_rope     o_proj = attn_post_proj
    mlp_gate_up = mlp_up_proj   mlp_act = mlp_act   mlp_down = mlp_down_proj
    norm      = input_layernorm + post_attention_layernorm + add

    python benchmarks/silicon_vs_vidur.py [--shared ../shared/data/silicon]

Needs ../shared (the Vidur profiles are not shipped).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.build import make_cost_model
from simulator.config.presets import resolve_hardware
from simulator.config.specs import ModelSpec
from simulator.cost import BatchShape
from simulator.cost.roofline import RooflineParams
from simulator.cost.silicon import SiliconParams

ROOT = Path(__file__).resolve().parent.parent
OPS = {
    "qkv_proj": ("attn_pre_proj", "attn_rope"),
    "o_proj": ("attn_post_proj",),
    "mlp_gate_up": ("mlp_up_proj",),
    "mlp_act": ("mlp_act",),
    "mlp_down": ("mlp_down_proj",),
    "norm": ("input_layernorm", "post_attention_layernorm", "add"),
}


def spec_from(row: pd.Series, name: str) -> ModelSpec:
    heads, hidden = int(row.n_head), int(row.n_embd)
    return ModelSpec(
        name=name,
        num_layers=1,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(row.n_kv_head),
        head_dim=hidden // heads,
        intermediate_size=int(row.n_expanded_embd),
        gated_mlp=bool(row.use_gated_mlp),
        vocab_size=int(row.vocab_size),
        max_context_tokens=1 << 17,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data" / "silicon")
    args = parser.parse_args()
    hw = resolve_hardware("a100-80gb")
    ratios: dict[str, dict[str, list[float]]] = {"silicon": {}, "roofline": {}}
    for path in sorted((args.shared / "vidur" / "profiling" / "compute" / "a100").glob("*/*/mlp.csv")):
        frame = pd.read_csv(path)
        name = path.parent.name
        for tp, part in frame.groupby("num_tensor_parallel_workers"):
            model = spec_from(part.iloc[0], name)
            try:
                model.check_tensor_parallel(int(tp))
            except ValueError:
                continue
            costs = {
                "silicon": make_cost_model(SiliconParams(), model, hw, int(tp)),
                "roofline": make_cost_model(RooflineParams(), model, hw, int(tp)),
            }
            for _, row in part.iterrows():
                tokens = int(row.num_tokens)
                shape = BatchShape((tokens,), (0,), num_sampled_tokens=1)
                for kind, cost in costs.items():
                    ops = cost.breakdown(shape).ops
                    for op, columns in OPS.items():
                        keys = [f"time_stats.{c}.median" for c in columns]
                        if not all(k in row and np.isfinite(row[k]) for k in keys):
                            continue  # this model's profile lacks the op (phi-2: no post-attention norm)
                        measured = sum(row[k] for k in keys) * 1e-3
                        if measured > 0 and op in ops:
                            ratios[kind].setdefault(op, []).append(ops[op].seconds / measured)
    print("op            model      points  geomean pred/measured  median |err|  p90 |err|")
    for op in OPS:
        for kind in ("silicon", "roofline"):
            r = np.asarray(ratios[kind].get(op, []))
            if not len(r):
                continue
            err = np.abs(r - 1)
            print(
                f"{op:13s} {kind:9s} {len(r):7d}  x{math.exp(np.log(r).mean()):.3f}"
                f"                {np.median(err):6.1%}      {np.quantile(err, 0.9):6.1%}"
            )


if __name__ == "__main__":
    main()
