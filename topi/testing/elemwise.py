"""numpy references of the elementwise, normalisation and data-movement ops."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def relu_python(x: np.ndarray) -> np.ndarray:
    """max(x, 0), in x's dtype."""
    return np.maximum(x, 0).astype(x.dtype)


def leaky_relu_python(x: np.ndarray, alpha: float) -> np.ndarray:
    """x where x > 0, else alpha * x."""
    return np.where(x > 0, x, x * alpha).astype(x.dtype)


def gelu_python(x: np.ndarray) -> np.ndarray:
    """Exact GELU with math.erf (numpy has no erf)."""
    erf = np.vectorize(math.erf)
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + erf(x64 / math.sqrt(2.0)))).astype(x.dtype)


def add_python(a, b) -> np.ndarray:
    """a + b with numpy broadcasting."""
    return np.add(a, b)


def subtract_python(a, b) -> np.ndarray:
    """a - b with numpy broadcasting."""
    return np.subtract(a, b)


def multiply_python(a, b) -> np.ndarray:
    """a * b with numpy broadcasting."""
    return np.multiply(a, b)


def divide_python(a, b) -> np.ndarray:
    """a / b with numpy broadcasting."""
    return np.divide(a, b)


def _channel_shape(ndim: int, axis: int) -> list[int]:
    shape = [1] * ndim
    shape[axis] = -1
    return shape


def bias_add_python(data: np.ndarray, bias: np.ndarray, axis: int = 1) -> np.ndarray:
    """data + bias along `axis`."""
    return data + bias.reshape(_channel_shape(data.ndim, axis % data.ndim))


def batch_norm_inference_python(data, gamma, beta, mean, var, epsilon: float = 1e-5,
                                axis: int = 1) -> np.ndarray:
    """(data - mean) / sqrt(var + epsilon) * gamma + beta along `axis`."""
    shape = _channel_shape(data.ndim, axis % data.ndim)
    scale = gamma.reshape(shape) / np.sqrt(var.reshape(shape).astype(np.float64) + epsilon)
    out = (data - mean.reshape(shape)) * scale + beta.reshape(shape)
    return out.astype(data.dtype)


def softmax_python(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(x) / sum(exp(x)) along `axis`, computed stably."""
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def log_softmax_python(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log(softmax(x)) along `axis`, computed stably."""
    shifted = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(x.dtype)


def layer_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                      axis: int | Sequence[int] = -1, epsilon: float = 1e-5) -> np.ndarray:
    """Normalise over `axis`, then scale by gamma and shift by beta."""
    axes = tuple(sorted(a % x.ndim for a in ([axis] if isinstance(axis, int) else axis)))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    shape = [x.shape[k] if k in axes else 1 for k in range(x.ndim)]
    out = (x64 - mean) / np.sqrt(var + epsilon) * gamma.reshape(shape) + beta.reshape(shape)
    return out.astype(x.dtype)


def pad_python(data: np.ndarray, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
               pad_value: float = 0.0, mode: str = "constant") -> np.ndarray:
    """numpy.pad with a constant value, or numpy's "reflect" / "edge" modes."""
    after = pad_before if pad_after is None else pad_after
    widths = list(zip(pad_before, after))
    if mode != "constant":
        return np.pad(data, widths, mode=mode)
    return np.pad(data, widths, constant_values=pad_value)


def reshape_python(data: np.ndarray, newshape: Sequence[int]) -> np.ndarray:
    """numpy.reshape."""
    return data.reshape(newshape)


def transpose_python(x: np.ndarray, axes: Sequence[int] | None = None) -> np.ndarray:
    """numpy.transpose."""
    return np.transpose(x, axes)


def concatenate_python(xs: Sequence[np.ndarray], axis: int = 0) -> np.ndarray:
    """numpy.concatenate."""
    return np.concatenate(xs, axis=axis)
