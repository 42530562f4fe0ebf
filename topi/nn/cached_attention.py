"""Attention of a few new queries over a key/value cache and the new keys, in one kernel.

A decode step attends one query row per head to every cached key: written as separate ops
(two score products, masks, two maxima, exponentials, two sums, two weighted sums) it is a dozen
small kernels per layer, each paying a thread wake-up and a pass over the scores, for a few
thousand multiply-adds. Here every stage is computed per query row (the x86 schedule runs the
rows in parallel): the row's scores against the cache and against the new keys, one maximum,
the exponentials, one sum, and the weighted sum of the values, the row's scores staying in L1.

The cache and the new keys stay apart (as the graph holds them: the cache an input read where
it lies, the new rows computed in the step), so the softmax runs over the two key sets with one
maximum and one sum.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .softmax import shifted_exp
from .utils import check_same_dim, check_tensor, static_dim


def _check(q: tl.Tensor, keys: tl.Tensor, values: tl.Tensor, new_keys: tl.Tensor,
           new_values: tl.Tensor, mask: tl.Tensor, new_mask: tl.Tensor) -> int:
    """The static token count, or a TypeError/ValueError naming the input that does not fit."""
    names = ("q", "keys", "values", "new_keys", "new_values")
    for name, t in zip(names, (q, keys, values, new_keys, new_values)):
        check_tensor(t, f"cached_attention: {name}", 3)
        if t.dtype != "float32":
            raise TypeError(f"cached_attention: {name} must be float32, got {t.dtype}")
    for name, t in (("mask", mask), ("new_mask", new_mask)):
        check_tensor(t, f"cached_attention: {name}", 2)
        if t.dtype != "float32":
            raise TypeError(f"cached_attention: {name} must be float32, got {t.dtype}")
    tokens = static_dim(new_keys.shape[1])
    if tokens is None or static_dim(q.shape[1]) is None or static_dim(q.shape[2]) is None:
        raise ValueError("cached_attention: the query rows, the head dim and the new tokens "
                         f"must be static, got q {q.shape} and new_keys {new_keys.shape}")
    if static_dim(q.shape[1]) % tokens:
        raise ValueError(f"cached_attention: q's {q.shape[1]} rows are not whole groups of the "
                         f"{tokens} new tokens")
    for name, t in (("keys", keys), ("values", values), ("new_keys", new_keys),
                    ("new_values", new_values)):
        check_same_dim(t.shape[0], q.shape[0], f"cached_attention: {name} heads")
        check_same_dim(t.shape[2], q.shape[2], f"cached_attention: {name} head dim")
    check_same_dim(values.shape[1], keys.shape[1], "cached_attention: values rows")
    check_same_dim(new_values.shape[1], tokens, "cached_attention: new_values rows")
    check_same_dim(mask.shape[0], tokens, "cached_attention: mask rows")
    check_same_dim(mask.shape[1], keys.shape[1], "cached_attention: mask columns")
    check_same_dim(new_mask.shape[0], tokens, "cached_attention: new_mask rows")
    check_same_dim(new_mask.shape[1], tokens, "cached_attention: new_mask columns")
    return tokens


def cached_attention(q: tl.Tensor, keys: tl.Tensor, values: tl.Tensor, new_keys: tl.Tensor,
                     new_values: tl.Tensor, mask: tl.Tensor, new_mask: tl.Tensor,
                     scale: float) -> tl.Tensor:
    """softmax(q K^T * scale + mask) V over the cached keys and values and the new ones.

    Args:
        q: (heads, rows, dim) query rows; row r belongs to new token r % tokens (a head's
            query groups stacked, as grouped-query attention reads one key head for several).
        keys, values: (heads, cached, dim) the cache (`cached` may be symbolic).
        new_keys, new_values: (heads, tokens, dim) the new tokens' keys and values.
        mask: (tokens, cached) added to the scores of the cached keys (a large negative value
            hides a key); new_mask: (tokens, tokens) added to those of the new keys.
        scale: the scores' factor (1 / sqrt(dim) as a rule).

    Returns:
        (heads, rows, dim), tagged "cached_attention".

    Raises:
        TypeError / ValueError: an input of the wrong dtype or shape (named).
    """
    tokens = _check(q, keys, values, new_keys, new_values, mask, new_mask)
    heads, rows, dim = q.shape
    cached = keys.shape[1]
    factor = tl.const(float(scale), "float32")

    def product(other: tl.Tensor, count: object, name: str) -> tl.Tensor:
        d = tl.reduce_axis((0, dim), name=f"{name}_d")
        return tl.compute((heads, rows, count),
                          lambda h, r, j: tl.sum(q[h, r, d] * other[h, j, d], axis=d), name=name)

    old_dots, new_dots = product(keys, cached, "cache_dots"), product(new_keys, tokens, "new_dots")

    def old_score(h: Expr, r: Expr, j: Expr) -> Expr:
        return old_dots[h, r, j] * factor + mask[r % tokens, j]

    def new_score(h: Expr, r: Expr, j: Expr) -> Expr:
        return new_dots[h, r, j] * factor + new_mask[r % tokens, j]

    def over(count: object, name: str, body) -> tl.Tensor:
        """A (heads, rows) reduction of body(h, r, j) over j < count."""
        j = tl.reduce_axis((0, count), name=f"{name}_j")
        return tl.compute((heads, rows), lambda h, r: body(h, r, j), name=name)

    old_top = over(cached, "cache_top", lambda h, r, j: tl.max(old_score(h, r, j), axis=j))
    top = over(tokens, "top", lambda h, r, j: tl.max(
        tl.maximum(new_score(h, r, j), old_top[h, r]), axis=j))
    old_exp = tl.compute((heads, rows, cached),
                         lambda h, r, j: shifted_exp(old_score(h, r, j), top[h, r]),
                         name="cache_exp")
    new_exp = tl.compute((heads, rows, tokens),
                         lambda h, r, j: shifted_exp(new_score(h, r, j), top[h, r]),
                         name="new_exp")
    old_sum = over(cached, "cache_sum", lambda h, r, j: tl.sum(old_exp[h, r, j], axis=j))
    new_sum = over(tokens, "new_sum", lambda h, r, j: tl.sum(new_exp[h, r, j], axis=j))

    def weighted(weights: tl.Tensor, rows_of: tl.Tensor, count: object, name: str) -> tl.Tensor:
        j = tl.reduce_axis((0, count), name=f"{name}_j")
        return tl.compute((heads, rows, dim), lambda h, r, c: tl.sum(
            weights[h, r, j] * rows_of[h, j, c], axis=j), name=name)

    old_out = weighted(old_exp, values, cached, "cache_weighted")
    new_out = weighted(new_exp, new_values, tokens, "new_weighted")
    return tl.compute((heads, rows, dim), lambda h, r, c: (old_out[h, r, c] + new_out[h, r, c])
                      / (old_sum[h, r] + new_sum[h, r]), name="cached_attention",
                      tag="cached_attention")
