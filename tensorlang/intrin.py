"""Math functions on expressions (exp, log, tanh, ...), with numpy's dtype rules.

Part of the expression layer. Float inputs keep their dtype; integer inputs are converted to
float64 first, as numpy's ufuncs do, except `abs` which keeps integers.
"""

from __future__ import annotations

from .dtype import FLOAT64
from .expr import (
    BinaryOp,
    Call,
    Expr,
    ExprLike,
    MathFunc,
    _operands,
    as_expr,
    binary,
    cast,
    power,  # noqa: F401  (a math function too: tl.power)
    select,
)


def _float_call(func: MathFunc, x: ExprLike) -> Expr:
    e = as_expr(x)
    if not e.dtype.is_float:
        e = cast(e, FLOAT64)
    return Call(func, (e,), e.dtype)


def exp(x: ExprLike) -> Expr:
    """e to the power `x`."""
    return _float_call(MathFunc.EXP, x)


def log(x: ExprLike) -> Expr:
    """The natural logarithm."""
    return _float_call(MathFunc.LOG, x)


def sqrt(x: ExprLike) -> Expr:
    """The square root."""
    return _float_call(MathFunc.SQRT, x)


def rsqrt(x: ExprLike) -> Expr:
    """1 / sqrt(x)."""
    return _float_call(MathFunc.RSQRT, x)


def tanh(x: ExprLike) -> Expr:
    """The hyperbolic tangent."""
    return _float_call(MathFunc.TANH, x)


def sigmoid(x: ExprLike) -> Expr:
    """1 / (1 + exp(-x))."""
    return _float_call(MathFunc.SIGMOID, x)


def erf(x: ExprLike) -> Expr:
    """The error function (for GELU)."""
    return _float_call(MathFunc.ERF, x)


def floor(x: ExprLike) -> Expr:
    """The largest integer value not above `x`, in x's float type."""
    return _float_call(MathFunc.FLOOR, x)


def ceil(x: ExprLike) -> Expr:
    """The smallest integer value not below `x`, in x's float type."""
    return _float_call(MathFunc.CEIL, x)


def sin(x: ExprLike) -> Expr:
    """The sine (radians)."""
    return _float_call(MathFunc.SIN, x)


def cos(x: ExprLike) -> Expr:
    """The cosine (radians)."""
    return _float_call(MathFunc.COS, x)


def abs(x: ExprLike) -> Expr:  # noqa: A001 - the public name mirrors numpy and TVM
    """Absolute value, elementwise (the identity on unsigned and bool values)."""
    e = as_expr(x)
    if e.dtype.is_bool or e.dtype.is_uint:
        return e
    return Call(MathFunc.ABS, (e,), e.dtype)


def fma(a: ExprLike, b: ExprLike, c: ExprLike) -> Expr:
    """a * b + c in one rounding (floats only)."""
    x, y = _operands(a, b)
    prod_t = binary(BinaryOp.MUL, x, y).dtype
    z = as_expr(c, prod_t)
    t = binary(BinaryOp.ADD, binary(BinaryOp.MUL, x, y), z).dtype
    if not t.is_float:
        raise TypeError(f"fma needs float operands, got {t}")
    return Call(MathFunc.FMA, (cast(x, t), cast(y, t), cast(z, t)), t)


def if_then_else(cond: ExprLike, true_value: ExprLike, false_value: ExprLike) -> Expr:
    """`true_value` where `cond` holds, else `false_value`. Only the chosen branch is read, so
    it is safe to guard an out-of-bounds read (padding) with the condition."""
    return select(cond, true_value, false_value)
