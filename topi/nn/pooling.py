"""Pooling computes: max/avg pooling over 2-D windows and global pooling, NCHW or NHWC.

Padding is never materialised: a window position outside the input is skipped by the reduction's
condition (max) or contributes zero (avg), and the avg divisor is a closed-form count per output
pixel, so `count_include_pad` and `ceil_mode` cost nothing in the inner loop. The semantics follow
TVM's reference (topi.testing.poolnd_python): with count_include_pad, the divisor counts the
window positions inside the padded input (a ceil_mode overhang past it is not counted).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .layout import nchwc_block
from .utils import as_pair, check_tensor, const_shape, get_pad_tuple, pooled_size

POOL_LAYOUTS = ("NCHW", "NHWC", "NCHW<b>c")


def pool_input(op: str, data: tl.Tensor, pool_type: str,
               layout: str) -> tuple[str, int, int, tuple[int, ...]]:
    """The checks every 2-D pooling shares: returns the op's name for messages (e.g.
    "max_pool2d"), the (h, w) axes of `layout` and the static shape of `data`.

    The channel-blocked NCHW<b>c layouts (topi.nn.layout) pool each lane of a block like a
    channel of its own, so they need nothing but the 5-D shape.

    Raises:
        ValueError: a pool_type other than "max"/"avg" or an unknown layout.
        TypeError: `data` is not a tensor of static shape with the layout's dimensions.
    """
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    what = op.replace("pool2d", f"{pool_type}_pool2d")
    if layout == "NHWC":
        ha, wa, ndim = 1, 2, 4
    else:
        try:
            ndim = 5 if nchwc_block(layout, what) else 4
        except ValueError:
            raise ValueError(f"{what}: layout must be one of {POOL_LAYOUTS}, "
                             f"got {layout!r}") from None
        ha, wa = 2, 3
    check_tensor(data, f"{what}: data", ndim)
    return what, ha, wa, const_shape(data, what)


def _taps_inside(base: Expr, count: int, step: int, lo: int, hi: int) -> Expr:
    """How many of the positions base + t * step (t < count) lie in [lo, hi): the taps from
    the first at or past `lo` to the last before `hi`, in closed form (a window may be
    thousands of taps wide: HF EfficientNet pools its 2x2 maps with a 2560-wide kernel)."""
    first = tl.maximum((lo - base + (step - 1)) // step, 0)
    last = tl.minimum((hi - 1 - base) // step, count - 1)
    return tl.maximum(last - first + 1, 0)


def pool2d(
    data: tl.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int],
    dilation: int | Sequence[int],
    padding: int | Sequence[int],
    pool_type: str,
    ceil_mode: bool = False,
    layout: str = "NCHW",
    count_include_pad: bool = True,
) -> tl.Tensor:
    """Max or average pooling (TVM's `pool2d` argument order).

    Args:
        data: 4-D input in `layout` (5-D in NCHW<b>c).
        kernel, stride, dilation: an int or (h, w).
        padding: an int, (pad_h, pad_w) or (top, left, bottom, right).
        pool_type: "max" or "avg".
        ceil_mode: round the output size up (partial windows at the bottom/right).
        layout: "NCHW", "NHWC" or "NCHW<b>c".
        count_include_pad: for "avg", divide by the window size including padding.

    Returns:
        The pooled tensor, tagged "pool_max" or "pool_avg".
    """
    what, ha, wa, shape = pool_input("pool2d", data, pool_type, layout)
    kh, kw = as_pair(kernel, f"{what}: kernel")
    sh, sw = as_pair(stride, f"{what}: stride")
    dh, dw = as_pair(dilation, f"{what}: dilation")
    if isinstance(padding, str):
        raise TypeError(f"{what}: padding must be an int or a tuple, got {padding!r}")
    top, left, bottom, right = get_pad_tuple(padding, (kh, kw))
    h, w = shape[ha], shape[wa]
    out_h = pooled_size(h, top, bottom, (kh - 1) * dh + 1, sh, ceil_mode)
    out_w = pooled_size(w, left, right, (kw - 1) * dw + 1, sw, ceil_mode)
    if out_h < 1 or out_w < 1:
        raise ValueError(f"{what}: the window is larger than the padded input")
    out_shape = list(shape)
    out_shape[ha], out_shape[wa] = out_h, out_w
    ry = tl.reduce_axis((0, kh), name="ry")
    rx = tl.reduce_axis((0, kw), name="rx")

    def window(index: tuple) -> tuple[Expr, tuple]:
        """Whether window tap (ry, rx) of output `index` is inside the input, and its index."""
        y = index[ha] * sh - top
        x = index[wa] * sw - left
        iy, ix = y + ry * dh, x + rx * dw
        inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        read = list(index)
        read[ha], read[wa] = iy, ix
        return inside, tuple(read)

    if pool_type == "max":
        info = tl.const(0, data.dtype).dtype  # integers (uint8 activations): their minimum
        lowest = tl.const(float("-inf") if info.is_float else info.min_value(), data.dtype)

        def fmax(*index: Expr) -> Expr:
            inside, read = window(index)
            return tl.max(tl.if_then_else(inside, data[read], lowest), axis=[ry, rx])

        return tl.compute(tuple(out_shape), fmax, name="pool_max", tag="pool_max")

    zero = tl.const(0, data.dtype)

    def fsum(*index: Expr) -> Expr:
        inside, read = window(index)
        return tl.sum(tl.if_then_else(inside, data[read], zero), axis=[ry, rx])

    total = tl.compute(tuple(out_shape), fsum, name="pool_sum", tag="pool_sum")
    lo_h, hi_h = (-top, h + bottom) if count_include_pad else (0, h)
    lo_w, hi_w = (-left, w + right) if count_include_pad else (0, w)

    def favg(*index: Expr) -> Expr:
        y = index[ha] * sh - top
        x = index[wa] * sw - left
        count = _taps_inside(y, kh, dh, lo_h, hi_h) * _taps_inside(x, kw, dw, lo_w, hi_w)
        # An all-padding window averages to 0, as in TVM's reference.
        return total[index] / tl.maximum(count, 1).astype(data.dtype)

    return tl.compute(tuple(out_shape), favg, name="pool_avg", tag="pool_avg")


def max_pool2d(
    data: tl.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    layout: str = "NCHW",
) -> tl.Tensor:
    """Max pooling; padded positions never win. See `pool2d` for the arguments."""
    return pool2d(data, kernel, stride, dilation, padding, "max", ceil_mode, layout)


def avg_pool2d(
    data: tl.Tensor,
    kernel: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    layout: str = "NCHW",
    count_include_pad: bool = True,
) -> tl.Tensor:
    """Average pooling. See `pool2d` for the arguments."""
    return pool2d(data, kernel, stride, dilation, padding, "avg", ceil_mode, layout,
                  count_include_pad)


def global_pool2d(data: tl.Tensor, pool_type: str, layout: str = "NCHW") -> tl.Tensor:
    """Max or average over the whole spatial plane; the spatial dims are kept with size 1.

    Returns:
        The pooled tensor, tagged "global_pool_max" or "global_pool_avg".
    """
    _, ha, wa, shape = pool_input("global_pool2d", data, pool_type, layout)
    ry = tl.reduce_axis((0, shape[ha]), name="ry")
    rx = tl.reduce_axis((0, shape[wa]), name="rx")
    out_shape = list(shape)
    out_shape[ha] = out_shape[wa] = 1
    reducer = tl.max if pool_type == "max" else tl.sum

    def f(*index: Expr) -> Expr:
        read = list(index)
        read[ha], read[wa] = ry, rx
        return reducer(data[tuple(read)], axis=[ry, rx])

    pooled = tl.compute(tuple(out_shape), f, name=f"global_pool_{pool_type}",
                        tag=f"global_pool_{pool_type}")
    if pool_type == "max":
        return pooled
    scale = tl.const(1.0 / (shape[ha] * shape[wa]), data.dtype)
    return tl.compute(tuple(out_shape), lambda *i: pooled[i] * scale, name="global_pool_avg_out",
                      tag="elemwise")


def global_avg_pool2d(data: tl.Tensor, layout: str = "NCHW") -> tl.Tensor:
    """Average over H and W: (N, C, H, W) -> (N, C, 1, 1) (or the NHWC equivalent)."""
    return global_pool2d(data, "avg", layout)


def global_max_pool2d(data: tl.Tensor, layout: str = "NCHW") -> tl.Tensor:
    """Maximum over H and W: (N, C, H, W) -> (N, C, 1, 1) (or the NHWC equivalent)."""
    return global_pool2d(data, "max", layout)
