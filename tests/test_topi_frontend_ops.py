"""The topi ops the model importers need (reductions, elementwise math, slicing, adaptive
pooling, the transposed convolution) against their numpy references on awkward shapes, with
their default x86 schedules, and their argument checking."""

from __future__ import annotations

import numpy as np
import pytest
from topi_check import assert_close, run_op, shape_of, uniform

import tensorlang as tl
import topi
from topi import nn, x86
from topi import testing as ref

REDUCE_CASES = [
    ((7,), None, False), ((3, 17), 1, False), ((3, 17), 0, True), ((2, 5, 19), (0, 2), False),
    ((2, 5, 19), (-1,), True), ((4, 1, 3), None, True), ((5, 3), (), False),
]


@pytest.mark.parametrize("shape, axis, keepdims", REDUCE_CASES)
@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
def test_reductions(op, shape, axis, keepdims, rng):
    x = tl.placeholder(shape, name="x")
    out = getattr(topi, op)(x, axis, keepdims)
    a = uniform(rng, *shape)
    expected = getattr(ref, f"{op}_python")(a, axis, keepdims)
    assert shape_of(out) == expected.shape
    assert_close(run_op(out, [x], [a], x86.schedule_sum), expected, a.size)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_reductions_other_dtypes(dtype, rng):
    x = tl.placeholder((3, 11), dtype, name="x")
    a = (rng.integers(-50, 50, (3, 11)) if dtype == "int32" else rng.random((3, 11))).astype(dtype)
    for op in ("sum", "max", "min"):
        got = run_op(getattr(topi, op)(x, 1), [x], [a], x86.schedule_reduce)
        np.testing.assert_allclose(got, getattr(ref, f"{op}_python")(a, 1), rtol=1e-12)


def test_reduction_errors():
    x = tl.placeholder((3, 4), name="x")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        topi.sum(x, 2)
    with pytest.raises(ValueError, match="twice"):
        topi.max(x, (1, -1))
    with pytest.raises(TypeError, match="keepdims"):
        topi.min(x, 1, keepdims=1)
    with pytest.raises(TypeError, match="float"):
        topi.mean(tl.placeholder((3,), "int32"))


UNARY = ["sqrt", "exp", "log", "tanh", "sigmoid", "erf", "abs", "negative", "reciprocal",
         "hard_swish", "gelu_tanh"]


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_math(op, dtype, rng):
    a = (uniform(rng, 3, 37) * 4).astype(dtype)
    if op in ("sqrt", "log", "reciprocal"):
        a = np.abs(a) + 0.1
    x = tl.placeholder(a.shape, dtype, name="x")
    got = run_op(getattr(nn, op)(x), [x], [a], x86.schedule_math)
    np.testing.assert_allclose(got, getattr(ref, f"{op}_python")(a), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("bounds", [(-0.5, 0.25), (None, 0.3), (0.0, None)])
def test_clip_and_hard_sigmoid(bounds, rng):
    a = uniform(rng, 5, 23) * 3
    x = tl.placeholder(a.shape, name="x")
    got = run_op(nn.clip(x, *bounds), [x], [a], x86.schedule_clip)
    np.testing.assert_array_equal(got, ref.clip_python(a, *bounds))
    got = run_op(nn.hard_sigmoid(x, 0.3, 0.4), [x], [a], x86.schedule_math)
    assert_close(got, ref.hard_sigmoid_python(a, 0.3, 0.4))


@pytest.mark.parametrize("op", ["power", "maximum", "minimum"])
def test_binary_math(op, rng):
    av, bv = np.abs(uniform(rng, 2, 1, 7)) + 0.1, uniform(rng, 3, 1) * 2
    a, b = tl.placeholder(av.shape, name="a"), tl.placeholder(bv.shape, name="b")
    got = run_op(getattr(nn, op)(a, b), [a, b], [av, bv], x86.schedule_power)
    assert_close(got, getattr(ref, f"{op}_python")(av, bv))


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("int32", "float32"),
                                      ("float32", "float64"), ("int64", "int32")])
def test_cast(src, dst, rng):
    a = (uniform(rng, 4, 19) * 20).astype(src)
    x = tl.placeholder(a.shape, src, name="x")
    got = run_op(nn.cast(x, dst), [x], [a], x86.schedule_cast)
    np.testing.assert_array_equal(got, ref.cast_python(a, dst))
    with pytest.raises(TypeError, match="cast: unknown dtype"):
        nn.cast(x, "complex64")


SLICES = [
    ((7, 9), [1, -8], [6, 100], [2, 3], None),
    ((7, 9), [-1], [-100], [-2], [1]),
    ((3, 5, 11), [0, 2], [2, 5], None, [0, 2]),
    ((1, 13), [0], [1], [1], [0]),
]


@pytest.mark.parametrize("shape, begin, end, strides, axes", SLICES)
def test_strided_slice(shape, begin, end, strides, axes, rng):
    a = uniform(rng, *shape)
    x = tl.placeholder(shape, name="x")
    got = run_op(nn.strided_slice(x, begin, end, strides, axes), [x], [a],
                 x86.schedule_strided_slice)
    np.testing.assert_array_equal(got, ref.strided_slice_python(a, begin, end, strides, axes))


def test_strided_slice_errors():
    x = tl.placeholder((4, 5), name="x")
    with pytest.raises(ValueError, match="empty"):
        nn.strided_slice(x, [3], [1])
    with pytest.raises(ValueError, match="stride of axis 0 is 0"):
        nn.strided_slice(x, [0], [2], [0])
    with pytest.raises(ValueError, match="same length"):
        nn.strided_slice(x, [0, 1], [2])


