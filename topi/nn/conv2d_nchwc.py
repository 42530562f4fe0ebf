"""Convolutions on channel-blocked activations: NCHW[x]c in, NCHW[x]c out (topi.nn.layout).

A model keeps this layout from one convolution to the next (the graph pass `alter_layout`), so
no convolution converts its input or output. The kernels come pre-packed (the pass packs the
constant weights once): conv2d_NCHWc takes (K/bo, C, R, S, bo), the packed kernel that
conv2d_nchw computes internally, and produces the same (N, K/bo, OH, OW, bo) blocked stage, so
one x86 schedule serves both; depthwise_conv2d_NCHWc takes (C/b, R, S, b) and vectorizes over
the channel block, so its loads are contiguous for any image width and stride.

group_conv2d_NCHWc is the same blocked stage with each block of output channels reading only
its groups' inputs: its kernel (K/bo, W, R, S, bo) holds, for each output block, the filters of
the groups that the block's bo channels belong to, W input channels wide (`group_conv2d_width`).
Groups narrower than a vector (RegNet's 8 or 16 channels per group on AVX-512, ResNeXt's 4) share
one: the block reads its groups' inputs one after the other and the kernel's lanes are zero
where the channel belongs to another group, so no channel is padded and the layout stays
NCHW[x]c; the zeros cost bo / (channels per group) times the FMAs of the block, which is a few
percent of a ResNeXt. Groups of a vector or wider read only their own input channels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tensorlang as tl
from tensorlang.expr import Expr

from .conv2d import WindowGeometry, _out_dtype, _pad_nchw, blocked_conv, window_geometry
from .transform import pad
from .utils import PaddingLike, check_tensor, const_shape, json_args


def _pad_nchwc(data: tl.Tensor, g: WindowGeometry) -> tl.Tensor:
    top, left, bottom, right = g.pad
    return pad(data, [0, 0, top, left, 0], [0, 0, bottom, right, 0], name="data_pad")


def conv2d_NCHWc(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int] = 1,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """2-D convolution: data (N, C/bi, H, W, bi) or (N, C, H, W), kernel (K/bo, C, R, S, bo) ->
    (N, K/bo, OH, OW, bo).

    kernel[ko, c, r, s, ki] is the OIHW weight[ko * bo + ki, c, r, s]. The input and output
    blocks are independent; a 4-D input is NCHW (what an image of 3 channels stays in: blocks
    of one channel would be NCHW's memory order anyway).

    Args:
        data: the input, NCHW<bi>c or NCHW.
        kernel: the packed filters.
        stride: an int or (h, w).
        padding: an int, (pad_h, pad_w), (top, left, bottom, right), "SAME" or "VALID".
        dilation: an int or (h, w).
        out_dtype: the accumulation and output dtype (the input dtype by default).

    Returns:
        The output tensor, NCHW<bo>c, tagged "conv2d_NCHWc".
    """
    check_tensor(data, "conv2d_NCHWc: data")
    if data.ndim not in (4, 5):
        raise ValueError(f"conv2d_NCHWc: data must have 4 (NCHW) or 5 (NCHW<b>c) dimensions, "
                         f"got shape {tuple(data.shape)}")
    check_tensor(kernel, "conv2d_NCHWc: kernel", 5)
    data_shape = const_shape(data, "conv2d_NCHWc")
    n, c_blocks, h, w, bi = data_shape if data.ndim == 5 else (*data_shape, 1)
    k_blocks, kc, r, s, bo = const_shape(kernel, "conv2d_NCHWc")
    if kc != c_blocks * bi:
        raise ValueError(f"conv2d_NCHWc: kernel has {kc} input channels but data has "
                         f"{c_blocks * bi} ({c_blocks} blocks of {bi})")
    g = window_geometry("conv2d_NCHWc", (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    if data.ndim == 4:
        padded = _pad_nchw(data, g)
        conv = blocked_conv(lambda b, c, y, x: padded[b, c, y, x], kernel, n, kc, g, dtype)
    else:
        padded = _pad_nchwc(data, g)
        conv = blocked_conv(lambda b, c, y, x: padded[b, c // bi, y, x, c % bi], kernel, n, kc,
                            g, dtype)
    workload = json_args(data_shape, (k_blocks, kc, r, s, bo), stride, padding, dilation, dtype)
    return tl.compute(conv.shape, lambda *i: conv[i], name="conv2d_NCHWc", tag="conv2d_NCHWc",
                      attrs={"workload": workload})


def depthwise_conv2d_NCHWc(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int] = 1,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """Depthwise convolution (one filter per channel): data (N, C/b, H, W, b), kernel
    (C/b, R, S, b) -> (N, C/b, OH, OW, b).

    kernel[co, r, s, ci] is the depthwise weight[co * b + ci, 0, r, s].

    Returns:
        The output tensor, NCHW<b>c, tagged "depthwise_conv2d_NCHWc".
    """
    check_tensor(data, "depthwise_conv2d_NCHWc: data", 5)
    check_tensor(kernel, "depthwise_conv2d_NCHWc: kernel", 4)
    n, blocks, h, w, lanes = const_shape(data, "depthwise_conv2d_NCHWc")
    k_blocks, r, s, k_lanes = const_shape(kernel, "depthwise_conv2d_NCHWc")
    if (k_blocks, k_lanes) != (blocks, lanes):
        raise ValueError(f"depthwise_conv2d_NCHWc: kernel of shape {(k_blocks, r, s, k_lanes)} "
                         f"does not match data of {blocks} blocks of {lanes} channels")
    g = window_geometry("depthwise_conv2d_NCHWc", (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    padded = _pad_nchwc(data, g)
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, s), name="rx")
    (sh, sw), (dh, dw) = g.stride, g.dilation
    workload = json_args((n, blocks, h, w, lanes), (blocks, r, s, lanes), stride, padding,
                         dilation, dtype)
    return tl.compute(
        (n, blocks, g.out_h, g.out_w, lanes),
        lambda b, co, y, x, ci: tl.sum(
            padded[b, co, y * sh + ry * dh, x * sw + rx * dw, ci].astype(dtype)
            * kernel[co, ry, rx, ci].astype(dtype),
            axis=[ry, rx],
        ),
        name="depthwise_conv2d_NCHWc",
        tag="depthwise_conv2d_NCHWc",
        attrs={"workload": workload},
    )


def _group_sizes(op: str, in_channels: int, out_channels: int, groups: int) -> tuple[int, int]:
    """(input channels, output channels) per group, checked."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{op}: channels in ({in_channels}) and out ({out_channels}) must "
                         f"divide by groups={groups}")
    return in_channels // groups, out_channels // groups


