"""The conv2d fallback on the layers of the common CNNs (ResNet's 7x7 planes, Inception's
17x17 and 35x35 planes with 96/160 channels and 1x7 / 7x1 kernels, VGG's wide layers): its
register blocks tile the rows, its parallel loop shares any number of channel blocks evenly
between two threads, its channel step follows the target's caches, and its results match numpy on
awkward shapes, on the host (AVX-512) and on AVX2."""

from __future__ import annotations

import re

import pytest
from topi_check import (assert_close, assert_conv2d_NCHWc_fallback_matches, in_target, run_op,
                        uniform)

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86 import conv2d as conv2d_x86
from topi.x86.common import cache_sizes

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HOST, HASWELL = "llvm", "llvm -mcpu=haswell"

#: Output planes of ResNet (56 .. 7), Inception-V3 (147, 73, 71, 35, 17, 8) and GoogLeNet.
PLANES = [(112, 112), (56, 56), (28, 28), (14, 14), (7, 7), (147, 147), (73, 73), (71, 71),
          (35, 35), (17, 17), (8, 8)]


@pytest.mark.parametrize("target", [HOST, HASWELL])
def test_fallback_blocks_tile_the_rows(target):
    """No block of several rows leaves a partial last row where another block shape costs the
    same: on AVX-512 7x7 planes get 7 x 2 (2 x 7 ran at 50-65% of it), and the blocks stay
    within the accumulator budget."""
    with tl.Target(target):
        budget = tl.Target.current().vector_registers - 4
        for plane in PLANES:
            oc, rows, cols = conv2d_x86.fallback_block(plane, 32)
            assert oc == 2 and rows * cols * oc <= budget, plane
            assert rows == 1 or plane[0] % rows == 0, (plane, rows, cols)
        if target == HOST:
            assert conv2d_x86.fallback_block((7, 7), 32) == (2, 7, 2)


