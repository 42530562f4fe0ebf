"""x86 schedule of resize2d (and of the elementwise ops fused around it).

`topi.nn.resize2d` gives a linear or cubic resize up to three kinds of stage: per-column tap
tables (index and weight of each tap, `TABLE_TAG`), the horizontal pass over the input rows
(`ROWS_TAG`, when the interpolation is separable) and the output, which reads two or four rows of
the horizontal pass per output row. The generic injective schedule computes every stage in full
before the next; here the tables are computed once up front (they are a few hundred values), the
horizontal pass of one (batch, channel) plane right before the output rows that read it, so it is
still in L1/L2 when read, and the planes run in parallel. Every pass is vectorized along the
output width: the column taps are gathers driven by table loads, the vertical taps contiguous
vector loads of a row chosen once per output row. A nearest resize (one input element per
output, `PICK_ATTR`) is a copy: its rows are plain loops, which LLVM vectorizes better than
gathers. A channel-blocked resize (NCHW[x]c) is scheduled alike, its vectors the channel
block's: every tap a contiguous vector load, no gathers.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import IterVar
from tensorlang.schedule import AttachKind

from ..nn.resize import PICK_ATTR, ROWS_TAG, TABLE_TAG
from .common import (
    as_tensor_list,
    is_inlinable,
    parallel_pays,
    schedule_injective_stage,
    schedule_reduction_stage,
    static_extent,
    traverse,
    vector_lanes,
)


def _vectorize_row(s: tl.Schedule, op: tl.Operation) -> list[IterVar]:
    """Vectorize the innermost (width) axis of a stage by one vector of the target; returns the
    axes outside the row, outermost first."""
    stage = s[op]
    *outer, width = stage.op.axis
    lanes = vector_lanes(stage.op.output(0).dtype)
    extent = static_extent(width)
    if extent is None or extent > lanes:
        _, width = stage.split(width, factor=lanes)
    stage.vectorize(width)
    return outer


def _schedule_copy(s: tl.Schedule, op: tl.Operation) -> None:
    """Nearest resizing: the output rows in parallel (when the output is large enough), each row
    a plain loop that LLVM's loop vectorizer turns into loads, shuffles and stores. Vectorized
    here, every vector of outputs would be a gather; measured side by side on Zen 4, the plain
    row ran 8.9x faster for a 2x upscale of 256x28x28 (9.7x with AVX2), 1.8x at 64x56x56 with
    half_pixel, and as fast for a non-integer 37x53 -> 101x71."""
    b, ch, oy, *_ = s[op].op.axis
    rows = s[op].fuse(b, ch, oy)
    if parallel_pays(op):
        s[op].parallel(rows)


def _same_planes(a: tl.Operation, b: tl.Operation) -> bool:
    return len(a.axis) == len(b.axis) in (4, 5) and all(
        static_extent(x) == static_extent(y) for x, y in zip(a.axis[:2], b.axis[:2]))


def schedule_resize2d(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule a resize2d kernel: tap tables first, each (batch, channel) plane's horizontal pass
    computed at that plane of the output, planes in parallel when the output is large enough; a
    nearest resize as plain rows (`_schedule_copy`). Stages of other shapes (a reshape after the resize, a reduction fused in) keep the generic
    loop structure, and a horizontal pass that no output shares planes with runs at root."""
    outs = as_tensor_list(outs)
    s = tl.create_schedule([t.op for t in outs])
    out_ops = {id(t.op) for t in outs}
    rows: list[tl.ComputeOp] = []
    stored: list[tl.ComputeOp] = []
    picks: list[tl.ComputeOp] = []  # nearest resizes, inlined into a 4-d output or stored

    unblocked = any(len(t.shape) == 4 for t in outs)

    def visit(op: tl.ComputeOp) -> None:
        if op.attrs.get(PICK_ATTR):
            picks.append(op)
        if op.tag == TABLE_TAG:
            _vectorize_row(s, op)
        elif op.tag == ROWS_TAG:
            rows.append(op)
        elif op.reduce_axis:
            schedule_reduction_stage(s, op)
        elif id(op) in out_ops or not is_inlinable(op):
            stored.append(op)
        elif unblocked and op.name == "resize2d" and len(op.axis) == 5 \
                and not op.attrs.get(PICK_ATTR):
            # a blocked interpolation is stored as it is before a layout transform to NCHW
            # reads it: inlined into the transform, each output lane gathered its taps
            # (LR-ASPP's 128 x 14 x 14 -> 28 x 28 ran 12x slower)
            s[op].compute_root()
            stored.append(op)

    traverse(s, outs, visit)
    for op in stored:
        if picks and len(op.axis) in (4, 5):
            _schedule_copy(s, op)
            continue
        planes = [r for r in rows if _same_planes(r, op) and s[r].attach == AttachKind.ROOT]
        if not planes:
            schedule_injective_stage(s, op, parallel=parallel_pays(op))
            continue
        b, ch, *_ = _vectorize_row(s, op)
        plane = s[op].fuse(b, ch)
        if parallel_pays(op):
            s[op].parallel(plane)
        for r in planes:
            _vectorize_row(s, r)
            s[r].compute_at(s[op], plane)
    for op in rows:
        if s[op].attach == AttachKind.ROOT:
            schedule_injective_stage(s, op, parallel=parallel_pays(op))
    return s