def _first_group(block: int, out_per_group: int) -> Callable[[Expr], Expr]:
    """The first group of output block `ko` (blocks of `block` channels), with no division
    where the block and the group divide each other."""
    if block % out_per_group == 0:
        return lambda ko: ko * (block // out_per_group)
    if out_per_group % block == 0:
        return lambda ko: ko // (out_per_group // block)
    return lambda ko: ko * block // out_per_group


def group_conv2d_width(in_channels: int, out_channels: int, groups: int, block: int) -> int:
    """The input channels that one block of `block` output channels of a grouped convolution
    reads: its groups' inputs, for the block that spans the most groups.

    Args:
        in_channels: C.
        out_channels: K, a multiple of `block`.
        groups: the number of groups, dividing C and K.
        block: the output channel block bo.

    Returns:
        W of the packed kernel (K/bo, W, R, S, bo).
    """
    per_in, per_out = _group_sizes("group_conv2d_width", in_channels, out_channels, groups)
    first = _first_group(block, per_out)
    spans = [(ko * block + block - 1) // per_out - first(ko) + 1
             for ko in range(out_channels // block)]
    return max(spans) * per_in


def pack_group_conv2d_kernel(weight: np.ndarray, groups: int, block: int) -> np.ndarray:
    """The OIHW weight (K, C / groups, R, S) of a grouped convolution packed for
    group_conv2d_NCHWc: (K/bo, W, R, S, bo), with output channel ko * bo + ki's filter at
    [ko, j * C/groups : (j + 1) * C/groups, :, :, ki] for the j-th group of block ko, zeros
    elsewhere (numpy; the layout pass packs constant weights once)."""
    k, per_in, r, s = weight.shape
    per_out = k // groups
    width = group_conv2d_width(per_in * groups, k, groups, block)
    first = _first_group(block, per_out)
    packed = np.zeros((k // block, width, r, s, block), weight.dtype)
    for oc in range(k):
        ko, ki = divmod(oc, block)
        start = (oc // per_out - first(ko)) * per_in
        packed[ko, start:start + per_in, :, :, ki] = weight[oc]
    return packed


def group_conv2d_NCHWc(data: tl.Tensor, kernel: tl.Tensor, stride: int | tuple[int, int],
                       padding: PaddingLike, dilation: int | tuple[int, int], groups: int,
                       out_dtype: str | None = None) -> tl.Tensor:
    """Grouped 2-D convolution: data (N, C/bi, H, W, bi) or (N, C, H, W), kernel
    (K/bo, W, R, S, bo) (`pack_group_conv2d_kernel`) -> (N, K/bo, OH, OW, bo).

    Output block ko reads the W input channels from its first group's first channel on; the
    kernel's lanes are zero where a channel belongs to another group than the lane's.

    Args:
        data, kernel, stride, padding, dilation, out_dtype: as for `conv2d_NCHWc`, with the
            kernel packed by `pack_group_conv2d_kernel`.
        groups: the number of groups, dividing C and K.

    Returns:
        The output tensor, NCHW<bo>c, tagged "group_conv2d_NCHWc".
    """
    op = "group_conv2d_NCHWc"
    check_tensor(data, f"{op}: data")
    if data.ndim not in (4, 5):
        raise ValueError(f"{op}: data must have 4 (NCHW) or 5 (NCHW<b>c) dimensions, "
                         f"got shape {tuple(data.shape)}")
    check_tensor(kernel, f"{op}: kernel", 5)
    data_shape = const_shape(data, op)
    n, c_blocks, h, w, bi = data_shape if data.ndim == 5 else (*data_shape, 1)
    k_blocks, width, r, s, bo = const_shape(kernel, op)
    channels, out_channels = c_blocks * bi, k_blocks * bo
    per_in, per_out = _group_sizes(op, channels, out_channels, groups)
    expected = group_conv2d_width(channels, out_channels, groups, bo)
    if width != expected:
        raise ValueError(f"{op}: kernel reads {width} input channels per block, expected "
                         f"{expected} ({channels} channels in {groups} groups, output blocks "
                         f"of {bo})")
    g = window_geometry(op, (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    first = _first_group(bo, per_out)
    # Only blocks that span a varying number of groups can read past the last channel (with
    # zero weights): those reads are clamped.
    overrun = any(first(ko) * per_in + width > channels for ko in range(k_blocks))

    def channel(ko: Expr, rc: Expr) -> Expr:
        c = first(ko) * per_in + rc
        return tl.minimum(c, channels - 1) if overrun else c

    if data.ndim == 4:
        padded = _pad_nchw(data, g)
        conv = blocked_conv(lambda b, c, y, x: padded[b, c, y, x], kernel, n, width, g, dtype,
                            channel, max(1, per_out // bo))
    else:
        padded = _pad_nchwc(data, g)
        conv = blocked_conv(lambda b, c, y, x: padded[b, c // bi, y, x, c % bi], kernel, n,
                            width, g, dtype, channel, max(1, per_out // bo))
    workload = json_args(data_shape, (k_blocks, width, r, s, bo), stride, padding, dilation,
                         groups, dtype)
    return tl.compute(conv.shape, lambda *i: conv[i], name=op, tag=op,
                      attrs={"workload": workload})
