"""The pragma `scalar_loop`: the loop stays a loop of one iteration at a time in LLVM (codegen
marks it `llvm.loop.unroll.disable` and `llvm.loop.vectorize.enable false`), and the kernel
still computes the right thing on awkward shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorlang as tl
from topi_check import assert_conv2d_nchw_matches, fallback_conv2d_nchw


def loop_hints(ll: str) -> list[set[str]]:
    """The hints of each `!llvm.loop` node of the module `ll`."""
    nodes = dict(re.findall(r"^(!\d+) = (.*)$", ll, re.M))
    loops = set(re.findall(r"!llvm\.loop (!\d+)", ll))
    return [{nodes[ref] for ref in re.findall(r"!\d+", nodes[loop])[1:]} for loop in loops]


SCALAR = {'!{!"llvm.loop.unroll.disable"}', '!{!"llvm.loop.vectorize.enable", i1 false}'}


def _transpose_rows(n: int, lanes: int, taps: int, pragma: object):
    """B[i, t, l] = A[i, l, t] * 2 with the lanes unrolled inside the tap loop (the shape of
    conv2d's kernel packing), the tap loop under `scalar_loop=pragma` (None: no pragma)."""
    A = tl.placeholder((n, lanes, taps), name="A")
    B = tl.compute((n, taps, lanes), lambda i, t, l: A[i, l, t] * 2.0, name="B")
    s = tl.create_schedule(B.op)
    s[B].unroll(B.op.axis[2])
    if pragma is not None:
        s[B].pragma(B.op.axis[1], "scalar_loop", pragma)
    return s, [A, B]


@pytest.mark.parametrize("n, lanes, taps", [(1, 16, 9), (3, 8, 49), (2, 5, 1), (1, 1, 13),
                                            (7, 3, 2)])
def test_scalar_loop_is_neither_unrolled_nor_vectorized_by_llvm(n, lanes, taps):
    s, args = _transpose_rows(n, lanes, taps, True)
    lowered = str(tl.lower(s, args))
    f = tl.build(s, args)
    hints = loop_hints(f.get_source("ll"))
    # Exactly the tap loop is marked (one of a single tap too: a loop with a pragma stays).
    assert sum(SCALAR <= h for h in hints) == 1
    assert "pragma(scalar_loop=True)" in lowered
    a = np.random.default_rng(0).random((n, lanes, taps), dtype=np.float32)
    b = np.empty((n, taps, lanes), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a.transpose(0, 2, 1) * 2)


def test_scalar_loop_stays_a_loop_under_auto_unroll():
    """auto_unroll_max_step copies out the loops inside it that are small enough, but not one
    under scalar_loop (a reduction whose unrolled copies would load more than the registers
    hold); the loops beside it are still copied."""
    s, args = _transpose_rows(2, 4, 9, True)
    B = args[1]
    s[B].pragma(B.op.axis[0], "auto_unroll_max_step", 64)
    lowered = str(tl.lower(s, args))
    assert "for t in range(9):  # pragma(scalar_loop=True)" in lowered, lowered
    a = np.random.default_rng(1).random((2, 4, 9), dtype=np.float32)
    b = np.empty((2, 9, 4), "float32")
    tl.build(s, args)(a, b)
    np.testing.assert_array_equal(b, a.transpose(0, 2, 1) * 2)
    s, args = _transpose_rows(2, 4, 9, None)
    s[args[1]].pragma(args[1].op.axis[0], "auto_unroll_max_step", 64)
    assert "for t in range" not in str(tl.lower(s, args))


@pytest.mark.parametrize("pragma", [None, False])
def test_loops_without_the_pragma_are_llvms_to_unroll_and_vectorize(pragma):
    s, args = _transpose_rows(2, 4, 9, pragma)
    assert not any(SCALAR <= h for h in loop_hints(tl.build(s, args).get_source("ll")))


@pytest.mark.parametrize("value", ["yes", None, 1.5])
def test_scalar_loop_needs_a_bool(value):
    s, (A, B) = _transpose_rows(1, 2, 3, None)
    with pytest.raises(tl.ScheduleError, match="scalar_loop.*needs a bool"):
        s[B].pragma(B.op.axis[1], "scalar_loop", value)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("shape, kernel, stride, padding", [
    ((1, 5, 13, 11), (23, 5, 3, 3), 1, 1),   # one image: packed per block of output channels
    ((2, 3, 17, 19), (9, 3, 7, 7), 2, 3),    # a batch: packed once, in a parallel loop
    ((1, 7, 9, 9), (17, 7, 1, 7), 1, (0, 3)),  # a row of taps
    ((3, 2, 5, 5), (1, 2, 1, 1), 1, 0),       # one tap, one output channel
])
def test_conv2d_kernel_packing_runs_its_taps_as_a_scalar_loop(target, shape, kernel, stride,
                                                               padding):
    with tl.Target(target):
        s, tensors = fallback_conv2d_nchw(shape, kernel, stride, padding)
        lowered = str(tl.lower(s, tensors))
        f = tl.build(s, tensors)
    taps = [line for line in lowered.splitlines() if "for ry.rx.fused in range" in line]
    # (two where a partial last block of output channels is peeled)
    assert taps and all("pragma(scalar_loop=True)" in line for line in taps)
    assert any(SCALAR <= h for h in loop_hints(f.get_source("ll")))
    assert_conv2d_nchw_matches(f, shape, kernel, stride, padding, seed=3)
