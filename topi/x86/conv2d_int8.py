"""x86 schedule and tuning template of the int8 conv2d (`topi.nn.conv2d_nchw_int8`,
`topi.nn.conv2d_int8.conv2d_NCHWc_int8`).

The product stage (NCHW[oc_bn]c int32) is register-blocked: `tile_ow` output columns x
`tile_oc` channel blocks accumulate in registers per block; inside, the reduction runs over
input-channel blocks, kh, kw and groups of 4 channels, and each (column, channel block) pair is
one tensorized dot of 4 (`dot_int8`: VNNI, or the exact fallback). Blocks run in parallel over
rows, or over channel blocks where the kernel is larger than the image (`channels_outer`). A
blocked output computes its epilogue (requantization, residual add) from the register block and
stores vectors; an NCHW one is unpacked from the stored product. The data and kernel copies
into their blocked layouts run in parallel too. Fallback: the widest column tile that divides
the output width with at most 28 accumulators (24 for the non-VNNI sequence, 12 with 16
registers).

The depthwise product (`depthwise_conv2d_NCHWc_int8`, channels in the lanes, no dot) takes the
same register block with one channel block (`tile_oc` = 1): rows in parallel, `tile_ow`
columns of int32 accumulators, the taps unrolled around them, each a widening multiply-add of
a data vector and a kernel vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import autotune
import tensorlang as tl
from tensorlang.schedule import AttachKind

from ..nn.conv2d_int8 import (
    BF16_TAG,
    DEPTHWISE_TAG,
    TAG,
    conv2d_NCHWc_bf16,
    conv2d_nchw_int8,
    depthwise_conv2d_nchw_int8,
)
from .common import compute_chain_at, fuse_parallel, static_extent
from .config import schedule_tagged
from .tensor_intrin import dot_bf16, dot_int8, int8_dot_kind


def _accumulators() -> int:
    if tl.Target.current().vector_registers < 32:
        return 12
    return 28 if int8_dot_kind() != "maddubs" else 24


def _define_space(cfg, out_w: int, oc_chunks: int, kernel_bytes: int, data_bytes: int,
                  depthwise: bool = False) -> None:
    widths = [d for d in range(1, min(out_w, 32) + 1) if out_w % d == 0]
    # Depthwise: one channel block per register block (no input shared across blocks).
    blocks = [1] if depthwise else [b for b in (1, 2, 4) if oc_chunks % b == 0]
    cfg.define_knob("tile_ow", widths)
    cfg.define_knob("tile_oc", blocks)
    cfg.define_knob("channels_outer", [False, True])
    if cfg.is_fallback:
        # Rows outermost read the whole kernel once per output row: where the kernel is the
        # larger operand (deep layers: 512 x 512 x 3 x 3 is 2.4 MB, the 7 x 7 image 25 KB) the
        # channel blocks go outermost instead, and each block's filters stay in the L2 cache
        # while it runs over the rows.
        cfg.fallback_knob("channels_outer", kernel_bytes > data_bytes)
        # Depthwise: half, the data and kernel vectors of the unrolled taps stay live too.
        budget = _accumulators() // (2 if depthwise else 1)
        best = max(((w * b, w, b) for w in widths for b in blocks if w * b <= budget))
        cfg.fallback_knob("tile_ow", best[1])
        cfg.fallback_knob("tile_oc", best[2])
    elif cfg["tile_ow"].val * cfg["tile_oc"].val > _accumulators() + 4:
        cfg.raise_error("register block larger than the register file")


def _tile_blocked(s: tl.Schedule, t: tl.Tensor, tile_ow: int, tile_oc: int,
                  channels_outer: bool):
    """Tile the NCHW[x]c stage `t` into register blocks of tile_oc channel vectors x tile_ow
    columns, rows or channel blocks outermost and in parallel; the loop under which one block
    is computed."""
    c = s[t]
    b, oco, y, x, oci = c.op.axis
    oco_o, oco_i = c.split(oco, factor=tile_oc)
    xo, xi = c.split(x, factor=tile_ow)
    # One loop in parallel, alone: a fused parallel loop would hide the block's position from
    # the bounds of its local buffer behind divisions, and the accumulators would stay in memory.
    outer = (oco_o, y) if channels_outer else (y, oco_o)
    c.reorder(b, *outer, xo, oco_i, xi, oci)
    c.vectorize(oci)
    c.parallel(outer[0])
    return xo


def _size(t: tl.Tensor) -> int:
    return math.prod(int(d) for d in t.shape)


def schedule_conv2d_int8_with(cfg, s: tl.Schedule, conv: tl.Tensor, out: tl.Tensor) -> None:
    """Schedule the int8 product stage `conv` (see the module docstring); `out` is the output:
    `conv` itself, a blocked epilogue (requantization, residual add) computed from the register
    block, or the NCHW unpacking with its epilogue."""
    data_vec, kernel_vec = conv.op.input_tensors
    _, oc_chunks, _, out_w, lanes = (static_extent(a) for a in conv.op.axis)
    _define_space(cfg, out_w, oc_chunks, _size(kernel_vec), _size(data_vec),
                  conv.op.tag == DEPTHWISE_TAG)
    tile = cfg["tile_ow"].val, cfg["tile_oc"].val, cfg["channels_outer"].val

    # A strided depthwise convolution reads its blocked input where it is, the padding
    # selected per load: the padded copy writes the whole input for a quarter as many outputs
    # (96 x 112 x 112, 3x3 / 2: 1.4-1.7x, AVX-512 and AVX2; at stride 1 the copy is as fast
    # or faster, 0.7-1.05x).
    if conv.op.tag == DEPTHWISE_TAG and max(conv.op.attrs["workload"][2]) > 1 \
            and isinstance(data_vec.op, tl.ComputeOp) \
            and len(data_vec.op.input_tensors[0].shape) == 5:
        s[data_vec].compute_inline()
    elif isinstance(data_vec.op, tl.ComputeOp):  # else blocked data read as it is
        d = s[data_vec]
        b, ico, y, _, ici = d.op.axis
        fuse_parallel(s, data_vec, [b, ico, y])
        if len(data_vec.op.input_tensors[0].shape) == 5:
            d.vectorize(ici)  # blocked data padded: contiguous channels
        else:
            d.unroll(ici)
    if isinstance(kernel_vec.op, tl.ComputeOp) and s[kernel_vec].attach is not AttachKind.INLINE:
        s[kernel_vec].parallel(s[kernel_vec].op.axis[0])  # else packed beforehand (a graph's)
    for stage in s.stages:
        if stage.op.name == "kernel_sum":
            stage.compute_root()

    blocked_out = out.op is not conv.op and len(out.shape) == 5
    if blocked_out:  # the epilogue computed from each register block, stored as vectors
        xo = _tile_blocked(s, out, *tile)
        compute_chain_at(s, out, conv, xo)
        local = conv
    else:
        local = s.cache_write(conv, "local")
        s[local].compute_at(s[conv], _tile_blocked(s, conv, *tile))

    g = s[local]
    gb, goc, gy, gx, goci = g.op.axis
    if conv.op.tag == DEPTHWISE_TAG:
        ky, kx = g.op.reduce_axis
        g.reorder(gb, gy, goc, ky, kx, gx, goci)
        g.vectorize(goci)
        for axis in (gx, kx, ky):
            g.unroll(axis)
        return
    ico, ky, kx, icf, ics = g.op.reduce_axis
    if conv.dtype == "float32":
        intrin = dot_bf16(lanes)
    else:
        intrin = dot_int8(lanes) if int8_dot_kind() != "none" else None
    if intrin is None:  # plain vector code: LLVM picks the target's widening multiplies
        g.reorder(gb, gy, ico, ky, kx, icf, ics, gx, goc, goci)
        g.unroll(ics)
    else:
        g.reorder(gb, gy, ico, ky, kx, icf, gx, goc, goci, ics)
    g.vectorize(goci)  # the accumulators' zero fill (the update is the intrinsic)
    if intrin is not None:
        g.tensorize(goci, intrin)
    g.unroll(goc)
    g.unroll(gx)

    o = s[out]
    if out.op is not conv.op and not blocked_out:  # NCHW, with the epilogue: rows as vectors
        ob, oc, oy, ox = o.op.axis
        # The channels of one block together: their rows gather from the same cache lines of
        # the blocked product (one channel at a time re-read each line 16 times: 64 -> 256
        # channels 1x1 at 56x56 spent 2.3 of its 3.6 ms here).
        oco, oci = o.split(oc, factor=lanes)
        o.reorder(ob, oco, oy, oci, ox)
        fuse_parallel(s, out, [ob, oco, oy])
        _, ox_lanes = o.split(ox, factor=lanes)
        o.vectorize(ox_lanes)


def schedule_conv2d_nchw_int8(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule `topi.nn.conv2d_nchw_int8`, the blocked int8 and bf16 convolutions and what
    follows them (tuned config when one is active, else the fallback)."""
    return schedule_tagged(outs, {TAG: "conv2d_int8.x86", BF16_TAG: "conv2d_bf16.x86",
                                  DEPTHWISE_TAG: "depthwise_conv2d_int8.x86"},
                           schedule_conv2d_int8_with)


