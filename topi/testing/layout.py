"""numpy references of the NCHW[x]c layout ops: the layout transform and the blocked
convolutions (each computed in NCHW by the plain reference, between layout transforms)."""

from __future__ import annotations

import numpy as np

from ..nn.layout import nchwc_block
from ..nn.utils import PaddingLike
from .conv2d import conv2d_nchw_python, depthwise_conv2d_nchw_python


def to_nchw(data: np.ndarray) -> np.ndarray:
    """(N, C/b, H, W, b) -> (N, C, H, W)."""
    n, blocks, h, w, lanes = data.shape
    return data.transpose(0, 1, 4, 2, 3).reshape(n, blocks * lanes, h, w)


def to_nchwc(data: np.ndarray, block: int) -> np.ndarray:
    """(N, C, H, W) -> (N, C/block, H, W, block)."""
    n, c, h, w = data.shape
    return data.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)


def layout_transform_python(data: np.ndarray, src_layout: str, dst_layout: str) -> np.ndarray:
    """`data` moved from `src_layout` to `dst_layout` ("NCHW" or "NCHW<b>c")."""
    plain = to_nchw(data) if nchwc_block(src_layout, "src_layout") else data
    dst = nchwc_block(dst_layout, "dst_layout")
    return np.ascontiguousarray(to_nchwc(plain, dst) if dst else plain)


def conv2d_NCHWc_python(data: np.ndarray, kernel: np.ndarray, stride: int | tuple[int, int],
                        padding: PaddingLike, dilation: int | tuple[int, int] = 1) -> np.ndarray:
    """data (N, C/bi, H, W, bi) or (N, C, H, W) * kernel (K/bo, C, R, S, bo) ->
    (N, K/bo, OH, OW, bo)."""
    k_blocks, c, r, s, bo = kernel.shape
    weight = kernel.transpose(0, 4, 1, 2, 3).reshape(k_blocks * bo, c, r, s)
    plain = to_nchw(data) if data.ndim == 5 else data
    return to_nchwc(conv2d_nchw_python(plain, weight, stride, padding, dilation), bo)


def depthwise_conv2d_NCHWc_python(data: np.ndarray, kernel: np.ndarray,
                                  stride: int | tuple[int, int], padding: PaddingLike,
                                  dilation: int | tuple[int, int] = 1) -> np.ndarray:
    """data (N, C/b, H, W, b) * kernel (C/b, R, S, b) -> (N, C/b, OH, OW, b)."""
    blocks, r, s, lanes = kernel.shape
    weight = kernel.transpose(0, 3, 1, 2).reshape(blocks * lanes, 1, r, s)
    out = depthwise_conv2d_nchw_python(to_nchw(data), weight, stride, padding, dilation)
    return to_nchwc(out, lanes)


def unpack_group_conv2d_kernel(kernel: np.ndarray, in_channels: int, groups: int) -> np.ndarray:
    """The OIHW weight (K, C / groups, R, S) of a kernel packed for group_conv2d_NCHWc
    (K/bo, W, R, S, bo): output channel ko * bo + ki's filter starts at its group's offset
    from the block's first group (the inverse of `topi.nn.pack_group_conv2d_kernel`)."""
    k_blocks, _, r, s, bo = kernel.shape
    k = k_blocks * bo
    per_in, per_out = in_channels // groups, k // groups
    weight = np.empty((k, per_in, r, s), kernel.dtype)
    for oc in range(k):
        ko, ki = divmod(oc, bo)
        start = (oc // per_out - ko * bo // per_out) * per_in
        weight[oc] = kernel[ko, start:start + per_in, :, :, ki]
    return weight


def group_conv2d_NCHWc_python(data: np.ndarray, kernel: np.ndarray, stride: int | tuple[int, int],
                              padding: PaddingLike, dilation: int | tuple[int, int],
                              groups: int) -> np.ndarray:
    """data (N, C/bi, H, W, bi) or (N, C, H, W) * kernel (K/bo, W, R, S, bo) with `groups`
    groups -> (N, K/bo, OH, OW, bo): output block ko convolves the W input channels from its
    first group's first channel on (the last channel repeated past the end) with kernel[ko],
    which is the grouped convolution when the kernel is packed (zeros off the groups)."""
    plain = to_nchw(data) if data.ndim == 5 else data
    channels = plain.shape[1]
    k_blocks, width, _, _, bo = kernel.shape
    per_in, per_out = channels // groups, k_blocks * bo // groups
    blocks = []
    for ko in range(k_blocks):
        start = ko * bo // per_out * per_in
        read = np.minimum(np.arange(start, start + width), channels - 1)
        blocks.append(conv2d_nchw_python(plain[:, read], kernel[ko].transpose(3, 0, 1, 2),
                                         stride, padding, dilation))
    return to_nchwc(np.concatenate(blocks, axis=1), bo)
