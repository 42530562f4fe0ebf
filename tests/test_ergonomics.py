"""TVM's ergonomics: shapes as Python ints, get_const_tuple, float-keeping dtype promotion, and
multi-output reductions (comm_reducer over tuples) with topi.argmax / topi.argmin."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from conftest import random_array

import tensorlang as tl
import topi
from topi import testing as ref
from topi import x86


def test_known_shape_entries_and_integer_constants_are_python_ints():
    n = tl.var("n")
    A = tl.placeholder((n, 4, 7), name="A")
    assert int(A.shape[1]) == 4 and operator.index(A.shape[2]) == 7
    assert list(range(A.shape[1])) == [0, 1, 2, 3]
    assert [10, 11, 12, 13, 14][A.shape[1]] == 14
    assert int(tl.const(3, "int64")) == 3 and float(tl.const(1.5, "float32")) == 1.5
    with pytest.raises(TypeError, match="n has no value until the kernel runs"):
        int(A.shape[0])
    with pytest.raises(TypeError, match="not an integer"):
        operator.index(tl.const(1.5, "float32"))
    with pytest.raises(TypeError, match="truth value"):  # DESIGN.md: bool() still raises
        bool(A.shape[1])


def test_get_const_tuple():
    n = tl.var("n")
    A = tl.placeholder((n, 4, 7), name="A")
    shape = tl.get_const_tuple(A.shape)
    assert shape[0] is A.shape[0] and shape[1:] == (4, 7)
    assert all(type(d) is int for d in shape[1:])
    assert tl.get_const_tuple((2, tl.const(3) * 5)) == (2, 15)
    with pytest.raises(TypeError, match="entry 0"):
        tl.get_const_tuple((1.5,))


@pytest.mark.parametrize("float_t", ["float32", "float64"])
@pytest.mark.parametrize("int_t", ["int8", "int32", "int64", "uint8"])
def test_a_float_joined_by_an_integer_keeps_its_dtype(float_t, int_t, rng):
    A = tl.placeholder((13,), float_t, name="A")
    B = tl.placeholder((13,), int_t, name="B")
    C = tl.compute((13,), lambda i: A[i] * i + B[i] * A[i], name="C")  # float*index, int*float
    assert C.dtype == float_t
    f = tl.build(tl.create_schedule(C.op), [A, B, C])
    a, b = random_array((13,), float_t, rng), random_array((13,), int_t, rng)
    out = np.zeros(13, float_t)
    f(a, b, out)
    af = a.astype(float_t)
    expected = af * np.arange(13).astype(float_t) + b.astype(float_t) * af
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_promotion_table():
    def dtype_of(a: str, b: str) -> str:
        x, y = tl.placeholder((1,), a, name="x"), tl.placeholder((1,), b, name="y")
        return str((x[0] + y[0]).dtype)

    assert dtype_of("int32", "float32") == "float32"
    assert dtype_of("int64", "float16") == "float16"
    assert dtype_of("float32", "float64") == "float64"
    assert dtype_of("int32", "int64") == "int64"
    assert dtype_of("uint8", "int8") == "int16"
    assert dtype_of("bool", "float32") == "float32"
    i = tl.var("i")
    assert str((i + 0.5).dtype) == "float64"  # a Python float next to an int, as numpy
    assert str((i / 2).dtype) == "float64"  # true division of integers


def argmax_pair():
    def fcombine(x, y):
        take_x = (x[1] > y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
        return tl.select(take_x, x[0], y[0]), tl.select(take_x, x[1], y[1])

    return tl.comm_reducer(
        fcombine, lambda ti, tv: (tl.const(-1, ti), tl.const(-np.inf, tv)), name="argmax")


def test_comm_reducer_over_tuples_gives_one_output_per_element(rng):
    argmax = argmax_pair()
    A = tl.placeholder((6, 11), name="A")
    k = tl.reduce_axis((0, 11), name="k")
    index, value = tl.compute((6,), lambda i: argmax((k, A[i, k]), axis=k), name="T")
    assert (index.dtype, value.dtype) == ("int32", "float32")
    s = tl.create_schedule(index.op)
    ko, ki = s[index].split(k, factor=4)  # a non-dividing split of the reduction
    s[index].reorder(ki, ko)  # and out of order: ties are still broken by index
    f = tl.build(s, [A, index, value])
    a = rng.integers(0, 3, (6, 11)).astype("float32")  # many ties
    got_index, got_value = np.zeros(6, "int32"), np.zeros(6, "float32")
    f(a, got_index, got_value)
    np.testing.assert_array_equal(got_index, a.argmax(axis=1))
    np.testing.assert_array_equal(got_value, a.max(axis=1))


def test_comm_reducer_checks_tuple_lengths():
    bad = tl.comm_reducer(lambda x, y: x[0] + y[0], lambda ti, tv: (0, 0))
    A = tl.placeholder((4,), name="A")
    k = tl.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="fcombine must return a tuple of 2 values"):
        bad((k, A[k]), axis=k)


SHAPES_AXES = [((1,), 0), ((7,), None), ((5, 13), 1), ((5, 13), 0), ((5, 13), -1),
               ((3, 1, 17), 2), ((4, 6, 5), 1), ((2, 3, 4), None)]


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8"])
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_topi_argmax_argmin_match_numpy(op, dtype, shape, axis, keepdims, rng):
    data = tl.placeholder(shape, dtype, name="data")
    out = getattr(topi, op)(data, axis=axis, keepdims=keepdims)
    f = tl.build(getattr(x86, f"schedule_{op}")(out), [data, out])
    a = rng.integers(-3, 3, shape).astype(dtype)  # small range: ties everywhere
    expected = getattr(ref, f"{op}_python")(a, axis, keepdims)
    got = np.zeros(tl.get_const_tuple(out.shape), "int32")
    f(a, got)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_take_the_first_nan_and_handle_infinities(op):
    data = tl.placeholder((4, 5), "float32", name="data")
    out = getattr(topi, op)(data, axis=1)
    f = tl.build(x86.schedule_argreduce(out), [data, out])
    a = np.array([[1, np.nan, 3, np.nan, 0], [-np.inf] * 5, [np.inf] * 5,
                  [2, 2, -np.inf, np.inf, 2]], "float32")
    got = np.zeros(4, "int32")
    f(a, got)
    np.testing.assert_array_equal(got, getattr(np, op)(a, axis=1))
