"""Elementwise and broadcasting computes: activations, arithmetic, bias_add, batch norm.

Every op here is tagged "elemwise" (same shape in and out) or "broadcast" (numpy broadcasting),
so that schedules inline them into the stage that produces their input, or give them one
vectorized, parallel loop nest when they are the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_axis, check_tensor, static_dim

ELEMWISE = "elemwise"
BROADCAST = "broadcast"

Operand = tl.Tensor | int | float


def _unary(x: tl.Tensor, f: Callable[[Expr], Expr], name: str) -> tl.Tensor:
    check_tensor(x, f"{name}: x")
    return tl.compute(x.shape, lambda *i: f(x[i]), name=name, tag=ELEMWISE)


def relu(x: tl.Tensor) -> tl.Tensor:
    """max(x, 0)."""
    return _unary(x, lambda v: tl.maximum(v, tl.const(0, x.dtype)), "relu")


def leaky_relu(x: tl.Tensor, alpha: float) -> tl.Tensor:
    """x where x > 0, else alpha * x."""
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise TypeError(f"leaky_relu: alpha must be a number, got {alpha!r}")
    return _unary(x, lambda v: tl.if_then_else(v > 0, v, v * tl.const(alpha, x.dtype)), "leaky_relu")


def gelu(x: tl.Tensor) -> tl.Tensor:
    """The exact GELU: x * (1 + erf(x / sqrt(2))) / 2."""
    inv_sqrt2 = tl.const(1.0 / math.sqrt(2.0), x.dtype)
    half = tl.const(0.5, x.dtype)
    return _unary(x, lambda v: v * half * (tl.erf(v * inv_sqrt2) + tl.const(1.0, x.dtype)), "gelu")


def broadcast_shape(a: Sequence, b: Sequence, what: str) -> tuple:
    """numpy's broadcast of two shapes (dims are ints or expressions; a symbolic dim is taken
    to match whatever it meets, since it can only be checked at run time)."""
    out = []
    for k in range(max(len(a), len(b))):
        da = a[len(a) - 1 - k] if k < len(a) else 1
        db = b[len(b) - 1 - k] if k < len(b) else 1
        va, vb = static_dim(da), static_dim(db)
        if va == 1:
            out.append(db)
        elif vb == 1 or va is None:
            out.append(da)
        elif vb is None or va == vb:
            out.append(db if vb is not None else da)
        else:
            raise ValueError(f"{what}: shapes {_fmt(a)} and {_fmt(b)} do not broadcast")
    return tuple(reversed(out))


def _fmt(shape: Sequence) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def broadcast_read(t: tl.Tensor, index: Sequence[Expr]) -> Expr:
    """Read `t` at the output `index`, right-aligned, with size-1 dims pinned to 0."""
    offset = len(index) - t.ndim
    own = []
    for k, dim in enumerate(t.shape):
        own.append(tl.const(0) if static_dim(dim) == 1 else index[offset + k])
    return t[tuple(own)]


def _binary(a: Operand, b: Operand, f: Callable[[Expr, Expr], Expr], name: str) -> tl.Tensor:
    if not isinstance(a, tl.Tensor) and not isinstance(b, tl.Tensor):
        raise TypeError(f"{name}: at least one operand must be a Tensor, got {a!r} and {b!r}")
    for label, v in (("lhs", a), ("rhs", b)):
        if not isinstance(v, (tl.Tensor, int, float)) or isinstance(v, bool):
            raise TypeError(f"{name}: {label} must be a Tensor or a number, got {type(v).__name__}")
    shape_a = a.shape if isinstance(a, tl.Tensor) else ()
    shape_b = b.shape if isinstance(b, tl.Tensor) else ()
    shape = broadcast_shape(shape_a, shape_b, name)

    def value(v: Operand, index: tuple) -> Expr | int | float:
        return broadcast_read(v, index) if isinstance(v, tl.Tensor) else v

    return tl.compute(
        shape, lambda *i: f(value(a, i), value(b, i)), name=name, tag=BROADCAST  # type: ignore
    )


def add(a: Operand, b: Operand) -> tl.Tensor:
    """a + b with numpy broadcasting."""
    return _binary(a, b, lambda x, y: x + y, "add")


def subtract(a: Operand, b: Operand) -> tl.Tensor:
    """a - b with numpy broadcasting."""
    return _binary(a, b, lambda x, y: x - y, "subtract")


def multiply(a: Operand, b: Operand) -> tl.Tensor:
    """a * b with numpy broadcasting."""
    return _binary(a, b, lambda x, y: x * y, "multiply")


def divide(a: Operand, b: Operand) -> tl.Tensor:
    """a / b with numpy broadcasting (true division)."""
    return _binary(a, b, lambda x, y: x / y, "divide")


def _channel_vector(v: tl.Tensor, data: tl.Tensor, axis: int, what: str) -> None:
    check_tensor(v, what, 1)
    dv, dd = static_dim(v.shape[0]), static_dim(data.shape[axis])
    if dv is not None and dd is not None and dv != dd:
        raise ValueError(f"{what} has {dv} elements but data has {dd} along axis {axis}")


def bias_add(data: tl.Tensor, bias: tl.Tensor, axis: int = 1) -> tl.Tensor:
    """data + bias, where the 1-D `bias` runs along `axis` of `data`."""
    check_tensor(data, "bias_add: data")
    axis = check_axis(axis, data.ndim, "bias_add: axis")
    _channel_vector(bias, data, axis, "bias_add: bias")
    return tl.compute(
        data.shape, lambda *i: data[i] + bias[i[axis]], name="bias_add", tag=BROADCAST
    )


def batch_norm_inference(
    data: tl.Tensor,
    gamma: tl.Tensor,
    beta: tl.Tensor,
    mean: tl.Tensor,
    var: tl.Tensor,
    epsilon: float = 1e-5,
    axis: int = 1,
) -> tl.Tensor:
    """(data - mean) / sqrt(var + epsilon) * gamma + beta, per channel along `axis`."""
    check_tensor(data, "batch_norm_inference: data")
    axis = check_axis(axis, data.ndim, "batch_norm_inference: axis")
    for name, v in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var)):
        _channel_vector(v, data, axis, f"batch_norm_inference: {name}")
    eps = tl.const(float(epsilon), data.dtype)

    def f(*i: Expr) -> Expr:
        c = i[axis]
        return (data[i] - mean[c]) * tl.rsqrt(var[c] + eps) * gamma[c] + beta[c]

    return tl.compute(data.shape, f, name="batch_norm", tag=BROADCAST)
