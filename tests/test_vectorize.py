"""The vectorize and unroll passes: the IR they produce, their errors, and compiled results."""

from __future__ import annotations

import numpy as np
import pytest
from ir_builders import buf, load, loop

import tensorlang as tl
from tensorlang.dtype import INT32, as_dtype
from tensorlang.expr import Cast, Const, Var, const
from tensorlang.ir import (
    Allocate,
    Broadcast,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    Ramp,
    Scope,
    Seq,
)
from tensorlang.lower import CODE_STEPS, STRUCTURE_STEPS
from tensorlang.lower.unroll import unroll_loops
from tensorlang.lower.vectorize import vectorize_loops
from tensorlang.runtime import build_module
from tensorlang.schedule import ScheduleError
from tensorlang.visitor import post_order_visit

F32 = as_dtype("float32")


def _nodes(func: PrimFunc, cls: type) -> list:
    found: list = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def _kinds(func: PrimFunc) -> list[ForKind]:
    return [f.kind for f in _nodes(func, For)]


def test_contiguous_loop_becomes_ramp_store() -> None:
    a, c = buf("A", "float32", (32,)), buf("C", "float32", (32,))
    i = Var("i", INT32)
    func = PrimFunc(
        "v", (a, c), (), loop(i, 16, BufferStore(c, i + 16, load(a, i) * 2.0), ForKind.VECTORIZED)
    )
    out = vectorize_loops(func)
    assert _kinds(out) == []
    (store,) = _nodes(out, BufferStore)
    assert isinstance(store.index, Ramp) and store.index.lanes == 16
    assert store.value.dtype == F32.with_lanes(16)
    x = np.arange(32, dtype="float32")
    y = np.zeros(32, "float32")
    build_module(out)(x, y)
    np.testing.assert_array_equal(y[16:], x[:16] * 2)


def test_nonzero_min_and_scalar_broadcast() -> None:
    a, s, c = buf("A", "float32", (40,)), buf("s", "float32", (1,)), buf("C", "float32", (40,))
    i = Var("i", INT32)
    zero = Const(0, INT32)
    func = PrimFunc(
        "m",
        (a, s, c),
        (),
        loop(i, 8, BufferStore(c, i, load(a, i) + load(s, zero)), ForKind.VECTORIZED, lo=5),
    )
    out = vectorize_loops(func)
    assert any(isinstance(n, Broadcast) for n in _nodes(out, Broadcast))
    x, y = np.arange(40, dtype="float32"), np.zeros(40, "float32")
    build_module(out)(x, np.array([3], "float32"), y)
    np.testing.assert_array_equal(y[5:13], x[5:13] + 3)
    assert (y[:5] == 0).all() and (y[13:] == 0).all()


def test_inner_loop_stays_a_loop_around_vectors() -> None:
    """C[j] += A[k] * B[k, j] with j vectorized outside the k loop (a GEMM row)."""
    a, b, c = buf("A", "float32", (8,)), buf("B", "float32", (8, 16)), buf("C", "float32", (16,))
    j, k = Var("j", INT32), Var("k", INT32)
    body = loop(k, 8, BufferStore(c, j, load(c, j) + load(a, k) * load(b, k * 16 + j)))
    out = vectorize_loops(PrimFunc("row", (a, b, c), (), loop(j, 16, body, ForKind.VECTORIZED)))
    assert _kinds(out) == [ForKind.SERIAL]
    rng = np.random.default_rng(0)
    x, w = rng.random(8, dtype="float32"), rng.random((8, 16), dtype="float32")
    y = np.zeros(16, "float32")
    build_module(out)(x, w, y)
    np.testing.assert_allclose(y, x @ w, rtol=1e-5)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell", "llvm -mcpu=x86-64"])
