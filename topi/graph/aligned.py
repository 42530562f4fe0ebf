"""Arrays whose data starts on a cache line.

numpy aligns its allocations to 16 bytes only. A kernel's vector loads from such an array (an
AVX-512 vector is a whole 64-byte line) each straddle two cache lines, and a prepacked weight read
in that way is read through twice as many lines: ResNet-18's 512 x 512 3x3 kernel, 1 thread,
weights fetched from memory, Zen 4: 73-82 GFLOP/s at offsets 16 and 48 against 99.5 aligned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Bytes: a cache line, and the widest vector (AVX-512).
ALIGNMENT = 64


def aligned_empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array of `shape` and `dtype` starting on a 64-byte
    boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.__array_interface__["data"][0] % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(tuple(shape))


def aligned_copy(value: Any) -> np.ndarray:
    """`value` as a C-contiguous array starting on a 64-byte boundary (a copy; an array of
    Python objects, which no kernel reads, is copied as numpy allocates it)."""
    value = np.asarray(value)
    if value.dtype.hasobject:
        return np.array(value, order="C")
    out = aligned_empty(value.shape, value.dtype)
    out[...] = value
    return out


def memory_key(value: np.ndarray) -> tuple:
    """What identifies the data an array reads (while the array lives): two arrays with equal
    keys view the same memory alike, so they hold equal values."""
    return (value.__array_interface__["data"][0], value.shape, value.strides, value.dtype.str)


def is_aligned(value: np.ndarray) -> bool:
    """Whether `value` is C-contiguous and its data starts on a 64-byte boundary."""
    return value.flags.c_contiguous and value.__array_interface__["data"][0] % ALIGNMENT == 0


def aligned_read_only(value: Any) -> np.ndarray:
    """`value` as a read-only, C-contiguous, 64-byte aligned array: a read-only view of `value`
    itself where it already lies so (a model's weight is read where it is, not copied: PyTorch
    allocates 64-byte aligned), else an aligned copy."""
    value = np.asarray(value)
    out = value.view() if is_aligned(value) and not value.dtype.hasobject else \
        aligned_copy(value)
    out.setflags(write=False)
    return out
