"""numpy references of argmax / argmin (int32 indices, as topi returns them)."""

from __future__ import annotations

import numpy as np


def argmax_python(a: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """numpy's argmax as topi.argmax returns it: int32 indices, first index on ties."""
    return _shaped(np.argmax(a, axis=axis, keepdims=keepdims))


def argmin_python(a: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """numpy's argmin as topi.argmin returns it: int32 indices, first index on ties."""
    return _shaped(np.argmin(a, axis=axis, keepdims=keepdims))


def _shaped(index: np.ndarray) -> np.ndarray:
    """int32, with numpy's scalar result as the 1-element tensor topi returns."""
    return np.asarray(index, "int32").reshape(np.shape(index) or (1,))
