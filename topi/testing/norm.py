"""numpy references of group_norm and instance_norm (float64 statistics)."""

from __future__ import annotations

import numpy as np


def group_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, num_groups: int,
                      epsilon: float = 1e-5) -> np.ndarray:
    """Normalise each sample's channel groups over their channels and positions, then scale and
    shift per channel."""
    n, c = x.shape[:2]
    grouped = x.astype(np.float64).reshape(n, num_groups, -1)
    mean = grouped.mean(-1, keepdims=True)
    var = grouped.var(-1, keepdims=True)
    normed = ((grouped - mean) / np.sqrt(var + epsilon)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return (normed * gamma.reshape(shape) + beta.reshape(shape)).astype(x.dtype)


def instance_norm_python(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                         epsilon: float = 1e-5) -> np.ndarray:
    """group_norm_python with one channel per group."""
    return group_norm_python(x, gamma, beta, x.shape[1], epsilon)
