"""The conv fallback on layers whose kernel is fetched from memory on every call (a window of
several taps, C x R x S x K values larger than L2: ResNet's and VGG's 256- and 512-channel 3x3
layers): one input channel per step, so that the kernel is read in address order; 1x1 layers
and kernels that stay in L2 keep the L1-sized step. Checked on the host (AVX-512) and on AVX2,
whose smaller L2 (256 KiB for Haswell) takes in more layers, against numpy on awkward shapes."""

from __future__ import annotations

import warnings

import pytest
from topi_check import (assert_close, assert_conv2d_NCHWc_fallback_matches, in_target, run_op,
                        uniform)

import autotune
import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86 import conv2d as conv2d_x86
from topi.x86.common import cache_sizes

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HOST, HASWELL = "llvm", "llvm -mcpu=haswell"


def _step(channels: int, out_channels: int, plane: tuple[int, int], kernel: int,
          stride: int = 1, known: bool = True) -> int:
    """The fallback's channel step, told the layer's output channels or (`known` False) not."""
    lanes = tl.Target.current().vector_lanes("float32")
    vectors = max(1, out_channels // lanes)
    oc, rows, cols = conv2d_x86.fallback_block(plane, vectors, vectors)
    return conv2d_x86.fallback_tile_ic(channels, oc * lanes, (rows, cols),
                                       (kernel, kernel, stride, stride),
                                       out_channels=out_channels if known else 0)


@pytest.mark.parametrize("target", [HOST, HASWELL])
@pytest.mark.parametrize("layer", [
    # C, K, output plane, R = S, stride: ResNet's 3x3 layers (7x7 .. 56x56), VGG's 512 on
    # 28x28, ResNet-50's 1x1 bottlenecks, the 7x7 stem, primes
    (512, 512, (7, 7), 3, 1), (256, 512, (7, 7), 3, 2), (256, 256, (14, 14), 3, 1),
    (128, 128, (28, 28), 3, 1), (64, 64, (56, 56), 3, 1), (512, 512, (28, 28), 3, 1),
    (2048, 512, (7, 7), 1, 1), (1024, 256, (14, 14), 1, 1), (3, 64, (112, 112), 7, 2),
    (181, 176, (7, 7), 3, 1), (61, 136, (9, 9), 3, 1),
])
def test_kernel_fetched_from_memory_is_read_in_address_order(layer, target):
    channels, out_channels, plane, kernel, stride = layer
    with tl.Target(target):
        l2 = cache_sizes().l2
        step = _step(channels, out_channels, plane, kernel, stride)
        without = _step(channels, out_channels, plane, kernel, stride, known=False)
    assert channels % step == 0
    if kernel > 1 and channels * kernel * kernel * out_channels * 4 > l2:
        assert step == 1
    else:
        assert step == without  # the register block's slice and L1 decide, as before


def test_resnet_layers_on_both_targets():
    """On the host's 1 MiB L2, 128 -> 128 3x3 (576 KiB) keeps its L1 step and 256 -> 256 (2.25
    MiB) streams; Haswell's 256 KiB L2 streams both. A 1x1 kernel never needs it."""
    with tl.Target(HOST):
        assert _step(128, 128, (28, 28), 3) == 8
        assert _step(256, 256, (14, 14), 3) == 1
        assert _step(2048, 512, (7, 7), 1) == 64
    with tl.Target(HASWELL):
        assert _step(128, 128, (28, 28), 3) == 1
        assert _step(64, 64, (56, 56), 3) == 16
        assert _step(2048, 512, (7, 7), 1) > 1


@pytest.mark.parametrize("target", [HOST, HASWELL])
def test_template_fallback_streams_a_large_kernel(target):
    """The conv2d_NCHWc template's fallback config (what an untuned model build gets) takes
    one channel per step for ResNet's 512 -> 512 3x3 layer, 8 or more for 64 -> 64."""
    with tl.Target(target):
        lanes = tl.Target.current().vector_lanes("float32")
    for channels, size, expected_one in ((512, 7, True), (64, 56, False)):
        args = ((1, channels // lanes, size, size, lanes),
                (channels // lanes, channels, 3, 3, lanes), 1, 1, 1, "float32")
        task = autotune.create_task("conv2d_NCHWc.x86", args, target=target)
        fallback = autotune.FallbackConfig()
        with warnings.catch_warnings(), tl.Target(target):
            warnings.simplefilter("ignore")
            task.template.run(fallback, task.args)
        assert (fallback["tile_ic"].size[-1] == 1) == expected_one, (channels, target)


CASES = [
    # C, H, W, K, stride, padding: kernels past L2 on the host (and on AVX2); C not a multiple
    # of the lanes -> NCHW data, K not -> one lane per output block
    (181, 7, 7, 176, 1, 1),       # primes in, 11 blocks of 16 out, a 7x7 plane
    (256, 15, 15, 144, 2, 1),     # stride 2 onto 8x8, 9 blocks of 16
    (120, 5, 11, 272, 1, 1),      # a 5x11 plane, 17 blocks of 16
    (61, 9, 9, 136, 1, 0),        # past Haswell's L2 only, no padding
    (256, 1, 1, 512, 1, 1),       # a 1x1 image (one output point, mostly padding)
    (37, 3, 3, 1000, 1, 1),       # a 3x3 plane, K = 1000 (125 blocks of 8, one lane on AVX-512)
]


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", [None, HASWELL])
@pytest.mark.parametrize("case", CASES)
def test_streamed_fallback_matches_numpy(case, target, rng):
    c, h, w, k, stride, padding = case
    assert_conv2d_NCHWc_fallback_matches(rng, target, c, h, w, k, 3, 3, stride, padding)


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("target", [None, HASWELL])
def test_streamed_conv2d_nchw_matches_numpy(target, rng):
    """conv2d_nchw packs its kernel per block of output channels inside the parallel loop; with
    one channel per step as well (197 -> 160 channels, 3x3 on 6x6)."""

    def run():
        arrays = [uniform(rng, 1, 197, 6, 6), uniform(rng, 160, 197, 3, 3)]
        data = tl.placeholder(arrays[0].shape, name="data")
        kernel = tl.placeholder(arrays[1].shape, name="kernel")
        out = nn.conv2d_nchw(data, kernel, 1, 1, 1)
        got = run_op(out, [data, kernel], arrays, x86.schedule_conv2d_nchw)
        return got, ref.conv2d_nchw_python(*arrays, 1, 1, 1)

    got, expected = in_target(target, run)
    assert_close(got, expected, 197 * 9)