def _nchw_template(cfg, compute, tag: str, data_shape, kernel_shape, args: tuple) -> tuple:
    """The body of the NCHW int8 templates: `compute(data, kernel, *args)` scheduled with
    `cfg`, and its flop count (2 per product of the NCHW output's points)."""
    data = tl.placeholder(data_shape, "uint8", name="data")
    kernel = tl.placeholder(kernel_shape, "int8", name="kernel")
    out = compute(data, kernel, *args)
    conv = out
    while conv.op.tag != tag:  # through the unpacking and the zero point's correction
        conv = conv.op.input_tensors[0]
    s = tl.create_schedule(out.op)
    schedule_conv2d_int8_with(cfg, s, conv, out)
    n, k, h, w = (static_extent(a) for a in out.op.axis)
    cfg.add_flop(2 * n * k * h * w * math.prod(kernel_shape[1:]))
    return s, [data, kernel, out]


@autotune.template("conv2d_int8.x86")
def conv2d_int8_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                         data_zero_point=0):
    """Tunable int8 conv2d: args ((N, C, H, W), (K, C, R, S), stride, padding, dilation,
    data zero point), uint8 data and int8 kernel, int32 NCHW output."""
    return _nchw_template(cfg, conv2d_nchw_int8, TAG, data_shape, kernel_shape,
                          (stride, padding, dilation, data_zero_point))


