"""numpy references of the convolutions (float64 accumulation, result in the input dtype)."""

from __future__ import annotations

import numpy as np

from ..nn.utils import PaddingLike, as_pair, get_pad_tuple


def _window(
    in_hw: tuple[int, int], kernel_hw: tuple[int, int], stride, padding, dilation
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int], int, int]:
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    eff_h, eff_w = (kernel_hw[0] - 1) * dh + 1, (kernel_hw[1] - 1) * dw + 1
    pads = get_pad_tuple(padding, (eff_h, eff_w))
    out_h = (in_hw[0] + pads[0] + pads[2] - eff_h) // sh + 1
    out_w = (in_hw[1] + pads[1] + pads[3] - eff_w) // sw + 1
    return (sh, sw), (dh, dw), pads, out_h, out_w


def _conv_nchw(data: np.ndarray, kernel: np.ndarray, stride, padding, dilation,
               groups: int) -> np.ndarray:
    """Grouped NCHW convolution as one tensordot per kernel tap (exact, and fast enough)."""
    n, _, h, w = data.shape
    k, kc, r, s = kernel.shape
    (sh, sw), (dh, dw), (top, left, bottom, right), oh, ow = _window(
        (h, w), (r, s), stride, padding, dilation
    )
    padded = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    out = np.zeros((n, k, oh, ow))
    per_group = k // groups
    for g in range(groups):
        x = padded[:, g * kc:(g + 1) * kc]
        wk = kernel[g * per_group:(g + 1) * per_group].astype(np.float64)
        for y in range(r):
            for xx in range(s):
                patch = x[:, :, y * dh:y * dh + (oh - 1) * sh + 1:sh,
                          xx * dw:xx * dw + (ow - 1) * sw + 1:sw]
                out[:, g * per_group:(g + 1) * per_group] += np.einsum(
                    "nchw,kc->nkhw", patch, wk[:, :, y, xx]
                )
    return out.astype(data.dtype)


def conv2d_nchw_python(data: np.ndarray, kernel: np.ndarray, stride: int | tuple[int, int],
                       padding: PaddingLike, dilation: int | tuple[int, int] = 1) -> np.ndarray:
    """data (N, C, H, W) * kernel (K, C, R, S) -> (N, K, OH, OW)."""
    return _conv_nchw(data, kernel, stride, padding, dilation, 1)


def group_conv2d_nchw_python(data: np.ndarray, kernel: np.ndarray, stride, padding, dilation,
                             groups: int) -> np.ndarray:
    """Grouped convolution: kernel (K, C / groups, R, S)."""
    return _conv_nchw(data, kernel, stride, padding, dilation, groups)


def conv2d_nhwc_python(data: np.ndarray, kernel: np.ndarray, stride: int | tuple[int, int],
                       padding: PaddingLike, dilation: int | tuple[int, int] = 1) -> np.ndarray:
    """data (N, H, W, C) * kernel (R, S, C, K) -> (N, OH, OW, K)."""
    out = conv2d_nchw_python(data.transpose(0, 3, 1, 2), kernel.transpose(3, 2, 0, 1), stride,
                             padding, dilation)
    return out.transpose(0, 2, 3, 1)


def depthwise_conv2d_nchw_python(data: np.ndarray, kernel: np.ndarray,
                                 stride: int | tuple[int, int], padding: PaddingLike,
                                 dilation: int | tuple[int, int] = 1) -> np.ndarray:
    """data (N, C, H, W), kernel (C, M, R, S) -> (N, C * M, OH, OW)."""
    c, m, r, s = kernel.shape
    expanded = np.repeat(data, m, axis=1)
    return _conv_nchw(expanded, kernel.reshape(c * m, 1, r, s), stride, padding, dilation, c * m)
