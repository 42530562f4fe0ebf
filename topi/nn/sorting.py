"""Sorting computes: argsort and top-k along an axis (torch.sort/argsort/topk, ONNX TopK), and
histc (torch.histc), as ranks.

An element's rank is the number of elements of its row that come before it in a stable total
order: ascending puts NaN after every number, descending before every number (torch's order),
and equal values keep their positions' order. The r-th index of the result is then the position
whose rank is r, which one reduction picks; the values are a gather of those positions. Both
stages are O(n^2) along the axis: meant for the rows models sort (a router's experts, a few
thousand token-expert pairs), ordinary reduction stages that parallelise and vectorise, with
every index in range by construction, whatever the data.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.dtype import as_dtype
from tensorlang.expr import Expr

from .utils import check_axis, check_tensor, static_dim


def _before(a: Expr, b: Expr, a_at: Expr, b_at: Expr, descending: bool, is_float: bool) -> Expr:
    """Whether `a` (at position `a_at` of its row) comes before `b` (at `b_at`)."""
    strictly = a > b if descending else a < b
    same = a == b
    if is_float:
        a_nan, b_nan = a != a, b != b
        strictly = strictly | ((a_nan & ~b_nan) if descending else (~a_nan & b_nan))
        same = same | (a_nan & b_nan)
    return strictly | (same & (a_at < b_at))


def _check_row(x: tl.Tensor, axis: int, what: str) -> int:
    check_tensor(x, f"{what}: x")
    if x.dtype == "bool":
        raise TypeError(f"{what}: x must be a number tensor, got bool (cast it first)")
    return check_axis(axis, x.ndim, f"{what}: axis")


def argsort(x: tl.Tensor, axis: int = -1, descending: bool = False, k: int | None = None
            ) -> tl.Tensor:
    """The int64 positions along `axis` that put x in stable order, ascending or `descending`
    (NaN last ascending, first descending); with `k`, only the first k of them (top-k's
    indices: `descending=True` for the largest).

    Raises:
        TypeError: a bool tensor, or a k that is no int.
        ValueError: k outside 1..the axis's size.
    """
    axis = _check_row(x, axis, "argsort")
    n = x.shape[axis]
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"argsort: k must be an int, got {k!r}")
        size = static_dim(n)
        if k < 1 or (size is not None and k > size):
            raise ValueError(f"argsort: k must be in 1..{n} (the size of axis {axis}), got {k}")
    is_float = as_dtype(x.dtype).is_float
    j = tl.reduce_axis((0, n), name="sort_j")

    def rank(*i: Expr) -> Expr:
        other = (*i[:axis], j.var, *i[axis + 1:])
        ahead = _before(x[other], x[i], j.var, i[axis], descending, is_float)
        return tl.sum(tl.const(1, "int64"), axis=j, where=ahead)

    ranks = tl.compute(x.shape, rank, name="sort_rank", tag="sort_rank")
    p = tl.reduce_axis((0, n), name="sort_p")

    def pick(*r: Expr) -> Expr:
        at = (*r[:axis], p.var, *r[axis + 1:])
        return tl.sum(p.var.astype("int64"), axis=p, where=ranks[at] == r[axis])

    shape = list(x.shape)
    if k is not None:
        shape[axis] = k
    return tl.compute(tuple(shape), pick, name="argsort", tag="argsort")


def histc(x: tl.Tensor, bins: int, low: float, high: float) -> tl.Tensor:
    """Counts of x's elements in `bins` equal bins over [low, high], in x's dtype (torch.histc):
    an element equal to `high` counts in the last bin; those outside the range, and NaNs, count
    nowhere.

    Raises:
        TypeError: x not floating point.
        ValueError: bins < 1, or high <= low (torch's data-dependent range when both are 0 is
            not supported: give the range).
    """
    check_tensor(x, "histc: x")
    if not as_dtype(x.dtype).is_float:
        raise TypeError(f"histc: x must be floating point (as torch.histc), got {x.dtype}")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"histc: bins must be an int >= 1, got {bins!r}")
    if not float(high) > float(low):
        raise ValueError(f"histc: the range [{low}, {high}] is empty (give min < max; the range "
                         f"of the data itself is not supported)")
    axes = [tl.reduce_axis((0, d), name=f"histc_k{a}") for a, d in enumerate(x.shape)]
    lo, hi = tl.const(float(low), x.dtype), tl.const(float(high), x.dtype)
    scale = tl.const(bins / (float(high) - float(low)), x.dtype)

    def count(b: Expr) -> Expr:
        v = x[tuple(a.var for a in axes)]
        raw = tl.floor((v - lo) * scale).astype("int64")
        at = tl.minimum(raw, tl.const(bins - 1, "int64"))
        inside = (v >= lo) & (v <= hi) & (at == b)
        return tl.sum(tl.const(1, x.dtype), axis=axes, where=inside)

    return tl.compute((bins,), count, name="histc", tag="histc")
