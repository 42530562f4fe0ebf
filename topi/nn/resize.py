"""Resize compute: resize2d over the H and W axes of NCHW data, with ONNX Resize's semantics
(opsets 13-19) for the nearest, linear and cubic methods (tag "injective").

Each output pixel maps to a source coordinate per axis (the coordinate transformation mode),
computed in float32 in the order onnxruntime uses, so nearest-neighbour picks agree with it at
exact ties. Interpolation neighbours outside the input take the edge pixel (ONNX's rule), so every
read is clamped into the input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import tensorlang as tl
from tensorlang.expr import Expr

from .transform import INJECTIVE
from .utils import check_tensor, const_shape

RESIZE_METHODS = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn", "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def coordinate_constants(in_size: int, out_size: int, mode: str) -> tuple[float, float, float]:
    """(scale, numerator, offset) as float32 values for one axis: the source coordinate of output
    index x is `offset + (x + 0.5) / scale - 0.5` for the half-pixel modes, `x * numerator /
    (out_size - 1)` for align_corners and `x / scale` for asymmetric.

    scale is out_size / in_size (ONNX derives it so from the sizes); half_pixel_symmetric's offset
    is the tiny correction ONNX defines for a scale that does not give the size exactly.
    """
    f32 = np.float32
    scale = f32(out_size) / f32(in_size)
    offset = f32(0.0)
    if mode == "half_pixel_symmetric":
        adjustment = f32(out_size) / (scale * f32(in_size))
        offset = (f32(in_size) / f32(2)) * (f32(1) - adjustment)
    return float(scale), float(f32(in_size - 1)), float(offset)


def check_resize_args(method: str, coordinate_transformation_mode: str,
                      nearest_mode: str) -> None:
    """Raise ValueError for a method or mode outside the supported sets (shared with the numpy
    reference, so both reject the same calls)."""
    for value, allowed, what in ((method, RESIZE_METHODS, "method"),
                                 (coordinate_transformation_mode, COORDINATE_MODES,
                                  "coordinate_transformation_mode"),
                                 (nearest_mode, NEAREST_MODES, "nearest_mode")):
        if value not in allowed:
            raise ValueError(f"resize2d: {what} must be one of {allowed}, got {value!r}")


def _source_coord(x: Expr, in_size: int, out_size: int, mode: str) -> Expr:
    """The float32 source coordinate of output index `x` along one axis."""
    scale, numerator, offset = coordinate_constants(in_size, out_size, mode)
    xf = x.astype("float32")
    half = tl.const(0.5, "float32")
    if mode == "half_pixel_symmetric":
        # onnxruntime evaluates this mode in double and rounds once to float32
        shifted = (x.astype("float64") + 0.5) / tl.const(scale, "float64")
        return (tl.const(offset, "float64") + shifted - 0.5).astype("float32")
    if mode == "align_corners":
        if out_size == 1:
            return tl.const(0.0, "float32")
        return xf * tl.const(numerator, "float32") / tl.const(float(out_size - 1), "float32")
    if mode == "asymmetric":
        return xf / tl.const(scale, "float32")
    if mode == "tf_half_pixel_for_nn":
        return (xf + half) / tl.const(scale, "float32")
    if mode == "pytorch_half_pixel" and out_size == 1:
        return tl.const(0.0, "float32")
    return (xf + half) / tl.const(scale, "float32") - half


def _clamp(i: Expr, n: int) -> Expr:
    return tl.minimum(tl.maximum(i, tl.const(0, i.dtype)), tl.const(n - 1, i.dtype))


def _nearest(coord: Expr, n: int, nearest_mode: str) -> Expr:
    """The input index that `nearest_mode` rounds `coord` to, clamped into [0, n)."""
    if nearest_mode == "floor":
        picked = tl.floor(coord)
    elif nearest_mode == "ceil":
        picked = tl.ceil(coord)
    else:
        # floor plus a step on the exact fraction: adding 0.5 first could round in float32
        low = tl.floor(coord)
        frac = coord - low
        half = tl.const(0.5, "float32")
        up = frac > half if nearest_mode == "round_prefer_floor" else frac >= half
        picked = tl.if_then_else(up, low + tl.const(1.0, "float32"), low)
    return _clamp(picked.astype("int32"), n)


def _linear_taps(coord: Expr, n: int) -> list[tuple[Expr, Expr]]:
    """(index, weight) of the two neighbours; the coordinate is clamped into the input first,
    which is ONNX's edge padding of the neighbours."""
    c = tl.minimum(tl.maximum(coord, tl.const(0.0, "float32")), tl.const(float(n - 1), "float32"))
    low = tl.floor(c)
    i0 = low.astype("int32")
    w1 = c - low
    return [(i0, tl.const(1.0, "float32") - w1),
            (tl.minimum(i0 + 1, tl.const(n - 1, "int32")), w1)]


