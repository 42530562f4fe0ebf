"""The kernels transformers spend their time in, scheduled for speed: row-wise normalisations
(softmax, log_softmax, layer_norm, RMSNorm's mean) one row at a time with the statistics in
vector lanes, checked against numpy on awkward shapes and on the AVX2 target too."""

from __future__ import annotations

import numpy as np
import pytest
from topi_check import assert_close, run_op, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86.rows import schedule_rows

TARGETS = ["llvm", "llvm -mcpu=haswell"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 4, 13, 128), (3, 17), (2, 7, 37), (5, 1), (1, 16), (2, 9)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rows(shape, op, target, rng):
    x = tl.placeholder(shape, name="x")
    a = (uniform(rng, *shape) * 50).astype("float32")  # large values: needs the max shift
    with tl.Target(target):
        out = getattr(nn, op)(x, -1)
        assert_close(run_op(out, [x], [a], x86.schedule_softmax),
                     getattr(ref, f"{op}_python")(a, -1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,axis", [((1, 128, 256), -1), ((3, 19), -1), ((2, 3, 37), (1, 2)),
                                        ((1, 1, 5), -1)])
def test_layer_norm_rows(shape, axis, target, rng):
    axes = [axis] if isinstance(axis, int) else list(axis)
    norm_shape = tuple(shape[a] for a in axes)
    x = tl.placeholder(shape, name="x")
    gamma, beta = tl.placeholder(norm_shape, name="gamma"), tl.placeholder(norm_shape, name="beta")
    arrays = [uniform(rng, *shape) * 3 + 1, uniform(rng, *norm_shape), uniform(rng, *norm_shape)]
    with tl.Target(target):
        out = nn.layer_norm(x, gamma, beta, axis)
        assert_close(run_op(out, [x, gamma, beta], arrays, x86.schedule_layer_norm),
                     ref.layer_norm_python(*arrays, axis))


@pytest.mark.parametrize("shape", [(1, 29, 67), (2, 128, 256)])
def test_rms_norm_mean_rows(shape, rng):
    """RMSNorm's statistic as exported: mean(x * x, axis=-1, keepdims) + eps, then rsqrt."""
    x = tl.placeholder(shape, name="x")
    square = nn.multiply(x, x)
    mean = nn.mean(square, axis=-1, keepdims=True)
    out = tl.compute(mean.shape, lambda *i: tl.rsqrt(mean[i] + tl.const(1e-6, "float32")))
    a = uniform(rng, *shape)
    assert schedule_rows([out]) is not None
    expected = 1 / np.sqrt((a.astype("float64") ** 2).mean(-1, keepdims=True) + 1e-6)
    assert_close(run_op(out, [x], [a], x86.schedule_reduce), expected.astype("float32"))


def test_softmax_statistics_per_row():
    """Each row's max and sum are computed inside the row loop, one value at a time (under the
    fused parallel loop of (heads, row chunks) too), not as whole passes over the tensor."""
    x = tl.placeholder((1, 4, 128, 128), name="x")
    out = nn.softmax(x, -1)
    text = str(tl.lower(x86.schedule_softmax([out]), [x, out]))
    assert "softmax_maxelem = allocate((1, 1, 1,)" in text
    assert "softmax_expsum = allocate((1, 1, 1,)" in text
    assert "ramp(" in text and ", 128, 16)" not in text  # no reads strided by a row


def test_softmax_on_other_axis_keeps_the_generic_schedule(rng):
    """Not a trailing-axis reduction: no row schedule, and still right."""
    x = tl.placeholder((3, 19, 5), name="x")
    out = nn.softmax(x, 1)
    assert schedule_rows([out]) is None
    a = uniform(rng, 3, 19, 5) * 20
    assert_close(run_op(out, [x], [a], x86.schedule_softmax), ref.softmax_python(a, 1))
