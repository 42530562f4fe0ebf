"""x86 schedule of the squeeze-and-excitation kernels (`topi.nn.squeeze_excitation`).

The pool reads the whole block input: it runs over images and channel blocks, the channels of
a block in the vector lanes and the plane reduced inside. The mat-vecs read weights of up to a
megabyte (MobileNet-V3's last SE block: 960 x 240, twice) for a multiply-add per element: they
are bound by how fast the weight streams in, so each keeps groups of output vectors in
registers through its reduction. The pool and the mat-vecs run in parallel where what they
read is PARALLEL_WEIGHT bytes or more, the scaled weight where it is larger than the L2 size,
the rest (the activation, the gate: a few vectors) on the calling thread. Every stage is
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


#: Bytes read (a mat-vec's weight, the pool's block input) from which a stage runs in parallel.
PARALLEL_WEIGHT = 64 * 1024


def _nbytes(t: tl.Tensor) -> int:
    """Bytes of a tensor of static shape (the SE computes require one)."""
    elements = 1
    for d in t.shape:
        elements *= d if isinstance(d, int) else const_value(d)
    return elements * as_dtype(t.dtype).itemsize


def _schedule_pool(s: tl.Schedule, op: tl.ComputeOp) -> None:
    """Channels (the block, or NCHW's channel axis) in the lanes, the plane reduced inside;
    images and blocks in parallel when the block input is PARALLEL_WEIGHT bytes or more."""
    stage = s[op]
    *outer, inner = op.axis
    if len(op.axis) == 3:  # NCHW<b>c: the block's channels are contiguous
        stage.reorder(*outer, *op.reduce_axis, inner)
        stage.vectorize(inner)
        parallel_axes = outer
    else:  # NCHW: each channel's plane is contiguous, read row by row
        parallel_axes = [*outer, inner]
    if _nbytes(op.input_tensors[0]) >= PARALLEL_WEIGHT:
        fuse_parallel(s, op, parallel_axes)


def _largest_divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def _schedule_matvec(s: tl.Schedule, op: tl.ComputeOp) -> None:
    """Output panels (images, panels, PANEL outputs): a group of up to 8 output vectors held
    in registers through the reduction, each reading its panel's contiguous stream of the
    packed weight, consecutive multiply-adds going to different accumulators (one vector at a
    time would chain its C multiply-adds one FMA latency apart). A weight of PARALLEL_WEIGHT
    bytes or more (MobileNet-V3's 960 x 240: 0.9 MB) is streamed by both cores, one group of
    panels each."""
    stage = s[op]
    *outer, panels, inner = op.axis
    width = vector_lanes(op.output(0).dtype)
    vectors, lanes = stage.split(inner, factor=min(width, static_extent(inner)))
    per_panel = -(-static_extent(inner) // width)
    groups, members = stage.split(panels, factor=_largest_divisor(
        static_extent(panels), max(1, 8 // per_panel)))
    stage.reorder(*outer, groups, *op.reduce_axis, members, vectors, lanes)
    stage.unroll(members)
    stage.unroll(vectors)
    stage.vectorize(lanes)
    if max(_nbytes(t) for t in op.input_tensors) >= PARALLEL_WEIGHT:
        fuse_parallel(s, op, [*outer, groups])


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
        elif op.tag == "injective,kernel_pack":  # run once at build time for constant weights
            schedule_injective_stage(s, op, parallel=False)
        elif op.tag == "se_scaled_weight" or id(op) in out_ops:
            schedule_injective_stage(s, op, parallel=parallel_pays(op))
        else:  # the activation and the gate: a few vectors each, on the calling thread
            schedule_injective_stage(s, op, parallel=False)
    return s