def cubic_weights(t: object, a: float) -> list:
    """Keys' cubic convolution weights of the four neighbours floor-1 .. floor+2 at fraction `t`
    (expressions or numpy arrays alike: ONNX's formulas)."""
    s, r = t + 1.0, 2.0 - t  # type: ignore[operator]
    u = 1.0 - t  # type: ignore[operator]
    return [
        ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a,
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,  # type: ignore[operator]
        ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0,
        ((a * r - 5.0 * a) * r + 8.0 * a) * r - 4.0 * a,
    ]


def _cubic_taps(coord: Expr, n: int, a: float, exclude_outside: bool) -> list[tuple[Expr, Expr]]:
    """(clamped index, weight) of the four neighbours; with `exclude_outside` the neighbours
    outside the input get weight 0 and the others are renormalised."""
    low = tl.floor(coord)
    t = coord - low
    base = low.astype("int32")
    weights = cubic_weights(t, float(a))
    raw = [base + (k - 1) for k in range(4)]
    if exclude_outside:
        zero = tl.const(0.0, "float32")
        weights = [tl.if_then_else((i >= 0) & (i < n), w, zero) for i, w in zip(raw, weights)]
        total = weights[0] + weights[1] + weights[2] + weights[3]
        weights = [w / total for w in weights]
    return [(_clamp(i, n), w) for i, w in zip(raw, weights)]


def resize2d(
    x: tl.Tensor,
    size: Sequence[int],
    method: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    cubic_coeff_a: float = -0.75,
    exclude_outside: bool = False,
    extrapolation_value: float = 0.0,
) -> tl.Tensor:
    """`x` (NCHW) resized to `size` = (out_h, out_w), as ONNX Resize with sizes given.

    PyTorch's upsample_nearest2d is asymmetric + floor, upsample_bilinear2d is linear with
    pytorch_half_pixel (or align_corners), upsample_bicubic2d is cubic with a = -0.75.
    `extrapolation_value` only matters for tf_crop_and_resize, which is not supported; it is
    accepted so that ONNX attrs pass through unchanged.

    Raises:
        ValueError: a method or mode outside the supported ones, a bad size.
        TypeError: linear or cubic on a non-float tensor.
    """
    check_tensor(x, "resize2d: x", 4)
    check_resize_args(method, coordinate_transformation_mode, nearest_mode)
    if (not isinstance(size, (tuple, list)) or len(size) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in size)):
        raise ValueError(f"resize2d: size must be (out_h, out_w) of positive ints, got {size!r}")
    if method != "nearest" and not x.dtype.startswith("float"):
        raise TypeError(f"resize2d: {method} resizing needs a float tensor, got {x.dtype}")
    n, c, in_h, in_w = const_shape(x, "resize2d")
    out_h, out_w = size
    mode = coordinate_transformation_mode

    def taps(v: Expr, in_size: int, out_size: int) -> list[tuple[Expr, Expr | None]]:
        if in_size == out_size:
            return [(v, None)]  # an axis kept at its size is copied (onnxruntime's rule)
        coord = _source_coord(v, in_size, out_size, mode)
        if method == "nearest":
            return [(_nearest(coord, in_size, nearest_mode), None)]
        if method == "linear":
            return _linear_taps(coord, in_size)
        return _cubic_taps(coord, in_size, cubic_coeff_a, bool(exclude_outside))

    def f(b: Expr, ch: Expr, oy: Expr, ox: Expr) -> Expr:
        rows, cols = taps(oy, in_h, out_h), taps(ox, in_w, out_w)
        if len(rows) == len(cols) == 1:  # nearest, or neither axis resized
            return x[b, ch, rows[0][0], cols[0][0]]
        rows = [(i, tl.const(1.0, "float32") if w is None else w) for i, w in rows]
        cols = [(i, tl.const(1.0, "float32") if w is None else w) for i, w in cols]
        # float64 data interpolates in float64; narrower floats in float32
        acc = "float64" if x.dtype == "float64" else "float32"
        value = None
        for iy, wy in rows:
            row = None
            for ix, wx in cols:
                term = x[b, ch, iy, ix].astype(acc) * wx.astype(acc)  # type: ignore[union-attr]
                row = term if row is None else row + term
            term = row * wy.astype(acc)  # type: ignore[union-attr]
            value = term if value is None else value + term
        return value.astype(x.dtype)

    return tl.compute((n, c, out_h, out_w), f, name="resize2d", tag=INJECTIVE)
