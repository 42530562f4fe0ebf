"""The NCHW[x]c layout ops against numpy on awkward shapes (channels 1, 3, 24, primes; images of
1, 7 and 13 pixels; strides, padding, dilation), with their default x86 schedules on the host
target and on AVX2, alone and with a fused elementwise tail; and argument checking."""

from __future__ import annotations

import numpy as np
import pytest
from topi_check import assert_close, in_target, run_op, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref

# Untuned templates warn once per workload; these tests run them untuned on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TARGETS = [None, "llvm -mcpu=haswell"]


CONV_CASES = [
    # N, C, bi, H, W, K, bo, R, S, stride, padding, dilation (bi = 0: NCHW data)
    (1, 3, 1, 13, 13, 16, 8, 3, 3, 2, 1, 1),
    (1, 24, 8, 7, 7, 24, 8, 1, 1, 1, 0, 1),
    (2, 16, 16, 1, 1, 32, 16, 1, 1, 1, 0, 1),
    (1, 8, 4, 13, 11, 4, 4, 3, 3, 1, "SAME", 1),
    (1, 7, 7, 9, 9, 2, 2, 3, 3, (2, 1), (1, 0, 2, 1), (1, 2)),
    (1, 1, 1, 7, 7, 3, 1, 3, 3, 1, 1, 1),
    (1, 3, 0, 13, 13, 16, 16, 3, 3, 2, 1, 1),  # bi = 0: an NCHW input
    (2, 5, 0, 7, 9, 8, 8, 1, 1, 1, 0, 1),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_NCHWc(case, target, rng):
    n, c, bi, h, w, k, bo, r, s, stride, padding, dilation = case
    shape = (n, c // bi, h, w, bi) if bi else (n, c, h, w)
    data = tl.placeholder(shape, name="data")
    kernel = tl.placeholder((k // bo, c, r, s, bo), name="kernel")
    arrays = [uniform(rng, *shape), uniform(rng, k // bo, c, r, s, bo)]

    def run():
        out = nn.conv2d_NCHWc(data, kernel, stride, padding, dilation)
        return run_op(out, [data, kernel], arrays, x86.schedule_conv2d_NCHWc)

    expected = ref.conv2d_NCHWc_python(*arrays, stride, padding, dilation)
    assert_close(in_target(target, run), expected, c * r * s)


def test_conv2d_NCHWc_with_fused_tail(rng):
    """bias (laid out as the output), residual add and clip, computed in the output stage."""
    data = tl.placeholder((1, 3, 7, 7, 8), name="data")
    kernel = tl.placeholder((2, 24, 3, 3, 8), name="kernel")
    bias = tl.placeholder((1, 2, 1, 1, 8), name="bias")
    residual = tl.placeholder((1, 2, 7, 7, 8), name="residual")
    out = nn.clip(nn.add(nn.add(nn.conv2d_NCHWc(data, kernel, 1, 1), bias), residual), 0.0, 6.0)
    arrays = [uniform(rng, 1, 3, 7, 7, 8), uniform(rng, 2, 24, 3, 3, 8), uniform(rng, 1, 2, 1, 1, 8),
              uniform(rng, 1, 2, 7, 7, 8)]
    got = run_op(out, [data, kernel, bias, residual], arrays, x86.schedule_conv2d_NCHWc)
    conv = ref.conv2d_NCHWc_python(arrays[0], arrays[1], 1, 1)
    assert_close(got, np.clip(conv + arrays[2] + arrays[3], 0.0, 6.0), 24 * 9)


DEPTHWISE_CASES = [
    # N, C, b, H, W, R, S, stride, padding, dilation
    (1, 24, 8, 13, 13, 3, 3, 1, 1, 1),
    (1, 32, 16, 7, 7, 3, 3, 2, 1, 1),
    (2, 3, 1, 13, 7, 3, 3, 2, (0, 1), 1),
    (1, 16, 16, 1, 1, 3, 3, 1, 1, 1),
    (1, 12, 4, 14, 14, 5, 3, (1, 2), "SAME", (2, 1)),
    (1, 48, 16, 29, 29, 3, 3, 2, (1, 1, 0, 0), 1),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", DEPTHWISE_CASES)
def test_depthwise_conv2d_NCHWc(case, target, rng):
    n, c, b, h, w, r, s, stride, padding, dilation = case
    data = tl.placeholder((n, c // b, h, w, b), name="data")
    kernel = tl.placeholder((c // b, r, s, b), name="kernel")
    arrays = [uniform(rng, n, c // b, h, w, b), uniform(rng, c // b, r, s, b)]

    def run():
        out = nn.relu(nn.depthwise_conv2d_NCHWc(data, kernel, stride, padding, dilation))
        return run_op(out, [data, kernel], arrays, x86.schedule_depthwise_conv2d_NCHWc)

    expected = ref.depthwise_conv2d_NCHWc_python(*arrays, stride, padding, dilation)
    assert_close(in_target(target, run), np.maximum(expected, 0), r * s)


@pytest.mark.parametrize("src,dst,shape", [
    ("NCHW", "NCHW8c", (2, 24, 7, 5)),
    ("NCHW", "NCHW1c", (1, 3, 13, 13)),
    ("NCHW16c", "NCHW", (1, 3, 1, 7, 16)),
    ("NCHW16c", "NCHW8c", (1, 3, 7, 1, 16)),
    ("NCHW4c", "NCHW8c", (1, 6, 3, 3, 4)),
    ("NCHW3c", "NCHW3c", (1, 1, 2, 2, 3)),
])
@pytest.mark.parametrize("target", TARGETS)
def test_layout_transform(src, dst, shape, target, rng):
    data = tl.placeholder(shape, name="data")
    array = uniform(rng, *shape)

    def run():
        out = nn.layout_transform(data, src, dst)
        return run_op(out, [data], [array], x86.schedule_injective)

    got = in_target(target, run)
    np.testing.assert_array_equal(got, ref.layout_transform_python(array, src, dst))
    back = ref.layout_transform_python(got, dst, src)
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pooling_on_NCHWc(pool, target, rng):
    data = tl.placeholder((1, 3, 13, 7, 8), name="data")
    array = uniform(rng, 1, 3, 13, 7, 8)

    def run():
        out = nn.pool2d(data, 3, 2, 1, 1, pool, layout="NCHW8c")
        return run_op(out, [data], [array], x86.schedule_pool)

    expected = ref.pool2d_python(array, 3, 2, 1, 1, pool, layout="NCHW8c")
    assert_close(in_target(target, run), expected, 9)
    plain = ref.pool2d_python(ref.layout_transform_python(array, "NCHW8c", "NCHW"), 3, 2, 1, 1,
                              pool)
    assert_close(expected, ref.layout_transform_python(plain, "NCHW", "NCHW8c"))


def test_global_avg_pool_on_NCHWc(rng):
    data = tl.placeholder((2, 2, 7, 5, 16), name="data")
    array = uniform(rng, 2, 2, 7, 5, 16)
    out = nn.global_avg_pool2d(data, layout="NCHW16c")
    got = run_op(out, [data], [array], x86.schedule_global_pool)
    assert got.shape == (2, 2, 1, 1, 16)
    assert_close(got, array.mean(axis=(2, 3), keepdims=True), 35)


def test_channel_block():
    assert [nn.channel_block(c, 16) for c in (1, 3, 24, 32, 96, 144, 960, 1000)] == \
        [1, 1, 8, 16, 16, 16, 16, 8]
    assert nn.channel_block(24, 4) == 4


def test_bad_arguments():
    data = tl.placeholder((1, 3, 7, 7, 8), name="data")
    with pytest.raises(ValueError, match="kernel has 16 input channels but data has 24"):
        nn.conv2d_NCHWc(data, tl.placeholder((2, 16, 3, 3, 8)), 1, 1)
    with pytest.raises(ValueError, match="conv2d_NCHWc: data must have 4 .NCHW. or 5"):
        nn.conv2d_NCHWc(tl.placeholder((1, 24, 7)), tl.placeholder((2, 24, 3, 3, 8)), 1, 1)
    with pytest.raises(ValueError, match="does not match data of 3 blocks of 8"):
        nn.depthwise_conv2d_NCHWc(data, tl.placeholder((3, 3, 3, 4)), 1, 1)
    with pytest.raises(ValueError, match="layout must be 'NCHW' or 'NCHW<b>c'"):
        nn.layout_transform(data, "NHWC", "NCHW")
    with pytest.raises(ValueError, match="divisible by 16"):
        nn.layout_transform(data, "NCHW8c", "NCHW16c")
    with pytest.raises(ValueError, match="is not NCHW4c"):
        nn.layout_transform(data, "NCHW4c", "NCHW")
    with pytest.raises(ValueError, match="layout must be one of"):
        nn.max_pool2d(data, 2, 2, 0, layout="NCHWc")
