"""Activations and elementwise math of real models beyond `math.py`: the exponential-linear
family, softplus and its relatives, prelu, sin/cos/log1p/expm1, rounding (sign, floor, ceil,
round, trunc), remainders and integer-valued divisions, and the product reduction.

Tagged "elemwise" or "broadcast" like the ops of `elemwise.py` (prod "reduce" like
`reduction.py`'s), so schedules inline them into their readers. log1p and expm1 are composed from
log and exp with the classic corrections (Goldberg's and Kahan's), accurate to a few ulps near
zero where the naive forms lose every digit; round is half to even, from floor and a parity test.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorlang as tl
from tensorlang.dtype import as_dtype
from tensorlang.expr import Expr, _operands

from . import logistic
from .elemwise import Operand, _binary, _unary
from .math import _float_op, _float_unary, _number
from .reduction import AxisLike, _reduce
from .utils import check_tensor


def _c(value: float, like: Expr) -> Expr:
    return tl.const(value, like.dtype)


# -- exp and log near zero -----------------------------------------------------------------------


def _log1p(v: Expr) -> Expr:
    # u - 1 is exact, so log(u) * v / (u - 1) corrects the rounding of 1 + v (Goldberg);
    # u == 1 means v is below half an ulp of 1, and an infinite u needs no correction.
    u = v + _c(1.0, v)
    corrected = tl.log(u) * v / (u - _c(1.0, v))
    return tl.select(u == _c(1.0, v), v,
                     tl.select(u == _c(float("inf"), v), u, corrected))


def _expm1(v: Expr) -> Expr:
    # Kahan's form (u - 1) * v / log(u) cancels the rounding of exp; the ends need no help.
    u = tl.exp(v)
    corrected = (u - _c(1.0, v)) * v / tl.log(u)
    return tl.select(u == _c(1.0, v), v,
                     tl.select((u - _c(1.0, v) == _c(-1.0, v)) | (u == _c(float("inf"), v)),
                               u - _c(1.0, v), corrected))


log1p = _float_op(_log1p, "log1p", "log(1 + x), accurate for small x.")
expm1 = _float_op(_expm1, "expm1", "exp(x) - 1, accurate for small x.")
sin = _float_op(tl.sin, "sin", "The sine (radians).")
cos = _float_op(tl.cos, "cos", "The cosine (radians).")


# -- activations -----------------------------------------------------------------------------------


def _negative_exp(v: Expr, alpha: float) -> Expr:
    """v where v > 0, else alpha * (exp(v) - 1): the ELU shape shared by elu and selu."""
    return tl.select(v > _c(0.0, v), v, _c(alpha, v) * _expm1(v))


def elu(x: tl.Tensor, alpha: float = 1.0) -> tl.Tensor:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    a = _number(alpha, "elu: alpha")
    return _float_unary(x, lambda v: _negative_exp(v, a), "elu")


def selu(x: tl.Tensor, alpha: float = 1.6732632423543772,
         gamma: float = 1.0507009873554805) -> tl.Tensor:
    """gamma * elu(x, alpha) (ONNX's Selu; the defaults are PyTorch's constants)."""
    a, g = _number(alpha, "selu: alpha"), _number(gamma, "selu: gamma")
    return _float_unary(x, lambda v: _c(g, v) * _negative_exp(v, a), "selu")


def celu(x: tl.Tensor, alpha: float = 1.0) -> tl.Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    Raises:
        ValueError: alpha is 0.
    """
    a = _number(alpha, "celu: alpha")
    if a == 0.0:
        raise ValueError("celu: alpha must not be 0")

    def f(v: Expr) -> Expr:
        zero = _c(0.0, v)
        return tl.maximum(zero, v) + tl.minimum(zero, _c(a, v) * _expm1(v * _c(1.0 / a, v)))

    return _float_unary(x, f, "celu")


