"""Scan compute: cumsum along an axis (ONNX's CumSum, torch.cumsum), as a reduction.

Each output element sums the prefix (or suffix) of its row with a conditional reduction over the
whole axis: O(n^2) along the axis, which is fine for the lengths models scan (position ids, masks)
and keeps the op an ordinary reduction stage that the reduce schedule parallelises and vectorizes.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_axis, check_tensor


def cumsum(x: tl.Tensor, axis: int, exclusive: bool = False, reverse: bool = False
           ) -> tl.Tensor:
    """Running sums of `x` along `axis` in x's dtype; `exclusive` leaves the element itself out,
    `reverse` sums from the end.

    Raises:
        TypeError: a bool tensor (cast it to an integer type first).
    """
    check_tensor(x, "cumsum: x")
    if x.dtype == "bool":
        raise TypeError("cumsum: x must be a number tensor, got bool")
    axis = check_axis(axis, x.ndim, "cumsum: axis")
    k = tl.reduce_axis((0, x.shape[axis]), name="cumsum_k")

    def f(*i: Expr) -> Expr:
        here = i[axis]
        if reverse:
            inside = k.var > here if exclusive else k.var >= here
        else:
            inside = k.var < here if exclusive else k.var <= here
        return tl.sum(x[(*i[:axis], k.var, *i[axis + 1:])], axis=k, where=inside)

    return tl.compute(x.shape, f, name="cumsum", tag="cumsum")
