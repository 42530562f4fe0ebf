"""The loop hints codegen gives LLVM to keep compile time down (lower/unroll.py KEEP_ROLLED,
codegen's `llvm.loop.vectorize.enable false` on loops that store vectors), and that the kernels
they touch still compute the right thing on awkward shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorlang as tl
import topi
from topi_check import assert_conv2d_nchw_matches
from tensorlang.lower.unroll import KEEP_ROLLED, LLVM_UNROLL_LIMIT


def _nest_in_unrolled_copies(n: int, lanes: int, rows: int, cols: int):
    """B[i, l, r, c] = A[i, r, c, l] + 1 with the lane axis unrolled around an r x c loop nest
    (the shape of conv2d's kernel packing)."""
    A = tl.placeholder((n, rows, cols, lanes), name="A")
    B = tl.compute((n, lanes, rows, cols), lambda i, l, r, c: A[i, r, c, l] + 1.0, name="B")
    s = tl.create_schedule(B.op)
    s[B].unroll(B.op.axis[1])
    return s, [A, B]


def _loop_pragmas(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(rf"for {name} in range", line)]


@pytest.mark.parametrize("n, lanes, rows, cols",
                         [(3, 16, 7, 7), (1, 37, 3, 3), (1, 53, 5, 1), (2, 1, 17, 19), (2, 8, 3, 3)])
def test_loops_holding_loops_in_unrolled_copies_stay_rolled(n, lanes, rows, cols):
    s, args = _nest_in_unrolled_copies(n, lanes, rows, cols)
    lowered = str(tl.lower(s, args))
    outer, inner = _loop_pragmas(lowered, "r"), _loop_pragmas(lowered, "c")
    # Copied out into more than LLVM_UNROLL_LIMIT statements, the r loops that hold c loops are
    # kept rolled; one copy multiplies nothing, and a c of extent 1 is no loop, so r is
    # innermost. Innermost loops are LLVM's to unroll, and so are small nests (8 x 3 x 3).
    rolled = lanes > 1 and cols > 1 and lanes * rows * cols > LLVM_UNROLL_LIMIT
    assert outer and all((f"pragma({KEEP_ROLLED[0]}=True)" in line) == rolled for line in outer)
    assert not any(KEEP_ROLLED[0] in line for line in inner)
    f = tl.build(s, args)
    assert ("llvm.loop.unroll.disable" in f.get_source("ll")) == rolled
    a = np.random.default_rng(0).random((n, rows, cols, lanes), dtype=np.float32)
    b = np.empty((n, lanes, rows, cols), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a.transpose(0, 3, 1, 2) + 1)


def test_only_loops_that_store_vectors_skip_the_loop_vectorizer():
    A = tl.placeholder((37, 53), name="A")
    B = tl.compute((37, 53), lambda i, j: A[i, j] * 2.0, name="B")
    C = tl.compute((37, 53), lambda i, j: B[i, j] + 1.0, name="C")
    s = tl.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].vectorize(ji)
    f = tl.build(s, [A, C])
    ll = f.get_source("ll")
    hints = re.findall(r'!"llvm\.loop\.vectorize\.enable", i1 false', ll)
    # C's loops over rows and vector chunks (the scalar tail of 53 = 6 * 8 + 5 is masked in
    # the chunk loop or straight-line), never B's scalar loops, which stay LLVM's to vectorize.
    assert 1 <= len(hints) <= 3
    a = np.random.default_rng(1).random((37, 53), dtype=np.float32)
    c = np.empty_like(a)
    f(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("shape, kernel, stride, padding", [
    ((1, 3, 37, 29), (19, 3, 7, 7), 2, 3),
    ((1, 5, 13, 17), (16, 5, 5, 5), 1, 2),
    ((1, 7, 11, 11), (33, 7, 3, 3), 1, 1),
])
def test_conv2d_with_kernel_rows_kept_rolled_matches_numpy(shape, kernel, stride, padding):
    data = tl.placeholder(shape, name="data")
    weight = tl.placeholder(kernel, name="kernel")
    out = topi.nn.conv2d_nchw(data, weight, stride, padding, 1)
    with pytest.warns(UserWarning):  # the fallback config of the template
        s = topi.x86.schedule_conv2d_nchw(out)
    f = tl.build(s, [data, weight, out])
    # The kernel packing's tap loop (R x S taps, each a run of 16 or 8 lanes) stays a loop of
    # one tap at a time in LLVM, whatever the kernel's size.
    assert "llvm.loop.unroll.disable" in f.get_source("ll")
    assert "pragma(scalar_loop=True)" in str(tl.lower(s, [data, weight, out]))
    assert_conv2d_nchw_matches(f, shape, kernel, stride, padding, seed=2)
