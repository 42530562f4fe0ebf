"""The x86 schedule of `topi.nn.cached_attention`: one parallel loop over the query rows of all
heads; for each row every stage runs in vector lanes of the target's width: the dot products
along the head dim (one vector of partial sums per key, then its lanes), the exponentials along
the keys, and the weighted sum of the value rows along the head dim (a row's weighted rows
accumulate in registers as the keys go by)."""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from .common import as_tensor_list, compute_ops, vector_lanes


def _dots_in_lanes(s: tl.Schedule, op: tl.ComputeOp, lanes: int) -> None:
    """A dot-product stage (keys, reduced over the head dim) as one vector of partial sums per
    key (rfactor), computed at the key's loop."""
    stage = s[op]
    _, inner = stage.split(op.reduce_axis[0], factor=lanes)
    partial = s[s.rfactor(op.output(0), inner, factor_axis=len(op.axis))]
    *data, lane = partial.op.axis
    partial.reorder(*data, *partial.op.reduce_axis, lane)
    partial.vectorize(lane)
    partial.compute_at(stage, stage.leaf_iter_vars[len(op.axis) - 1])


def _vectorize_last(stage: tl.Stage, axis: tl.IterVar, lanes: int) -> None:
    _, inner = stage.split(axis, factor=lanes)
    stage.vectorize(inner)


def schedule_cached_attention(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """See the module docstring."""
    out = as_tensor_list(outs)[0]
    s = tl.create_schedule(out.op)
    lanes = vector_lanes(out.dtype)
    o = s[out]
    heads, rows, dim = o.op.axis
    row = o.fuse(heads, rows)
    o.parallel(row)
    _vectorize_last(o, dim, lanes)
    stages = {op.name: op for op in compute_ops([out]) if op is not out.op}
    for name in ("cache_dots", "new_dots"):
        _dots_in_lanes(s, stages[name], lanes)
    exp = s[stages["cache_exp"]]
    _vectorize_last(exp, exp.op.axis[-1], lanes)
    for name in ("cache_weighted", "new_weighted"):
        weighted = s[stages[name]]
        weighted.reorder(weighted.op.reduce_axis[0], weighted.op.axis[-1])
        _vectorize_last(weighted, weighted.op.axis[-1], lanes)
    for op in stages.values():
        s[op].compute_at(o, row)
    return s
