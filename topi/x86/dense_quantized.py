"""x86 schedule of the weight-quantized dense (`topi.nn.dense_quantized`).

At batch 1 the product is a matrix-vector product whose time is the time to read the weight,
which it reads in panels of output channels (`topi.nn.quantized_panels`), one sequential stream
per panel. A panel's channels are the vector lanes of its accumulators: the inner loop loads a
vector of packed weights (one per channel), widens it to float32 and multiplies it with one
broadcast element of the data into the panel's accumulators, a few vectors whose chains
interleave. Per group, the group's sums are scaled (and offset by the zero points) into a
second set of accumulators. The panels run in parallel (each core streams its own part of the
weight), and with more rows of data (prefill) each panel is re-read from cache for every row.
The weight packing, when it runs in the kernel (a weight that is no graph constant), runs in
parallel over the panels; the data's group sums (int4) are one small vectorized stage first.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from ..nn.dense_int8 import PACK_TAG
from ..nn.dense_quantized import DATA_SUMS_TAG, GROUPS_TAG, TAG
from .common import compute_chain_at, compute_ops, static_extent, vector_lanes
from .config import schedule_tagged


def _producers(t: tl.Tensor, tag: str) -> list[tl.Tensor]:
    return [p for p in t.op.input_tensors if getattr(p.op, "tag", "") == tag]


def _accumulate_in_lanes(stage: tl.Stage, lanes: int) -> None:
    """Reduction loops outside, the output channels inside: unrolled vectors of `lanes`."""
    *spatial, channels = stage.op.axis
    vectors, lane = stage.split(channels, factor=lanes)
    stage.reorder(*spatial, *stage.op.reduce_axis, vectors, lane)
    stage.vectorize(lane)
    stage.unroll(vectors)


def _schedule_data_sums(s: tl.Schedule, sums: tl.Tensor, lanes: int) -> None:
    """Each group's sum of the data as vector adds (rfactor over lanes), not a scalar chain."""
    (t,) = sums.op.reduce_axis
    if static_extent(t) % lanes:
        return
    _, lane = s[sums].split(t, factor=lanes)
    partial = s.rfactor(sums, lane)
    p = s[partial]
    p.compute_at(s[sums], s[sums].op.axis[-1])
    p.reorder(*p.op.axis[1:], *p.op.reduce_axis, p.op.axis[0])
    p.vectorize(p.op.axis[0])


def schedule_dense_quantized_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor) -> None:
    """Schedule the product stage `gemm` (tag `TAG`) with its epilogue ending in `out` (module
    docstring)."""
    lanes = vector_lanes("float32")
    for op in compute_ops([out]):
        if op.tag == PACK_TAG:
            s[op].parallel(s[op].op.axis[0])
    for sums in _producers(gemm, DATA_SUMS_TAG):
        _schedule_data_sums(s, sums, lanes)
    groups = _producers(gemm, GROUPS_TAG)
    rows = gemm.op.attrs["panel_rows"]
    if gemm.op is out.op:
        out, gemm = gemm, s.cache_write(gemm, "local")
    o = s[out]
    i, j = o.op.axis
    j_outer, j_inner = o.split(j, factor=rows)
    o.reorder(j_outer, i, j_inner)
    o.parallel(j_outer)
    o.vectorize(o.split(j_inner, factor=lanes)[1])
    compute_chain_at(s, out, gemm, i)
    _accumulate_in_lanes(s[gemm], lanes)
    for group in groups:
        g = s[group]
        g.compute_at(s[gemm], s[gemm].op.reduce_axis[0])
        _accumulate_in_lanes(g, lanes)
        if len(g.op.reduce_axis) == 3:  # int4: both nibbles of a byte in a row
            g.unroll(g.op.reduce_axis[-1])


def schedule_dense_quantized(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule the weight-quantized dense with its fused elementwise tail."""
    return schedule_tagged(outs, {TAG: "dense_quantized.x86"}, schedule_dense_quantized_with)
