"""Convolutions with few output channels (DenseNet's 32) and channel counts that make no
power-of-two block (ShuffleNet's 58/116): the fallback keeps every thread busy, and the
NCHW[x]c convolutions stay correct on awkward shapes (output channels 1, 32, 58, primes; input
channels not a multiple of the block) on the host and on AVX2."""

from __future__ import annotations

import pytest
from topi_check import assert_close, in_target, run_op, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86 import conv2d as conv2d_x86

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HASWELL = "llvm -mcpu=haswell"
TARGETS = [None, HASWELL]


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("shape", [(56, 56), (28, 28), (14, 14), (7, 7)])
def test_fallback_block_gives_each_thread_a_channel_block(shape):
    """Two channel vectors of one image (32 channels on AVX-512) would make one parallel
    iteration for two threads: the fallback takes one vector per register block, and fills the
    accumulators with more points instead; with two images, or four vectors, it keeps two."""
    registers = tl.Target.current().vector_registers
    oc, rows, cols = conv2d_x86.fallback_block(shape, 2, 2)
    assert oc == 1
    assert rows * cols <= registers - 3
    assert rows * cols >= min(shape[0] * shape[1], (registers - 3) // 2)
    assert conv2d_x86.fallback_block(shape, 2, 4) == conv2d_x86.fallback_block(shape, 2)
    assert conv2d_x86.fallback_block(shape, 4, 4)[0] == 2
    assert conv2d_x86.fallback_block(shape, 1, 1)[0] == 1


@pytest.mark.usefixtures("two_threads")
def test_one_thread_keeps_two_vectors():
    tl.set_num_threads(1)
    assert conv2d_x86.fallback_block((28, 28), 2, 2)[0] == 2


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
