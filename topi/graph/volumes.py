"""Volumes, (N, C, D, H, W): 3-D convolutions and pooling for the frontends, built from the 2-D
ops over the frames folded into the batch, so that video models (R3D, R(2+1)D, S3D) run on the
2-D kernels and their tuning."""

from __future__ import annotations

import numpy as np

from ..nn.utils import pooled_size
from .importer import GraphWriter, Value, dtype_of, require, shape_of


def conv3d(im: GraphWriter, x: Value, w: Value, stride: tuple, padding: tuple,
           dilation: tuple, groups: int) -> Value:
    """A 3-D convolution of (N, C, D, H, W) by (K, C / groups, KD, KH, KW), `padding` as
    (front, top, left, back, bottom, right): one 2-D convolution per kernel depth tap, over
    the frames that tap reads folded into the batch (one take per tap; a frame past the edges
    is zeros), the taps' results summed."""
    n, c, depth, h, width = shape_of(x)
    k, _, taps = shape_of(w)[:3]
    out_depth = pooled_size(depth, padding[0], padding[3], dilation[0] * (taps - 1) + 1,
                            stride[0], False)
    require(out_depth >= 1, f"a 3-D kernel of depth {taps} over {depth} frames")
    frames = im.op("transpose", x, axes=(0, 2, 1, 3, 4))  # (N, D, C, H, W)
    padded = padding[0] or padding[3] or stride[0] > 1 or taps > 1
    if padded:
        zero = np.zeros((n, 1, c, h, width), dtype_of(x))
        frames = im.op("concatenate", frames, zero, axis=1)
    total = None
    starts = np.arange(out_depth) * stride[0] - padding[0]
    for t in range(taps):
        picked = im.op("take", frames, _frames_read(starts + t * dilation[0], depth),
                       axis=1) if padded else frames
        weight = w[:, :, t] if isinstance(w, np.ndarray) else im.op(
            "take", w, np.array(t, np.int64), axis=2)
        y = im.graph.conv2d(
            im.as_node(im.reshape(picked, (n * out_depth, c, h, width))),
            im.as_node(weight), stride=stride[1:], dilation=dilation[1:], groups=groups,
            padding=(padding[1], padding[2], padding[4], padding[5]), name=im.name)
        total = y if total is None else im.op("add", total, y)
    out_h, out_w = shape_of(total)[2:]
    total = im.reshape(total, (n, out_depth, k, out_h, out_w))
    return im.op("transpose", total, axes=(0, 2, 1, 3, 4))


def pool3d(im: GraphWriter, x: Value, pool_type: str, kernel: tuple, stride: tuple,
           padding: tuple, ceil_mode: bool, count_include_pad: bool = True) -> Value:
    """Max or average pooling of (N, C, D, H, W), `padding` as in `conv3d`: the 2-D pooling
    of every frame (folded into the batch), then the maximum or the mean over the depth
    window, one take per tap (a frame past the edges reads the lowest value, or zero). An
    average's divisor is the depth taps counted times the 2-D one, as PyTorch counts it."""
    n, c, depth, h, width = shape_of(x)
    out_depth = pooled_size(depth, padding[0], padding[3], kernel[0], stride[0], ceil_mode)
    require(out_depth >= 1, f"a 3-D pooling window of depth {kernel[0]} over {depth} frames")
    frames = im.reshape(x, (n * c * depth, 1, h, width))
    attrs = {"kernel": kernel[1:], "stride": stride[1:], "ceil_mode": bool(ceil_mode),
             "padding": (padding[1], padding[2], padding[4], padding[5])}
    if pool_type == "max":
        pooled = im.op("max_pool2d", frames, dilation=(1, 1), **attrs)
    else:
        pooled = im.op("avg_pool2d", frames, count_include_pad=bool(count_include_pad),
                       **attrs)
    out_h, out_w = shape_of(pooled)[2:]
    pooled = im.reshape(pooled, (n * c, depth, out_h, out_w))
    edge = (-np.inf if "float" in dtype_of(x) else np.iinfo(dtype_of(x)).min) \
        if pool_type == "max" else 0
    pooled = im.op("concatenate", pooled,
                   np.full((n * c, 1, out_h, out_w), edge, dtype_of(x)), axis=1)
    out = None
    starts = np.arange(out_depth) * stride[0] - padding[0]
    for t in range(kernel[0]):
        tap = im.op("take", pooled, _frames_read(starts + t, depth), axis=1)
        out = tap if out is None else im.op("maximum" if pool_type == "max" else "add",
                                            out, tap)
    if pool_type != "max":
        lo, hi = (-padding[0], depth + padding[3]) if count_include_pad else (0, depth)
        counts = np.minimum(starts + kernel[0], hi) - np.maximum(starts, lo)
        scale = (1.0 / np.maximum(counts, 1)).astype(dtype_of(x)).reshape(out_depth, 1, 1)
        out = im.op("multiply", out, scale)
    return im.reshape(out, (n, c, out_depth, out_h, out_w))


def _frames_read(positions: np.ndarray, depth: int) -> np.ndarray:
    """The frames at depth `positions`, those past either edge replaced by the edge frame
    appended after the last one (index `depth`)."""
    inside = (positions >= 0) & (positions < depth)
    return np.where(inside, positions, depth).astype(np.int64)
