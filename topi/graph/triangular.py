"""Triangular solves (`torch.linalg.solve_triangular`) for the frontends, as matrix products.

Substitution row by row is a chain of n dependent steps, which no graph op expresses. The inverse
of a triangular matrix is built instead by doubling, as recursive blocked inversion does: the
inverses of the diagonal blocks of size s give those of size 2s,

    [[A, 0], [C, B]]^-1 = [[A^-1, 0], [-B^-1 C A^-1, B^-1]],

starting from the reciprocals of the diagonal, in log2(n) levels of two batched products each
(n padded with identity rows to a power of two). The solution is that inverse times the right
side. Unlike a power series in the strict triangle (whose terms grow like binomials and cancel),
each level only multiplies inverses already formed, so the rounding is that of substitution.
"""

from __future__ import annotations

import numpy as np

from .importer import GraphWriter, Value, dtype_of, require, shape_of


def solve_triangular(im: GraphWriter, a: Value, b: Value, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Value:
    """X with a X = b (`left`) or X a = b, `a` (..., n, n) upper or lower triangular (the other
    triangle is never read; `unitriangular` reads ones on its diagonal), leading axes
    broadcasting as torch's."""
    sa, sb = shape_of(a), shape_of(b)
    require(len(sa) >= 2 and len(sb) >= 2 and sa[-1] == sa[-2],
            f"a triangular solve of a {sa} matrix and a {sb} right side")
    require(all(isinstance(d, int) for d in (*sa, *sb)), "a triangular solve of symbolic sizes")
    n = sa[-1]
    require(sb[-2 if left else -1] == n, f"a triangular solve of a {sa} matrix and a {sb} "
            f"right side ({'left' if left else 'right'})")
    # an upper a is the transpose of a lower one: a⁻¹ = ((aᵀ)⁻¹)ᵀ
    inverse = _lower_inverse(im, _swap(im, a) if upper else a, unitriangular)
    if upper:
        inverse = _swap(im, inverse)
    return im.matmul(inverse, b) if left else im.matmul(b, inverse)


def _swap(im: GraphWriter, x: Value) -> Value:
    """x with its last two axes swapped."""
    rank = len(shape_of(x))
    return im.op("transpose", x, axes=(*range(rank - 2), rank - 1, rank - 2))


def _lower_inverse(im: GraphWriter, a: Value, unitriangular: bool) -> Value:
    """The inverse of the lower triangle of `a` (..., n, n) (module docstring)."""
    *lead, n, _ = shape_of(a)
    dtype = dtype_of(a)
    size = 1 << max(n - 1, 0).bit_length()
    eye = np.eye(n, dtype=bool)
    if unitriangular:
        a = im.op("where", eye, np.array(1, dtype), a)
    if size > n:  # identity rows and columns past n: the padded inverse holds a's in its corner
        a = im.op("pad", a, pad_before=(0,) * (len(lead) + 2),
                  pad_after=(0,) * len(lead) + (size - n, size - n))
        a = im.op("add", a, np.diag(np.arange(size) >= n).astype(dtype))
    flat = im.reshape(a, (*lead, size * size))
    diagonal = im.op("take", flat, np.arange(size) * (size + 1), axis=len(lead))
    blocks = im.op("divide", np.array(1, dtype), im.reshape(diagonal, (*lead, size, 1, 1)))
    width = 1
    while width < size:
        pairs = size // (2 * width)
        first = im.op("strided_slice", blocks, begin=(0,), end=(2 * pairs,), strides=(2,),
                      axes=(len(lead),))
        second = im.op("strided_slice", blocks, begin=(1,), end=(2 * pairs,), strides=(2,),
                       axes=(len(lead),))
        below = im.op("take", flat, _below_blocks(size, width), axis=len(lead))
        corner = im.op("negative", im.matmul(im.matmul(second, below), first))
        zeros = im.op("where", np.zeros((width, width), bool), first, np.array(0, dtype))
        top = im.op("concatenate", first, zeros, axis=len(lead) + 2)
        bottom = im.op("concatenate", corner, second, axis=len(lead) + 2)
        blocks = im.op("concatenate", top, bottom, axis=len(lead) + 1)
        width *= 2
    inverse = im.reshape(blocks, (*lead, size, size))
    if size > n:
        inverse = im.op("strided_slice", inverse, begin=(0, 0), end=(n, n), strides=(1, 1),
                        axes=(len(lead), len(lead) + 1))
    return inverse


def _below_blocks(size: int, width: int) -> np.ndarray:
    """Flat positions in a (size, size) matrix of the block below the diagonal of each pair of
    diagonal blocks of `width`: (pairs, width, width)."""
    pairs = size // (2 * width)
    p, r, c = np.meshgrid(np.arange(pairs), np.arange(width), np.arange(width), indexing="ij")
    rows = p * 2 * width + width + r
    cols = p * 2 * width + c
    return (rows * size + cols).astype(np.int64)
