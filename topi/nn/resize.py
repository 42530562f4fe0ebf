"""Resize compute: resize2d over the H and W axes of NCHW data, with ONNX Resize's semantics
(opsets 13-19) for the nearest, linear and cubic methods (tag "injective").

Each output pixel maps to a source coordinate per axis (the coordinate transformation mode),
computed in float32 in the order onnxruntime uses, so nearest-neighbour picks agree with it at
exact ties. Interpolation neighbours outside the input take the edge pixel (ONNX's rule), so every
read is clamped into the input.

Linear and cubic resizing is separable: the column taps (index and weight) are small tables
computed once per call, and when upsampling the height a horizontal pass interpolates each input
row once, so that each output row mixes two or four whole rows of it (`ROWS_TAG`;
`topi.x86.resize` schedules the stages). Summed in the same order as before (rows of column
sums), the values are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

import tensorlang as tl
from tensorlang.expr import Expr

from .transform import INJECTIVE
from .utils import check_tensor, const_shape

RESIZE_METHODS = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn", "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: Tags of resize2d's helper stages, which schedules must not inline: the per-column tap tables
#: and the horizontal pass of a separable interpolation.
TABLE_TAG = "resize,table"
ROWS_TAG = "resize,rows"
#: Attribute of a resize2d stage that copies one input element per output (nearest, or no axis
#: resized), so that schedules can tell it from an interpolation.
PICK_ATTR = "resize_pick"


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


#: (coordinate transformation, nearest mode) pairs that pick input index `x // k` for output
#: index x when the output is exactly k times the input: the half-pixel coordinates of output
#: block q lie strictly within q +- 0.5 (rounded to q), tf_half_pixel_for_nn's and asymmetric's
#: in [q, q + 1) (floored to q); half_pixel_symmetric has no offset at an exact multiple.
_REPEATING = {(m, r) for m in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric")
              for r in ("round_prefer_floor", "round_prefer_ceil")} | {
    ("asymmetric", "floor"), ("tf_half_pixel_for_nn", "floor")}


def _repeats(in_size: int, out_size: int, mode: str, nearest_mode: str) -> bool:
    """Whether nearest resizing repeats each input index out_size / in_size times (an integer
    upscale in a mode of `_REPEATING`): the index is then one division by a constant (a shift
    for powers of two) instead of a float coordinate, a floor and a clamp per lane."""
    return out_size % in_size == 0 and out_size > in_size and (mode, nearest_mode) in _REPEATING


def resize2d(
    x: tl.Tensor,
    size: Sequence[int],
    method: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    cubic_coeff_a: float = -0.75,
    exclude_outside: bool = False,
    extrapolation_value: float = 0.0,
    layout: str = "NCHW",
) -> tl.Tensor:
    """`x` (NCHW) resized to `size` = (out_h, out_w), as ONNX Resize with sizes given.

    With `layout` "NCHW<b>c", `x` is channel-blocked (N, C/b, H, W, b) and so is the result: a
    blocked activation is resized without leaving its layout, each tap a vector of b channels.

    PyTorch's upsample_nearest2d is asymmetric + floor, upsample_bilinear2d is linear with
    pytorch_half_pixel (or align_corners), upsample_bicubic2d is cubic with a = -0.75.
    `extrapolation_value` only matters for tf_crop_and_resize, which is not supported; it is
    accepted so that ONNX attrs pass through unchanged.

    Raises:
        ValueError: a method or mode outside the supported ones, a bad size or layout.
        TypeError: linear or cubic on a non-float tensor.
    """
    blocked = re.fullmatch(r"NCHW(\d+)c", layout)
    if layout != "NCHW" and blocked is None:
        raise ValueError(f"resize2d: layout must be NCHW or NCHW<b>c, got {layout!r}")
    check_tensor(x, "resize2d: x", 5 if blocked else 4)
    if blocked and const_shape(x, "resize2d")[4] != int(blocked.group(1)):
        raise ValueError(f"resize2d: a {layout} tensor's last axis must be "
                         f"{blocked.group(1)}, got shape {tuple(x.shape)}")
    check_resize_args(method, coordinate_transformation_mode, nearest_mode)
    if (not isinstance(size, (tuple, list)) or len(size) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in size)):
        raise ValueError(f"resize2d: size must be (out_h, out_w) of positive ints, got {size!r}")
    if method != "nearest" and not x.dtype.startswith("float"):
        raise TypeError(f"resize2d: {method} resizing needs a float tensor, got {x.dtype}")
    n, c, in_h, in_w, *inner = const_shape(x, "resize2d")
    out_h, out_w = size
    mode = coordinate_transformation_mode

    def taps(v: Expr, in_size: int, out_size: int) -> list[tuple[Expr, Expr | None]]:
        if in_size == out_size:
            return [(v, None)]  # an axis kept at its size is copied (onnxruntime's rule)
        if method == "nearest" and _repeats(in_size, out_size, mode, nearest_mode):
            return [(v // (out_size // in_size), None)]
        coord = _source_coord(v, in_size, out_size, mode)
        if method == "nearest":
            return [(_nearest(coord, in_size, nearest_mode), None)]
        if method == "linear":
            return _linear_taps(coord, in_size)
        return _cubic_taps(coord, in_size, cubic_coeff_a, bool(exclude_outside))

    # float64 data interpolates in float64; narrower floats in float32
    acc = "float64" if x.dtype == "float64" else "float32"
    if method == "nearest" or (in_h == out_h and in_w == out_w):
        # one read per output: its index arithmetic costs less than loading it from a table
        def pick(*index: Expr) -> Expr:
            b, ch, oy, ox, *cc = index
            return x[b, ch, taps(oy, in_h, out_h)[0][0], taps(ox, in_w, out_w)[0][0], *cc]
        return tl.compute((n, c, out_h, out_w, *inner), pick, name="resize2d", tag=INJECTIVE,
                          attrs={PICK_ATTR: True})
    col_taps = _column_tables(taps, in_w, out_w, acc)

    def weighted(terms: list[tuple[Expr, Expr | None]]) -> Expr:
        value = None
        for v, w in terms:
            term = v.astype(acc) if w is None else v.astype(acc) * w.astype(acc)
            value = term if value is None else value + term
        return value  # type: ignore[return-value]

    def horizontal(*index: Expr) -> Expr:  # (b, ch, iy, ox) and the block's lane
        b, ch, iy, ox, *cc = index
        return weighted([(x[b, ch, iy, ix, *cc], w) for ix, w in col_taps(ox)])

    source: Callable[..., Expr] = horizontal
    # Separable: with both axes resized, the horizontal pass runs once per input row when that
    # is no more work than once per output tap row (upsampling); the vertical pass then reads
    # whole rows of it with contiguous vector loads. Otherwise each output row interpolates
    # directly.
    if in_w != out_w and out_h != in_h <= out_h * len(taps(tl.const(0, "int32"), in_h, out_h)):
        rows = tl.compute((n, c, in_h, out_w, *inner), horizontal, name="resize2d_rows",
                          tag=ROWS_TAG)
        source = lambda *index: rows[index]  # noqa: E731

    def f(*index: Expr) -> Expr:
        b, ch, oy, ox, *cc = index
        return weighted([(source(b, ch, iy, ox, *cc), w) for iy, w in taps(oy, in_h, out_h)]
                        ).astype(x.dtype)

    return tl.compute((n, c, out_h, out_w, *inner), f, name="resize2d", tag=INJECTIVE)


def _weight(tap: tuple[Expr, Expr | None], acc: str) -> Expr:
    _, w = tap
    assert w is not None  # linear and cubic taps of a resized axis are weighted
    return w.astype(acc)


Taps = Callable[[Expr, int, int], list[tuple[Expr, Expr | None]]]


def _column_tables(taps: Taps, in_w: int, out_w: int,
                   acc: str) -> Callable[[Expr], list[tuple[Expr, Expr | None]]]:
    """The column taps of a linear or cubic resize at output column `ox`, read from tables
    (index and weight of each tap, one small stage each, tag TABLE_TAG) that are computed once
    per call instead of once per output row: the vectorized column loop loads its indices and
    weights instead of recomputing floors, clamps and cubic polynomials lane by lane. An axis
    kept at its size reads `ox` itself."""
    if in_w == out_w:
        return lambda ox: [(ox, None)]
    tables = []
    for k in range(len(taps(tl.const(0, "int32"), in_w, out_w))):
        index = tl.compute((out_w,), lambda ox, k=k: taps(ox, in_w, out_w)[k][0],
                           name=f"resize2d_col{k}", tag=TABLE_TAG)
        weight = tl.compute((out_w,), lambda ox, k=k: _weight(taps(ox, in_w, out_w)[k], acc),
                            name=f"resize2d_colw{k}", tag=TABLE_TAG)
        tables.append((index, weight))
    return lambda ox: [(i[ox], w[ox]) for i, w in tables]
