"""Indexing computes: tile, broadcast_to, trilu, the gathers (gather_elements, gather_nd) and the
scatters (scatter_nd, scatter_elements), with ONNX's semantics.

Indices read from tensors at run time are wrapped when negative (they count from the end, as in
ONNX and torch) and clamped into range, so no read leaves its buffer. The copies and gathers are
tagged "injective"; a scatter finds, for each output element, the update that lands on it with a
max-reduction over the updates (O(output x updates), meant for the small masks models build), and
is tagged as a reduction.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .elemwise import broadcast_read
from .transform import INJECTIVE, _unravel
from .utils import check_axis, check_tensor, const_shape, dims, static_dim


def _check_indices(indices: tl.Tensor, what: str) -> None:
    check_tensor(indices, f"{what}: indices")
    if not (indices.dtype.startswith("int") or indices.dtype.startswith("uint")):
        raise TypeError(f"{what}: indices must be integers, got {indices.dtype}")


def wrap_index(raw: Expr, n: int | Expr) -> Expr:
    """An index read at run time as an in-range int64 position along a dimension of size `n`
    (an int, or a symbolic size read at run time): negative values count from the end, anything
    still out of range is clamped."""
    raw = raw.astype("int64")
    size = static_dim(n)
    length = tl.const(size, "int64") if size is not None else tl.cast(n, "int64")
    wrapped = tl.if_then_else(raw < 0, raw + length, raw)
    return tl.minimum(tl.maximum(wrapped, tl.const(0, "int64")), length - 1)


def _int_tuple(values: Sequence[int], what: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(values, (tuple, list)) or any(
            isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in values):
        raise ValueError(f"{what} must be a tuple of ints >= {minimum}, got {values!r}")
    return tuple(values)


def tile(x: tl.Tensor, reps: Sequence[int]) -> tl.Tensor:
    """`x` repeated `reps[d]` times along each dimension (numpy's tile, ONNX's Tile): a shorter
    `reps` is padded with leading 1s, a longer one adds leading dimensions to `x`."""
    check_tensor(x, "tile: x")
    reps = _int_tuple(reps, "tile: reps", 1)
    ndim = max(x.ndim, len(reps))
    reps = (1,) * (ndim - len(reps)) + reps
    dims = (1,) * (ndim - x.ndim) + const_shape(x, "tile")
    offset = ndim - x.ndim

    def f(*i: Expr) -> Expr:
        return x[tuple(v % dims[k] if reps[k] > 1 else v
                       for k, v in enumerate(i) if k >= offset)]

    return tl.compute(tuple(d * r for d, r in zip(dims, reps)), f, name="tile", tag=INJECTIVE)


def broadcast_to(x: tl.Tensor, shape: Sequence[int]) -> tl.Tensor:
    """`x` broadcast to `shape` (numpy's broadcast_to: `x`'s dims, right-aligned, are 1 or equal
    to those of `shape`)."""
    check_tensor(x, "broadcast_to: x")
    shape = _int_tuple(shape, "broadcast_to: shape", 1)
    dims = const_shape(x, "broadcast_to")
    if len(shape) < len(dims) or any(
            d not in (1, s) for d, s in zip(reversed(dims), reversed(shape))):
        raise ValueError(f"broadcast_to: shape {dims} does not broadcast to {shape}")
    return tl.compute(shape, lambda *i: broadcast_read(x, i), name="broadcast_to", tag=INJECTIVE)


def trilu(x: tl.Tensor, k: int = 0, upper: bool = True) -> tl.Tensor:
    """The upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes of `x`, zeros
    elsewhere (ONNX's Trilu, torch's triu / tril)."""
    check_tensor(x, "trilu: x")
    if x.ndim < 2:
        raise ValueError(f"trilu: x must have at least 2 dimensions, got shape {x.shape}")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"trilu: k must be an int, got {k!r}")
    zero = tl.const(0, x.dtype)

    def f(*i: Expr) -> Expr:
        diagonal = i[-1] - i[-2]
        keep = diagonal >= k if upper else diagonal <= k
        return tl.if_then_else(keep, x[i], zero)

    return tl.compute(x.shape, f, name="trilu", tag=INJECTIVE)


def gather_elements(x: tl.Tensor, indices: tl.Tensor, axis: int = 0) -> tl.Tensor:
    """out[i] = x[i with its `axis` entry replaced by indices[i]] (ONNX's GatherElements,
    torch.gather); the output has the shape of `indices`."""
    check_tensor(x, "gather_elements: x")
    _check_indices(indices, "gather_elements")
    if indices.ndim != x.ndim:
        raise ValueError(f"gather_elements: indices must have {x.ndim} dimensions like x, got "
                         f"shape {indices.shape}")
    axis = check_axis(axis, x.ndim, "gather_elements: axis")
    # symbolic sizes (a sequence) are checked where both are known
    sizes = [static_dim(d) for d in x.shape]
    isizes = [static_dim(d) for d in indices.shape]
    if any(None not in (isizes[d], sizes[d]) and isizes[d] > sizes[d]
           for d in range(x.ndim) if d != axis):
        raise ValueError(f"gather_elements: indices shape {indices.shape} exceeds x shape "
                         f"{x.shape} outside axis {axis}")

    def f(*i: Expr) -> Expr:
        index = list(i)
        index[axis] = wrap_index(indices[i], x.shape[axis])
        return x[tuple(index)]

    return tl.compute(indices.shape, f, name="gather_elements", tag=INJECTIVE)


def gather_nd(x: tl.Tensor, indices: tl.Tensor, batch_dims: int = 0) -> tl.Tensor:
    """ONNX's GatherND: the last axis of `indices` (length m) indexes x's axes batch_dims ..
    batch_dims + m - 1; the output shape is indices.shape[:-1] + x.shape[batch_dims + m:]."""
    check_tensor(x, "gather_nd: x")
    _check_indices(indices, "gather_nd")
    xdims, idims = dims(x), dims(indices)
    b = batch_dims
    if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < min(x.ndim, indices.ndim):
        raise ValueError(f"gather_nd: batch_dims must be an int in [0, {min(x.ndim, indices.ndim)})"
                         f", got {batch_dims!r}")
    m = idims[-1]
    if not isinstance(m, int):
        raise ValueError(f"gather_nd: the last axis of indices {idims} must have a static size")
    if not 1 <= m <= x.ndim - b or any(static_dim(i) != static_dim(d) or static_dim(i) is None
                                       and i is not d for i, d in zip(idims[:b], xdims[:b])):
        raise ValueError(f"gather_nd: indices shape {idims} does not index x shape {xdims} with "
                         f"batch_dims={b}")
    q = indices.ndim - 1

    def f(*i: Expr) -> Expr:
        lead = i[:q]
        picked = [wrap_index(indices[(*lead, k)], xdims[b + k]) for k in range(m)]
        return x[(*lead[:b], *picked, *i[q:])]

    return tl.compute((*idims[:-1], *xdims[b + m:]), f, name="gather_nd", tag=INJECTIVE)


def _scatter(data: tl.Tensor, update_dims: Sequence[int], match, read_update, name: str
             ) -> tl.Tensor:
    """out[p] = the update whose index is p (the last one if several are), else data[p].

    `match(p, r)` says whether update position r (a tuple over `update_dims`) lands on output
    element p; `read_update(p, r)` reads that update.
    """
    dims = const_shape(data, name)
    if not update_dims:
        def direct(*p: Expr) -> Expr:
            return tl.if_then_else(match(p, ()), read_update(p, ()), data[p])

        return tl.compute(dims, direct, name=name, tag=f"{name}_output")
    rs = [tl.reduce_axis((0, n), name=f"{name}_r{k}") for k, n in enumerate(update_dims)]
    flat: Expr = tl.const(0, "int32")
    for r, n in zip(rs, update_dims):
        flat = flat * n + r.var
    zero = tl.const(0, "int32")
    found = tl.compute(
        dims, lambda *p: tl.max(tl.if_then_else(match(p, tuple(r.var for r in rs)), flat + 1,
                                                zero), axis=rs),
        name=f"{name}_found", tag=f"{name}_found")

    def f(*p: Expr) -> Expr:
        pos = found[p]
        r = _unravel(tl.maximum(pos - 1, zero), update_dims)
        return tl.if_then_else(pos > 0, read_update(p, tuple(r)), data[p])

    return tl.compute(dims, f, name=name, tag=f"{name}_output")


def scatter_nd(data: tl.Tensor, indices: tl.Tensor, updates: tl.Tensor) -> tl.Tensor:
    """ONNX's ScatterND (reduction "none"): a copy of `data` with `updates[r]` written at
    `data[indices[r]]`, indices of shape (..., k) addressing data's first k axes and updates of
    shape indices.shape[:-1] + data.shape[k:]. Indices should not repeat (the last update of a
    repeated one wins here)."""
    check_tensor(data, "scatter_nd: data")
    check_tensor(updates, "scatter_nd: updates")
    _check_indices(indices, "scatter_nd")
    if updates.dtype != data.dtype:
        raise TypeError(f"scatter_nd: updates are {updates.dtype} but data is {data.dtype}")
    dims, idims = const_shape(data, "scatter_nd"), const_shape(indices, "scatter_nd")
    k = idims[-1]
    if not 1 <= k <= data.ndim:
        raise ValueError(f"scatter_nd: indices shape {idims} must end in 1 .. {data.ndim}")
    expected = (*idims[:-1], *dims[k:])
    if const_shape(updates, "scatter_nd") != expected:
        raise ValueError(f"scatter_nd: updates must have shape {expected}, got {updates.shape}")

    def match(p: tuple, r: tuple) -> Expr:
        hit = None
        for j in range(k):
            same = wrap_index(indices[(*r, j)], dims[j]) == p[j].astype("int64")
            hit = same if hit is None else hit & same
        return hit

    return _scatter(data, idims[:-1], match, lambda p, r: updates[(*r, *p[k:])], "scatter_nd")


def scatter_elements(data: tl.Tensor, indices: tl.Tensor, updates: tl.Tensor,
                     axis: int = 0) -> tl.Tensor:
    """ONNX's ScatterElements (reduction "none"), the inverse of gather_elements: a copy of
    `data` with updates[i] written at i with its `axis` entry replaced by indices[i]. Indices
    should not repeat (the last update of a repeated one wins here)."""
    check_tensor(data, "scatter_elements: data")
    check_tensor(updates, "scatter_elements: updates")
    _check_indices(indices, "scatter_elements")
    if updates.dtype != data.dtype:
        raise TypeError(f"scatter_elements: updates are {updates.dtype} but data is {data.dtype}")
    axis = check_axis(axis, data.ndim, "scatter_elements: axis")
    dims, idims = const_shape(data, "scatter_elements"), const_shape(indices, "scatter_elements")
    if (indices.ndim != data.ndim or const_shape(updates, "scatter_elements") != idims
            or any(idims[d] > dims[d] for d in range(data.ndim) if d != axis)):
        raise ValueError(f"scatter_elements: indices {idims} and updates {updates.shape} must "
                         f"have one shape, within data's {dims} outside axis {axis}")

    def at(p: tuple, r: tuple) -> tuple:
        # the update position sharing p's other coordinates (clamped: `inside` rules them out)
        return tuple(r[0] if d == axis else tl.minimum(v, idims[d] - 1) if idims[d] < dims[d]
                     else v for d, v in enumerate(p))

    def match(p: tuple, r: tuple) -> Expr:
        hit = wrap_index(indices[at(p, r)], dims[axis]) == p[axis].astype("int64")
        for d, v in enumerate(p):
            if d != axis and idims[d] < dims[d]:
                hit = hit & (v < idims[d])
        return hit

    return _scatter(data, (idims[axis],), match, lambda p, r: updates[at(p, r)],
                    "scatter_elements")
