"""Default x86 schedule of argmax / argmin: the reduction loop runs in order inside each output
element, and the output elements (their outer axes fused) run in parallel."""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from .common import as_tensor_list, fuse_parallel


def schedule_argreduce(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule `topi.nn.argmax` / `argmin` outputs (and elementwise stages they feed)."""
    outs = as_tensor_list(outs)
    s = tl.create_schedule([t.op for t in outs])
    for stage in s.stages:
        op = stage.op
        if isinstance(op, tl.ComputeOp) and op.tag == "argreduce":
            fuse_parallel(s, op, op.axis)
    return s


schedule_argmax = schedule_argmin = schedule_argreduce
