"""Grouped matrix products: the per-expert GEMMs of a mixture of experts (torch._grouped_mm).

Rows of x come sorted by group; `offsets` holds each group's end row (cumulative counts, read at
run time), and group g's rows are multiplied by weight[g]. A row's group is the number of
offsets at or below it, a small reduction over the groups, clamped into range so that no read
leaves the weight whatever the offsets hold; rows past the last offset belong to no group and are
zero.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_tensor, static_dim


def grouped_matmul(x: tl.Tensor, weight: tl.Tensor, offsets: tl.Tensor) -> tl.Tensor:
    """out[s, n] = sum_k x[s, k] * weight[g(s), k, n] for x (S, K), weight (G, K, N) and
    offsets (G,) integers, where g(s) is the group whose rows [offsets[g-1], offsets[g]) hold s.

    Raises:
        TypeError: offsets that are not integers, or x and weight of different dtypes.
        ValueError: shapes that do not line up.
    """
    check_tensor(x, "grouped_matmul: x")
    check_tensor(weight, "grouped_matmul: weight")
    check_tensor(offsets, "grouped_matmul: offsets")
    if not offsets.dtype.startswith(("int", "uint")):
        raise TypeError(f"grouped_matmul: offsets must be integers, got {offsets.dtype}")
    if x.dtype != weight.dtype:
        raise TypeError(f"grouped_matmul: x ({x.dtype}) and weight ({weight.dtype}) must have "
                        f"one dtype")
    if x.ndim != 2 or weight.ndim != 3 or offsets.ndim != 1:
        raise ValueError(f"grouped_matmul: x must be (S, K), weight (G, K, N) and offsets (G,); "
                         f"got {x.shape}, {weight.shape} and {offsets.shape}")
    groups, depth = weight.shape[0], weight.shape[1]
    if static_dim(x.shape[1]) != static_dim(depth) or \
            static_dim(offsets.shape[0]) != static_dim(groups):
        raise ValueError(f"grouped_matmul: x {x.shape}, weight {weight.shape} and offsets "
                         f"{offsets.shape} do not line up (K and G must agree)")
    if static_dim(groups) is None:
        raise ValueError(f"grouped_matmul: the number of groups {groups} must be static")
    e = tl.reduce_axis((0, groups), name="group_e")
    group = tl.compute(
        (x.shape[0],),
        lambda s: tl.sum(tl.const(1, "int64"), axis=e,
                         where=offsets[e.var].astype("int64") <= s.astype("int64")),
        name="row_group", tag="row_group")
    last = tl.const(static_dim(groups) - 1, "int64")
    k = tl.reduce_axis((0, depth), name="group_k")

    def product(s: Expr, n: Expr) -> Expr:
        g = group[s]
        return tl.sum(x[s, k.var] * weight[tl.minimum(g, last), k.var, n], axis=k,
                      where=g <= last)

    return tl.compute((x.shape[0], weight.shape[2]), product, name="grouped_matmul",
                      tag="grouped_matmul")
