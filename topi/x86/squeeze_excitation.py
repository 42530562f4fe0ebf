"""x86 schedule of the squeeze-and-excitation kernels (`topi.nn.squeeze_excitation`).

Only the pool reads the whole block input, so only it (and a scaled weight larger than the L2
size) runs in parallel, over images and channel blocks, with the channels of a block in the
vector lanes and the plane reduced inside. The mat-vecs are a few thousand multiply-adds: each
runs on the calling thread with its outputs in the vector lanes (rows of the transposed weights
are contiguous), where a parallel loop would cost more to wake than it saves. Every stage is
computed in full before the next (each needs all of the previous one).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.arith import const_value
from tensorlang.dtype import as_dtype

from .common import (
    as_tensor_list,
    compute_ops,
    fuse_parallel,
    parallel_pays,
    schedule_injective_stage,
    static_extent,
    vector_lanes,
)


def _nbytes(t: tl.Tensor) -> int:
    """Bytes of a tensor of static shape (the SE computes require one)."""
    elements = 1
    for d in t.shape:
        elements *= d if isinstance(d, int) else const_value(d)
    return elements * as_dtype(t.dtype).itemsize


def _schedule_pool(s: tl.Schedule, op: tl.ComputeOp) -> None:
    """Channels (the block, or NCHW's channel axis) in the lanes, the plane reduced inside;
    images and blocks in parallel when the block input is at least the L2 size."""
    stage = s[op]
    *outer, inner = op.axis
    if len(op.axis) == 3:  # NCHW<b>c: the block's channels are contiguous
        stage.reorder(*outer, *op.reduce_axis, inner)
        stage.vectorize(inner)
        parallel_axes = outer
    else:  # NCHW: each channel's plane is contiguous, read row by row
        parallel_axes = [*outer, inner]
    if _nbytes(op.input_tensors[0]) >= tl.Target.current().caches.l2:
        fuse_parallel(s, op, parallel_axes)


def _schedule_matvec(s: tl.Schedule, op: tl.ComputeOp) -> None:
    """Outputs in the lanes (the weight rows are contiguous), the reduction outside them."""
    stage = s[op]
    *outer, inner = op.axis
    width = vector_lanes(op.output(0).dtype)
    if (static_extent(inner) or width + 1) <= width:
        stage.reorder(*outer, *op.reduce_axis, inner)
        stage.vectorize(inner)
        return
    blocks, lanes = stage.split(inner, factor=width)
    stage.reorder(*outer, blocks, *op.reduce_axis, lanes)
    stage.vectorize(lanes)


def schedule_squeeze_excitation(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule `se_gate` or `se_scaled_weight` (with any elementwise tail fused after it)."""
    outs = as_tensor_list(outs)
    s = tl.create_schedule([t.op for t in outs])
    out_ops = {id(t.op) for t in outs}
    for op in compute_ops(outs):
        if op.tag == "se_pool":
            _schedule_pool(s, op)
        elif op.tag == "se_matvec":
            _schedule_matvec(s, op)
        elif op.tag == "se_scaled_weight" or id(op) in out_ops:
            schedule_injective_stage(s, op, parallel=parallel_pays(op))
        else:  # the activation and the gate: a few vectors each, on the calling thread
            schedule_injective_stage(s, op, parallel=False)
    return s
