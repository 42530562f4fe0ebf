"""x86 schedules of depthwise and grouped convolution, and the depthwise tuning template.

Depthwise convolution has no reduction over channels, so its vectors run along the output row: a
block of `tile_ow` output columns (whole vectors of the current target) accumulates over the kernel
window (columns unrolled when `unroll_kw`); the (batch, channel) loops run in parallel. Grouped
convolution uses the generic reduction schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl

from ..nn.conv2d import depthwise_conv2d_nchw
from .common import (
    compute_chain_at,
    fuse_parallel,
    generic_schedule,
    materialise_padding,
    static_extent,
    vector_lanes,
)
from .config import conv_template, schedule_tagged

TASK = "depthwise_conv2d_nchw.x86"


def schedule_depthwise_conv2d_nchw_with(cfg, s: tl.Schedule, conv: tl.Tensor,
                                        out: tl.Tensor) -> None:
    """Apply the row-vector schedule to the depthwise stage `conv`, whose elementwise tail ends
    in `out`; `cfg` holds the knob values."""
    out_w = static_extent(conv.op.axis[3])
    lanes = vector_lanes(conv.dtype)
    # One to four whole vectors of the row: as many independent FMA chains.
    widths = [v * lanes for v in range(1, 5) if (v - 1) * lanes < out_w]
    cfg.define_knob("tile_ow", widths)
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        # 3 vectors where the row fills them: the fastest block for 56-wide rows on both AVX2
        # and AVX-512 (2x a single vector, whose one FMA chain waits on its own latency).
        cfg.fallback_knob("tile_ow", max(w for w in widths[:3] if w <= max(out_w, lanes)))
    if not _masks_cost_no_vector_registers():
        materialise_padding(s, conv.op.input_tensors[0])
    if conv.op is out.op:
        out, conv = conv, s.cache_write(conv, "local")
    o = s[out]
    n, c, _, x = o.op.axis
    x_outer, x_inner = o.split(x, factor=cfg["tile_ow"].val)
    fuse_parallel(s, out, [n, c])
    x_vectors, x_lanes = o.split(x_inner, factor=lanes)
    o.vectorize(x_lanes)
    o.unroll(x_vectors)  # constant offsets into the accumulator block keep it in registers
    compute_chain_at(s, out, conv, x_outer)

    d = s[conv]
    dn, dc, dy, dx = d.op.axis
    ry, rx = d.op.reduce_axis
    dx_outer, dx_lanes = d.split(dx, factor=lanes)
    d.reorder(dn, dc, dy, ry, rx, dx_outer, dx_lanes)
    d.vectorize(dx_lanes)
    d.unroll(dx_outer)
    if cfg["unroll_kw"].val:
        d.unroll(rx)


def _masks_cost_no_vector_registers() -> bool:
    """Whether the current target masks a vector load with a register of its own (AVX-512's
    k registers), so that the pad may stay inlined (traverse did it). Inlined, every read of the
    window that can cross the border is a masked load: a depthwise step is one FMA per input
    value read, and with AVX-512 the 144x56x56 layer ran 8% faster so than with the pad stored
    first (materialise_padding). Elsewhere each mask takes a vector register beside the block
    and the window's weights, which LLVM keeps in registers across the rows: with AVX2 a 13-wide
    row (2 accumulators, 9 weights, the masks) spilled in its row loop, and SVE builds each
    predicate from vector compares per row and spilled as well; stored first, the pad costs one
    pass over the input (the 144x56x56 layer ran as fast on AVX2) and the loop reads plain
    vectors."""
    target = tl.Target.current()
    return target.arch == "x86_64" and target.vector_bits >= 512


def schedule_depthwise_conv2d_nchw(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule depthwise_conv2d_nchw and its fused elementwise tail."""
    return schedule_tagged(
        outs, {"depthwise_conv2d_nchw": TASK}, schedule_depthwise_conv2d_nchw_with
    )


def schedule_group_conv2d_nchw(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule group_conv2d_nchw: parallel outer loops, vectors along the output row."""
    return generic_schedule(outs)


@autotune.template(TASK)
def depthwise_conv2d_nchw_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                                   dtype):
    """Tunable depthwise conv: args ((N, C, H, W), (C, M, R, S), stride, padding, dilation,
    dtype)."""
    return conv_template(cfg, depthwise_conv2d_nchw, schedule_depthwise_conv2d_nchw_with,
                         data_shape, kernel_shape, stride, padding, dilation, dtype,
                         channel_axis=1)
