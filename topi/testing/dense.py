"""numpy references of the matrix products."""

from __future__ import annotations

import numpy as np


def dense_python(data: np.ndarray, weight: np.ndarray,
                 bias: np.ndarray | None = None) -> np.ndarray:
    """data (M, K) @ weight (N, K)^T (+ bias)."""
    out = data.astype(np.float64) @ weight.astype(np.float64).T
    if bias is not None:
        out += bias
    return out.astype(data.dtype)


def matmul_python(a: np.ndarray, b: np.ndarray, transpose_a: bool = False,
                  transpose_b: bool = False, bias: np.ndarray | None = None) -> np.ndarray:
    """a @ b with the last two axes swapped per flag; batch axes broadcast."""
    x = np.swapaxes(a, -1, -2) if transpose_a else a
    y = np.swapaxes(b, -1, -2) if transpose_b else b
    out = np.matmul(x.astype(np.float64), y.astype(np.float64))
    if bias is not None:
        out += bias
    return out.astype(a.dtype)


def batch_matmul_python(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x (B, M, K) @ y (B, N, K)^T per batch; a batch of 1 broadcasts."""
    return matmul_python(x, y, transpose_b=True)
