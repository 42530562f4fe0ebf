"""argmax / argmin: the index of the largest / smallest element along an axis (numpy's rules).

Both are one multi-output reduction (`tl.comm_reducer` over (index, value) pairs), as in TVM.
The combiner is commutative, not just order-preserving: of two equal values it keeps the smaller
index, and a NaN beats every number (the first NaN wins, as in numpy), so any loop order or
split of the reduction gives numpy's answer.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorlang as tl
from tensorlang.dtype import INT32, as_dtype
from tensorlang.expr import Expr

from .utils import check_axis, check_tensor

NO_INDEX = INT32.max_value()
"""The index of the reduction's identity: larger than any real index, so it loses every tie."""


def _combiner(better: Callable[[Expr, Expr], Expr], value_dtype: str) -> Callable:
    is_float = as_dtype(value_dtype).is_float

    def fcombine(x: tuple[Expr, Expr], y: tuple[Expr, Expr]) -> tuple[Expr, Expr]:
        (x_index, x_value), (y_index, y_value) = x, y
        first = x_index < y_index
        take_x = better(x_value, y_value) | ((x_value == y_value) & first)
        if is_float:
            x_nan, y_nan = x_value != x_value, y_value != y_value
            take_x = (x_nan & (~y_nan | first)) | (~y_nan & take_x)
        return tl.select(take_x, x_index, y_index), tl.select(take_x, x_value, y_value)

    return fcombine


def _arg_reduce(data: tl.Tensor, axis: int | None, keepdims: bool, name: str) -> tl.Tensor:
    check_tensor(data, name)
    if not isinstance(keepdims, bool):
        raise TypeError(f"{name}: keepdims must be a bool, got {keepdims!r}")
    ndim = data.ndim
    axes = list(range(ndim)) if axis is None else [check_axis(axis, ndim)]
    t = as_dtype(data.dtype)
    worst = t.min_value() if name == "argmax" else t.max_value()
    better = (lambda a, b: a > b) if name == "argmax" else (lambda a, b: a < b)
    reducer = tl.comm_reducer(
        _combiner(better, data.dtype),
        lambda index_t, value_t: (tl.const(NO_INDEX, index_t), tl.const(worst, value_t)),
        name=name,
    )
    reduce_axes = {a: tl.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes}
    kept = [a for a in range(ndim) if a not in reduce_axes]
    out_shape = [1 if a in reduce_axes else data.shape[a] for a in range(ndim)] if keepdims \
        else [data.shape[a] for a in kept]

    def body(*index: Expr) -> tuple[Expr, Expr]:
        outer = iter(index) if not keepdims else iter(index[a] for a in kept)
        point = [reduce_axes[a] if a in reduce_axes else next(outer) for a in range(ndim)]
        flat: Expr = tl.const(0, "int32")
        for a in axes:  # the index into the reduced axes in C order (flat when axis is None)
            flat = flat * data.shape[a] + reduce_axes[a]
        return reducer((flat, data[tuple(point)]), axis=list(reduce_axes.values()))

    if not out_shape:  # a 0-d result is held in a 1-element tensor
        out_shape = [1]
        compute_body: Callable = lambda _: body()  # noqa: E731
    else:
        compute_body = body
    index, _ = tl.compute(tuple(out_shape), compute_body, name=name, tag="argreduce")
    return index


def argmax(data: tl.Tensor, axis: int | None = None, keepdims: bool = False) -> tl.Tensor:
    """The int32 index of the largest element along `axis` (of the flattened tensor when None),
    the first one on ties and the first NaN if any, as `np.argmax`.

    A reduction over every axis without keepdims gives a 1-element tensor (numpy: a scalar).
    """
    return _arg_reduce(data, axis, keepdims, "argmax")


def argmin(data: tl.Tensor, axis: int | None = None, keepdims: bool = False) -> tl.Tensor:
    """The int32 index of the smallest element along `axis`, as `np.argmin` (see `argmax`)."""
    return _arg_reduce(data, axis, keepdims, "argmin")
