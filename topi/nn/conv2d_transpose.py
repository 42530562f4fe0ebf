"""Transposed 2-D convolution (the gradient of conv2d with respect to its input; PyTorch's
ConvTranspose2d, ONNX's ConvTranspose), NCHW with the kernel laid out (C, K / groups, R, S).

It is computed as TVM does: the input is spread out by the stride (zeros between pixels) and
padded by the dilated kernel size minus the padding, in one materialised stage; then a stride-1
convolution with the spatially flipped kernel runs over it. The spread stage is tagged so that
schedules keep it as its own loop nest rather than inlining its conditions into the reduction.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import as_pair, check_tensor, const_shape, get_pad_tuple

SPREAD = "conv2d_transpose_spread"
CONV2D_TRANSPOSE = "conv2d_transpose_nchw"


def _output_padding(value: int | tuple[int, int], stride: tuple[int, int],
                    dilation: tuple[int, int]) -> tuple[int, int]:
    if isinstance(value, bool) or not isinstance(value, (int, tuple, list)):
        raise TypeError(f"conv2d_transpose_nchw: output_padding must be an int or (h, w), "
                        f"got {value!r}")
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 0
                             for v in pair):
        raise ValueError(f"conv2d_transpose_nchw: output_padding must be non-negative ints, "
                         f"got {value!r}")
    for v, s, d in zip(pair, stride, dilation):
        if v >= max(s, d):
            raise ValueError(f"conv2d_transpose_nchw: output_padding {value!r} must be smaller "
                             f"than the stride or the dilation")
    return pair  # type: ignore[return-value]


def conv2d_transpose_nchw(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, ...] = 0,
    output_padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
) -> tl.Tensor:
    """Transposed convolution.

    Args:
        data: (N, C, H, W).
        kernel: (C, K / groups, R, S).
        stride, dilation: an int or (h, w).
        padding: an int, (pad_h, pad_w) or (top, left, bottom, right): rows and columns removed
            from the borders of the full output.
        output_padding: an int or (h, w): extra rows/columns at the bottom/right.
        groups: channel groups; C and K must be multiples of it.

    Returns:
        (N, K, (H - 1) * sh - top - bottom + dh * (R - 1) + 1 + output_padding_h, ...), tagged
        "conv2d_transpose_nchw".
    """
    what = "conv2d_transpose_nchw"
    check_tensor(data, f"{what}: data", 4)
    check_tensor(kernel, f"{what}: kernel", 4)
    if data.dtype != kernel.dtype:
        raise TypeError(f"{what}: data is {data.dtype} but kernel is {kernel.dtype}")
    n, c, h, w = const_shape(data, what)
    kc, k_per_group, r, s = const_shape(kernel, what)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{what}: groups must be a positive int, got {groups!r}")
    if kc != c or c % groups:
        raise ValueError(f"{what}: kernel {tuple(kernel.shape)} does not match {c} input "
                         f"channels in {groups} groups")
    sh, sw = as_pair(stride, f"{what}: stride")
    dh, dw = as_pair(dilation, f"{what}: dilation")
    if isinstance(padding, str):
        raise TypeError(f"{what}: padding must be an int or a tuple, got {padding!r}")
    top, left, bottom, right = get_pad_tuple(padding, (r, s))
    oph, opw = _output_padding(output_padding, (sh, sw), (dh, dw))
    out_h = (h - 1) * sh - top - bottom + dh * (r - 1) + 1 + oph
    out_w = (w - 1) * sw - left - right + dw * (s - 1) + 1 + opw
    if out_h < 1 or out_w < 1:
        raise ValueError(f"{what}: padding {padding!r} leaves an empty output")
    # The spread input, indexed so that output pixel y reads rows y .. y + dh (R - 1).
    front_h, front_w = dh * (r - 1) - top, dw * (s - 1) - left
    spread_shape = (n, c, out_h + dh * (r - 1), out_w + dw * (s - 1))

    def spread(b: Expr, ch: Expr, y: Expr, x: Expr) -> Expr:
        py, px = y - front_h, x - front_w
        iy, ix = py // sh, px // sw
        inside = (py >= 0) & (px >= 0) & (iy < h) & (ix < w)
        if sh > 1:
            inside = inside & (py % sh == 0)
        if sw > 1:
            inside = inside & (px % sw == 0)
        safe_y = tl.minimum(tl.maximum(iy, 0), h - 1)
        safe_x = tl.minimum(tl.maximum(ix, 0), w - 1)
        return tl.if_then_else(inside, data[b, ch, safe_y, safe_x], tl.const(0, data.dtype))

    spread_data = tl.compute(spread_shape, spread, name="spread", tag=SPREAD)
    c_per_group = c // groups
    rc = tl.reduce_axis((0, c_per_group), name="rc")
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, s), name="rx")

    def conv(b: Expr, k: Expr, y: Expr, x: Expr) -> Expr:
        ch = (k // k_per_group) * c_per_group + rc if groups > 1 else rc
        return tl.sum(
            spread_data[b, ch, y + ry * dh, x + rx * dw]
            * kernel[ch, k % k_per_group if groups > 1 else k, r - 1 - ry, s - 1 - rx],
            axis=[rc, ry, rx],
        )

    return tl.compute((n, k_per_group * groups, out_h, out_w), conv, name=CONV2D_TRANSPOSE,
                      tag=CONV2D_TRANSPOSE)
