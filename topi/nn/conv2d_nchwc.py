"""Convolutions on channel-blocked activations: NCHW[x]c in, NCHW[x]c out (topi.nn.layout).

A model keeps this layout from one convolution to the next (the graph pass `alter_layout`), so
no convolution converts its input or output. The kernels come pre-packed (the pass packs the
constant weights once): conv2d_NCHWc takes (K/bo, C, R, S, bo), the packed kernel that
conv2d_nchw computes internally, and produces the same (N, K/bo, OH, OW, bo) blocked stage, so
one x86 schedule serves both; depthwise_conv2d_NCHWc takes (C/b, R, S, b) and vectorizes over
the channel block, so its loads are contiguous for any image width and stride.
"""

from __future__ import annotations

import tensorlang as tl

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
