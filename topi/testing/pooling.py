"""numpy references of pooling: a direct loop over output windows, as in TVM's reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..nn.utils import as_pair, get_pad_tuple, pooled_size
from .layout import to_nchw, to_nchwc


def pool2d_python(data: np.ndarray, kernel, stride, dilation, padding, pool_type: str,
                  ceil_mode: bool = False, layout: str = "NCHW",
                  count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling; padding never wins a max, an all-padding average is 0."""
    if layout not in ("NCHW", "NHWC"):  # NCHW<b>c: pool the NCHW view
        out = pool2d_python(to_nchw(data), kernel, stride, dilation, padding, pool_type,
                            ceil_mode, "NCHW", count_include_pad)
        return to_nchwc(out, data.shape[-1])
    x = data if layout == "NCHW" else data.transpose(0, 3, 1, 2)
    kh, kw = as_pair(kernel, "kernel")
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    top, left, bottom, right = get_pad_tuple(padding, (kh, kw))
    n, c, h, w = x.shape
    oh = pooled_size(h, top, bottom, (kh - 1) * dh + 1, sh, ceil_mode)
    ow = pooled_size(w, left, right, (kw - 1) * dw + 1, sw, ceil_mode)
    fill = -np.inf if pool_type == "max" else 0.0
    padded = np.full((n, c, h + top + bottom, w + left + right), fill)
    padded[:, :, top:top + h, left:left + w] = x
    inside = np.zeros(padded.shape[2:], bool)
    inside[top:top + h, left:left + w] = True
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for xx in range(ow):
            rows = slice(y * sh, y * sh + (kh - 1) * dh + 1, dh)
            cols = slice(xx * sw, xx * sw + (kw - 1) * dw + 1, dw)
            window = padded[:, :, rows, cols]
            if pool_type == "max":
                out[:, :, y, xx] = window.max(axis=(2, 3))
                continue
            count = window.shape[2] * window.shape[3] if count_include_pad else \
                inside[rows, cols].sum()
            out[:, :, y, xx] = window.sum(axis=(2, 3)) / count if count else 0.0
    out = out.astype(data.dtype)
    return out if layout == "NCHW" else out.transpose(0, 2, 3, 1)


def max_pool2d_python(data: np.ndarray, kernel, stride, padding, dilation=1,
                      ceil_mode: bool = False, layout: str = "NCHW") -> np.ndarray:
    """Max pooling (argument order of topi.nn.max_pool2d)."""
    return pool2d_python(data, kernel, stride, dilation, padding, "max", ceil_mode, layout)


def avg_pool2d_python(data: np.ndarray, kernel, stride, padding, dilation=1,
                      ceil_mode: bool = False, layout: str = "NCHW",
                      count_include_pad: bool = True) -> np.ndarray:
    """Average pooling (argument order of topi.nn.avg_pool2d)."""
    return pool2d_python(data, kernel, stride, dilation, padding, "avg", ceil_mode, layout,
                         count_include_pad)


def global_pool2d_python(data: np.ndarray, pool_type: str, layout: str = "NCHW") -> np.ndarray:
    """Max or mean over the spatial axes, kept with size 1."""
    axes: Sequence[int] = (1, 2) if layout == "NHWC" else (2, 3)  # NCHW or NCHW<b>c
    reduce = np.max if pool_type == "max" else np.mean
    return reduce(data.astype(np.float64), axis=tuple(axes), keepdims=True).astype(data.dtype)


def global_avg_pool2d_python(data: np.ndarray, layout: str = "NCHW") -> np.ndarray:
    """Mean over the spatial axes."""
    return global_pool2d_python(data, "avg", layout)


def global_max_pool2d_python(data: np.ndarray, layout: str = "NCHW") -> np.ndarray:
    """Max over the spatial axes."""
    return global_pool2d_python(data, "max", layout)
