"""Activation layouts: NCHW and the channel-blocked NCHW[x]c, and the transform between them.

"NCHW16c" is a 5-D (N, C/16, H, W, 16) array: channel c lives in block c // 16, lane c % 16.
With a block of one vector of the target, a convolution loads and stores whole vectors of
channels and a depthwise convolution or pooling vectorizes over channels whatever the image
width (shared/DESIGN.md, "Performance design"). "NCHW1c" is NCHW's own memory order (a 5-D view
of it), which is how a convolution reads an input whose channel count has no useful block.
"""

from __future__ import annotations

import re

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_tensor, const_shape

_BLOCKED = re.compile(r"NCHW([1-9][0-9]*)c")


def nchwc_block(layout: object, what: str) -> int:
    """The channel block of a layout string: 0 for "NCHW", b for "NCHW{b}c".

    Raises:
        ValueError: any other layout (the message names `what`).
    """
    if layout == "NCHW":
        return 0
    match = _BLOCKED.fullmatch(layout) if isinstance(layout, str) else None
    if match is None:
        raise ValueError(f"{what}: layout must be 'NCHW' or 'NCHW<b>c' (e.g. 'NCHW16c'), "
                         f"got {layout!r}")
    return int(match.group(1))


def channel_block(channels: int, lanes: int) -> int:
    """The block that `channels` channels use in NCHW[x]c: the largest power of two that divides
    `channels` and is at most `lanes` (the target's vector lanes).

    Powers of two give whole (or half, quarter) vector registers: 24 channels use 8-lane
    blocks on AVX-512, 3 channels use blocks of 1 (plain NCHW memory order). A block never pads
    channels, so no lane computes garbage and no layout needs a channel count to divide."""
    return min(lanes, channels & -channels)


def layout_transform(data: tl.Tensor, src_layout: str, dst_layout: str) -> tl.Tensor:
    """`data` moved from `src_layout` to `dst_layout` (each "NCHW" or "NCHW<b>c", any blocks).

    Args:
        data: a 4-D (NCHW) or 5-D (NCHW<b>c) tensor.
        src_layout: the layout of `data`.
        dst_layout: the layout of the result; its block must divide the channel count.

    Returns:
        The moved tensor, tagged "injective" (a schedule inlines it into its reader).

    Raises:
        ValueError: an unknown layout, a shape that does not match `src_layout`, or a block
            that does not divide the channels.
    """
    src = nchwc_block(src_layout, "layout_transform: src_layout")
    dst = nchwc_block(dst_layout, "layout_transform: dst_layout")
    check_tensor(data, "layout_transform: data", 5 if src else 4)
    shape = const_shape(data, "layout_transform")
    if src:
        n, blocks, h, w, lanes = shape
        if lanes != src:
            raise ValueError(f"layout_transform: data of shape {shape} is not {src_layout}")
        channels = blocks * lanes
    else:
        n, channels, h, w = shape
    if dst and channels % dst:
        raise ValueError(f"layout_transform: {dst_layout} needs a channel count divisible by "
                         f"{dst}, got {channels}")

    def read(b: Expr, c: Expr, y: Expr, x: Expr) -> Expr:
        return data[b, c // src, y, x, c % src] if src else data[b, c, y, x]

    if not dst:
        return tl.compute((n, channels, h, w), read, name="layout_transform", tag="injective")
    return tl.compute((n, channels // dst, h, w, dst),
                      lambda b, co, y, x, ci: read(b, co * dst + ci, y, x),
                      name="layout_transform", tag="injective")
