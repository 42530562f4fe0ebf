"""numpy reference of cumsum."""

from __future__ import annotations

import numpy as np


def cumsum_python(x: np.ndarray, axis: int, exclusive: bool = False,
                  reverse: bool = False) -> np.ndarray:
    """numpy.cumsum in x's dtype, optionally exclusive and/or from the end."""
    y = np.flip(x, axis) if reverse else x
    out = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis)),
                              np.take(out, np.arange(x.shape[axis] - 1), axis)], axis)
    return np.flip(out, axis).copy() if reverse else out
