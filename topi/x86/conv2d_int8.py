"""x86 schedule and tuning template of the int8 conv2d (`topi.nn.conv2d_nchw_int8`).

The product stage (NCHW[oc_bn]c int32) is register-blocked: `tile_ow` output columns x
`tile_oc` channel blocks accumulate in a local buffer computed per block; inside, the reduction
runs over input-channel blocks, kh, kw and groups of 4 channels, and each (column, channel
block) pair is one tensorized dot of 4 (`dot_int8`: VNNI, or the exact fallback). Blocks run in
parallel over (batch, channel blocks, rows); the data and kernel copies into their blocked
layouts run in parallel too. Fallback: the widest column tile that divides the output width
with at most 28 accumulators (24 for the non-VNNI sequence, 12 with 16 registers).
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl
from tensorlang.schedule import AttachKind

from ..nn.conv2d_int8 import TAG, conv2d_nchw_int8
from .common import fuse_parallel, static_extent
from .config import schedule_tagged
from .tensor_intrin import dot_int8, int8_dot_kind


def _accumulators() -> int:
    if tl.Target.current().vector_registers < 32:
        return 12
    return 28 if int8_dot_kind() != "maddubs" else 24


def _define_space(cfg, out_w: int, oc_chunks: int) -> None:
    widths = [d for d in range(1, min(out_w, 32) + 1) if out_w % d == 0]
    blocks = [b for b in (1, 2, 4) if oc_chunks % b == 0]
    cfg.define_knob("tile_ow", widths)
    cfg.define_knob("tile_oc", blocks)
    if cfg.is_fallback:
        budget = _accumulators()
        best = max(((w * b, w, b) for w in widths for b in blocks if w * b <= budget))
        cfg.fallback_knob("tile_ow", best[1])
        cfg.fallback_knob("tile_oc", best[2])
    elif cfg["tile_ow"].val * cfg["tile_oc"].val > _accumulators() + 4:
        cfg.raise_error("register block larger than the register file")


def schedule_conv2d_int8_with(cfg, s: tl.Schedule, conv: tl.Tensor, out: tl.Tensor) -> None:
    """Schedule the int8 product stage `conv` (see the module docstring); `out` is the output
    (the NCHW unpacking, or an epilogue after it)."""
    data_vec, kernel_vec = conv.op.input_tensors
    _, oc_chunks, _, out_w, lanes = (static_extent(a) for a in conv.op.axis)
    _define_space(cfg, out_w, oc_chunks)
    tile_ow, tile_oc = cfg["tile_ow"].val, cfg["tile_oc"].val

    d = s[data_vec]
    b, ico, y, _, ici = d.op.axis
    fuse_parallel(s, data_vec, [b, ico, y])
    d.unroll(ici)
    if isinstance(kernel_vec.op, tl.ComputeOp) and s[kernel_vec].attach is not AttachKind.INLINE:
        s[kernel_vec].parallel(s[kernel_vec].op.axis[0])  # else packed beforehand (a graph's)
    for t in out.op.input_tensors:
        if getattr(t.op, "name", "") == "kernel_sum":
            s[t].compute_root()

    local = s.cache_write(conv, "local")
    c = s[conv]
    b, oco, y, x, oci = c.op.axis
    oco_o, oco_i = c.split(oco, factor=tile_oc)
    xo, xi = c.split(x, factor=tile_ow)
    # Rows in parallel, alone: a fused parallel loop would hide the block's position from the
    # bounds of its local buffer behind divisions, and the accumulators would stay in memory.
    c.reorder(b, y, oco_o, xo, oco_i, xi, oci)
    c.vectorize(oci)
    c.parallel(y)
    s[local].compute_at(c, xo)

    g = s[local]
    gb, goc, gy, gx, goci = g.op.axis
    ico, ky, kx, icf, ics = g.op.reduce_axis
    g.reorder(gb, gy, ico, ky, kx, icf, gx, goc, goci, ics)
    g.vectorize(goci)  # the accumulators' zero fill (the update is the intrinsic)
    g.tensorize(goci, dot_int8(lanes))
    g.unroll(goc)
    g.unroll(gx)

    o = s[out]
    if out.op is not conv.op:  # NCHW, with the epilogue: rows as vectors (gathered reads)
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
    """Schedule `topi.nn.conv2d_nchw_int8` and what follows it (tuned config when one is
    active, else the fallback)."""
    return schedule_tagged(outs, {TAG: "conv2d_int8.x86"}, schedule_conv2d_int8_with)


@autotune.template("conv2d_int8.x86")
def conv2d_int8_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                         data_zero_point=0):
    """Tunable int8 conv2d: args ((N, C, H, W), (K, C, R, S), stride, padding, dilation,
    data zero point), uint8 data and int8 kernel, int32 NCHW output."""
    data = tl.placeholder(data_shape, "uint8", name="data")
    kernel = tl.placeholder(kernel_shape, "int8", name="kernel")
    out = conv2d_nchw_int8(data, kernel, stride, padding, dilation, data_zero_point)
    conv = next(t for t in out.op.input_tensors if getattr(t.op, "tag", "") == TAG)
    s = tl.create_schedule(out.op)
    schedule_conv2d_int8_with(cfg, s, conv, out)
    n, _, h, w = (static_extent(a) for a in out.op.axis)
    cfg.add_flop(2 * n * kernel_shape[0] * h * w * kernel_shape[1] * kernel_shape[2]
                 * kernel_shape[3])
    return s, [data, kernel, out]