def _parallel_extents(s: tl.Schedule, tensors: list[tl.Tensor]) -> list[int]:
    lowered = str(tl.lower(s, tensors))
    return [int(n) for n in re.findall(r"in range\((\d+)\):  # parallel", lowered)]


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", [HOST, HASWELL])
@pytest.mark.parametrize("channels", [80, 128])
def test_row_blocks_join_an_uneven_parallel_loop(channels, target):
    """A prepacked kernel (the graph's): where the threads cannot share the register blocks of
    channels evenly (80 channels: 3 blocks of 2 vectors on AVX-512, 5 on AVX2), they split
    channel blocks x row blocks (x 35 one-row blocks); where they can (128), the rows stay
    out of the parallel loop."""
    with tl.Target(target):
        lanes = tl.Target.current().vector_lanes("float32")
        data = tl.placeholder((1, channels // lanes, 35, 35, lanes), name="data")
        kernel = tl.placeholder((channels // lanes, channels, 3, 3, lanes), name="kernel")
        out = nn.conv2d_NCHWc(data, kernel, 1, 1, 1)
        oc, rows, _ = conv2d_x86.fallback_block((35, 35), channels // lanes, channels // lanes)
        extents = _parallel_extents(x86.schedule_conv2d_NCHWc([out]), [data, kernel, out])
    blocks = -(-channels // lanes // oc)
    assert (blocks * -(-35 // rows) if blocks % 2 else blocks) in extents


@pytest.mark.usefixtures("two_threads")
def test_kernel_packed_in_the_schedule_keeps_one_iteration_per_channel_block():
    """conv2d_nchw packs its kernel per block of output channels inside the parallel loop: the
    loop must not repeat a block, so the rows stay out of it."""
    data = tl.placeholder((1, 32, 14, 14), name="data")
    kernel = tl.placeholder((128, 32, 3, 3), name="kernel")
    out = nn.conv2d_nchw(data, kernel, 1, 1, 1)
    lanes = tl.Target.current().vector_lanes("float32")
    oc, _, _ = conv2d_x86.fallback_block((14, 14), 128 // lanes, 128 // lanes)
    extents = _parallel_extents(x86.schedule_conv2d_nchw([out]), [data, kernel, out])
    assert 128 // lanes // oc in extents


@pytest.mark.parametrize("target", [HOST, HASWELL])
@pytest.mark.parametrize("layer", [
    # C, H, W, R, S, stride: VGG's and ResNet's widest layers, Inception's 1x7 / 7x1 and its
    # stride-2 3x3, the 7x7 stride-2 stem, 1x1 bottlenecks
    (512, 28, 28, 3, 3, 1), (512, 7, 7, 3, 3, 1), (1024, 7, 7, 3, 3, 1), (2048, 7, 7, 1, 1, 1),
    (192, 17, 17, 1, 7, 1), (192, 17, 17, 7, 1, 1), (288, 35, 35, 3, 3, 2),
    (3, 224, 224, 7, 7, 2),
])
def test_channel_step_follows_the_caches(layer, target):
    """A step's kernel block and input window fit in half of L1; where a register block's
    kernel slice (C x R x S x its output lanes) overflows L2, one channel per step streams it
    in address order."""
    channels, height, width, kernel_h, kernel_w, stride = layer
    with tl.Target(target):
        lanes = tl.Target.current().vector_lanes("float32")
        caches = cache_sizes()
        out_hw = ((height - 1) // stride + 1, (width - 1) // stride + 1)
        oc, rows, cols = conv2d_x86.fallback_block(out_hw, 512 // lanes)
        window = (kernel_h, kernel_w, stride, stride)
        step = conv2d_x86.fallback_tile_ic(channels, oc * lanes, (rows, cols), window)
    assert channels % step == 0
    slice_bytes = channels * kernel_h * kernel_w * oc * lanes * 4
    if slice_bytes > caches.l2:
        assert step == 1
    else:
        inputs = ((rows - 1) * stride + kernel_h) * ((cols - 1) * stride + kernel_w)
        step_bytes = step * (kernel_h * kernel_w * oc * lanes + inputs) * 4
        assert step == 1 or step_bytes <= caches.l1d // 2


CASES = [
    # C, H, W, K, R, S, stride, padding; C not a multiple of the lanes -> NCHW data
    (48, 7, 7, 48, 3, 3, 1, 1),       # 7x7 plane, an odd number of channel blocks
    (96, 11, 9, 96, 3, 3, 1, 1),      # 3 register blocks of channels over rows
    (80, 17, 17, 48, 1, 7, 1, (0, 3, 0, 3)),   # Inception's 1x7
    (32, 17, 13, 80, 7, 1, 1, (3, 0, 3, 0)),   # and 7x1, rows not a multiple of the block
    (64, 17, 17, 96, 3, 3, 2, 0),     # stride-2 3x3 reduction
    (3, 29, 31, 64, 7, 7, 2, 3),      # the 7x7 stride-2 stem on 3 channels
    (13, 8, 8, 31, 3, 3, 1, 1),       # primes
    (160, 8, 8, 16, 1, 1, 1, 0),      # 1x1 on an 8x8 plane
]


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", [None, HASWELL])
@pytest.mark.parametrize("case", CASES)
def test_fallback_matches_numpy(case, target, rng):
    c, h, w, k, r, s, stride, padding = case
    assert_conv2d_NCHWc_fallback_matches(rng, target, c, h, w, k, r, s, stride, padding)


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", [None, HASWELL])
@pytest.mark.parametrize("channels, size, stride", [(24, 9, 1), (40, 7, 2), (72, 5, 1),
                                                     (32, 6, 1)])
def test_depthwise_rows_in_the_parallel_loop_match_numpy(channels, size, stride, target, rng):
    """The depthwise schedule splits channel blocks x rows between threads where the channel
    blocks alone would not be shared evenly (3, 5 or 9 blocks of 8), not otherwise (32)."""

    def run():
        lanes = tl.Target.current().vector_lanes("float32")
        block = min(lanes, channels & -channels)
        arrays = [uniform(rng, 1, channels // block, size, size, block),
                  uniform(rng, channels // block, 3, 3, block)]
        data = tl.placeholder(arrays[0].shape, name="data")
        weight = tl.placeholder(arrays[1].shape, name="weight")
        out = nn.depthwise_conv2d_NCHWc(data, weight, stride, 1)
        got = run_op(out, [data, weight], arrays, x86.schedule_depthwise_conv2d_NCHWc)
        extents = _parallel_extents(x86.schedule_depthwise_conv2d_NCHWc([out]), [data, weight, out])
        rows = (size - 1) // stride + 1
        blocks = channels // block
        assert (blocks * rows if blocks % 2 else blocks) in extents
        return got, ref.depthwise_conv2d_NCHWc_python(*arrays, stride, 1)

    got, expected = in_target(target, run)
    assert_close(got, expected, 9)
