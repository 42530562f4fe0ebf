"""No schedule request is dropped: each primitive that used to be ignored in some case either
does what it says (shown on the loop IR or the assembly, checked against numpy) or raises
ScheduleError naming the stage and the axis."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import random_array, tolerance

import tensorlang as tl


def elementwise(n, dtype="float32"):
    A = tl.placeholder((n,), dtype, name="A")
    B = tl.compute((n,), lambda i: A[i] * 3 + A[i], name="B")
    return A, B


def row_sums(n, m, dtype="float32"):
    A = tl.placeholder((n, m), dtype, name="A")
    k = tl.reduce_axis((0, m), name="k")
    return A, tl.compute((n,), lambda i: tl.sum(A[i, k], axis=k), name="R")


def run(s, args, inputs, out_shape, dtype):
    f = tl.build(s, args)
    out = np.zeros(out_shape, dtype)
    f(*inputs, out)
    return f, out


def test_vectorize_on_a_reduction_axis_raises_naming_stage_and_axis():
    A, R = row_sums(5, 7)
    s = tl.create_schedule(R.op)
    (k,) = R.op.reduce_axis
    with pytest.raises(tl.ScheduleError, match="vectorize: axis k of stage R is a reduction axis"):
        s[R].vectorize(k)
    ko, ki = s[R].split(k, factor=4)
    with pytest.raises(tl.ScheduleError, match="axis k.inner of stage R is a reduction axis"):
        s[R].vectorize(ki)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8"])
@pytest.mark.parametrize("n", [65, 130, 257])
def test_vectorize_longer_than_64_lanes_runs_as_native_vectors(n, dtype, rng):
    A, B = elementwise(n, dtype)
    s = tl.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    width = tl.Target.current().vector_lanes(dtype)  # one register: 16 float32 with AVX-512
    text = str(tl.lower(s, [A, B]))
    assert "for i in" not in text and f", 1, {width})]" in text, text  # chunks, no scalar loop
    assert n % width < 2 or f", 1, {n % width})]" in text, text  # and one shorter vector
    a = random_array((n,), dtype, rng)
    f, out = run(s, [A, B], [a], (n,), dtype)
    np.testing.assert_allclose(out, (a * 3 + a).astype(dtype), **tolerance(dtype))
    assert re.search(r"%[yz]mm\d+", f.get_source("asm"))


def test_vectorize_of_symbolic_extent_runs_as_vectors_with_a_masked_tail(rng):
    n = tl.var("n")
    A, B = elementwise(n)
    s = tl.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    w = tl.Target.current().vector_lanes("float32")
    text = str(tl.lower(s, [A, B]))
    assert f"for i.chunk in range(n // {w})" in text, text
    assert f"mask=ramp(0, 1, {w}) < x{w}(n % {w})" in text, text
    f = tl.build(s, [A, B])
    assert "llvm.masked.store" in f.get_source("ll")
    for size in (1, 17, 64, 65, 200):
        a = random_array((size,), "float32", rng)
        out = np.zeros(size, "float32")
        f(a, out)
        np.testing.assert_allclose(out, a * 3 + a, rtol=1e-6)


TARGETS = ["llvm", "llvm -mcpu=haswell", "llvm -mcpu=x86-64"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_long_vectorized_axis_is_correct_for_every_extent_on_every_target(target, dtype, rng):
    """Constant extents (1, a prime below one register, primes above 64) and a symbolic one,
    built for AVX-512, AVX2 and SSE: chunks of the target's width and their tails agree with
    numpy and write nothing past the end."""
    sym = tl.var("n")
    A, B = elementwise(sym, dtype)
    s = tl.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    symbolic = tl.build(s, [A, B], target=target)
    for n in (1, 7, 65, 257):
        A, B = elementwise(n, dtype)
        s = tl.create_schedule(B.op)
        s[B].vectorize(B.op.axis[0])
        for f in (tl.build(s, [A, B], target=target), symbolic):
            a = random_array((n,), dtype, rng)
            out = np.full(n + 32, 7, dtype)
            f(a, out[:n])
            np.testing.assert_allclose(out[:n], (a * 3 + a).astype(dtype), **tolerance(dtype))
            assert (out[n:] == 7).all(), f"wrote past the end for n={n}"


@pytest.mark.parametrize("target, used, unused", [
    ("llvm -mcpu=haswell", "ymm", "zmm"),
    ("llvm -mcpu=x86-64", "xmm", "ymm"),
])
def test_long_vectorized_axis_uses_the_registers_of_the_target(target, used, unused):
    A, B = elementwise(256)
    s = tl.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    with tl.Target(target) as current:
        width = current.vector_lanes("float32")
        assert f", 1, {width})]" in str(tl.lower(s, [A, B]))
        asm = tl.build(s, [A, B]).get_source("asm")
    assert re.search(rf"%{used}\d+", asm) and not re.search(rf"%{unused}\d+", asm), asm


@pytest.mark.parametrize("n", [65, 100])
def test_unroll_of_more_than_64_iterations_copies_the_body(n, rng):
    A, B = elementwise(n)
    s = tl.create_schedule(B.op)
    s[B].unroll(B.op.axis[0])
    text = str(tl.lower(s, [A, B]))
    assert "for " not in text and text.count("B[") == n, text
    a = random_array((n,), "float32", rng)
    _, out = run(s, [A, B], [a], (n,), "float32")
    np.testing.assert_allclose(out, a * 3 + a, rtol=1e-6)


def test_unroll_of_an_unbounded_symbolic_extent_raises_naming_stage_and_axis():
    A, B = elementwise(tl.var("n"))
    s = tl.create_schedule(B.op)
    s[B].unroll(B.op.axis[0])
    with pytest.raises(tl.ScheduleError, match="unroll: axis i of stage B has extent n"):
        tl.lower(s, [A, B])


def gemm(n, m, l):
    A = tl.placeholder((n, l), name="A")
    B = tl.placeholder((l, m), name="B")
    k = tl.reduce_axis((0, l), name="k")
    C = tl.compute((n, m), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def blocked_gemm(max_step, explicit=None):
    A, B, C = gemm(12, 8, 5)
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=4)
    s[C].reorder(io, C.op.reduce_axis[0], ii, j)
    s[C].pragma(io, "auto_unroll_max_step", max_step)
    if explicit is not None:
        s[C].pragma(io, "unroll_explicit", explicit)
    return s, [A, B, C]


def check_gemm(s, args, rng):
    a, b = random_array((12, 5), "float32", rng), random_array((5, 8), "float32", rng)
    f, out = run(s, args, [a, b], (12, 8), "float32")
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    return f


def test_pragma_auto_unroll_max_step_unrolls_the_loops_inside(rng):
    s, args = blocked_gemm(32)  # ii (4) x j (8) = 32 statements per k: both unrolled
    text = str(tl.lower(s, args))
    assert "for i.inner" not in text and "for j" not in text, text
    assert "for k" in text  # 5 x 32 would exceed 32: k stays a loop
    check_gemm(s, args, rng)
    s, args = blocked_gemm(8)  # only j fits (8 x 1)
    text = str(tl.lower(s, args))
    assert "for i.inner" in text and "for j" not in text, text
    check_gemm(s, args, rng)


def test_pragma_unroll_explicit_false_asks_llvm_to_unroll(rng):
    s, args = blocked_gemm(32, explicit=False)
    text = str(tl.lower(s, args))
    assert "for j in range(8):  # unrolled" in text, text
    f = check_gemm(s, args, rng)
    assert '!{!"llvm.loop.unroll.full"}' in f.get_source("ll")


def test_unknown_pragmas_and_bad_values_raise():
    A, B = elementwise(8)
    s = tl.create_schedule(B.op)
    (i,) = B.op.axis
    with pytest.raises(tl.ScheduleError, match="pragma on axis i of stage B: unknown key 'vec'"):
        s[B].pragma(i, "vec", 4)
    with pytest.raises(tl.ScheduleError, match="auto_unroll_max_step .* needs an int >= 0"):
        s[B].pragma(i, "auto_unroll_max_step", -1)


def test_marked_axes_cannot_be_split_or_fused():
    A, B, C = gemm(8, 8, 8)
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    s[C].vectorize(j)
    with pytest.raises(tl.ScheduleError, match="split: axis j of stage C is already marked"):
        s[C].split(j, factor=4)
    s[C].parallel(i)
    with pytest.raises(tl.ScheduleError, match="fuse: axis i of stage C is already marked"):
        s[C].fuse(i, j)


def test_vectorize_that_cannot_run_lane_by_lane_raises():
    A, B, C = gemm(8, 8, 8)
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=4)
    s[C].vectorize(jo)
    s[C].vectorize(ji)
    with pytest.raises(tl.ScheduleError, match="vectorize: loop j.outer .* vectorized too"):
        tl.lower(s, [A, B, C])
    X = tl.compute((8,), lambda i: A[i, 0] * 2, name="X")
    Y = tl.compute((8,), lambda i: X[i] + 1, name="Y")
    s = tl.create_schedule(Y.op)
    s[Y].vectorize(Y.op.axis[0])
    s[X].compute_at(s[Y], Y.op.axis[0])
    with pytest.raises(tl.ScheduleError, match="a stage is computed inside it"):
        tl.lower(s, [A, Y])
