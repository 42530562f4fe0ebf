"""Every schedule primitive, alone and combined, against numpy on awkward shapes and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_array, tolerance

import tensorlang as tl

DTYPES = ["float32", "float64", "int8", "int32", "int64"]
EXTENTS = [1, 7, 13, 64]


def elementwise(n: int, m: int, dtype: str):
    A = tl.placeholder((n, m), dtype, name="A")
    B = tl.placeholder((n, m), dtype, name="B")
    C = tl.compute((n, m), lambda i, j: A[i, j] * B[i, j] + A[i, j], name="C")
    return A, B, C


def check_elementwise(s, A, B, C, n, m, dtype, rng):
    f = tl.build(s, [A, B, C])
    a, b = random_array((n, m), dtype, rng), random_array((n, m), dtype, rng)
    c = np.zeros((n, m), dtype)
    f(a, b, c)
    np.testing.assert_allclose(c, a * b + a, **tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", EXTENTS)
@pytest.mark.parametrize("factor", [1, 3, 4, 16])
def test_split_factor(dtype, n, factor, rng):
    A, B, C = elementwise(n, 5, dtype)
    s = tl.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=factor)
    check_elementwise(s, A, B, C, n, 5, dtype, rng)


@pytest.mark.parametrize("n", EXTENTS)
@pytest.mark.parametrize("nparts", [1, 2, 5])
def test_split_nparts(n, nparts, rng):
    A, B, C = elementwise(n, 3, "float32")
    s = tl.create_schedule(C.op)
    s[C].split(C.op.axis[1], nparts=nparts)
    s[C].split(C.op.axis[0], nparts=nparts)
    check_elementwise(s, A, B, C, n, 3, "float32", rng)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (16, 33)])
def test_tile_vectorize_parallel(dtype, shape, rng):
    n, m = shape
    A, B, C = elementwise(n, m, dtype)
    s = tl.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[C].vectorize(yi)
    s[C].parallel(xo)
    check_elementwise(s, A, B, C, n, m, dtype, rng)


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (12, 16)])
def test_fuse_split_unroll(shape, rng):
    n, m = shape
    A, B, C = elementwise(n, m, "float64")
    s = tl.create_schedule(C.op)
    fused = s[C].fuse(*C.op.axis)
    outer, inner = s[C].split(fused, factor=5)
    s[C].unroll(inner)
    s[C].parallel(outer)
    check_elementwise(s, A, B, C, n, m, "float64", rng)


def test_split_then_fuse_across(rng):
    A, B, C = elementwise(10, 6, "int32")
    s = tl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=3)
    f = s[C].fuse(xi, C.op.axis[1])
    s[C].vectorize(f)
    check_elementwise(s, A, B, C, 10, 6, "int32", rng)


def test_reorder_and_pragma(rng):
    A, B, C = elementwise(9, 4, "float32")
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(j, i)
    s[C].pragma(j, "auto_unroll_max_step", 16)
    assert "auto_unroll_max_step" in str(tl.lower(s, [A, B, C]))
    check_elementwise(s, A, B, C, 9, 4, "float32", rng)


def gemm(n, m, l, dtype="float32"):
    A = tl.placeholder((n, l), dtype, name="A")
    B = tl.placeholder((l, m), dtype, name="B")
    k = tl.reduce_axis((0, l), name="k")
    C = tl.compute((n, m), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def check_gemm(s, A, B, C, n, m, l, dtype, rng):
    f = tl.build(s, [A, B, C])
    a, b = random_array((n, l), dtype, rng), random_array((l, m), dtype, rng)
    c = np.zeros((n, m), dtype)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, **tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (32, 17, 19)])
def test_gemm_blocked(dtype, shape, rng):
    n, m, l = shape
    A, B, C = gemm(n, m, l, dtype)
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    ko, ki = s[C].split(k, factor=3)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    check_gemm(s, A, B, C, n, m, l, dtype, rng)


@pytest.mark.parametrize("shape", [(1, 1, 1), (13, 29, 7), (64, 48, 32)])
def test_gemm_cache_write_compute_at(shape, rng):
    n, m, l = shape
    A, B, C = gemm(n, m, l)
    s = tl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 6, 16)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(ck, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ci)
    s[C].vectorize(ji)
    s[C].parallel(io)
    check_gemm(s, A, B, C, n, m, l, "float32", rng)


@pytest.mark.parametrize("shape", [(5, 7, 3), (32, 32, 32), (33, 17, 65)])
def test_gemm_cache_read_packing(shape, rng):
    n, m, l = shape
    A, B, C = gemm(n, m, l)
    s = tl.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "local", [C])
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, ii = s[C].split(i, factor=8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(io, ko, ii, ki, j)
    s[AA].compute_at(s[C], ko)
    s[BB].compute_at(s[C], ko)
    s[C].vectorize(j)
    check_gemm(s, A, B, C, n, m, l, "float32", rng)


@pytest.mark.parametrize("n", [1, 6, 17])
def test_compute_inline_and_root(n, rng):
    A = tl.placeholder((n, n), "float32", name="A")
    B = tl.compute((n, n), lambda i, j: A[i, j] + 1, name="B")
    C = tl.compute((n, n), lambda i, j: B[i, j] * 2, name="C")
    D = tl.compute((n, n), lambda i, j: C[j, i] - B[i, j], name="D")
    s = tl.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_at(s[D], D.op.axis[0])
    s[C].compute_root()
    f = tl.build(s, [A, D])
    a = random_array((n, n), "float32", rng)
    d = np.zeros((n, n), "float32")
    f(a, d)
    b = a + 1
    np.testing.assert_allclose(d, (b * 2).T - b, rtol=1e-6)


@pytest.mark.parametrize("n", [1, 10, 31])
def test_compute_at_with_halo(n, rng):
    """A 3-point stencil consumer: the producer region per consumer tile includes a halo."""
    A = tl.placeholder((n + 2,), "float32", name="A")
    B = tl.compute((n + 2,), lambda i: A[i] * 3, name="B")
    C = tl.compute((n,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = tl.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    f = tl.build(s, [A, C])
    a = random_array((n + 2,), "float32", rng)
    c = np.zeros((n,), "float32")
    f(a, c)
    b = a * 3
    np.testing.assert_allclose(c, b[:-2] + b[1:-1] + b[2:], rtol=1e-5)


@pytest.mark.parametrize("sizes", [(1, 3), (10, 64), (100, 7)])
def test_symbolic_dims(sizes, rng):
    n = tl.var("n")
    A = tl.placeholder((n, 8), "float32", name="A")
    B = tl.compute((n, 8), lambda i, j: A[i, j] * 2 + 1, name="B")
    s = tl.create_schedule(B.op)
    io, ii = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(B.op.axis[1])
    s[B].parallel(io)
    f = tl.build(s, [A, B])
    for size in sizes:
        a = random_array((size, 8), "float32", rng)
        b = np.zeros((size, 8), "float32")
        f(a, b)
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
def test_reductions_max_min_where(dtype, rng):
    n, m = 9, 13
    A = tl.placeholder((n, m), dtype, name="A")
    k = tl.reduce_axis((0, m), name="k")
    Mx = tl.compute((n,), lambda i: tl.max(A[i, k], axis=k), name="Mx")
    k2 = tl.reduce_axis((0, m), name="k2")
    Mn = tl.compute((n,), lambda i: tl.min(A[i, k2], axis=k2, where=k2 % 2 == 0), name="Mn")
    k3 = tl.reduce_axis((1, m), name="k3")
    Sm = tl.compute((n,), lambda i: tl.sum(A[i, k3], axis=k3, where=A[i, k3] > 0), name="Sm")
    s = tl.create_schedule([Mx.op, Mn.op, Sm.op])
    ko, ki = s[Mx].split(k, factor=4)
    f = tl.build(s, [A, Mx, Mn, Sm])
    a = random_array((n, m), dtype, rng)
    outs = [np.zeros((n,), dtype) for _ in range(3)]
    f(a, *outs)
    np.testing.assert_array_equal(outs[0], a.max(axis=1))
    np.testing.assert_array_equal(outs[1], a[:, ::2].min(axis=1))
    expected = np.where(a[:, 1:] > 0, a[:, 1:], 0).sum(axis=1).astype(dtype)
    np.testing.assert_allclose(outs[2], expected, rtol=1e-5)


def test_comm_reducer_product(rng):
    prod = tl.comm_reducer(lambda x, y: x * y, lambda t: tl.const(1, t), name="prod")
    A = tl.placeholder((4, 6), "float64", name="A")
    k = tl.reduce_axis((0, 6), name="k")
    P = tl.compute((4,), lambda i: prod(A[i, k], axis=k), name="P")
    s = tl.create_schedule(P.op)
    f = tl.build(s, [A, P])
    a = random_array((4, 6), "float64", rng)
    p = np.zeros(4)
    f(a, p)
    np.testing.assert_allclose(p, a.prod(axis=1))


def test_multi_output_compute(rng):
    A = tl.placeholder((5, 7), "float32", name="A")
    S, D = tl.compute((5, 7), lambda i, j: (A[i, j] + 1, A[i, j] * 2), name="SD")
    s = tl.create_schedule(S.op)
    s[S].vectorize(S.op.axis[1])
    f = tl.build(s, [A, S, D])
    a = random_array((5, 7), "float32", rng)
    out1, out2 = np.zeros((5, 7), "float32"), np.zeros((5, 7), "float32")
    f(a, out1, out2)
    np.testing.assert_allclose(out1, a + 1)
    np.testing.assert_allclose(out2, a * 2)


def test_padded_convolution_reads_are_guarded(rng):
    """if_then_else guards the out-of-bounds reads of padding."""
    n, r = 11, 3
    A = tl.placeholder((n, n), "float32", name="A")
    W = tl.placeholder((r, r), "float32", name="W")
    P = tl.compute(
        (n + 2, n + 2),
        lambda i, j: tl.if_then_else(
            (i >= 1) & (i <= n) & (j >= 1) & (j <= n), A[i - 1, j - 1], 0.0
        ),
        name="P",
    )
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, r), name="rx")
    C = tl.compute((n, n), lambda i, j: tl.sum(P[i + ry, j + rx] * W[ry, rx], axis=[ry, rx]), name="C")
    s = tl.create_schedule(C.op)
    s[P].compute_inline()
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[C].reorder(C.op.axis[0], jo, ry, rx, ji)
    s[C].vectorize(ji)
    f = tl.build(s, [A, W, C])
    a, w = random_array((n, n), "float32", rng), random_array((r, r), "float32", rng)
    c = np.zeros((n, n), "float32")
    f(a, w, c)
    padded = np.pad(a, 1)
    expected = sum(padded[y : y + n, x : x + n] * w[y, x] for y in range(r) for x in range(r))
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-5)


def test_compute_at_through_an_inlined_reader(rng):
    A = tl.placeholder((8,), "float32", name="A")
    P = tl.compute((8,), lambda i: A[i] * 2, name="P")
    B = tl.compute((8,), lambda i: P[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 3, name="C")
    s = tl.create_schedule(C.op)
    s[B].compute_inline()
    s[P].compute_at(s[C], C.op.axis[0])
    f = tl.build(s, [A, C])
    a = random_array((8,), "float32", rng)
    c = np.zeros(8, "float32")
    f(a, c)
    np.testing.assert_allclose(c, (a * 2 + 1) * 3, rtol=1e-6)


def test_compute_at_not_inlined_middle_reader_is_rejected_when_lowering():
    A = tl.placeholder((8,), "float32", name="A")
    P = tl.compute((8,), lambda i: A[i] * 2, name="P")
    B = tl.compute((8,), lambda i: P[i] + 1, name="B")
    C = tl.compute((8,), lambda i: B[i] * 3, name="C")
    s = tl.create_schedule(C.op)
    s[P].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ValueError, match="B reads it too"):
        tl.lower(s, [A, C])


def _three_stage_chain(n: int, m: int):
    """P -> B -> C, B reading a 3-wide window of P along j: C[i, j] = sum_k P[i, j + k]."""
    A = tl.placeholder((n, m + 2), "float32", name="A")
    P = tl.compute((n, m + 2), lambda i, j: A[i, j] * 2, name="P")
    k = tl.reduce_axis((0, 3), name="k")
    B = tl.compute((n, m), lambda i, j: tl.sum(P[i, j + k], axis=k), name="B")
    C = tl.compute((n, m), lambda i, j: B[i, j] + 1, name="C")
    return A, P, B, C


@pytest.mark.parametrize("n,m,factor", [(5, 13, 4), (1, 7, 7), (3, 16, 5)])
def test_compute_at_a_loop_that_runs_its_reader(n, m, factor, rng):
    """A producer may be computed at a loop of a stage that does not read it, when its reader
    runs inside that loop (compute_at of compute_at): one iteration computes the part that all
    of the reader's iterations inside it need."""
    A, P, B, C = _three_stage_chain(n, m)
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    _, ji = s[C].split(j, factor=factor)
    s[B].compute_at(s[C], ji)
    s[P].compute_at(s[C], i)
    lowered = str(tl.lower(s, [A, C]))
    assert "P = allocate((1, " in lowered  # one row of P per row of C
    f = tl.build(s, [A, C])
    a = random_array((n, m + 2), "float32", rng)
    c = np.zeros((n, m), "float32")
    f(a, c)
    expected = sum(2 * a[:, k : k + m] for k in range(3)) + 1
    np.testing.assert_allclose(c, expected, rtol=1e-5)


