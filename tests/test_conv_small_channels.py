"""Convolutions with few output channels (DenseNet's 32) and channel counts that make no
power-of-two block (ShuffleNet's 58/116): the blocked convolutions are correct on awkward shapes
(output channels 1, 32, 58, primes; input channels not a multiple of the block) on the host and
on AVX2, with two threads (two vectors of output channels then make one parallel iteration)."""

from __future__ import annotations

import pytest
from topi_check import assert_close, in_target, run_op, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HASWELL = "llvm -mcpu=haswell"
TARGETS = [None, HASWELL]


@pytest.fixture
def two_threads():
    before = tl.get_num_threads()
    tl.set_num_threads(2)
    yield
    tl.set_num_threads(before)


CONV_CASES = [
    # C, bi, H, W, K, bo, R, S, stride, padding (bi = 0: NCHW data)
    (128, 16, 9, 11, 32, 16, 3, 3, 1, 1),   # DenseNet's growth layer, odd plane
    (24, 8, 7, 7, 32, 8, 3, 3, 1, 1),
    (40, 8, 5, 13, 32, 16, 3, 3, 2, 1),     # input channels not a multiple of the out block
    (58, 2, 7, 7, 58, 2, 1, 1, 1, 0),       # ShuffleNet's 58 = 2 x 29
    (29, 0, 11, 5, 58, 2, 3, 3, 2, 1),
    (13, 0, 7, 7, 1, 1, 3, 3, 1, 1),        # one output channel
    (17, 0, 6, 9, 31, 1, 1, 1, 1, 0),       # primes
]


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_NCHWc_small_channels(case, target, rng):
    c, bi, h, w, k, bo, r, s, stride, padding = case
    shape = (1, c // bi, h, w, bi) if bi else (1, c, h, w)
    data = tl.placeholder(shape, name="data")
    kernel = tl.placeholder((k // bo, c, r, s, bo), name="kernel")
    arrays = [uniform(rng, *shape), uniform(rng, k // bo, c, r, s, bo)]

    def run():
        out = nn.conv2d_NCHWc(data, kernel, stride, padding, 1)
        return run_op(out, [data, kernel], arrays, x86.schedule_conv2d_NCHWc)

    expected = ref.conv2d_NCHWc_python(*arrays, stride, padding, 1)
    assert_close(in_target(target, run), expected, c * r * s)


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("channels, out_channels", [(128, 32), (19, 32), (58, 58), (7, 1)])
def test_conv2d_nchw_small_channels(channels, out_channels, target, rng):
    """The NCHW convolution shares the blocked schedule and its fallback."""
    data = tl.placeholder((1, channels, 10, 7), name="data")
    kernel = tl.placeholder((out_channels, channels, 3, 3), name="kernel")
    arrays = [uniform(rng, 1, channels, 10, 7), uniform(rng, out_channels, channels, 3, 3)]

    def run():
        out = nn.conv2d_nchw(data, kernel, 1, 1, 1)
        return run_op(out, [data, kernel], arrays, x86.schedule_conv2d_nchw)

    expected = ref.conv2d_nchw_python(*arrays, 1, 1)
    assert_close(in_target(target, run), expected, channels * 9)
