"""Row-wise reductions on x86: softmax, log_softmax, layer_norm, RMSNorm's mean and every kernel
whose reductions run along the trailing axes of what they read, with an elementwise output over
the same rows.

The generic reduction schedule vectorizes the innermost *kept* axis, so a reduction along the
contiguous last axis (a softmax row, a layer_norm row) reads one element per row into each lane:
strided gathers, and each statistic a pass of its own over the whole tensor. Here one loop runs
over the rows (in parallel when the tensor is large): for each row, each statistic is reduced in
vector lanes over the contiguous row (rfactor: one vector of partial results, then the lanes),
and the row's output is written right after, while the row is still in L1.

A kernel qualifies when every reduction reads its source as (kept axes..., reduced axes...) in
order, and its kept axes (less trailing axes of 1) are the leading axes of the output: then a
row of the output needs exactly one row of each statistic.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Reduce, TensorRead, Var
from tensorlang.visitor import nodes_below

from .common import (
    as_tensor_list,
    compute_ops,
    fuse_parallel,
    static_extent,
    traverse,
    vector_lanes,
)


def row_kernel(outs: tl.Tensor | Sequence[tl.Tensor]
               ) -> tuple[tl.Tensor, list[tl.ComputeOp], list[tl.ComputeOp], int | None] | None:
    """(the output, its compute ops producers first, those that reduce, the row depth they all
    share) when `outs` is one output whose reductions share a row depth, else None."""
    outs = as_tensor_list(outs)
    if len(outs) != 1:
        return None
    computes = compute_ops(outs)
    reductions = [op for op in computes if op.reduce_axis]
    depths = {_row_depth(op) for op in reductions}
    if not reductions or len(depths) != 1:
        return None
    return outs[0], computes, reductions, depths.pop()


def schedule_rows(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule | None:
    """The row schedule of `outs`, or None when the kernel is not row-wise (module docstring)."""
    kernel = row_kernel(outs)
    if kernel is None:
        return None
    out, computes, reductions, depth = kernel
    if depth is None or depth == 0 or depth > len(out.op.axis) or any(
            static_extent(a) != static_extent(b) or static_extent(a) is None
            for a, b in zip(out.op.axis, _kept_axes(reductions[0]))):
        return None
    s = tl.create_schedule(out.op)
    traverse(s, [out], lambda op: None)
    for op in computes:
        if op is not out.op and not op.reduce_axis:
            s[op].compute_inline()  # the normalised output (a row of it per row of `out`)
    # rfactor comes before any other step on a stage, the output's rows included where the
    # output is itself a reduction (a sum over the last axis, large enough to run in parallel)
    partials = [_factor_in_lanes(s, op) for op in reductions]
    row = _schedule_output(s, out, depth, reductions)
    for op, partial in zip(reductions, partials):  # producers first: expsum reads maxelem
        _reduce_in_lanes(s, op, partial, s[out], row)
    return s


def _kept_axes(op: tl.ComputeOp) -> list:
    """The data axes of reduction `op` without its trailing axes of extent 1 (keepdims)."""
    axes = list(op.axis)
    while axes and static_extent(axes[-1]) == 1:
        axes.pop()
    return axes


def _row_depth(op: tl.ComputeOp) -> int | None:
    """How many leading axes a row has for reduction `op`: its kept axes, when it reads a
    source indexed with exactly its kept axes then its reduction axes (so that the innermost
    reduction walks a contiguous row); else None."""
    body = op.body[0]
    if len(op.body) != 1 or not isinstance(body, Reduce):
        return None
    kept = _kept_axes(op)
    expected = [a.var for a in (*kept, *op.reduce_axis)]

    def is_row(read: TensorRead) -> bool:
        return len(read.indices) == len(expected) and all(
            isinstance(i, Var) and i is v for i, v in zip(read.indices, expected))

    reads = [n for src in body.source for n in nodes_below(src) if isinstance(n, TensorRead)]
    return len(kept) if any(is_row(r) for r in reads) else None


def _schedule_output(s: tl.Schedule, out: tl.Tensor, depth: int,
                     reductions: Sequence[tl.ComputeOp]) -> tl.IterVar:
    """Loops over the output's `depth` leading axes (the rows) and the innermost of the other
    axes vectorized; returns the innermost row loop, where a row's statistics are computed.

    When the rows read enough data to pay for waking the threads, the leading row axes and
    the outer part of the last one, split into `ROW_CHUNKS` parts, run as one parallel loop,
    and each chunk runs its rows one by one."""
    o = s[out]
    axes = list(o.op.axis)
    inner = axes[depth:]
    if inner and not o.op.reduce_axis:  # (a reduction's kept axes past the rows are 1s)
        lanes = vector_lanes(out.dtype)
        last = inner[-1]
        if (static_extent(last) or 0) > lanes:
            _, last = o.split(last, factor=lanes)
        o.vectorize(last)
    *outer, row = axes[:depth]
    if not _parallel_pays(reductions):
        return row
    rows = static_extent(row)
    if rows is not None and rows >= 2 * ROW_CHUNKS:
        row_outer, row = o.split(row, nparts=ROW_CHUNKS)
        outer.append(row_outer)
    if outer:
        fuse_parallel(s, out, outer)
    else:
        o.parallel(row)
    return row


#: Parts of the last row axis in the parallel loop: enough chunks for a few threads.
ROW_CHUNKS = 8


#: Elements the reductions of a kernel read before the rows run in parallel: about ten
#: microseconds of one core's work (a layer_norm of 128 x 256 reads 64K), where waking the
#: thread pool costs a few. Smaller kernels run on the calling thread.
PARALLEL_ELEMENTS = 32 * 1024


def _parallel_pays(reductions: Sequence[tl.ComputeOp]) -> bool:
    elements = 0
    for op in reductions:
        count = 1
        for a in (*op.axis, *op.reduce_axis):
            extent = static_extent(a)
            if extent is None:
                return True
            count *= extent
        elements += count
    return elements >= PARALLEL_ELEMENTS


def _factor_in_lanes(s: tl.Schedule, op: tl.ComputeOp) -> tl.Tensor | None:
    """Reduction `op` first into one vector of partial results (rfactor), where it reduces a
    contiguous innermost axis at least one vector long; else None."""
    tensor = op.output(0)
    k = op.reduce_axis[-1]
    lanes = vector_lanes(tensor.dtype)
    if len(op.body[0].source) != 1 or (static_extent(k) or 0) < lanes:
        return None
    _, k_lanes = s[op].split(k, factor=lanes)
    return s.rfactor(tensor, k_lanes, factor_axis=len(op.axis))


def _reduce_in_lanes(s: tl.Schedule, op: tl.ComputeOp, partial: tl.Tensor | None,
                     parent: tl.Stage, row: tl.IterVar) -> None:
    """Compute reduction `op` per row at `row` of `parent`, from its vector of `partial`
    results where it has one (`_factor_in_lanes`)."""
    stage = s[op]
    if partial is not None:
        p = s[partial]
        *data, lane = p.op.axis
        p.reorder(*data, *p.op.reduce_axis, lane)
        p.vectorize(lane)
        if stage is parent:  # the output is the reduction: its partials per row
            p.compute_at(parent, row)
        else:
            p.compute_at(stage, stage.leaf_iter_vars[len(op.axis) - 1])
    if stage is not parent:
        stage.compute_at(parent, row)