def _softplus(v: Expr, beta: float = 1.0, threshold: float = 20.0) -> Expr:
    scaled = v * _c(beta, v)
    return tl.select(scaled > _c(threshold, v), v, _log1p(tl.exp(scaled)) * _c(1.0 / beta, v))


def softplus(x: tl.Tensor, beta: float = 1.0, threshold: float = 20.0) -> tl.Tensor:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (PyTorch's
    Softplus; ONNX's is beta = 1, where the threshold changes nothing in float32).

    Raises:
        ValueError: beta is 0.
    """
    b = _number(beta, "softplus: beta")
    t = _number(threshold, "softplus: threshold")
    if b == 0.0:
        raise ValueError("softplus: beta must not be 0")
    return _float_unary(x, lambda v: _softplus(v, b, t), "softplus")


mish = _float_op(lambda v: v * tl.tanh(_softplus(v)), "mish", "x * tanh(softplus(x)).")
silu = _float_op(lambda v: v * logistic.sigmoid(v), "silu", "x * sigmoid(x) (also called swish).")
softsign = _float_op(lambda v: v / (_c(1.0, v) + tl.abs(v)), "softsign", "x / (1 + |x|).")


def prelu(x: tl.Tensor, slope: tl.Tensor) -> tl.Tensor:
    """x where x >= 0, else slope * x; `slope` broadcasts against x like numpy (ONNX's PRelu)."""
    check_tensor(x, "prelu: x")
    check_tensor(slope, "prelu: slope")
    if x.dtype != slope.dtype:
        raise TypeError(f"prelu: slope must have x's dtype {x.dtype}, got {slope.dtype}")
    return _binary(x, slope, lambda v, s: tl.select(v < _c(0, v), v * s, v), "prelu")


# -- rounding ---------------------------------------------------------------------------------------


def _rounding(x: tl.Tensor, f: Callable[[Expr], Expr], name: str) -> tl.Tensor:
    """`f` on float tensors; integers are already whole, so they are copied."""
    check_tensor(x, f"{name}: x")
    t = as_dtype(x.dtype)
    if t.is_bool:
        raise TypeError(f"{name}: x must be a number tensor, got bool")
    return _unary(x, f if t.is_float else (lambda v: v), name)


def _trunc(v: Expr) -> Expr:
    return tl.select(v < _c(0, v), tl.ceil(v), tl.floor(v))


def _round_half_even(v: Expr) -> Expr:
    below = tl.floor(v)
    frac = v - below  # exact: below is v's integer part towards minus infinity
    half = _c(0.5, v)
    odd = tl.floor(below * half) * _c(2.0, v) != below
    up = below + _c(1.0, v)
    return tl.select(frac > half, up,
                     tl.select(frac < half, below, tl.select(odd, up, below)))


def sign(x: tl.Tensor) -> tl.Tensor:
    """-1, 0 or 1 by the sign of x (NaN stays NaN), in x's dtype."""
    check_tensor(x, "sign: x")
    if as_dtype(x.dtype).is_bool:
        raise TypeError("sign: x must be a number tensor, got bool")

    def f(v: Expr) -> Expr:
        zero = _c(0, v)
        if v.dtype.is_uint:
            return tl.select(v > zero, _c(1, v), zero)
        return tl.select(v > zero, _c(1, v), tl.select(v < zero, _c(-1, v), v))

    return _unary(x, f, "sign")


def floor(x: tl.Tensor) -> tl.Tensor:
    """The largest whole number not above x, in x's dtype."""
    return _rounding(x, tl.floor, "floor")


def ceil(x: tl.Tensor) -> tl.Tensor:
    """The smallest whole number not below x, in x's dtype."""
    return _rounding(x, tl.ceil, "ceil")


def trunc(x: tl.Tensor) -> tl.Tensor:
    """x rounded towards zero, in x's dtype."""
    return _rounding(x, _trunc, "trunc")


def round(x: tl.Tensor) -> tl.Tensor:  # noqa: A001 - the public name mirrors numpy
    """x rounded to the nearest whole number, halves to the even one (numpy, ONNX, PyTorch)."""
    return _rounding(x, _round_half_even, "round")


# -- remainders and divisions -----------------------------------------------------------------------


def _opposite_signs(a: Expr, b: Expr) -> Expr:
    return (a < _c(0, a)) != (b < _c(0, b))


def _fmod(a: Expr, b: Expr) -> Expr:
    if a.dtype.is_float:
        # On magnitudes the floored remainder is C's fmod, exactly; it then takes a's sign.
        m = tl.abs(a) % tl.abs(b)
        return tl.select(a < _c(0, a), -m, m)
    r = a % b
    return tl.select((r != _c(0, r)) & _opposite_signs(a, b), r - b, r)


def _divide_op(a: Operand, b: Operand, f: Callable[[Expr, Expr], Expr],
               name: str) -> tl.Tensor:
    for label, v in (("a", a), ("b", b)):
        if isinstance(v, tl.Tensor) and as_dtype(v.dtype).is_bool:
            raise TypeError(f"{name}: {label} must be a number tensor, got bool")
    return _binary(a, b, lambda x, y: f(*_operands(x, y)), name)


def _floor_divide(a: Expr, b: Expr) -> Expr:
    if not a.dtype.is_float:
        return a // b
    # numpy's and PyTorch's float floor division: from the exact remainder, not floor(a / b),
    # which can round the quotient up to the next whole number (1 // 0.1 is 9, not 10).
    m = _fmod(a, b)
    div = (a - m) / b
    div = tl.select((m != _c(0, m)) & _opposite_signs(b, m), div - _c(1.0, div), div)
    whole = tl.floor(div)
    whole = tl.select(div - whole > _c(0.5, div), whole + _c(1.0, div), whole)
    return tl.select(b == _c(0, b), a / b, whole)


def _trunc_divide(a: Expr, b: Expr) -> Expr:
    if a.dtype.is_float:
        return _trunc(a / b)
    q = a // b
    return tl.select((a % b != _c(0, a)) & _opposite_signs(a, b), q + _c(1, q), q)


def mod(a: Operand, b: Operand) -> tl.Tensor:
    """The remainder of a / b with the sign of b (Python's %, numpy's remainder, PyTorch's
    remainder, ONNX's Mod with fmod=0), with numpy broadcasting; an integer b of 0 gives 0."""
    return _divide_op(a, b, lambda x, y: x % y, "mod")


def fmod(a: Operand, b: Operand) -> tl.Tensor:
    """The remainder of a / b with the sign of a (C's fmod, ONNX's Mod with fmod=1), with numpy
    broadcasting; an integer b of 0 gives 0."""
    return _divide_op(a, b, _fmod, "fmod")


def floor_divide(a: Operand, b: Operand) -> tl.Tensor:
    """a / b rounded towards minus infinity (Python's //), with numpy broadcasting; an integer b
    of 0 gives 0."""
    return _divide_op(a, b, _floor_divide, "floor_divide")


def trunc_divide(a: Operand, b: Operand) -> tl.Tensor:
    """a / b rounded towards zero (C's integer division, PyTorch's rounding_mode="trunc"), with
    numpy broadcasting; an integer b of 0 gives 0."""
    return _divide_op(a, b, _trunc_divide, "trunc_divide")


# -- products ---------------------------------------------------------------------------------------

_prod = tl.comm_reducer(lambda a, b: a * b, lambda dtype: tl.const(1, dtype), name="prod")


def prod(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:
    """The product of `x` over `axis` (all axes when None), in x's dtype."""
    check_tensor(x, "prod: x")
    if as_dtype(x.dtype).is_bool:
        raise TypeError("prod: x must be a number tensor, got bool")
    return _reduce(x, axis, keepdims, _prod, "prod")[0]
