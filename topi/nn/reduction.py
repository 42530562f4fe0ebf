"""Reductions along axes: sum, max, min, mean (numpy's `axis` and `keepdims`).

One reduction stage over the reduced axes, tagged "reduce" (mean adds an elementwise scale stage
that schedules inline into the output), so the default schedule parallelises the kept axes and
vectorizes the innermost kept one.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_axis, check_tensor, dims

REDUCE = "reduce"

AxisLike = int | Sequence[int] | None


def normalize_axes(axis: AxisLike, ndim: int, what: str) -> list[int]:
    """`axis` (None for all, an int or a sequence of ints, negative allowed) as sorted distinct
    non-negative axes."""
    if axis is None:
        return list(range(ndim))
    items = [axis] if isinstance(axis, int) and not isinstance(axis, bool) else axis
    if not isinstance(items, (tuple, list)):
        raise TypeError(f"{what}: axis must be None, an int or a tuple of ints, got {axis!r}")
    axes = [check_axis(a, ndim, f"{what}: axis") for a in items]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{what}: axis {axis!r} names an axis twice")
    return sorted(axes)


def _reduce(x: tl.Tensor, axis: AxisLike, keepdims: bool, reducer: Callable,
            name: str) -> tuple[tl.Tensor, int | Expr]:
    """reducer(x) over `axis`, and how many elements each output reduces (symbolic where a
    reduced axis is)."""
    check_tensor(x, f"{name}: x")
    if not isinstance(keepdims, bool):
        raise TypeError(f"{name}: keepdims must be a bool, got {keepdims!r}")
    axes = normalize_axes(axis, x.ndim, name)
    shape = dims(x)
    rvs = {a: tl.reduce_axis((0, shape[a]), name=f"k{a}") for a in axes}
    out_shape = tuple(1 if k in rvs else d for k, d in enumerate(shape)
                      if keepdims or k not in rvs)

    def f(*index: Expr) -> Expr:
        kept = iter(index)
        full = []
        for k in range(x.ndim):
            if k in rvs:
                if keepdims:
                    next(kept)
                full.append(rvs[k])
            else:
                full.append(next(kept))
        return reducer(x[tuple(full)], axis=list(rvs.values()))

    count = functools.reduce(operator.mul, (shape[a] for a in axes), 1)
    if not axes:  # nothing to reduce: numpy returns the input unchanged
        return tl.compute(shape, lambda *i: x[i], name=name, tag="elemwise"), count
    return tl.compute(out_shape, f, name=name, tag=REDUCE), count


def sum(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:
    """The sum of `x` over `axis` (all axes when None)."""
    return _reduce(x, axis, keepdims, tl.sum, "sum")[0]


def max(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:
    """The maximum of `x` over `axis` (all axes when None)."""
    return _reduce(x, axis, keepdims, tl.max, "max")[0]


def min(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:
    """The minimum of `x` over `axis` (all axes when None)."""
    return _reduce(x, axis, keepdims, tl.min, "min")[0]


def mean(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:
    """The mean of float `x` over `axis` (all axes when None)."""
    check_tensor(x, "mean: x")
    if not x.dtype.startswith("float"):
        raise TypeError(f"mean: x must be a float tensor, got {x.dtype}")
    total, count = _reduce(x, axis, keepdims, tl.sum, "mean_sum")
    scale = tl.const(1.0 / count, x.dtype) if isinstance(count, int) else \
        tl.const(1.0, x.dtype) / tl.cast(count, x.dtype)
    return tl.compute(total.shape, lambda *i: total[i] * scale, name="mean", tag="elemwise")
