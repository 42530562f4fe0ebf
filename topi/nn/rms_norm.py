"""RMSNorm (LLaMA's normalisation): x / sqrt(mean(x^2 over the last axis) + eps) * weight.

One row reduction (the sum of squares) and one elementwise output stage, the shape of
`softmax.layer_norm`, so the row schedules (static and symbolic rows) take it as they take
layer_norm.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .softmax import _row_reduce
from .utils import check_same_dim, check_tensor, static_dim


def rms_norm(x: tl.Tensor, weight: tl.Tensor, epsilon: float = 1e-5) -> tl.Tensor:
    """RMSNorm of float `x` over its last axis (static), scaled by `weight` (that axis' size).

    Raises:
        TypeError: x is not float.
        ValueError: weight does not match the last axis, or the axis is symbolic.
    """
    check_tensor(x, "rms_norm: x")
    check_tensor(weight, "rms_norm: weight", 1)
    if not x.dtype.startswith("float"):
        raise TypeError(f"rms_norm: x must be a float tensor, got {x.dtype}")
    axis = x.ndim - 1
    check_same_dim(weight.shape[0], x.shape[axis], "rms_norm: weight size")
    size = static_dim(x.shape[axis])
    if size is None:
        raise ValueError("rms_norm: the normalised axis must be static")
    squares = _row_reduce(x, [axis], lambda v, kept: v * v, tl.sum, "rms_norm_sumsq")
    inv_count, eps = tl.const(1.0 / size, x.dtype), tl.const(float(epsilon), x.dtype)

    def f(*i: Expr) -> Expr:
        return x[i] * tl.rsqrt(squares[i[:-1]] * inv_count + eps) * weight[i[-1]]

    return tl.compute(x.shape, f, name="rms_norm", tag="rms_norm_output")
