"""Data movement computes: pad, reshape, transpose, concatenate (tag "injective").

They compute nothing, so schedules inline them into their readers where possible; a pad in front
of a window op is instead materialised once when that keeps conditions out of the hot loop.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_axis, check_tensor, static_dim

INJECTIVE = "injective"
PAD = "injective,pad"
PAD_MODES = ("constant", "reflect", "edge")


def pad(
    data: tl.Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    pad_value: float = 0.0,
    name: str = "pad",
    mode: str = "constant",
) -> tl.Tensor:
    """`data` surrounded by `pad_value`: `pad_before[d]` / `pad_after[d]` elements per dimension.

    `mode` "reflect" mirrors `data` without repeating its edge and "edge" repeats the edge
    element (numpy's and ONNX Pad's modes; torch's reflection_pad and replication_pad); a reflect
    pad as wide as the dimension or wider keeps mirroring back and forth, as numpy does.
    Returns `data` itself when nothing is padded, so callers need no special case.
    """
    check_tensor(data, "pad: data")
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
    pad_after = pad_before if pad_after is None else pad_after
    for label, p in (("pad_before", pad_before), ("pad_after", pad_after)):
        if not isinstance(p, (tuple, list)) or len(p) != data.ndim:
            raise ValueError(f"pad: {label} must list {data.ndim} ints, got {p!r}")
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in p):
            raise ValueError(f"pad: {label} must hold non-negative ints, got {p!r}")
    if not any(pad_before) and not any(pad_after):
        return data
    shape = tuple(
        (static_dim(d) if static_dim(d) is not None else d) + b + a
        for d, b, a in zip(data.shape, pad_before, pad_after)
    )
    if mode != "constant":
        return _pad_by_index(data, shape, pad_before, pad_after, mode, name)
    fill = tl.const(pad_value, data.dtype)

    def f(*i: Expr) -> Expr:
        inside = None
        index = []
        for k, (v, b, a) in enumerate(zip(i, pad_before, pad_after)):
            index.append(v - b if b else v)
            conds = []
            if b:
                conds.append(v >= b)
            if a:
                conds.append(v < data.shape[k] + b)
            for c in conds:
                inside = c if inside is None else inside & c
        value = data[tuple(index)]
        return value if inside is None else tl.if_then_else(inside, value, fill)

    return tl.compute(shape, f, name=name, tag=PAD)


def _pad_by_index(data: tl.Tensor, shape: tuple, pad_before: Sequence[int],
                  pad_after: Sequence[int], mode: str, name: str) -> tl.Tensor:
    """The reflect and edge pads: each output element reads one clamped or mirrored index."""
    dims = []
    for k, (b, a) in enumerate(zip(pad_before, pad_after)):
        n = static_dim(data.shape[k])
        if n is None and (b or a):
            raise ValueError(f"pad: {mode} padding needs a static size along axis {k}, got "
                             f"{data.shape[k]}")
        dims.append(n)

    def source(v: Expr, b: int, a: int, n: int | None) -> Expr:
        if not b and not a:
            return v
        j = v - b if b else v
        if n == 1:
            return tl.const(0, v.dtype)
        if mode == "edge":
            return tl.minimum(tl.maximum(j, tl.const(0, v.dtype)), tl.const(n - 1, v.dtype))
        if max(b, a) >= n:  # type: ignore[operator]
            # mirroring repeats with period 2 (n - 1); shift j to be non-negative first
            period = 2 * (n - 1)  # type: ignore[operator]
            j = (j + period * -(-b // period)) % period
        last = tl.const(n - 1, v.dtype)  # type: ignore[operator]
        return last - tl.abs(last - tl.abs(j))

    def f(*i: Expr) -> Expr:
        return data[tuple(source(v, b, a, n) for v, b, a, n in
                          zip(i, pad_before, pad_after, dims))]

    return tl.compute(shape, f, name=name, tag=PAD)


def _unravel(flat: Expr, shape: Sequence) -> list[Expr]:
    """The index into `shape` of the row-major position `flat` (< its size: the outermost
    index needs no modulo, which matters where the sizes are symbolic)."""
    if not shape:
        return []
    index = []
    for dim in reversed(shape[1:]):
        index.append(flat % dim)
        flat = flat // dim
    return [flat, *reversed(index)]


def reshape(data: tl.Tensor, newshape: Sequence[int]) -> tl.Tensor:
    """`data` with shape `newshape` (row-major order kept; one -1 is inferred)."""
    check_tensor(data, "reshape: data")
    dims = [static_dim(d) for d in data.shape]
    if any(d is None for d in dims) or any(isinstance(d, Expr) for d in newshape):
        return _symbolic_reshape(data, newshape)
    size = math.prod(dims)  # type: ignore[arg-type]
    if not isinstance(newshape, (tuple, list)):
        raise TypeError(f"reshape: newshape must be a tuple of ints, got {newshape!r}")
    shape = list(newshape)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: at most one -1 in newshape, got {newshape!r}")
    if any(isinstance(d, bool) or not isinstance(d, int) or (d < 1 and d != -1) for d in shape):
        raise ValueError(f"reshape: newshape must hold positive ints (or one -1), got {newshape!r}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if size % known:
            raise ValueError(f"reshape: cannot infer -1 in {newshape!r} for {size} elements")
        shape[shape.index(-1)] = size // known
    if math.prod(shape) != size:
        raise ValueError(f"reshape: {tuple(dims)} ({size} elements) cannot become {tuple(shape)}")

    def f(*i: Expr) -> Expr:
        flat: Expr = tl.const(0)
        for v, d in zip(i, shape):
            flat = flat * d + v
        return data[tuple(_unravel(flat, dims))]

    return tl.compute(tuple(shape), f, name="reshape", tag=INJECTIVE)


def _symbolic_reshape(data: tl.Tensor, newshape: Sequence) -> tl.Tensor:
    """reshape with symbolic dims (see `topi.symbolic`): -1 is the exact quotient of the sizes."""
    from ..symbolic import canon, product, quotient

    dims = [canon(d) for d in data.shape]
    size = product(dims)
    shape = [canon(d) for d in newshape]
    if sum(1 for d in shape if isinstance(d, int) and d == -1) > 1:
        raise ValueError(f"reshape: at most one -1 in newshape, got {tuple(newshape)!r}")
    if any(isinstance(d, int) and d == -1 for d in shape):
        k = next(k for k, d in enumerate(shape) if isinstance(d, int) and d == -1)
        rest = product([d for j, d in enumerate(shape) if j != k])
        inferred = quotient(size, rest)
        if inferred is None:
            raise ValueError(f"reshape: cannot infer -1 in {tuple(shape)} for {tuple(dims)}")
        shape[k] = inferred
    if product(shape) is not size and product(shape) != size:
        raise ValueError(f"reshape: {tuple(dims)} cannot become {tuple(shape)}")

    groups = _axis_groups(dims, shape)

    def f(*i: Expr) -> Expr:
        index: list[Expr] = []
        for (a, b), (c, d) in groups:
            flat: Expr = tl.const(0)
            for v, n in zip(i[c:d], shape[c:d]):
                flat = flat * n + v
            index += [flat] if b - a == 1 else _unravel(flat, dims[a:b])
        return data[tuple(index)]

    return tl.compute(tuple(shape), f, name="reshape", tag=INJECTIVE)


def _axis_groups(dims: Sequence, shape: Sequence) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The axes of `dims` and of `shape` (a reshape of it) as consecutive groups of equal size,
    each as small as it can be: ((begin, end) in dims, (begin, end) in shape) per group. A
    reshape that splits or merges axes then divides only within a group, never by the whole
    symbolic size (one group of everything where the sizes do not line up)."""
    from ..symbolic import product

    groups, a, c = [], 0, 0
    while a < len(dims) and c < len(shape):
        found = next(((p, q) for total in range(2, len(dims) - a + len(shape) - c + 1)
                      for p in range(1, total) for q in [total - p]
                      if a + p <= len(dims) and c + q <= len(shape) and
                      product(dims[a:a + p]) is product(shape[c:c + q])), None)
        if found is None:
            return [((0, len(dims)), (0, len(shape)))]
        groups.append(((a, a + found[0]), (c, c + found[1])))
        a, c = a + found[0], c + found[1]
    if a < len(dims) or c < len(shape):  # trailing axes of size 1 join the last group
        if not groups:
            return [((0, len(dims)), (0, len(shape)))]
        (ga, _), (gc, _) = groups.pop()
        groups.append(((ga, len(dims)), (gc, len(shape))))
    return groups


def transpose(x: tl.Tensor, axes: Sequence[int] | None = None) -> tl.Tensor:
    """`x` with its dimensions permuted: output dim k is input dim axes[k] (reversed if None)."""
    check_tensor(x, "transpose: x")
    perm = list(reversed(range(x.ndim))) if axes is None else [
        check_axis(a, x.ndim, "transpose: axes entry") for a in axes
    ]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes!r} is not a permutation of {x.ndim} dimensions")
    shape = tuple(x.shape[a] for a in perm)

    def f(*i: Expr) -> Expr:
        index: list[Expr] = [tl.const(0)] * x.ndim
        for k, a in enumerate(perm):
            index[a] = i[k]
        return x[tuple(index)]

    return tl.compute(shape, f, name="transpose", tag=INJECTIVE)


