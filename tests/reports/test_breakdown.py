"""The step-time breakdown figure's colours: one per op of the shared decomposition, stable across models."""

from __future__ import annotations

from reports.breakdown import OP_COLOURS
from reports.style import PALETTE
from simulator.cost import OP_NAMES


def test_every_op_has_its_own_colour_and_the_gated_deltanet_ops_move_no_other():
    assert set(OP_COLOURS) == {*OP_NAMES, "kv_swap"}
    assert len(set(OP_COLOURS.values())) == len(OP_COLOURS)
    # the colours the ops had before the hybrid model's three were named: the palette in decomposition order, then
    # three greys
    others = [op for op in OP_NAMES if op not in ("linear_in_proj", "attn_linear", "linear_out_proj")]
    assert [OP_COLOURS[op] for op in (*others, "kv_swap")] == [*PALETTE, "#444444", "#AAAAAA", "#222222"]
