"""x86 schedule of the weight-quantized dense (`topi.nn.dense_quantized`).

At batch 1 the product is a matrix-vector product whose time is the time to read the weight:
each weight byte is read once, in order. The innermost reduction axis (16 positions of a group:
one int4 block's bytes, or a run of int8 weights) is factored into vector lanes (rfactor), so
that the inner loop loads a vector of packed weights, widens it to float32, subtracts the zero
point, multiplies by the group's scale (one broadcast value per run) and accumulates it with the
data by FMA. `rows` output channels at a time interleave their chains, the blocks of channels
run in parallel (both cores stream their own part of the weight), and with more rows of data
(prefill) each block's weights are re-read from cache for every row.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from ..nn.dense_quantized import TAG
from .common import compute_chain_at, static_extent, vector_lanes
from .config import schedule_tagged

#: Output channels per parallel block (their FMA chains interleave in the inner loop).
ROWS = 4


def schedule_dense_quantized_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor) -> None:
    """Schedule the product stage `gemm` (tag `TAG`) with its epilogue ending in `out` (module
    docstring)."""
    lanes = vector_lanes("float32")
    cfg.define_knob("rows", [ROWS, 2, 8])
    stage = s[gemm]
    inner = gemm.op.reduce_axis[-1]
    if static_extent(inner) % lanes == 0 and static_extent(inner) == lanes:
        lane_axis = inner
    else:
        _, lane_axis = stage.split(inner, factor=lanes)
    partial = s.rfactor(gemm, lane_axis, factor_axis=2)
    o = s[out]
    i, j = o.op.axis
    j_outer, j_inner = o.split(j, factor=cfg["rows"].val)
    o.reorder(j_outer, i, j_inner)
    o.parallel(j_outer)
    compute_chain_at(s, out, gemm, i)
    p = s[partial]
    if gemm.op is out.op:
        p.compute_at(o, i)
    else:
        p.compute_at(s[gemm], s[gemm].op.axis[0])
    pi, pj, pl = p.op.axis
    p.reorder(pi, *p.op.reduce_axis, pj, pl)
    p.vectorize(pl)
    p.unroll(pj)


def schedule_dense_quantized(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule the weight-quantized dense with its fused elementwise tail."""
    return schedule_tagged(outs, {TAG: "dense_quantized.x86"}, schedule_dense_quantized_with)
