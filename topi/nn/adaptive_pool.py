"""Adaptive pooling: max or average over windows that tile the plane into a given output size
(PyTorch's AdaptiveAvgPool2d / AdaptiveMaxPool2d; output size 1 is global pooling).

Output pixel i along an axis of length n pools input rows [floor(i n / o), ceil((i + 1) n / o)).
The windows vary in size, so the reduction runs over the largest window with a condition, and
the avg divisor is the window's size in closed form.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .pooling import pool_input
from .utils import as_pair


def adaptive_windows(n: int, out: int) -> list[tuple[int, int]]:
    """(start, end) of each of the `out` windows over `n` positions."""
    return [((i * n) // out, -(-((i + 1) * n) // out)) for i in range(out)]


def _max_window(n: int, out: int) -> int:
    return max(e - s for s, e in adaptive_windows(n, out))


def adaptive_pool2d(data: tl.Tensor, output_size: int | Sequence[int], pool_type: str,
                    layout: str = "NCHW") -> tl.Tensor:
    """Adaptive max or average pooling of a 4-D `data` to `output_size` (an int or (h, w)).

    Returns:
        The pooled tensor, tagged "adaptive_pool_max" or "adaptive_pool_avg".
    """
    what, ha, wa, shape = pool_input("adaptive_pool2d", data, pool_type, layout)
    oh, ow = as_pair(output_size, f"{what}: output_size")
    h, w = shape[ha], shape[wa]
    ry = tl.reduce_axis((0, _max_window(h, oh)), name="ry")
    rx = tl.reduce_axis((0, _max_window(w, ow)), name="rx")
    out_shape = list(shape)
    out_shape[ha], out_shape[wa] = oh, ow

    def bounds(i: Expr, n: int, out: int) -> tuple[Expr, Expr]:
        return (i * n) // out, ((i + 1) * n + out - 1) // out

    def window(index: tuple) -> tuple[Expr, tuple, Expr]:
        y0, y1 = bounds(index[ha], h, oh)
        x0, x1 = bounds(index[wa], w, ow)
        inside = (y0 + ry < y1) & (x0 + rx < x1)
        read = list(index)
        # Clamped so that the (discarded) taps past a window never read past the plane.
        read[ha] = tl.minimum(y0 + ry, h - 1)
        read[wa] = tl.minimum(x0 + rx, w - 1)
        return inside, tuple(read), (y1 - y0) * (x1 - x0)

    if pool_type == "max":
        lowest = tl.const(float("-inf"), data.dtype)

        def fmax(*index: Expr) -> Expr:
            inside, read, _ = window(index)
            return tl.max(tl.if_then_else(inside, data[read], lowest), axis=[ry, rx])

        return tl.compute(tuple(out_shape), fmax, name="adaptive_pool_max",
                          tag="adaptive_pool_max")
    zero = tl.const(0, data.dtype)

    def fsum(*index: Expr) -> Expr:
        inside, read, _ = window(index)
        return tl.sum(tl.if_then_else(inside, data[read], zero), axis=[ry, rx])

    total = tl.compute(tuple(out_shape), fsum, name="adaptive_pool_sum", tag="adaptive_pool_sum")

    def favg(*index: Expr) -> Expr:
        return total[index] / window(index)[2].astype(data.dtype)

    return tl.compute(tuple(out_shape), favg, name="adaptive_pool_avg", tag="adaptive_pool_avg")


def adaptive_avg_pool2d(data: tl.Tensor, output_size: int | Sequence[int],
                        layout: str = "NCHW") -> tl.Tensor:
    """Adaptive average pooling (see `adaptive_pool2d`)."""
    return adaptive_pool2d(data, output_size, "avg", layout)


def adaptive_max_pool2d(data: tl.Tensor, output_size: int | Sequence[int],
                        layout: str = "NCHW") -> tl.Tensor:
    """Adaptive max pooling (see `adaptive_pool2d`)."""
    return adaptive_pool2d(data, output_size, "max", layout)