def test_long_and_symbolic_vectors_run_as_chunks_of_the_native_width(target) -> None:
    i, n = Var("i", INT32), Var("n", INT32)
    with tl.Target(target) as current:
        width = current.vector_lanes("float32")  # 16 with AVX-512, 8 with AVX2, 4 with SSE
        for extent, shape_vars, sizes in ((const(150), (), [150]), (n, (n,), [1, 7, 64, 65, 150])):
            a, c = buf("A", "float32", (extent,)), buf("C", "float32", (extent,))
            body = loop(i, extent, BufferStore(c, i, load(a, i) + 1.0), ForKind.VECTORIZED)
            out = vectorize_loops(PrimFunc("f", (a, c), shape_vars, body))
            assert _kinds(out) == [ForKind.SERIAL]  # the loop over whole chunks
            lanes = sorted({r.lanes for r in _nodes(out, Ramp)})
            assert lanes == (sorted({150 % width, width}) if shape_vars == () else [width]), lanes
            masked = [s for s in _nodes(out, BufferStore) if s.mask is not None]
            assert len(masked) == (0 if shape_vars == () else 1)
            m = build_module(out)
            for size in sizes:
                x = np.arange(size, dtype="float32")
                y = np.full(size + 64, -1.0, "float32")
                m(x, y[:size])
                np.testing.assert_array_equal(y[:size], x + 1)
                assert (y[size:] == -1).all()


def test_chunks_fit_one_register_of_the_widest_element_type() -> None:
    """A float64 load in a float32 loop halves the chunk: each value fills one register."""
    i = Var("i", INT32)
    a, c = buf("A", "float64", (100,)), buf("C", "float32", (100,))
    narrow = Cast(load(a, i), as_dtype("float32"))
    body = loop(i, 100, BufferStore(c, i, narrow), ForKind.VECTORIZED)
    for bits, width in ((512, 8), (256, 4), (128, 2)):
        out = vectorize_loops(PrimFunc("f", (a, c), (), body), vector_bits=bits)
        assert sorted({r.lanes for r in _nodes(out, Ramp)}) == sorted({width, 100 % width} - {0})
        x = np.arange(100, dtype="float64") / 3
        y = np.zeros(100, "float32")
        build_module(out)(x, y)
        np.testing.assert_array_equal(y, x.astype("float32"))


def test_loops_whose_lanes_are_not_independent_raise() -> None:
    a, c = buf("A", "float32", (100,)), buf("C", "float32", (100,))
    i = Var("i", INT32)
    zero = Const(0, INT32)
    tmp = buf("tmp", "float32", (1,), Scope.LOCAL)
    cases = {
        "reduces over lanes": loop(
            i, 16, BufferStore(c, zero, load(c, zero) + load(a, i)), ForKind.VECTORIZED),
        "is read at": loop(i, 16, BufferStore(c, i + 1, load(c, i) + 1.0), ForKind.VECTORIZED),
        "allocates a buffer": loop(
            i, 16, Allocate(tmp, BufferStore(c, i, load(a, i))), ForKind.VECTORIZED),
    }
    for reason, body in cases.items():
        with pytest.raises(ScheduleError, match=f"vectorize: loop i cannot run .*{reason}"):
            vectorize_loops(PrimFunc("f", (a, c), (), body))


