"""Complex values and discrete Fourier transforms for the frontends: a complex value is a pair of
real graph values (its imaginary part None where it is zero), and its arithmetic is that of the
parts (rotary embeddings that multiply a query viewed as complex numbers by e^(i theta)). The
transform along an axis of n elements is a dense product with constant cosine and sine
matrices, (C ± iS) times it, C[k, j] = cos(2 pi k j / n), S[k, j] = sin(2 pi k j / n). FNet's
Fourier mixing, the real part of the 2-D transform of a real x, so runs as C x C' - S x S':
dense kernels the tuner knows, and the imaginary part, which nothing reads, is dead code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .importer import GraphWriter, Value, dtype_of, require, shape_of

#: PyTorch's normalization codes of `_fft_c2c` and `_fft_r2c`: none, 1 / sqrt(n), 1 / n
_SCALES = {0: lambda n: 1.0, 1: lambda n: 1.0 / np.sqrt(n), 2: lambda n: 1.0 / n}


@dataclass(frozen=True)
class Complex:
    """A complex tensor as its real and imaginary parts (`imag` None: zero)."""

    real: Value
    imag: Value | None = None


def polar(im: GraphWriter, magnitude: Value, angle: Value) -> Complex:
    """magnitude * e^(i angle)."""
    return Complex(im.op("multiply", magnitude, im.op("cos", angle)),
                   im.op("multiply", magnitude, im.op("sin", angle)))


def _combined(im: GraphWriter, op: str, x: Value | None, y: Value | None) -> Value | None:
    """x `op` y ("add" or "subtract") for parts that may be zero (None)."""
    if y is None:
        return x
    if x is None:
        return y if op == "add" else im.op("negative", y)
    return im.op(op, x, y)


def _times(im: GraphWriter, x: Value | None, y: Value | None) -> Value | None:
    return None if x is None or y is None else im.op("multiply", x, y)


def complex_product(im: GraphWriter, a: Complex, b: Complex) -> Complex:
    """(ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)."""
    real = _combined(im, "subtract", im.op("multiply", a.real, b.real), _times(im, a.imag, b.imag))
    imag = _combined(im, "add", _times(im, a.real, b.imag), _times(im, a.imag, b.real))
    return Complex(real, imag)


def complex_sum(im: GraphWriter, op: str, a: Complex, b: Complex) -> Complex:
    """a + b or a - b (`op` "add" or "subtract"), part by part."""
    return Complex(im.op(op, a.real, b.real), _combined(im, op, a.imag, b.imag))


def dft(im: GraphWriter, z: Complex, axes: Sequence[int], inverse: bool, normalization: int,
        onesided: bool = False) -> Complex:
    """The discrete Fourier transform of `z` over `axes` (e^(-2 pi i k j / n), or e^(+...) when
    `inverse`), scaled per axis by PyTorch's `normalization` code; `onesided` keeps only the
    first n // 2 + 1 frequencies of the last of `axes` (a real input's transform, `rfft`)."""
    require(normalization in _SCALES, f"normalization {normalization}")
    rank = len(shape_of(z.real))
    axes = [a % rank for a in axes]
    for axis in sorted(axes, reverse=True):  # the last axis needs no transposes: first
        n = shape_of(z.real)[axis]
        require(isinstance(n, int), "a Fourier transform over a symbolic axis")
        kept = n // 2 + 1 if onesided and axis == axes[-1] else n
        z = _along(im, z, axis, *_matrices(n, kept, _SCALES[normalization](n),
                                           dtype_of(z.real)), inverse)
    return z


def _matrices(n: int, kept: int, scale: float, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(C, S), `kept` frequencies by n samples, times `scale` (angles reduced mod n exactly)."""
    angle = 2 * np.pi * (np.outer(np.arange(kept), np.arange(n)) % n) / n
    return (np.cos(angle) * scale).astype(dtype), (np.sin(angle) * scale).astype(dtype)


def _along(im: GraphWriter, z: Complex, axis: int, cos: np.ndarray, sin: np.ndarray,
           inverse: bool) -> Complex:
    """(C - iS) z along `axis` (C + iS when `inverse`): re' = C re + S im and
    im' = C im - S re forward, the signs of S the other way round for the inverse."""
    sign = -1.0 if inverse else 1.0
    real = _product(im, z.real, axis, cos)
    imag = _product(im, z.real, axis, -sign * sin)
    if z.imag is not None:
        real = im.op("add", real, _product(im, z.imag, axis, sign * sin))
        imag = im.op("add", imag, _product(im, z.imag, axis, cos))
    return Complex(real, imag)


def _product(im: GraphWriter, x: Value, axis: int, matrix: np.ndarray) -> Value:
    """sum_j matrix[k, j] x[..., j, ...] along `axis`: one dense over the other axes' rows."""
    rank = len(shape_of(x))
    if axis == rank - 1:
        return im.dense_rows(x, matrix)
    order = (*range(axis), *range(axis + 1, rank), axis)
    y = im.dense_rows(im.op("transpose", x, axes=order), matrix)
    back = (*range(axis), rank - 1, *range(axis, rank - 1))
    return im.op("transpose", y, axes=back)


def stacked(im: GraphWriter, z: Complex) -> Value:
    """`view_as_real`: the parts side by side along a new last axis of 2."""
    shape = (*shape_of(z.real), 1)
    imag = z.imag if z.imag is not None else np.zeros(shape_of(z.real), dtype_of(z.real))
    return im.op("concatenate", im.reshape(z.real, shape), im.reshape(imag, shape),
                 axis=len(shape) - 1)
