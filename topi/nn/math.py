"""Elementwise math beyond the activations of `elemwise.py`: unary functions, clip, the hard
activations, power/maximum/minimum with numpy broadcasting, and dtype casts.

Tagged "elemwise" or "broadcast" like the ops of `elemwise.py`, so schedules inline them into
their readers and fuse them into a producer's output stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorlang as tl
from tensorlang.dtype import as_dtype
from tensorlang.expr import Expr

from .elemwise import ELEMWISE, Operand, _binary, _unary
from .utils import check_tensor


def _float_unary(x: tl.Tensor, f: Callable[[Expr], Expr], name: str) -> tl.Tensor:
    check_tensor(x, f"{name}: x")
    if not x.dtype.startswith("float"):
        raise TypeError(f"{name}: x must be a float tensor, got {x.dtype}")
    return _unary(x, f, name)


def _float_op(f: Callable[[Expr], Expr], name: str, doc: str) -> Callable[[tl.Tensor], tl.Tensor]:
    def op(x: tl.Tensor) -> tl.Tensor:
        return _float_unary(x, f, name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


sqrt = _float_op(tl.sqrt, "sqrt", "The square root of a float tensor.")
exp = _float_op(tl.exp, "exp", "e ** x.")
log = _float_op(tl.log, "log", "The natural logarithm.")
tanh = _float_op(tl.tanh, "tanh", "The hyperbolic tangent.")
sigmoid = _float_op(tl.sigmoid, "sigmoid", "1 / (1 + exp(-x)).")
erf = _float_op(tl.erf, "erf", "The error function.")


def abs(x: tl.Tensor) -> tl.Tensor:
    """|x| (any dtype)."""
    return _unary(x, tl.abs, "abs")


def negative(x: tl.Tensor) -> tl.Tensor:
    """-x (any dtype)."""
    return _unary(x, lambda v: -v, "negative")


def reciprocal(x: tl.Tensor) -> tl.Tensor:
    """1 / x of a float tensor."""
    return _float_unary(x, lambda v: tl.const(1.0, x.dtype) / v, "reciprocal")


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number, got {value!r}")
    return float(value)


def clip(x: tl.Tensor, a_min: float | None, a_max: float | None) -> tl.Tensor:
    """x limited to [a_min, a_max]; a None bound is no bound."""
    check_tensor(x, "clip: x")
    lo = None if a_min is None else tl.const(_number(a_min, "clip: a_min"), x.dtype)
    hi = None if a_max is None else tl.const(_number(a_max, "clip: a_max"), x.dtype)

    def f(v: Expr) -> Expr:
        if lo is not None:
            v = tl.maximum(v, lo)
        return v if hi is None else tl.minimum(v, hi)

    return _unary(x, f, "clip")


def hard_sigmoid(x: tl.Tensor, alpha: float = 0.2, beta: float = 0.5) -> tl.Tensor:
    """max(0, min(1, alpha * x + beta)) (ONNX's HardSigmoid; PyTorch's is alpha = 1/6)."""
    check_tensor(x, "hard_sigmoid: x")
    a = tl.const(_number(alpha, "hard_sigmoid: alpha"), x.dtype)
    b = tl.const(_number(beta, "hard_sigmoid: beta"), x.dtype)
    zero, one = tl.const(0.0, x.dtype), tl.const(1.0, x.dtype)
    return _float_unary(x, lambda v: tl.maximum(zero, tl.minimum(one, v * a + b)),
                        "hard_sigmoid")


def hard_swish(x: tl.Tensor) -> tl.Tensor:
    """x * hard_sigmoid(x) with alpha = 1/6, beta = 1/2 (ONNX's HardSwish, PyTorch's
    Hardswish)."""
    check_tensor(x, "hard_swish: x")
    sixth, half = tl.const(1.0 / 6.0, x.dtype), tl.const(0.5, x.dtype)
    zero, one = tl.const(0.0, x.dtype), tl.const(1.0, x.dtype)
    return _float_unary(x, lambda v: v * tl.maximum(zero, tl.minimum(one, v * sixth + half)),
                        "hard_swish")


def gelu_tanh(x: tl.Tensor) -> tl.Tensor:
    """GELU's tanh approximation: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))."""
    check_tensor(x, "gelu_tanh: x")
    c = tl.const(math.sqrt(2.0 / math.pi), x.dtype)
    k, half, one = (tl.const(v, x.dtype) for v in (0.044715, 0.5, 1.0))
    return _float_unary(x, lambda v: v * half * (one + tl.tanh(c * (v + k * v * v * v))),
                        "gelu_tanh")


def power(a: Operand, b: Operand) -> tl.Tensor:
    """a ** b with numpy broadcasting."""
    return _binary(a, b, tl.power, "power")


def maximum(a: Operand, b: Operand) -> tl.Tensor:
    """The larger of a and b, with numpy broadcasting."""
    return _binary(a, b, tl.maximum, "maximum")


def minimum(a: Operand, b: Operand) -> tl.Tensor:
    """The smaller of a and b, with numpy broadcasting."""
    return _binary(a, b, tl.minimum, "minimum")


def cast(x: tl.Tensor, dtype: str) -> tl.Tensor:
    """x converted to `dtype` (C's conversions: float to int truncates toward zero)."""
    check_tensor(x, "cast: x")
    try:
        target = str(as_dtype(dtype))
    except TypeError as err:
        raise TypeError(f"cast: {err}") from err
    return tl.compute(x.shape, lambda *i: x[i].astype(target), name="cast", tag=ELEMWISE)
