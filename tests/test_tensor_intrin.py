"""Tensor intrinsics, extern stages, LLVM intrinsic calls and bfloat16 in the core."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest

import tensorlang as tl


def _pmaddwd_intrin() -> tl.TensorIntrin:
    """out[i] += a[2i] * b[2i] + a[2i+1] * b[2i+1] over 4 int32 lanes: SSE2's pmaddwd, which
    every x86-64 CPU has."""
    a = tl.placeholder((4, 2), "int16", name="a")
    b = tl.placeholder((4, 2), "int16", name="b")
    k = tl.reduce_axis((0, 2), name="k")
    c = tl.compute((4,), lambda i: tl.sum(a[i, k].astype("int32") * b[i, k].astype("int32"),
                                          axis=k), name="pmaddwd")

    def lower(ins, outs):
        acc = outs[0].vload([0], "int32x4")
        prod = tl.call_llvm_intrin("int32x4", "llvm.x86.sse2.pmadd.wd",
                                   ins[0].vload([0, 0], "int16x8"), ins[1].vload([0, 0], "int16x8"))
        return outs[0].vstore([0], acc + prod)

    return tl.decl_tensor_intrin(c.op, lower)


def _pair_dot(n: int, m: int, b_dtype: str = "int16", transposed: bool = False):
    x = tl.placeholder((n, m, 2), "int16", name="x")
    y = tl.placeholder((n, m, 2), b_dtype, name="y")
    k = tl.reduce_axis((0, 2), name="k")

    def read_y(i, j):
        return y[i, j, 1 - k] if transposed else y[i, j, k]

    out = tl.compute((n, m), lambda i, j: tl.sum(
        x[i, j, k].astype("int32") * read_y(i, j).astype("int32"), axis=k), name="out")
    return x, y, out


def test_tensorize_matches_and_runs():
    x, y, out = _pair_dot(3, 8)
    s = tl.create_schedule(out.op)
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=4)
    s[out].tensorize(ji, _pmaddwd_intrin())
    assert "tensorize" in str(s[out])
    text = str(tl.lower(s, [x, y, out]))
    assert "llvm.x86.sse2.pmadd.wd" in text
    f = tl.build(s, [x, y, out])
    rng = np.random.default_rng(0)
    a = rng.integers(-30000, 30000, (3, 8, 2)).astype("int16")
    b = rng.integers(-30000, 30000, (3, 8, 2)).astype("int16")
    c = np.zeros((3, 8), "int32")
    f(a, b, c)
    ref = (a.astype(np.int64) * b.astype(np.int64)).sum(-1)
    np.testing.assert_array_equal(c, ref.astype(np.int32))  # wraps like pmaddwd at the extremes
    assert "pmaddwd" in f.get_source("asm")


@pytest.mark.parametrize("case, message", [
    ("dtype", "int8"),
    ("index", "moves by"),
    ("extent", "extent"),
    ("loops", "reduction loops"),
])
def test_tensorize_mismatch_names_the_difference(case, message):
    x, y, out = _pair_dot(3, 8, b_dtype="int8" if case == "dtype" else "int16",
                          transposed=case == "index")
    s = tl.create_schedule(out.op)
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=8 if case == "extent" else 4)
    at = jo if case == "loops" else ji
    with pytest.raises(tl.ScheduleError, match=message):
        s[out].tensorize(at, _pmaddwd_intrin())


_AFFINE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float),
                           ctypes.c_int64)


@_AFFINE
def _affine(src, dst, n):  # a C-callable function: dst = 2 * src + 1
    for i in range(n):
        dst[i] = 2 * src[i] + 1


def test_extern_stage_calls_a_c_function():
    llvm.add_symbol("tl_test_affine", ctypes.cast(_affine, ctypes.c_void_p).value)
    n = 10
    a = tl.placeholder((n,), "float32", name="a")
    b = tl.extern((n,), [a], lambda ins, outs: tl.call_extern(
        "void", "tl_test_affine", ins[0], outs[0], tl.const(n, "int64")), name="b")
    c = tl.compute((n,), lambda i: b[i] * 3, name="c")
    s = tl.create_schedule(c.op)
    assert 'call("tl_test_affine"' in str(tl.lower(s, [a, c]))
    f = tl.build(s, [a, c])
    x = np.arange(n, dtype="float32")
    out = np.zeros(n, "float32")
    f(x, out)
    np.testing.assert_array_equal(out, (2 * x + 1) * 3)


def test_extern_stage_calls_libc():
    n = 16
    a = tl.placeholder((n,), "int32", name="a")
    b = tl.extern((n,), [a], lambda ins, outs: tl.call_extern(
        "void", "memcpy", outs[0], ins[0], tl.const(4 * n, "int64")), name="b")
    f = tl.build(tl.create_schedule(b.op), [a, b])
    x = np.arange(n, dtype="int32")
    y = np.zeros(n, "int32")
    f(x, y)
    np.testing.assert_array_equal(x, y)


def test_call_llvm_intrin_in_a_compute():
    n = 8
    a = tl.placeholder((n,), "int32", name="a")
    b = tl.compute((n,), lambda i: tl.call_llvm_intrin("int32", "llvm.smax.i32", a[i], 3), name="b")
    f = tl.build(tl.create_schedule(b.op), [a, b])
    x = np.arange(n, dtype="int32") - 2
    y = np.zeros(n, "int32")
    f(x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 3))


def test_reinterpret_checks_sizes():
    a = tl.placeholder((4,), "uint8", name="a")
    with pytest.raises(ValueError, match="different sizes"):
        tl.reinterpret(a[0], "int32")


def test_bfloat16_dtype_round_trips_through_float32():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    n = 64
    a = tl.placeholder((n,), "float32", name="a")
    b = tl.compute((n,), lambda i: a[i].astype("bfloat16"), name="b")
    c = tl.compute((n,), lambda i: b[i].astype("float32") * 2, name="c")
    s = tl.create_schedule(c.op)
    f = tl.build(s, [a, b, c])
    x = np.random.default_rng(1).standard_normal(n).astype("float32")
    bb = np.zeros(n, ml_dtypes.bfloat16)
    cc = np.zeros(n, "float32")
    f(x, bb, cc)
    np.testing.assert_array_equal(bb, x.astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(cc, x.astype(ml_dtypes.bfloat16).astype("float32") * 2)
