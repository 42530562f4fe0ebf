"""x86 schedules and tuning templates of the NCHW[x]c convolutions (topi.nn.conv2d_nchwc).

conv2d_NCHWc computes the same blocked stage as conv2d_nchw, so it is scheduled by
`schedule_conv2d_nchw_with` (register block of tile_ow columns x tile_oc channel vectors); only
its output is written as whole channel vectors instead of NCHW rows.

depthwise_conv2d_NCHWc vectorizes over the channel block: per (batch, channel block, output row)
a register block of `tile_ow` output columns, one vector of channels each, accumulates over the
kernel window (columns unrolled when `unroll_kw`). Each step loads one kernel vector and one
contiguous input vector per column, so the row width (7 or 14 at the end of a MobileNet) and the
stride cost nothing, unlike the NCHW schedule's vectors along the row.
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl

from ..nn.conv2d_nchwc import conv2d_NCHWc, depthwise_conv2d_NCHWc
from .common import (
    accumulator_budget,
    compute_chain_at,
    fuse_parallel,
    static_extent,
)
from .config import conv_template, schedule_tagged
from .conv2d import parallel_axes, schedule_conv2d_nchw_with

TASK = "conv2d_NCHWc.x86"
DEPTHWISE_TASK = "depthwise_conv2d_NCHWc.x86"


def schedule_conv2d_NCHWc(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule conv2d_NCHWc and its fused elementwise tail (tuned config when one is active)."""
    return schedule_tagged(outs, {"conv2d_NCHWc": TASK}, schedule_conv2d_nchw_with)


def _fallback_columns(out_w: int, limit: int) -> int:
    """The depthwise register block without tuning: the whole row when it fits in `limit`
    columns, else the largest divisor of the row of at least limit / 2 columns (no partial
    block), else `limit` columns (the last block is peeled)."""
    if out_w <= limit:
        return out_w
    divisor = max(d for d in range(1, limit + 1) if out_w % d == 0)
    return divisor if 2 * divisor >= limit else limit


def schedule_depthwise_conv2d_NCHWc_with(cfg, s: tl.Schedule, conv: tl.Tensor,
                                         out: tl.Tensor) -> None:
    """Apply the channel-vector schedule to the depthwise stage `conv`, whose elementwise tail
    ends in `out`; `cfg` holds the knob values."""
    out_w = static_extent(conv.op.axis[3])
    # Each step loads a kernel vector and an input vector per column.
    budget = accumulator_budget(1)
    cfg.define_split("tile_ow", out_w, num_outputs=2, policy="candidate",
                     candidate=[[-1, w] for w in range(1, min(out_w, budget) + 1)])
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        # Half the budget: the input vectors that neighbouring columns share stay live too.
        cfg.fallback_split("tile_ow", [-1, _fallback_columns(out_w, budget // 2)])
    # The pad stays inlined (traverse did it), as in the NCHW depthwise schedule: one FMA per
    # input value read leaves no time to win back a stored copy (measured 2-12x slower).
    if conv.op is out.op:
        out, conv = conv, s.cache_write(conv, "local")
    o = s[out]
    n, c, y, x, lane = o.op.axis
    x_outer, x_inner = cfg["tile_ow"].apply(s, out, x)
    o.reorder(n, c, y, x_outer, x_inner, lane)
    o.vectorize(lane)
    # The rows join the parallel loop where the threads would not share the channel blocks
    # evenly (MobileNet-V2's 144 channels: 9 blocks of 16).
    images, blocks = static_extent(n), static_extent(c)
    fuse_parallel(s, out, parallel_axes(
        [n, c], None if None in (images, blocks) else images * blocks, y))
    compute_chain_at(s, out, conv, x_outer)

    d = s[conv]
    dn, dc, dy, dx, dl = d.op.axis
    ry, rx = d.op.reduce_axis
    d.reorder(dn, dc, dy, ry, rx, dx, dl)
    d.vectorize(dl)
    d.unroll(dx)
    if cfg["unroll_kw"].val:
        d.unroll(rx)


def schedule_depthwise_conv2d_NCHWc(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule depthwise_conv2d_NCHWc and its fused elementwise tail."""
    return schedule_tagged(outs, {"depthwise_conv2d_NCHWc": DEPTHWISE_TASK},
                           schedule_depthwise_conv2d_NCHWc_with)


@autotune.template(TASK)
def conv2d_NCHWc_template(cfg, data_shape, kernel_shape, stride, padding, dilation, dtype):
    """Tunable conv2d_NCHWc: args ((N, C/bi, H, W, bi), (K/bo, C, R, S, bo), stride, padding,
    dilation, dtype)."""
    return conv_template(cfg, conv2d_NCHWc, schedule_conv2d_nchw_with, data_shape, kernel_shape,
                         stride, padding, dilation, dtype, channel_axis=(1, 4))


@autotune.template(DEPTHWISE_TASK)
def depthwise_conv2d_NCHWc_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                                    dtype):
    """Tunable depthwise_conv2d_NCHWc: args ((N, C/b, H, W, b), (C/b, R, S, b), stride,
    padding, dilation, dtype)."""
    return conv_template(cfg, depthwise_conv2d_NCHWc, schedule_depthwise_conv2d_NCHWc_with,
                         data_shape, kernel_shape, stride, padding, dilation, dtype,
                         channel_axis=(1, 4))