@autotune.template("depthwise_conv2d_int8.x86")
def depthwise_conv2d_int8_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                                   data_zero_point=0):
    """Tunable int8 depthwise conv2d: args ((N, C, H, W), (C, 1, R, S), stride, padding,
    dilation, data zero point), uint8 data and int8 kernel, int32 NCHW output."""
    return _nchw_template(cfg, depthwise_conv2d_nchw_int8, DEPTHWISE_TAG, data_shape,
                          kernel_shape, (stride, padding, dilation, data_zero_point))


@autotune.template("conv2d_bf16.x86")
def conv2d_bf16_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                         data_zero_point=0):
    """Tunable bf16 conv2d (AVX512-BF16): args ((N, C, H, W), (K, C, R, S), stride, padding,
    dilation, 0), bfloat16 NCHW data and OIHW kernel, float32 NCHW[16]c output."""
    data = tl.placeholder(data_shape, "bfloat16", name="data")
    kernel = tl.placeholder(kernel_shape, "bfloat16", name="kernel")
    out = conv2d_NCHWc_bf16(data, kernel, stride, padding, dilation)
    s = tl.create_schedule(out.op)
    schedule_conv2d_int8_with(cfg, s, out, out)
    n, _, h, w, _ = (static_extent(a) for a in out.op.axis)
    cfg.add_flop(2 * n * kernel_shape[0] * h * w * kernel_shape[1] * kernel_shape[2]
                 * kernel_shape[3])
    return s, [data, kernel, out]