def test_compute_at_a_loop_outside_which_its_reader_runs_is_rejected():
    """The reader B runs at the outer loop of C, the producer P inside the inner one: P's part
    for one inner iteration would not be there when B runs, so lowering says so."""
    A, P, B, C = _three_stage_chain(4, 8)
    s = tl.create_schedule(C.op)
    i, j = C.op.axis
    s[B].compute_at(s[C], i)
    s[P].compute_at(s[C], j)
    with pytest.raises(ValueError, match="B reads it too outside that loop"):
        tl.lower(s, [A, C])


@pytest.mark.parametrize("body", ["padded", "direct", "divide"])
def test_a_block_computes_past_the_edge_only_where_that_is_safe(body):
    """C is computed per block of 4 rows of D (10 rows: the last block is partial). Reading a
    padded copy P (12 rows), C fills its whole block, unguarded: the same code for every block,
    and only D's own loop stops at the edge. Reading A (10 rows) directly, or dividing by P's
    zero padding, C keeps its guard: the last block stops at the edge too."""
    A = tl.placeholder((10, 8), "int32", name="A")
    zero = tl.const(0, "int32")
    P = tl.compute((12, 8), lambda i, j: tl.if_then_else(i < 10, A[i, j], zero), name="P")
    reads = {"padded": lambda i, j: P[i, j] * 2, "direct": lambda i, j: A[i, j] * 2,
             "divide": lambda i, j: A[i, j] // P[i, j]}
    C = tl.compute((10, 8), reads[body], name="C")
    D = tl.compute((10, 8), lambda i, j: C[i, j] + 1, name="D")
    s = tl.create_schedule(D.op)
    io, _ = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], io)
    lowered = str(tl.lower(s, [A, D]))
    edge = "range(min(4, 10 - i.outer * 4))"
    assert lowered.count(edge) == (1 if body == "padded" else 2)
    assert "if " not in lowered  # the edge is in the loop bounds, not in a guard per point
    a = np.arange(1, 81, dtype="int32").reshape(10, 8)
    d = np.zeros((10, 8), "int32")
    tl.build(s, [A, D])(a, d)
    expected = {"padded": a * 2, "direct": a * 2, "divide": a // a}[body] + 1
    np.testing.assert_array_equal(d, expected)


@pytest.mark.parametrize("order", ["split_after", "fuse_after"])
def test_attachment_follows_split_and_fuse_of_its_loop(order, rng):
    A, B, C = gemm(20, 40, 9)
    s = tl.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 6, 16)
    s[CC].compute_at(s[C], jo)
    if order == "fuse_after":
        s[C].parallel(s[C].fuse(io, jo))
    else:
        s[C].split(jo, factor=2)
    check_gemm(s, A, B, C, 20, 40, 9, "float32", rng)


