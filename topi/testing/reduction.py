"""numpy references of the reductions (float64 accumulation for sums and means)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _axes(axis: int | Sequence[int] | None) -> int | tuple[int, ...] | None:
    return axis if axis is None or isinstance(axis, int) else tuple(axis)


def sum_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Sum along `axis` (all axes when None), accumulated in a wide type, in the input's dtype."""
    acc = np.float64 if x.dtype.kind == "f" else x.dtype
    return np.asarray(np.sum(x, _axes(axis), dtype=acc, keepdims=keepdims)).astype(x.dtype)


def max_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Maximum along `axis` (all axes when None)."""
    return np.asarray(np.max(x, _axes(axis), keepdims=keepdims))


def min_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Minimum along `axis` (all axes when None)."""
    return np.asarray(np.min(x, _axes(axis), keepdims=keepdims))


def mean_python(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Mean along `axis` (all axes when None), accumulated in float64, in the input's dtype."""
    return np.asarray(np.mean(x, _axes(axis), dtype=np.float64, keepdims=keepdims)).astype(x.dtype)