@pytest.mark.parametrize("xshape, ishape, axis, idx_dtype", [
    ((7, 5), (3,), 0, "int64"), ((2, 11, 3), (2, 4), 1, "int32"), ((5,), (), 0, "int64"),
    ((3, 6), (1,), -1, "int32"),
])
def test_take(xshape, ishape, axis, idx_dtype, rng):
    a = uniform(rng, *xshape)
    n = xshape[axis]
    idx = rng.integers(-n, n, size=ishape).astype(idx_dtype)
    x, i = tl.placeholder(xshape, name="x"), tl.placeholder(ishape, idx_dtype, name="i")
    got = run_op(nn.take(x, i, axis), [x, i], [a, idx], x86.schedule_take)
    np.testing.assert_array_equal(got, ref.take_python(a, idx, axis))


def test_take_clamps_out_of_range_indices(rng):
    a = uniform(rng, 4, 3)
    x, i = tl.placeholder((4, 3), name="x"), tl.placeholder((3,), "int64", name="i")
    got = run_op(nn.take(x, i, 0), [x, i], [a, np.array([9, -9, 2])], x86.schedule_take)
    np.testing.assert_array_equal(got, a[[3, 0, 2]])
    with pytest.raises(TypeError, match="integers"):
        nn.take(x, tl.placeholder((2,), name="f"))


@pytest.mark.parametrize("sections, axis", [(3, 1), ([2, 5], 1), ([1], 0)])
def test_split(sections, axis, rng):
    a = uniform(rng, 3, 9, 2)
    x = tl.placeholder(a.shape, name="x")
    pieces = nn.split(x, sections, axis)
    expected = ref.split_python(a, sections, axis)
    assert len(pieces) == len(expected)
    for piece, want in zip(pieces, expected):
        np.testing.assert_array_equal(run_op(piece, [x], [a], x86.schedule_split), want)
    with pytest.raises(ValueError, match="equal sections"):
        nn.split(x, 4, 1)
    with pytest.raises(ValueError, match="increase"):
        nn.split(x, [5, 2], 1)


@pytest.mark.parametrize("shape, size", [((1, 3, 7, 7), 1), ((2, 5, 11, 9), (3, 4)),
                                         ((1, 2, 5, 6), (5, 6)), ((1, 3, 4, 3), (7, 5))])
@pytest.mark.parametrize("pool_type", ["avg", "max"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_adaptive_pool2d(shape, size, pool_type, layout, rng):
    if layout == "NHWC":
        shape = (shape[0], shape[2], shape[3], shape[1])
    a = uniform(rng, *shape)
    x = tl.placeholder(shape, name="x")
    out = nn.adaptive_pool2d(x, size, pool_type, layout)
    got = run_op(out, [x], [a], x86.schedule_adaptive_pool)
    assert_close(got, ref.adaptive_pool2d_python(a, size, pool_type, layout))


TRANSPOSE_CASES = [
    # N, C, H, W, K/groups, R, S, stride, padding, output_padding, dilation, groups
    (1, 3, 5, 5, 4, 3, 3, 1, 0, 0, 1, 1),
    (2, 4, 7, 6, 3, 3, 2, 2, 1, 1, 1, 2),
    (1, 5, 4, 3, 7, 4, 4, (2, 3), (1, 0, 2, 1), (1, 2), 1, 1),
    (1, 6, 3, 5, 1, 3, 3, 2, 1, 0, 2, 6),
    (1, 2, 6, 6, 3, 1, 1, 3, 0, 2, 1, 1),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv2d_transpose_nchw(case, rng):
    n, c, h, w, kg, r, s, stride, padding, out_pad, dilation, groups = case
    arrays = [uniform(rng, n, c, h, w), uniform(rng, c, kg, r, s), uniform(rng, kg * groups)]
    data, kernel = tl.placeholder((n, c, h, w), name="data"), tl.placeholder((c, kg, r, s),
                                                                                name="kernel")
    bias = tl.placeholder((kg * groups,), name="bias")
    conv = nn.conv2d_transpose_nchw(data, kernel, stride, padding, out_pad, dilation, groups)
    out = nn.relu(nn.bias_add(conv, bias))
    expected = ref.conv2d_transpose_nchw_python(arrays[0], arrays[1], stride, padding, out_pad,
                                                dilation, groups)
    expected = ref.relu_python(ref.bias_add_python(expected, arrays[2]))
    got = run_op(out, [data, kernel, bias], arrays, x86.schedule_conv2d_transpose_nchw)
    assert_close(got, expected, c * r * s)


def test_conv2d_transpose_matches_torch(rng):
    torch = pytest.importorskip("torch")
    a, k = uniform(rng, 1, 4, 5, 6), uniform(rng, 4, 3, 3, 3)
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(a), torch.from_numpy(k),
                                                stride=2, padding=1, output_padding=1,
                                                groups=2, dilation=1).numpy()
    got = ref.conv2d_transpose_nchw_python(a, k, 2, 1, 1, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv2d_transpose_errors():
    data = tl.placeholder((1, 4, 5, 5), name="data")
    with pytest.raises(ValueError, match="does not match"):
        nn.conv2d_transpose_nchw(data, tl.placeholder((3, 2, 3, 3), name="k"))
    with pytest.raises(ValueError, match="output_padding"):
        nn.conv2d_transpose_nchw(data, tl.placeholder((4, 2, 3, 3), name="k"), 2, 0, 2)
    with pytest.raises(ValueError, match="groups"):
        nn.conv2d_transpose_nchw(data, tl.placeholder((4, 2, 3, 3), name="k"), groups=0)
