"""conv2d_nchw's per-call kernel packing reads a block's rows at most PACK_ROWS_UNROLLED at a time
(topi/x86/conv2d.py pack_kernel): a 16-row block (AVX-512) packs in two rolled steps of 8
unrolled rows, an 8-row one (AVX2) in one, and the convolution stays right on awkward shapes."""

from __future__ import annotations

import re

import pytest

import tensorlang as tl
from topi.x86.conv2d import PACK_ROWS_UNROLLED
from topi_check import assert_conv2d_nchw_matches, fallback_conv2d_nchw


def _lowered(target: str, shape, kernel, stride, padding):
    with tl.Target(target):
        s, tensors = fallback_conv2d_nchw(shape, kernel, stride, padding)
        return s, tensors, str(tl.lower(s, tensors))


def _packing_stores(lowered: str) -> list[str]:
    return [line.strip() for line in lowered.splitlines()
            if line.strip().startswith("kernel_vec[")]


@pytest.mark.parametrize("target, rows, steps", [
    ("llvm -mcpu=skylake-avx512", 16, 2),
    ("llvm -mcpu=haswell", 8, 1),
])
def test_packing_body_reads_at_most_the_unrolled_rows(target, rows, steps):
    _, _, lowered = _lowered(target, (1, 64, 14, 14), (64, 64, 3, 3), 1, 1)
    stores = _packing_stores(lowered)
    assert 0 < len(stores) <= PACK_ROWS_UNROLLED
    # (ko, ci, taps[, rows step]) around the unrolled rows: the step loop is a scalar loop too.
    step_loops = [line for line in lowered.splitlines() if re.search(r"for ki\.outer in range", line)]
    if steps == 1:
        assert not step_loops
    else:
        assert step_loops and all(f"range({steps})" in line and "scalar_loop=True" in line
                                  for line in step_loops)
    assert rows == len(stores) * steps


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("shape, kernel, stride, padding", [
    ((1, 5, 13, 11), (23, 5, 3, 3), 1, 1),    # a partial last block of output channels
    ((2, 3, 17, 19), (33, 3, 7, 7), 2, 3),    # a batch: packed once, in a parallel loop
    ((1, 7, 9, 9), (17, 7, 1, 7), 1, (0, 3)),  # a row of taps
    ((1, 1, 6, 5), (1, 1, 2, 2), 1, 0),       # one input and one output channel
])
def test_conv2d_nchw_with_packing_in_steps_matches_numpy(target, shape, kernel, stride, padding):
    with tl.Target(target):
        s, args, _ = _lowered(target, shape, kernel, stride, padding)
        f = tl.build(s, args)
    assert_conv2d_nchw_matches(f, shape, kernel, stride, padding, seed=5)
