"""numpy references of strided_slice, take and split."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def strided_slice_python(x: np.ndarray, begin: Sequence[int], end: Sequence[int],
                         strides: Sequence[int] | None = None,
                         axes: Sequence[int] | None = None) -> np.ndarray:
    """x[begin:end:strides] per axis, with numpy's clamping of out-of-range bounds."""
    strides = [1] * len(begin) if strides is None else strides
    axes = range(len(begin)) if axes is None else axes
    index = [slice(None)] * x.ndim
    for b, e, s, a in zip(begin, end, strides, axes):
        index[a] = slice(b, e, s)
    return x[tuple(index)].copy()


def take_python(x: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """numpy's take with negative indices counting from the end, out-of-range ones clamped."""
    n = x.shape[axis]
    wrapped = np.where(indices < 0, indices + n, indices)
    return np.take(x, np.clip(wrapped, 0, n - 1), axis=axis)


def split_python(x: np.ndarray, indices_or_sections, axis: int = 0) -> list[np.ndarray]:
    """numpy's split: equal sections or cuts at the given indices."""
    return np.split(x, indices_or_sections, axis=axis)
