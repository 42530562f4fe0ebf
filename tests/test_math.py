"""Math functions, operators and every dtype, compiled and compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array, tolerance

import tensorlang as tl

UNARY = {
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.5),
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 0.5),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": None,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
}


def _apply(name, x):
    fn = getattr(tl, name)
    if name == "log":
        return fn(tl.abs(x) + 0.5)
    if name == "sqrt":
        return fn(tl.abs(x))
    if name == "rsqrt":
        return fn(tl.abs(x) + 0.5)
    return fn(x)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_unary_math(name, dtype, vectorized, rng):
    n = 37
    A = tl.placeholder((n,), dtype, name="A")
    B = tl.compute((n,), lambda i: _apply(name, A[i] * 3), name="B")
    s = tl.create_schedule(B.op)
    if vectorized:
        xo, xi = s[B].split(B.op.axis[0], factor=16)
        s[B].vectorize(xi)
    f = tl.build(s, [A, B])
    a = random_array((n,), dtype, rng)
    b = np.zeros(n, dtype)
    f(a, b)
    if name == "erf":
        from math import erf

        expected = np.array([erf(v) for v in (a * 3).astype("float64")], dtype)
    else:
        expected = UNARY[name](a * np.array(3, dtype)).astype(dtype)
    np.testing.assert_allclose(b, expected, rtol=2e-6 if dtype == "float32" else 1e-12, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "uint8", "int16", "int8", "int64", "bool"])
def test_every_dtype_round_trips(dtype, rng):
    A = tl.placeholder((5, 3), dtype, name="A")
    B = tl.compute((5, 3), lambda i, j: A[i, j], name="B")
    f = tl.build(tl.create_schedule(B.op), [A, B])
    a = random_array((5, 3), dtype, rng)
    b = np.zeros((5, 3), dtype)
    f(a, b)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_operators(dtype, rng):
    n = 19
    A = tl.placeholder((n,), dtype, name="A")
    B = tl.placeholder((n,), dtype, name="B")
    ops = {
        "add": (lambda x, y: x + y, np.add),
        "sub": (lambda x, y: x - y, np.subtract),
        "mul": (lambda x, y: x * y, np.multiply),
        "floordiv": (lambda x, y: x // y, np.floor_divide),
        "mod": (lambda x, y: x % y, np.mod),
        "and": (lambda x, y: x & y, np.bitwise_and),
        "or": (lambda x, y: x | y, np.bitwise_or),
        "max": (tl.maximum, np.maximum),
        "min": (tl.minimum, np.minimum),
    }
    outs = [tl.compute((n,), lambda i, fn=fn: fn(A[i], B[i]), name=name) for name, (fn, _) in ops.items()]
    f = tl.build(tl.create_schedule([o.op for o in outs]), [A, B, *outs])
    a, b = random_array((n,), dtype, rng), random_array((n,), dtype, rng)
    b[b == 0] = 3
    results = [np.zeros(n, o.dtype) for o in outs]
    f(a, b, *results)
    for (name, (_, ref)), got in zip(ops.items(), results):
        np.testing.assert_array_equal(got, ref(a, b).astype(dtype), err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_power_and_compare_select(dtype, rng):
    n = 23
    A = tl.placeholder((n,), dtype, name="A")
    P = tl.compute((n,), lambda i: A[i] ** 2 + tl.if_then_else(A[i] > 0, A[i], -A[i]), name="P")
    f = tl.build(tl.create_schedule(P.op), [A, P])
    a = random_array((n,), dtype, rng)
    p = np.zeros(n, dtype)
    f(a, p)
    np.testing.assert_allclose(p, a**2 + np.abs(a), **tolerance(dtype))


def test_float_to_int_cast_truncates_like_numpy(rng):
    A = tl.placeholder((8,), "float32", name="A")
    B = tl.compute((8,), lambda i: (A[i] * 10).astype("int32"), name="B")
    f = tl.build(tl.create_schedule(B.op), [A, B])
    a = random_array((8,), "float32", rng)
    b = np.zeros(8, "int32")
    f(a, b)
    np.testing.assert_array_equal(b, (a * np.float32(10)).astype("int32"))


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_vector_exp_float32_within_an_ulp_and_ieee_at_the_edges(target):
    """float32 exp on vectors is inline arithmetic (vscalefps with AVX-512, exponent bits
    elsewhere): within an ulp over the whole range, subnormal results rounded once, 0, inf and
    NaN where IEEE has them; a length of 1001 leaves a vector tail."""
    edges = [0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, -87.3, -100.5, -103.9, -104.5,
             -1e4, 1e-30, 1, -1]
    x = np.concatenate([np.linspace(-105, 90, 1001 - len(edges)), edges]).astype("float32")
    A = tl.placeholder(x.shape, "float32", name="A")
    B = tl.compute(x.shape, lambda i: tl.exp(A[i]), name="B")
    with tl.Target(target):
        s = tl.create_schedule(B.op)
        lanes = tl.Target.current().vector_lanes("float32")
        _, inner = s[B].split(B.op.axis[0], factor=lanes)
        s[B].vectorize(inner)
        f = tl.build(s, [A, B])
    got = np.empty_like(x)
    f(x, got)
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
        want = exact.astype(np.float32)
    normal = np.isfinite(want) & (want >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[normal] - exact[normal]) / np.spacing(want[normal])
    assert ulps.max() <= 1.01, ulps.max()
    tiny = ~normal & ~np.isnan(x)  # subnormal, zero or infinite results
    np.testing.assert_allclose(got[tiny], want[tiny], rtol=0, atol=np.spacing(np.float32(0)))
    assert np.isnan(got[np.isnan(x)]).all()


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_vector_min_max_propagate_nan_from_either_side(op):
    a = np.array([1, np.nan, -2, 3, np.nan, -np.inf, 5, 0] * 3, "float32")
    b = np.array([2, 0, np.nan, -3, np.nan, 1, np.inf, -1] * 3, "float32")
    A = tl.placeholder(a.shape, "float32", name="A")
    B = tl.placeholder(b.shape, "float32", name="B")
    C = tl.compute(a.shape, lambda i: getattr(tl, op)(A[i], B[i]), name="C")
    s = tl.create_schedule(C.op)
    _, inner = s[C].split(C.op.axis[0], factor=16)
    s[C].vectorize(inner)
    f = tl.build(s, [A, B, C])
    c = np.empty_like(a)
    f(a, b, c)
    np.testing.assert_array_equal(c, getattr(np, op)(a, b))
