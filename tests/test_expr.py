"""Expressions and dtypes: promotion (numpy's rules, weak Python scalars), constants, printing."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.dtype import as_dtype, promote
from tensorlang.expr import Binary, Cast, Const

ALL = ["float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64", "bool"]


@pytest.mark.parametrize("a", ALL)
@pytest.mark.parametrize("b", ALL)
def test_promotion_matches_numpy_but_a_float_keeps_its_dtype_next_to_an_integer(a, b):
    """numpy's table, except TVM's rule for a float mixed with an integer or bool (dtype.py)."""
    float_side = [t for t in (a, b) if t.startswith("float")]
    expected = float_side[0] if len(float_side) == 1 else np.promote_types(a, b).name
    assert str(promote(as_dtype(a), as_dtype(b))) == expected


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "float16", "uint8"])
def test_python_scalars_are_weak(dtype):
    x = tl.placeholder((1,), dtype, name="x")[0]
    assert (x * 2).dtype == as_dtype(dtype)
    assert (2 + x).dtype == as_dtype(dtype)


def test_int_and_float_mix_is_promoted_not_truncated():
    i = tl.placeholder((1,), "int32", name="i")[0]
    assert str((i + 0.5).dtype) == "float64"
    f = tl.placeholder((1,), "float32", name="f")[0]
    assert str((i + f).dtype) == "float32"  # the float's dtype, never float64 (TVM's rule)
    assert str((i / 2).dtype) == "float64"  # true division, as numpy


def test_casts_are_explicit_nodes():
    i = tl.placeholder((1,), "int8", name="i")[0]
    f = tl.placeholder((1,), "float32", name="f")[0]
    e = i + f
    assert isinstance(e, Binary) and isinstance(e.a, Cast) and str(e.a.dtype) == "float32"
    assert str(f.astype("int16").dtype) == "int16"
    assert str(tl.cast(i, "float64").dtype) == "float64"


def test_const():
    assert str(tl.const(3).dtype) == "int32"
    assert str(tl.const(2**40).dtype) == "int64"
    assert str(tl.const(1.5).dtype) == "float64"
    assert str(tl.const(True).dtype) == "bool"
    assert tl.const(3, "float32").value == 3.0
    with pytest.raises(ValueError, match="does not fit"):
        tl.const(300, "int8")


def test_comparisons_and_logic_give_bool():
    x = tl.var("x")
    cond = (x < 3) & (x >= 0) | ~(x == 5)
    assert str(cond.dtype) == "bool"
    assert str(tl.if_then_else(x > 1, 1.0, 2.0).dtype) == "float64"


def test_select_requires_bool():
    x = tl.var("x")
    with pytest.raises(TypeError, match="bool"):
        tl.if_then_else(x, 1, 2)


def test_printing_is_python_like():
    A = tl.placeholder((4, 4), "float32", name="A")
    k = tl.reduce_axis((0, 4), name="k")
    C = tl.compute((4,), lambda i: tl.sum(A[i, k] * 2.0, axis=k), name="C")
    assert str(C.op.body[0]) == "sum(A[i, k] * 2.0, axis=[k in range(4)])"
    x, y = tl.var("x"), tl.var("y")
    assert str((x + y) * (x - 1) // 2) == "(x + y) * (x - 1) // 2"
    assert str(tl.maximum(x, y) % 3 < y) == "max(x, y) % 3 < y"


def test_tensor_attributes():
    n = tl.var("n")
    A = tl.placeholder((n, 3), "int16", name="A")
    assert A.ndim == 2 and A.dtype == "int16" and A.name == "A"
    assert isinstance(A.op, tl.PlaceholderOp)
    assert str(A.shape[0]) == "n" and isinstance(A.shape[1], Const)


def test_schedule_steps_are_printed():
    A = tl.placeholder((8, 8), "float32", name="A")
    B = tl.compute((8, 8), lambda i, j: A[i, j], name="B")
    s = tl.create_schedule(B)
    xo, xi = s[B].split(B.op.axis[0], factor=2)
    s[B].vectorize(B.op.axis[1])
    text = str(s[B])
    assert "split(i, factor=2)" in text and "vectorize(j)" in text
    assert "i.outer, i.inner, j[vectorize]" in text
