"""x86 schedule and tuning template of conv2d_nhwc.

In NHWC with an HWIO kernel the output channel is innermost in both the kernel and the output, so no
packing is needed: a register block of `tile_oh` output rows x `tile_ow` output columns x `tile_oc`
vectors of output channels (vectors of the current target) accumulates over kernel rows, kernel
columns (unrolled when `unroll_kw`) and input channels split by `tile_ic`; each step broadcasts one
input value and loads kernel vectors directly. The padded input is materialised first. The (batch,
block of output rows) loops run in parallel. Knobs and fallback: those of conv2d_nchw.
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl

from ..nn.conv2d import conv2d_nhwc
from .common import (
    compute_chain_at,
    fuse_parallel,
    materialise_padding,
    static_extent,
    vector_lanes,
)
from .config import conv_template, schedule_tagged
from .conv2d import define_conv_space

TASK = "conv2d_nhwc.x86"


def schedule_conv2d_nhwc_with(cfg, s: tl.Schedule, conv: tl.Tensor, out: tl.Tensor) -> None:
    """Apply the register-blocked schedule to the conv2d_nhwc stage `conv`, whose elementwise
    tail ends in `out`; `cfg` holds the knob values."""
    padded = conv.op.input_tensors[0]
    _, out_h, out_w, channels = (static_extent(a) for a in conv.op.axis)
    kernel_h, kernel_w, in_channels = (static_extent(a) for a in conv.op.reduce_axis)
    (stride_h, stride_w), (dilation_h, dilation_w) = conv.op.attrs["window"]
    lanes = vector_lanes(conv.dtype)
    define_conv_space(cfg, in_channels, -(-channels // lanes), (out_h, out_w), lanes,
                      ((kernel_h - 1) * dilation_h + 1, (kernel_w - 1) * dilation_w + 1,
                       stride_h, stride_w))

    materialise_padding(s, padded)
    if conv.op is out.op:
        out, conv = conv, s.cache_write(conv, "local")
    o = s[out]
    n, y, x, k = o.op.axis
    y_outer, y_inner = cfg["tile_oh"].apply(s, out, y)
    x_outer, x_inner = cfg["tile_ow"].apply(s, out, x)
    k_outer, k_inner = o.split(k, factor=lanes * cfg["tile_oc"].val)
    o.reorder(n, y_outer, x_outer, k_outer, y_inner, x_inner, k_inner)
    fuse_parallel(s, out, [n, y_outer])
    _, k_lanes = o.split(k_inner, factor=lanes)
    o.vectorize(k_lanes)
    compute_chain_at(s, out, conv, k_outer)

    c = s[conv]
    cn, cy, cx, ck = c.op.axis
    cry, crx, crc = c.op.reduce_axis
    rc_outer, rc_inner = cfg["tile_ic"].apply(s, conv, crc)
    ck_outer, ck_lanes = c.split(ck, factor=lanes)
    c.reorder(cn, rc_outer, cry, crx, rc_inner, cy, cx, ck_outer, ck_lanes)
    c.vectorize(ck_lanes)
    c.unroll(ck_outer)
    c.unroll(cx)
    c.unroll(cy)
    if cfg["unroll_kw"].val:
        c.unroll(crx)


def schedule_conv2d_nhwc(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule conv2d_nhwc and its fused elementwise tail (tuned config when one is active)."""
    return schedule_tagged(outs, {"conv2d_nhwc": TASK}, schedule_conv2d_nhwc_with)


@autotune.template(TASK)
def conv2d_nhwc_template(cfg, data_shape, kernel_shape, stride, padding, dilation, dtype):
    """Tunable conv2d_nhwc: args ((N, H, W, C), (R, S, C, K), stride, padding, dilation, dtype)."""
    return conv_template(cfg, conv2d_nhwc, schedule_conv2d_nhwc_with, data_shape, kernel_shape,
                         stride, padding, dilation, dtype, channel_axis=3)