def test_masked_tail_is_masked_store_and_load() -> None:
    n = Var("n", INT32)
    a, c = buf("A", "float32", (n,)), buf("C", "float32", (n,))
    io, ii = Var("io", INT32), Var("ii", INT32)
    idx = io * 8 + ii
    guard = IfThenElse(idx < n, BufferStore(c, idx, load(a, idx) * 3.0), None, likely=True)
    func = PrimFunc(
        "t", (a, c), (n,), loop(io, (n + 7) // 8, loop(ii, 8, guard, ForKind.VECTORIZED))
    )
    out = vectorize_loops(func)
    (store,) = _nodes(out, BufferStore)
    (masked_load,) = _nodes(out, BufferLoad)
    assert store.mask is not None and masked_load.mask is not None
    assert not _nodes(out, IfThenElse)
    x = np.arange(13, dtype="float32")
    big = np.full(24, -1.0, "float32")
    build_module(out)(x, big[:13])
    np.testing.assert_array_equal(big[:13], x * 3)
    assert (big[13:] == -1).all()


def test_let_in_vector_loop() -> None:
    a, c = buf("A", "float32", (16,)), buf("C", "float32", (16,))
    i, t = Var("i", INT32), Var("t", F32)
    body = LetStmt(t, load(a, i) + 1.0, BufferStore(c, i, t * t))
    out = vectorize_loops(PrimFunc("let", (a, c), (), loop(i, 16, body, ForKind.VECTORIZED)))
    (let,) = _nodes(out, LetStmt)
    assert let.var.dtype.lanes == 16
    x, y = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    build_module(out)(x, y)
    np.testing.assert_array_equal(y, (x + 1) ** 2)


def test_unroll_copies_body() -> None:
    a, c = buf("A", "float32", (12,)), buf("C", "float32", (12,))
    i, j = Var("i", INT32), Var("j", INT32)
    body = loop(
        i, 3, loop(j, 4, BufferStore(c, i * 4 + j, load(a, i * 4 + j) + 1.0), ForKind.UNROLLED)
    )
    out = unroll_loops(PrimFunc("u", (a, c), (), body))
    assert _kinds(out) == [ForKind.SERIAL]
    (outer,) = _nodes(out, For)
    assert isinstance(outer.body, Seq) and len(outer.body.stmts) == 4
    x, y = np.arange(12, dtype="float32"), np.zeros(12, "float32")
    build_module(out)(x, y)
    np.testing.assert_array_equal(y, x + 1)


def test_unroll_constant_min_folds_and_any_constant_extent() -> None:
    a = buf("A", "float32", (200,))
    i = Var("i", INT32)
    n = Var("n", INT32)
    out = unroll_loops(
        PrimFunc(
            "u", (a,), (), loop(i, 3, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED, lo=5)
        )
    )
    assert [s.index.value for s in _nodes(out, BufferStore)] == [5, 6, 7]
    long = loop(i, 150, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED)
    out = unroll_loops(PrimFunc("u", (a,), (), long))
    assert _kinds(out) == [] and len(_nodes(out, BufferStore)) == 150
    unbounded = loop(i, n, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED)
    with pytest.raises(ScheduleError, match="unroll: loop i has extent n"):
        unroll_loops(PrimFunc("u", (a,), (n,), unbounded))


@pytest.mark.parametrize("rows, first, second", [(5, 3, 2), (17, 5, 2), (13, 4, 3), (7, 7, 5)])
def test_outer_vector_loop_over_an_inner_loop_split_twice(rows, first, second) -> None:
    """The outer loop of a non-dividing split vectorized, and its inner loop split again: the
    innermost loop's range depends on the lanes and on the loop around it, which the vector
    code bounds by that loop's own range (it raised "no constant bounds" before)."""
    a = tl.placeholder((rows, 3), name="A")
    out = tl.compute((rows, 3), lambda i, j: a[i, j] * 2.0 + 1.0, name="out")
    s = tl.create_schedule(out.op)
    outer, inner = s[out].split(out.op.axis[0], factor=first)
    s[out].vectorize(outer)
    s[out].split(inner, factor=second)
    data = np.random.default_rng(rows).random((rows, 3), dtype="float32")
    result = np.full((rows, 3), np.nan, "float32")
    tl.build(s, [a, out])(data, result)
    np.testing.assert_allclose(result, data * 2.0 + 1.0, rtol=1e-6)


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.UNROLLED,
                                  ForKind.VECTORIZED])
def test_a_guarded_loop_runs_from_its_guards_lower_bound(kind) -> None:
    """`for i in 0..20: if i >= 13: B[i] = 2 A[i]` lowers to a loop (or its copies, or one
    7-lane vector) over 13..19 without the guard, in every kind of loop, and writes only there."""
    a, b = buf("A", "float32", (40,)), buf("B", "float32", (40,))
    i = Var("i", INT32)
    guarded = IfThenElse(i >= 13, BufferStore(b, i, load(a, i) * 2.0), None, True)
    func = PrimFunc("g", (a, b), (), loop(i, 20, guarded, kind))
    for _, step in STRUCTURE_STEPS + CODE_STEPS:
        func = step(func)
    assert not _nodes(func, IfThenElse)
    x, y = np.arange(40, dtype="float32"), np.zeros(40, "float32")
    build_module(func)(x, y)
    expected = np.zeros(40, "float32")
    expected[13:20] = x[13:20] * 2.0
    np.testing.assert_array_equal(y, expected)
