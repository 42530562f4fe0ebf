"""numpy references of topi.nn.activation: activations, sin/cos/log1p/expm1, rounding,
remainders and divisions, prod (float64 inside for the float functions)."""

from __future__ import annotations

import numpy as np

from .math import _f64
from .reduction import _axes


def elu_python(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """x where x > 0, else alpha * expm1(x)."""
    return _f64(lambda v: np.where(v > 0, v, alpha * np.expm1(v)))(x)


def selu_python(x: np.ndarray, alpha: float = 1.6732632423543772,
                gamma: float = 1.0507009873554805) -> np.ndarray:
    """gamma * elu(x, alpha)."""
    return _f64(lambda v: gamma * np.where(v > 0, v, alpha * np.expm1(v)))(x)


def celu_python(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """max(0, x) + min(0, alpha * expm1(x / alpha))."""
    return _f64(lambda v: np.maximum(0, v) + np.minimum(0, alpha * np.expm1(v / alpha)))(x)


def softplus_python(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    """log1p(exp(beta * x)) / beta, x where beta * x > threshold (PyTorch's Softplus)."""
    def f(v: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.where(v * beta > threshold, v, np.log1p(np.exp(v * beta)) / beta)

    return _f64(f)(x)


def mish_python(x: np.ndarray) -> np.ndarray:
    """x * tanh(softplus(x))."""
    return _f64(lambda v: v * np.tanh(softplus_python(v)))(x)


def prelu_python(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """x where x >= 0, else slope * x, slope broadcast like numpy."""
    return np.asarray(np.where(x < 0, x * slope, x)).astype(x.dtype)


silu_python = _f64(lambda v: v / (1.0 + np.exp(-v)))
softsign_python = _f64(lambda v: v / (1.0 + np.abs(v)))
sin_python = _f64(np.sin)
cos_python = _f64(np.cos)


def log1p_python(x: np.ndarray) -> np.ndarray:
    """numpy's log1p (float64 inside; -inf at -1 and NaN below, quietly)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _f64(np.log1p)(x)


def expm1_python(x: np.ndarray) -> np.ndarray:
    """numpy's expm1 (float64 inside; inf on overflow, quietly)."""
    with np.errstate(over="ignore"):
        return _f64(np.expm1)(x)


def _whole(fn):
    def ref(x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(x) if x.dtype.kind == "f" else x.copy())

    ref.__doc__ = f"numpy's {fn.__name__} in x's dtype (integers are returned as they are)."
    return ref


floor_python = _whole(np.floor)
ceil_python = _whole(np.ceil)
trunc_python = _whole(np.trunc)
round_python = _whole(np.round)  # half to even


def sign_python(x: np.ndarray) -> np.ndarray:
    """numpy's sign in x's dtype (NaN stays NaN)."""
    return np.asarray(np.sign(x))


def mod_python(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's remainder (sign of b); an integer b of 0 gives 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.remainder(a, b))


def fmod_python(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's fmod (C's, sign of a); an integer b of 0 gives 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.fmod(a, b))


def floor_divide_python(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's floor_divide; an integer b of 0 gives 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.floor_divide(a, b))


def trunc_divide_python(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b rounded towards zero (integers exactly, through the floored quotient)."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.result_type(a, b).kind == "f":
            return np.asarray(np.trunc(a / b))
        q, r = np.floor_divide(a, b), np.remainder(a, b)
        return np.asarray(q + ((r != 0) & ((a < 0) != (b < 0))))


def prod_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """numpy's prod along `axis` (all axes when None), in x's dtype."""
    return np.asarray(np.prod(x, _axes(axis), dtype=x.dtype, keepdims=keepdims))
