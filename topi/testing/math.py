"""numpy references of the elementwise math ops of topi.nn.math (float64 inside)."""

from __future__ import annotations

import math

import numpy as np


def _f64(fn):
    def ref(x: np.ndarray, *args) -> np.ndarray:
        return np.asarray(fn(x.astype(np.float64), *args)).astype(x.dtype)

    ref.__doc__ = f"numpy reference of {fn.__name__} (float64 inside)."
    return ref


erf_python = _f64(np.vectorize(math.erf, otypes=[np.float64]))
sqrt_python = _f64(np.sqrt)
exp_python = _f64(np.exp)
log_python = _f64(np.log)
tanh_python = _f64(np.tanh)
sigmoid_python = _f64(lambda v: 1.0 / (1.0 + np.exp(-v)))
reciprocal_python = _f64(lambda v: 1.0 / v)


def abs_python(x: np.ndarray) -> np.ndarray:
    """numpy's absolute value, the reference of topi.abs."""
    return np.abs(x)


def negative_python(x: np.ndarray) -> np.ndarray:
    """numpy's negation, the reference of topi.nn.negative."""
    return np.negative(x)


def clip_python(x: np.ndarray, a_min: float | None, a_max: float | None) -> np.ndarray:
    """Clamp to [a_min, a_max] (either bound may be None), in the input's dtype."""
    out = x if a_min is None else np.maximum(x, np.asarray(a_min, x.dtype))
    return out if a_max is None else np.minimum(out, np.asarray(a_max, x.dtype))


def hard_sigmoid_python(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    """max(0, min(1, alpha * x + beta)), computed in float64 (ONNX HardSigmoid)."""
    return np.clip(x.astype(np.float64) * alpha + beta, 0.0, 1.0).astype(x.dtype)


def hard_swish_python(x: np.ndarray) -> np.ndarray:
    """x * hard_sigmoid(x) with alpha 1/6 and beta 1/2, in float64 (ONNX HardSwish)."""
    x64 = x.astype(np.float64)
    return (x64 * np.clip(x64 / 6.0 + 0.5, 0.0, 1.0)).astype(x.dtype)


def gelu_tanh_python(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation, in float64 (PyTorch's approximate='tanh')."""
    x64 = x.astype(np.float64)
    inner = math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)
    return (0.5 * x64 * (1.0 + np.tanh(inner))).astype(x.dtype)


def power_python(a, b) -> np.ndarray:
    """numpy's elementwise power with broadcasting."""
    return np.power(a, b)


def maximum_python(a, b) -> np.ndarray:
    """numpy's elementwise maximum with broadcasting."""
    return np.maximum(a, b)


def minimum_python(a, b) -> np.ndarray:
    """numpy's elementwise minimum with broadcasting."""
    return np.minimum(a, b)


def cast_python(x: np.ndarray, dtype: str) -> np.ndarray:
    """The input converted to `dtype` with numpy's casting rules."""
    return x.astype(dtype)
