"""numpy references of tile, broadcast_to, trilu, gather_elements, gather_nd, scatter_nd and
scatter_elements (ONNX semantics; negative indices count from the end, out-of-range ones are
clamped, as the computes do)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _wrap(indices: np.ndarray, n: int) -> np.ndarray:
    indices = indices.astype(np.int64)
    return np.clip(np.where(indices < 0, indices + n, indices), 0, n - 1)


def tile_python(x: np.ndarray, reps: Sequence[int]) -> np.ndarray:
    """numpy.tile."""
    return np.tile(x, reps)


def broadcast_to_python(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """numpy.broadcast_to (as a fresh array)."""
    return np.broadcast_to(x, tuple(shape)).copy()


def trilu_python(x: np.ndarray, k: int = 0, upper: bool = True) -> np.ndarray:
    """numpy.triu / numpy.tril over the last two axes."""
    return np.triu(x, k) if upper else np.tril(x, k)


def gather_elements_python(x: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """torch.gather: numpy.take_along_axis on the leading block of x that indices covers."""
    axis %= x.ndim
    block = x[tuple(slice(0, n) if d != axis else slice(None)
                    for d, n in enumerate(indices.shape))]
    return np.take_along_axis(block, _wrap(indices, x.shape[axis]), axis)


def gather_nd_python(x: np.ndarray, indices: np.ndarray, batch_dims: int = 0) -> np.ndarray:
    """ONNX GatherND, one index tuple at a time."""
    b, m = batch_dims, indices.shape[-1]
    out = np.empty(indices.shape[:-1] + x.shape[b + m:], x.dtype)
    for pos in np.ndindex(*indices.shape[:-1]):
        picked = tuple(_wrap(indices[pos][j], x.shape[b + j]) for j in range(m))
        out[pos] = x[pos[:b] + picked]
    return out


def scatter_nd_python(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """ONNX ScatterND (reduction none), updates written in order."""
    out = data.copy()
    k = indices.shape[-1]
    for pos in np.ndindex(*indices.shape[:-1]):
        out[tuple(_wrap(indices[pos][j], data.shape[j]) for j in range(k))] = updates[pos]
    return out


def scatter_elements_python(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                            axis: int = 0) -> np.ndarray:
    """ONNX ScatterElements (reduction none), updates written in order."""
    axis %= data.ndim
    out = data.copy()
    for pos in np.ndindex(*indices.shape):
        target = list(pos)
        target[axis] = _wrap(indices[pos], data.shape[axis])
        out[tuple(target)] = updates[pos]
    return out