def test_intermediate_with_symbolic_ceil_division_shape(rng):
    n = tl.var("n")
    A = tl.placeholder((n,), "float32", name="A")
    P = tl.compute(
        ((n + 15) // 16, 16),
        lambda o, i: tl.if_then_else(o * 16 + i < n, A[o * 16 + i], 0.0),
        name="P",
    )
    C = tl.compute((n,), lambda i: P[i // 16, i % 16] + 1, name="C")
    f = tl.build(tl.create_schedule(C.op), [A, C])
    for size in (1, 16, 37):
        a = random_array((size,), "float32", rng)
        c = np.zeros(size, "float32")
        f(a, c)
        np.testing.assert_allclose(c, a + 1, rtol=1e-6)


RFACTOR_MODES = ["inner_of_split", "outer_of_nparts", "whole_axis", "last_axis"]


@pytest.mark.parametrize("mode", RFACTOR_MODES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_rfactor_matches_numpy(mode, dtype, rng):
    """Sum over (k, r) of a (5, 37, 3) array, with k starting at 2 and a where= on r, factored
    in each supported way; the factored axis runs in parallel or as vector lanes."""
    A = tl.placeholder((5, 39, 3), dtype, name="A")
    k = tl.reduce_axis((2, 39), name="k")
    r = tl.reduce_axis((0, 3), name="r")
    C = tl.compute((5,), lambda i: tl.sum(A[i, k, r], axis=[k, r], where=r != 1), name="C")
    s = tl.create_schedule(C.op)
    if mode == "inner_of_split":
        _, ki = s[C].split(k, factor=8)  # 37 = 4 * 8 + 5: the tail is guarded
        CF = s.rfactor(C, ki)
        s[CF].vectorize(s[CF].op.axis[0])
    elif mode == "outer_of_nparts":
        ko, _ = s[C].split(k, nparts=3)
        CF = s.rfactor(C, ko, factor_axis=1)
        s[CF].parallel(s[CF].op.axis[1])
    elif mode == "whole_axis":
        CF = s.rfactor(C, k, factor_axis=1)
        s[CF].parallel(s[CF].op.axis[0])
    else:
        CF = s.rfactor(C, r)  # the condition on r moves to the partial stage's data axis
    a = random_array((5, 39, 3), dtype, rng)
    expected = a[:, 2:, [0, 2]].sum(axis=(1, 2)).astype(dtype)
    c = np.zeros(5, dtype)
    tl.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, expected, **tolerance(dtype))
    assert CF.op.name == "C.rf" and len(CF.shape) == 2


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_rfactor_of_the_only_reduction_axis_leaves_a_select(dtype, rng):
    A = tl.placeholder((4, 11), dtype, name="A")
    k = tl.reduce_axis((0, 11), name="k")
    C = tl.compute((4,), lambda i: tl.max(A[i, k], axis=k, where=k % 3 != 0), name="C")
    s = tl.create_schedule(C.op)
    CF = s.rfactor(C, k)
    assert not CF.op.reduce_axis
    a = random_array((4, 11), dtype, rng)
    c = np.zeros(4, dtype)
    tl.build(s, [A, C])(a, c)
    np.testing.assert_array_equal(c, a[:, [j for j in range(11) if j % 3]].max(axis=1))


@pytest.mark.parametrize("reducer", ["max", "min"])
def test_rfactor_vectorized_dot_product_and_other_reducers(reducer, rng):
    n = 1000
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.placeholder((n,), "float32", name="B")
    k = tl.reduce_axis((0, n), name="k")
    for name in ("sum", reducer):
        C = tl.compute((1,), lambda i, name=name: getattr(tl, name)(A[k] * B[k], axis=k), name="C")
        s = tl.create_schedule(C.op)
        _, ki = s[C].split(k, factor=16)
        CF = s.rfactor(C, ki)
        lanes, _ = s[CF].op.axis
        (ko,) = s[CF].op.reduce_axis
        s[CF].reorder(ko, lanes)
        s[CF].vectorize(lanes)
        f = tl.build(s, [A, B, C])
        a, b = random_array((n,), "float32", rng), random_array((n,), "float32", rng)
        c = np.zeros(1, "float32")
        f(a, b, c)
        expected = (a @ b) if name == "sum" else getattr(np, name)(a * b)
        np.testing.assert_allclose(c[0], expected, rtol=1e-4)
        assert "zmm" in f.get_source("asm") or "ymm" in f.get_source("asm")


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_rfactor_of_a_factored_stage_runs_threads_times_lanes(n, rng):
    """Two rfactors: each thread sums a part of k, and within it each vector lane its own
    partial sum (the schedule of a fast dot product)."""
    A = tl.placeholder((n,), "float64", name="A")
    B = tl.placeholder((n,), "float64", name="B")
    k = tl.reduce_axis((0, n), name="k")
    C = tl.compute((1,), lambda i: tl.sum(A[k] * B[k], axis=k), name="C")
    s = tl.create_schedule(C.op)
    part, _ = s[C].split(k, nparts=3)
    per_thread = s.rfactor(C, part)
    _, lane = s[per_thread].split(s[per_thread].op.reduce_axis[0], factor=8)
    partial = s.rfactor(per_thread, lane, factor_axis=2)
    thread, _, vector = s[partial].op.axis
    s[partial].reorder(thread, s[partial].op.reduce_axis[0], vector)
    s[partial].parallel(thread)
    s[partial].vectorize(vector)
    a, b = random_array((n,), "float64", rng), random_array((n,), "float64", rng)
    c = np.zeros(1, "float64")
    tl.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c[0], a @ b, rtol=1e-10)
    assert partial.shape[0].value == 3 and partial.shape[2].value == 8


def test_rfactor_of_a_non_dividing_split_leaves_the_bound_check_to_the_tail():
    n = tl.var("n")
    A = tl.placeholder((n,), "float32", name="A")
    k = tl.reduce_axis((0, n), name="k")
    C = tl.compute((1,), lambda i: tl.sum(A[k], axis=k), name="C")
    s = tl.create_schedule(C.op)
    _, ki = s[C].split(k, factor=16)
    CF = s.rfactor(C, ki, factor_axis=1)
    _, lanes = s[CF].op.axis
    s[CF].reorder(s[CF].op.reduce_axis[0], lanes)
    s[CF].vectorize(lanes)
    text = str(tl.lower(s, [A, C]))
    main, tail = text.split("for k.outer in range(n // 16):")[1].split("for k.outer in range(")[:2]
    assert "mask" not in main and "mask" in tail, text
    f = tl.build(s, [A, C])
    for size in (1, 16, 37):
        a, c = np.arange(size, dtype="float32"), np.zeros(1, "float32")
        f(a, c)
        assert c[0] == a.sum()
