"""Normalisations along axes: softmax, log_softmax (both subtract the max first) and layer_norm.

Each is a short chain of reductions over the normalised axes followed by one elementwise output
stage; schedules compute the reductions per row, under the output's outer loops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_axis, check_same_dim, check_tensor, static_dim


def _reduced(shape: Sequence, axes: Sequence[int]) -> tuple:
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def _full_index(kept: Sequence[Expr], reduce_vars: Sequence, axes: Sequence[int], ndim: int) -> tuple:
    """Interleave kept indices and reduction variables back into a full index."""
    kept_iter, red_iter = iter(kept), iter(reduce_vars)
    return tuple(next(red_iter) if k in axes else next(kept_iter) for k in range(ndim))


def _kept(index: Sequence[Expr], axes: Sequence[int]) -> tuple:
    return tuple(v for k, v in enumerate(index) if k not in axes)


def _row_reduce(x: tl.Tensor, axes: list[int], body, reducer, name: str) -> tl.Tensor:
    """reducer(body(x[full index])) over `axes`, as a tensor over the other axes."""
    rvs = [tl.reduce_axis((0, x.shape[a]), name=f"{name}_k{a}") for a in axes]

    def f(*kept: Expr) -> Expr:
        return reducer(body(x[_full_index(kept, rvs, axes, x.ndim)], kept), axis=rvs)

    return tl.compute(_reduced(x.shape, axes), f, name=name, tag=name)


def _softmax_parts(x: tl.Tensor, axis: int, what: str) -> tuple[int, tl.Tensor, tl.Tensor]:
    check_tensor(x, f"{what}: x")
    if not x.dtype.startswith("float"):
        raise TypeError(f"{what}: x must be a float tensor, got {x.dtype}")
    axis = check_axis(axis, x.ndim, f"{what}: axis")
    axes = [axis]
    maxelem = _row_reduce(x, axes, lambda v, kept: v, tl.max, "softmax_maxelem")
    expsum = _row_reduce(
        x, axes, lambda v, kept: shifted_exp(v, maxelem[kept]), tl.sum, "softmax_expsum"
    )
    return axis, maxelem, expsum


#: Where exp(x - max) is taken as exp(EXP_FLOOR): exp(-87) = 1.6e-38, nothing next to the row's
#: sum (>= 1). A causal or padding mask adds the dtype's most negative value to half the
#: scores; a vector math library's expf computed each such lane by a scalar call (GPT-2's
#: softmax ran 4x slower for it), and scalar code still calls one.
EXP_FLOOR = -87.0


def shifted_exp(v: Expr, peak: Expr) -> Expr:
    """exp(v - peak) with the difference floored at `EXP_FLOOR` (NaN stays NaN)."""
    diff = v - peak
    floor = tl.const(EXP_FLOOR, diff.dtype)
    return tl.exp(tl.if_then_else(diff < floor, floor, diff))


def softmax(x: tl.Tensor, axis: int = -1) -> tl.Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis`.

    Returns:
        The output, tagged "softmax_output".
    """
    axis, maxelem, expsum = _softmax_parts(x, axis, "softmax")
    return tl.compute(
        x.shape,
        lambda *i: shifted_exp(x[i], maxelem[_kept(i, [axis])]) / expsum[_kept(i, [axis])],
        name="softmax",
        tag="softmax_output",
    )


def log_softmax(x: tl.Tensor, axis: int = -1) -> tl.Tensor:
    """x - max - log(sum(exp(x - max))) along `axis`.

    Returns:
        The output, tagged "log_softmax_output".
    """
    axis, maxelem, expsum = _softmax_parts(x, axis, "log_softmax")
    return tl.compute(
        x.shape,
        lambda *i: x[i] - maxelem[_kept(i, [axis])] - tl.log(expsum[_kept(i, [axis])]),
        name="log_softmax",
        tag="log_softmax_output",
    )


def layer_norm(
    x: tl.Tensor,
    gamma: tl.Tensor,
    beta: tl.Tensor,
    axis: int | Sequence[int] = -1,
    epsilon: float = 1e-5,
) -> tl.Tensor:
    """(x - mean) / sqrt(var + epsilon) * gamma + beta, statistics over `axis` (an int or a
    list of ints); gamma and beta have the shape of the normalised axes.

    Returns:
        The output, tagged "layer_norm_output".
    """
    check_tensor(x, "layer_norm: x")
    axes_in = [axis] if isinstance(axis, int) else list(axis)
    axes = sorted({check_axis(a, x.ndim, "layer_norm: axis") for a in axes_in})
    if len(axes) != len(axes_in):
        raise ValueError(f"layer_norm: axis {axis!r} lists an axis twice")
    for name, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(t, f"layer_norm: {name}", len(axes))
        for d, a in zip(t.shape, axes):
            check_same_dim(d, x.shape[a], f"layer_norm: {name} size along axis {a}")
    sizes = [static_dim(x.shape[a]) for a in axes]
    if any(d is None for d in sizes):
        count: Expr = tl.const(1)
        for a in axes:
            count = count * x.shape[a]
        inv_count = tl.const(1.0, x.dtype) / tl.cast(count, x.dtype)
    else:
        inv_count = tl.const(1.0 / math.prod(sizes), x.dtype)  # type: ignore[arg-type]
    mean_sum = _row_reduce(x, axes, lambda v, kept: v, tl.sum, "layer_norm_sum")
    var_sum = _row_reduce(
        x, axes, lambda v, kept: (v - mean_sum[kept] * inv_count) * (v - mean_sum[kept] * inv_count),
        tl.sum, "layer_norm_varsum",
    )
    eps = tl.const(float(epsilon), x.dtype)

    def f(*i: Expr) -> Expr:
        kept = _kept(i, axes)
        norm_index = tuple(i[a] for a in axes)
        mean = mean_sum[kept] * inv_count
        scale = tl.rsqrt(var_sum[kept] * inv_count + eps)
        return (x[i] - mean) * scale * gamma[norm_index] + beta[norm_index]

    return tl.compute(x.shape, f, name="layer_norm", tag="layer_norm_output")
