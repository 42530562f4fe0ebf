"""numpy references of the sorting ops and of the grouped matrix product."""

from __future__ import annotations

import numpy as np


def argsort_python(x: np.ndarray, axis: int = -1, descending: bool = False,
                   k: int | None = None) -> np.ndarray:
    """Stable argsort (NaN last ascending, first descending, as torch), the first k kept."""
    axis %= x.ndim
    if not descending:
        order = np.argsort(x, axis=axis, kind="stable")
    elif x.dtype.kind == "f":  # NaN first, then the numbers from the largest
        nan = np.isnan(x)
        order = np.lexsort((np.where(nan, 0, -x), ~nan), axis=axis)
    else:  # ~x reverses the order of integers without overflowing
        order = np.argsort(~x, axis=axis, kind="stable")
    if k is not None:
        order = np.take(order, np.arange(k), axis=axis)
    return order.astype(np.int64)


def histc_python(x: np.ndarray, bins: int, low: float, high: float) -> np.ndarray:
    """torch.histc over [low, high]: the top edge counts in the last bin."""
    counts, _ = np.histogram(x[~np.isnan(x)] if x.dtype.kind == "f" else x, bins=bins,
                             range=(low, high))
    return counts.astype(x.dtype)


def grouped_matmul_python(x: np.ndarray, weight: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Rows [offsets[g-1], offsets[g]) of x times weight[g]; rows past the last offset zero."""
    out = np.zeros((x.shape[0], weight.shape[2]), x.dtype)
    start = 0
    for g, end in enumerate(offsets.tolist()):
        end = min(max(end, start), x.shape[0])
        out[start:end] = x[start:end] @ weight[g]
        start = end
    return out
