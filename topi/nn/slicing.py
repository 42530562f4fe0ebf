"""Slicing computes: strided_slice (numpy's / ONNX's Slice), take (gather along an axis) and
split. All are tagged "injective": each output element is one input element, so schedules
inline them into their readers.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .transform import INJECTIVE
from .utils import check_axis, check_tensor, const_shape, static_dim


def _int_list(values: Sequence[int], what: str) -> list[int]:
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{what} must be a tuple of ints, got {values!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{what} must hold ints, got {values!r}")
    return list(values)


def slice_ranges(shape: Sequence[int], begin: Sequence[int], end: Sequence[int],
                 strides: Sequence[int] | None = None,
                 axes: Sequence[int] | None = None) -> list[tuple[int, int, int]]:
    """(start, step, length) per dimension of `shape` for Python's slice semantics (negative
    indices count from the end, out-of-range bounds are clamped, a negative step walks back).

    Raises:
        ValueError: lengths of begin/end/strides/axes differ, a step is 0, an axis repeats.
    """
    ndim = len(shape)
    begin = _int_list(begin, "strided_slice: begin")
    end = _int_list(end, "strided_slice: end")
    strides = [1] * len(begin) if strides is None else _int_list(strides, "strided_slice: strides")
    axes = list(range(len(begin))) if axes is None else _int_list(axes, "strided_slice: axes")
    if not len(begin) == len(end) == len(strides) == len(axes):
        raise ValueError(f"strided_slice: begin {begin}, end {end}, strides {strides} and axes "
                         f"{axes} must have the same length")
    if len(axes) > ndim:
        raise ValueError(f"strided_slice: {len(axes)} slices for a tensor of {ndim} dimensions")
    ranges = [(0, 1, d) for d in shape]
    seen: set[int] = set()
    for b, e, st, a in zip(begin, end, strides, axes):
        axis = check_axis(a, ndim, "strided_slice: axis")
        if axis in seen:
            raise ValueError(f"strided_slice: axis {a} is sliced twice")
        seen.add(axis)
        if st == 0:
            raise ValueError(f"strided_slice: stride of axis {a} is 0")
        start, stop, step = slice(b, e, st).indices(shape[axis])
        ranges[axis] = (start, step, len(range(start, stop, step)))
    return ranges


def strided_slice(x: tl.Tensor, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None,
                  axes: Sequence[int] | None = None) -> tl.Tensor:
    """x[begin:end:strides] along `axes` (the leading axes when None), with Python's slice
    semantics per axis.

    Raises:
        ValueError: an empty result (a dimension of length 0) or inconsistent arguments.
    """
    check_tensor(x, "strided_slice: x")
    # symbolic dims are kept on the axes that are not sliced
    shape = [d if static_dim(d) is None else static_dim(d) for d in x.shape]
    ranges = slice_ranges(shape, begin, end, strides, axes)
    if any(isinstance(length, int) and length < 1 for _, _, length in ranges):
        raise ValueError(f"strided_slice: the slice of {tuple(x.shape)} by begin {begin}, end "
                         f"{end}, strides {strides}, axes {axes} is empty")

    def f(*i: Expr) -> Expr:
        return x[tuple(v * step + start if (start, step) != (0, 1) else v
                       for v, (start, step, _) in zip(i, ranges))]

    return tl.compute(tuple(r[2] for r in ranges), f, name="strided_slice", tag=INJECTIVE)


def take(x: tl.Tensor, indices: tl.Tensor, axis: int = 0) -> tl.Tensor:
    """x gathered along `axis` at `indices` (numpy's take, ONNX's Gather): the output shape is
    x.shape[:axis] + indices.shape + x.shape[axis + 1:]. Negative indices count from the end;
    an index out of range is clamped (reads stay inside `x`)."""
    check_tensor(x, "take: x")
    check_tensor(indices, "take: indices")
    if not (indices.dtype.startswith("int") or indices.dtype.startswith("uint")):
        raise TypeError(f"take: indices must be integers, got {indices.dtype}")
    axis = check_axis(axis, x.ndim, "take: axis")
    size = static_dim(x.shape[axis])  # None: a symbolic size (a table as long as the sequence)
    n = tl.const(size, "int64") if size is not None else tl.cast(x.shape[axis], "int64")
    shape = (*x.shape[:axis], *indices.shape, *x.shape[axis + 1:])
    k = indices.ndim

    def f(*i: Expr) -> Expr:
        raw = indices[i[axis:axis + k]].astype("int64")
        wrapped = tl.if_then_else(raw < 0, raw + n, raw)
        pos = tl.minimum(tl.maximum(wrapped, tl.const(0, "int64")), n - 1)
        return x[(*i[:axis], pos, *i[axis + k:])]

    return tl.compute(shape, f, name="take", tag=INJECTIVE)


def split(x: tl.Tensor, indices_or_sections: int | Sequence[int], axis: int = 0
          ) -> list[tl.Tensor]:
    """x cut along `axis` (numpy's split): an int is a number of equal sections, a sequence the
    indices where one piece ends and the next begins."""
    check_tensor(x, "split: x")
    axis = check_axis(axis, x.ndim, "split: axis")
    n = const_shape(x, "split")[axis]
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        sections = indices_or_sections
        if sections < 1 or n % sections:
            raise ValueError(f"split: {n} elements along axis {axis} do not split into "
                             f"{sections} equal sections")
        bounds = [n // sections * k for k in range(sections + 1)]
    else:
        cuts = _int_list(indices_or_sections, "split: indices")
        bounds = [0, *cuts, n]
        if any(b1 <= b0 for b0, b1 in itertools.pairwise(bounds)) or bounds[-2] > n:
            raise ValueError(f"split: indices {cuts} must increase strictly inside (0, {n})")
    return [strided_slice(x, [b0], [b1], [1], [axis]) for b0, b1 in itertools.pairwise(bounds)]