def concatenate(xs: Sequence[tl.Tensor], axis: int = 0) -> tl.Tensor:
    """The tensors `xs` joined along `axis` (all other dimensions equal)."""
    if not isinstance(xs, (tuple, list)) or not xs:
        raise ValueError("concatenate: xs must be a non-empty list of tensors")
    for k, t in enumerate(xs):
        check_tensor(t, f"concatenate: xs[{k}]", xs[0].ndim)
        if t.dtype != xs[0].dtype:
            raise TypeError(f"concatenate: xs[{k}] is {t.dtype} but xs[0] is {xs[0].dtype}")
    axis = check_axis(axis, xs[0].ndim, "concatenate: axis")
    sizes = []
    for k, t in enumerate(xs):
        for d in range(t.ndim):
            if d != axis and static_dim(t.shape[d]) != static_dim(xs[0].shape[d]):
                raise ValueError(
                    f"concatenate: xs[{k}] has shape {t.shape} which differs from xs[0] "
                    f"outside axis {axis}"
                )
        size = static_dim(t.shape[axis])
        sizes.append(t.shape[axis] if size is None else size)  # symbolic: a cache and new keys
    shape = list(xs[0].shape)
    shape[axis] = functools.reduce(operator.add, sizes)

    starts = [functools.reduce(operator.add, sizes[:k], 0) for k in range(len(xs))]

    def read(k: int, i: tuple) -> Expr:
        index = list(i)
        index[axis] = i[axis] - starts[k] if static_dim(starts[k]) != 0 else i[axis]
        return xs[k][tuple(index)]

    def f(*i: Expr) -> Expr:
        # Nested selects from the last piece backwards: one comparison per piece boundary, and
        # only the chosen piece is read.
        value = read(len(xs) - 1, i)
        for k in range(len(xs) - 2, -1, -1):
            value = tl.if_then_else(i[axis] < starts[k + 1], read(k, i), value)
        return value

    return tl.compute(tuple(shape), f, name="concatenate", tag=INJECTIVE)
