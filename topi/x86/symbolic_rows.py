"""Row-wise reductions (softmax, layer_norm, ...: `rows.py`) whose rows or row length are
symbolic: a model's dynamic batch and sequence (an attention softmax is `seq` rows of `seq`).

`rows.schedule_rows` wants static rows; without this, such a kernel took the generic schedule:
one row per vector lane (reads strided by the row length) and a pass over the whole tensor
per statistic, 1.7x slower than the static build's softmax and 3x its layer_norm. Here, as in
`rows.py`, each row's statistics are reduced in one vector of lanes over the contiguous row (a
symbolic row length ends in a masked vector), whose lanes are then reduced by halves, and its
output is written right after; the row loops stay nested, the last one split into
`rows.ROW_CHUNKS` parts, and the leading ones with those parts run as one parallel loop (serial
in a module's small-size variant).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.visitor import structural_equal

from . import rows
from .common import (
    fuse_parallel,
    parallel_pays,
    static_extent,
    traverse,
    vector_lanes,
)


def schedule_symbolic_rows(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule | None:
    """The row schedule of `outs` when it is row-wise (`rows.py`) with a symbolic extent among
    its rows or its row length, else None."""
    kernel = rows.row_kernel(outs)
    if kernel is None:
        return None
    out, computes, reductions, depth = kernel
    axes = list(out.op.axis)
    if depth is None or depth == 0 or depth > len(axes) or out.op.reduce_axis:
        return None
    kept = rows._kept_axes(reductions[0])
    if len(kept) != depth or not all(structural_equal(a.dom.extent, b.dom.extent)
                                     for a, b in zip(axes, kept)):
        return None
    extents = [*axes, *(k for op in reductions for k in op.reduce_axis)]
    if all(static_extent(a) is not None for a in extents):
        return None  # rows.schedule_rows
    s = tl.create_schedule(out.op)
    traverse(s, [out], lambda op: None)
    for op in computes:
        if op is not out.op and not op.reduce_axis:
            s[op].compute_inline()
    o = s[out]
    if axes[depth:]:
        _, lanes = o.split(axes[-1], factor=vector_lanes(out.dtype))
        o.vectorize(lanes)
    *outer, row = axes[:depth]
    if parallel_pays(out):
        row_outer, row = o.split(row, nparts=rows.ROW_CHUNKS)
        fuse_parallel(s, out, [*outer, row_outer])
    for op in reductions:  # producers first: expsum reads maxelem
        _reduce_in_lanes(s, op, o, row)
    return s


def _reduce_in_lanes(s: tl.Schedule, op: tl.ComputeOp, parent: tl.Stage,
                     row: tl.IterVar) -> None:
    """Compute reduction `op` per row at `row` of `parent`, first into one vector of partial
    results over its contiguous innermost axis (rfactor; a symbolic length ends in a masked
    vector), then that vector's lanes halved down to two (`_halve_lanes`)."""
    stage = s[op]
    tensor = op.output(0)
    k = op.reduce_axis[-1]
    lanes = vector_lanes(tensor.dtype)
    if len(op.body[0].source) == 1 and (static_extent(k) or lanes) >= lanes:
        _, k_lanes = stage.split(k, factor=lanes)
        partial = _rfactor_lanes(s, tensor, k_lanes, len(op.axis))
        for half in _halve_lanes(s, tensor, stage, lanes, len(op.axis)):
            partial.compute_at(half, half.leaf_iter_vars[len(op.axis) - 1])
            partial = half
        partial.compute_at(stage, stage.leaf_iter_vars[len(op.axis) - 1])
    stage.compute_at(parent, row)


def _rfactor_lanes(s: tl.Schedule, tensor: tl.Tensor, lanes: tl.IterVar,
                   depth: int) -> tl.Stage:
    """The stage of `tensor`'s partial results over `lanes` (one vector per row of `depth`
    axes), its reductions outside the vector."""
    p = s[s.rfactor(tensor, lanes, factor_axis=depth)]
    *data, lane = p.op.axis
    p.reorder(*data, *p.op.reduce_axis, lane)
    p.vectorize(lane)
    return p


def _halve_lanes(s: tl.Schedule, tensor: tl.Tensor, stage: tl.Stage, lanes: int,
                 depth: int) -> list[tl.Stage]:
    """Stages that reduce the vector of `lanes` partial results of `stage` to 2 by halves (a
    vector op of the two halves each), producers first; `stage` then reduces the last 2.

    Why: the masked last vector keeps the partial results in memory, and LLVM then reduced
    the lanes one by one: a chain of 15 scalar NaN-propagating maxima (about 8 instructions
    each) per row, where the static kernel's lanes, in registers, became a tree of vector
    maxima. Softmax rows of 16 took 2x the static kernel's time, of 64 1.5x."""
    halves = []
    while lanes > 2:
        lanes //= 2
        _, inner = stage.split(stage.op.reduce_axis[-1], factor=lanes)
        halves.append(_rfactor_lanes(s, tensor, inner, depth))
    return halves
