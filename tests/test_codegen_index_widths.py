"""A gather's int64 indices read through a stage inlined into it (a pad, whose bound checks are
in its int32 loop variable): the inliner gives each index the type of the variable it replaces,
so scalar and vector code compare operands of one type (the vector IR had been rejected by LLVM:
ConvBERT's unfold)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl


def padded_gather(length: int, pad: int, rows: int, cols: int):
    """out[i, j] = padded[idx[i, j]], `padded` the input with `pad` zeros at each end."""
    A = tl.placeholder((length,), "float32", name="A")
    idx = tl.placeholder((rows, cols), "int64", name="idx")
    padded = tl.compute((length + 2 * pad,),
                        lambda h: tl.if_then_else((h >= pad) & (h < length + pad),
                                                  A[h - pad], 0.0), name="padded")
    out = tl.compute((rows, cols), lambda i, j: padded[idx[i, j]], name="out")
    return A, idx, padded, out


@pytest.mark.parametrize("vector_axis", [None, 0, 1])
@pytest.mark.parametrize("rows, cols", [(9, 37), (1, 16), (5, 3)])
def test_int64_gather_through_an_inlined_int32_pad(vector_axis, rows, cols):
    length, pad = 37, 4
    A, idx, padded, out = padded_gather(length, pad, rows, cols)
    s = tl.create_schedule(out.op)
    s[padded].compute_inline()
    if vector_axis is not None:
        i, j = out.op.axis
        if vector_axis == 0:
            s[out].reorder(j, i)
        s[out].vectorize((i, j)[vector_axis])
    f = tl.build(s, [A, idx, out])
    rng = np.random.default_rng(0)
    a = rng.standard_normal(length).astype("float32")
    indices = rng.integers(0, length + 2 * pad, (rows, cols)).astype("int64")
    got = np.zeros((rows, cols), "float32")
    f(a, indices, got)
    np.testing.assert_array_equal(got, np.pad(a, pad)[indices])
