"""The x86 schedule of `topi.nn.channel_norm.layer_norm_NCHWc`, a layer norm over the channels
of an NCHW[x]c tensor, with its elementwise tail and injective producers.

The generic reduction schedule vectorizes the innermost kept axis (the image width), so each
lane would gather one pixel's channels x floats apart. Here the loops run over image rows
(n, h), in parallel when the output passes the L2 size: for each pixel of the row, each
statistic adds the pixel's channel blocks as whole vectors (one x-lane vector of partial sums,
held in registers), then its lanes; the row's output follows, block by block, each block a
vector store, while the row (W * C floats) is still in cache.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from .common import (
    as_tensor_list,
    compute_ops,
    fuse_parallel,
    parallel_pays,
    traverse,
    vector_lanes,
)

#: Tags of the two statistics of `layer_norm_NCHWc` (each a sum over a pixel's channels).
STATISTICS = ("layer_norm_NCHWc_sum", "layer_norm_NCHWc_varsum")
#: Tag of its stage of one reciprocal square root per pixel.
SCALE = "layer_norm_NCHWc_scale"


def schedule_layer_norm_NCHWc(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule a (fused) `layer_norm_NCHWc` kernel row by row (see the module docstring)."""
    outs = as_tensor_list(outs)
    out = outs[0]
    s = tl.create_schedule([t.op for t in outs])
    traverse(s, outs, lambda op: None)
    stats = {op.tag: op for op in compute_ops(outs) if op.tag in (*STATISTICS, SCALE)}
    for op in compute_ops(outs):
        if op is not out.op and not op.reduce_axis and op.tag != SCALE:
            s[op].compute_inline()  # the normalised value, read once per output element
    o = s[out]
    n, blocks, h, w, lane = o.op.axis
    o.reorder(n, h, blocks, w, lane)
    o.vectorize(lane)
    if parallel_pays(out):
        row = fuse_parallel(s, out, [n, h])
    else:
        row = h
    for tag in STATISTICS:  # the mean before the variance, which reads it
        total = s[stats[tag]]
        partial = s[stats[tag].input_tensors[0]]
        total.compute_at(o, row)
        pixel = total.op.axis[-1]
        partial.compute_at(total, pixel)
        _, _, _, vector = partial.op.axis
        partial.reorder(*partial.op.reduce_axis, vector)
        partial.vectorize(vector)
    scale = s[stats[SCALE]]
    scale.compute_at(o, row)
    _, pixels = scale.split(scale.op.axis[-1], factor=vector_lanes(out.dtype))
    scale.vectorize(pixels)
    return s
