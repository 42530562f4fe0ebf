"""numpy references of the comparisons, logic, selection and bool reductions of
topi.nn.logical."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .reduction import _axes


def _binary(fn: Callable, name: str) -> Callable:
    def ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(fn(a, b), bool)

    ref.__name__ = ref.__qualname__ = f"{name}_python"
    ref.__doc__ = f"numpy's {fn.__name__}, the reference of topi.nn.{name} (bool)."
    return ref


equal_python = _binary(np.equal, "equal")
not_equal_python = _binary(np.not_equal, "not_equal")
less_python = _binary(np.less, "less")
less_equal_python = _binary(np.less_equal, "less_equal")
greater_python = _binary(np.greater, "greater")
greater_equal_python = _binary(np.greater_equal, "greater_equal")
logical_and_python = _binary(np.logical_and, "logical_and")
logical_or_python = _binary(np.logical_or, "logical_or")
logical_xor_python = _binary(np.logical_xor, "logical_xor")


def logical_not_python(x: np.ndarray) -> np.ndarray:
    """numpy's logical_not (bool)."""
    return np.asarray(np.logical_not(x))


def isnan_python(x: np.ndarray) -> np.ndarray:
    """numpy's isnan (bool; false for integers)."""
    return np.asarray(np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool))


def isinf_python(x: np.ndarray) -> np.ndarray:
    """numpy's isinf (bool; false for integers)."""
    return np.asarray(np.isinf(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool))


def where_python(cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """numpy's where, all three broadcast."""
    return np.asarray(np.where(cond, x, y))


def any_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """numpy's any along `axis` (all axes when None), bool."""
    return np.asarray(np.any(x, _axes(axis), keepdims=keepdims))


def all_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """numpy's all along `axis` (all axes when None), bool."""
    return np.asarray(np.all(x, _axes(axis), keepdims=keepdims))
