"""x86 schedule and tuning template of conv2d_nchw: the NCHW[x]c recipe.

The compute (topi.nn.conv2d_nchw) already reads a kernel packed by blocks of w output channels
(w: one vector of the target it was defined for) and produces a (N, K/w, OH, OW, w) blocked
result. The schedule:
- materialises the padded input once (no bounds checks in the hot loop) and the packed kernel;
- per (batch, block of output channels, output row, block of `tile_ow` output columns) keeps a
  register block of tile_ow x tile_oc vectors of w channels, accumulated over input channels
  split by `tile_ic`, kernel rows, and kernel columns (unrolled when `unroll_kw`): each step is
  one kernel vector load, one broadcast of an input pixel and tile_ow * tile_oc FMAs;
- writes the block out through the fused elementwise tail (bias, relu, ...) of the output stage.
Knobs: tile_ic, tile_oc, tile_ow, unroll_kw (shared/DESIGN.md). The register block may hold as
many accumulators as the current target has vector registers to spare.
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl

from ..nn.conv2d import conv2d_nchw
from .common import (
    accumulator_budget,
    compute_chain_at,
    fuse_parallel,
    schedule_injective_stage,
    static_extent,
    whole_block_loop,
)
from .config import conv_template, schedule_tagged

TASK = "conv2d_nchw.x86"

def define_conv_space(cfg, in_channels: int, oc_vectors: int, out_w: int, lanes: int) -> None:
    """The knobs of a register-blocked convolution and its fallback: `tile_ic` input channels
    per step, `tile_oc` vectors of output channels (of `oc_vectors`) times `tile_ow` output
    columns of accumulators, within the current target's accumulator budget (each step loads
    `tile_oc` kernel vectors and broadcasts one input value)."""
    cfg.define_split("tile_ic", in_channels, num_outputs=2)
    cfg.define_knob("tile_oc", [v for v in (1, 2, 4) if v <= oc_vectors])
    # Every block width up to the budget: the loop partitioner peels a partial last block, so
    # non-divisors (e.g. 6 x 2 vectors = AVX2's 12 accumulators on a 56-wide row) are cheap.
    cfg.define_split("tile_ow", out_w, num_outputs=2, policy="candidate",
                     candidate=[[-1, w] for w in range(1, min(out_w, accumulator_budget(1)) + 1)])
    cfg.define_knob("unroll_kw", [True, False])
    if cfg.is_fallback:
        cfg.fallback_split("tile_ic", [-1, _largest_divisor(in_channels, lanes)])
        cfg.fallback_split("tile_ow", [-1, _fallback_ow(out_w, (accumulator_budget(1) + 1) // 2)])
    elif cfg["tile_ow"].size[-1] * (oc := cfg["tile_oc"].val) > accumulator_budget(oc):
        cfg.raise_error("register block larger than the register file")


def _largest_divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def _fallback_ow(out_w: int, limit: int) -> int:
    """A register block of up to `limit` columns of one vector (the fallback passes half the
    accumulator budget: with the kernel columns unrolled, the broadcast inputs that neighbouring
    columns share stay live as well; 7 columns beat 8 on AVX2, 14 is right for AVX-512); an
    exact divisor of the width when there is a good one."""
    limit = min(16, limit)
    exact = _largest_divisor(out_w, limit)
    return exact if exact >= limit // 2 - 1 or exact == out_w else min(out_w, limit)


def schedule_conv2d_nchw_with(cfg, s: tl.Schedule, conv: tl.Tensor, out: tl.Tensor) -> None:
    """Apply the blocked schedule to the conv2d_nchw stage `conv`, whose elementwise tail ends in
    the output `out` (possibly `conv` itself); `cfg` holds the knob values."""
    blocked = conv.op.input_tensors[0]
    padded, kernel_vec = blocked.op.input_tensors
    _, blocks, _, out_w, lanes = (static_extent(a) for a in blocked.op.axis)
    in_channels = static_extent(blocked.op.reduce_axis[0])
    define_conv_space(cfg, in_channels, blocks, out_w, lanes)
    oc_vectors = cfg["tile_oc"].val
    ow_block = cfg["tile_ow"].size[-1]

    if isinstance(padded.op, tl.ComputeOp):
        # Materialised once: the hot loop then reads without bounds checks.
        schedule_injective_stage(s, padded)
    if isinstance(kernel_vec.op, tl.ComputeOp):  # conv2d_NCHWc reads a pre-packed kernel
        pk = s[kernel_vec]
        ko, _, _, _, ki = pk.op.axis
        pk.vectorize(ki)
        pk.parallel(ko)

    o = s[out]
    # An NCHW output splits its channels into the blocks; an NCHW[x]c one (conv2d_NCHWc) has
    # them, and its lane axis stays innermost, one vector store.
    n, k, y, x, *lane = o.op.axis
    k_outer, k_inner = o.split(k, factor=oc_vectors if lane else lanes * oc_vectors)
    x_outer, x_inner = o.split(x, factor=ow_block)
    o.reorder(n, k_outer, y, x_outer, k_inner, x_inner, *lane)
    if lane:
        o.vectorize(lane[0])
    # The output row stays out of the fused parallel loop: region inference of the blocked
    # stage needs the channel block as a loop of its own.
    fuse_parallel(s, out, [n, k_outer])

    b = s[blocked]
    if lane and conv.op is not out.op:
        # conv2d_NCHWc's output stage is a copy of the block: the tail reads the block itself.
        s[conv].compute_inline()
    if conv.op is out.op or lane:
        b.compute_at(o, x_outer)
    else:
        compute_chain_at(s, out, conv, x_outer)
        b.compute_at(s[conv], whole_block_loop(s[conv]))
    bn, bk, by, bx, bc = b.op.axis
    rc, ry, rx = b.op.reduce_axis
    rc_outer, rc_inner = cfg["tile_ic"].apply(s, blocked, rc)
    b.reorder(bn, by, rc_outer, ry, rc_inner, rx, bk, bx, bc)
    b.vectorize(bc)
    b.unroll(bx)
    b.unroll(bk)
    if cfg["unroll_kw"].val:
        b.unroll(rx)


def schedule_conv2d_nchw(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule conv2d_nchw and its fused elementwise tail (tuned config when one is active)."""
    return schedule_tagged(outs, {"conv2d_nchw": TASK}, schedule_conv2d_nchw_with)


@autotune.template(TASK)
def conv2d_nchw_template(cfg, data_shape, kernel_shape, stride, padding, dilation, dtype):
    """Tunable conv2d_nchw: args ((N, C, H, W), (K, C, R, S), stride, padding, dilation, dtype)."""
    return conv_template(cfg, conv2d_nchw, schedule_conv2d_nchw_with, data_shape, kernel_shape,
                         stride, padding, dilation, dtype, channel_axis=1)
