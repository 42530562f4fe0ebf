"""The vectorize and unroll passes: the IR they produce, their fallbacks, and compiled results."""

from __future__ import annotations

import numpy as np
from ir_builders import buf, load, loop

from tensorlang.dtype import INT32, as_dtype
from tensorlang.expr import Const, Var, const
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
from tensorlang.lower.unroll import unroll_loops
from tensorlang.lower.vectorize import vectorize_loops
from tensorlang.runtime import build_module
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


def test_fallbacks_to_serial() -> None:
    a, c = buf("A", "float32", (100,)), buf("C", "float32", (100,))
    i = Var("i", INT32)
    n = Var("n", INT32)
    zero = Const(0, INT32)
    tmp = buf("tmp", "float32", (1,), Scope.LOCAL)
    cases = {
        "symbolic extent": (loop(i, n, BufferStore(c, i, load(a, i)), ForKind.VECTORIZED), (n,)),
        "reduction": (
            loop(i, 16, BufferStore(c, zero, load(c, zero) + load(a, i)), ForKind.VECTORIZED),
            (),
        ),
        "lane dependency": (
            loop(i, 16, BufferStore(c, i + 1, load(c, i) + 1.0), ForKind.VECTORIZED),
            (),
        ),
        "allocate": (
            loop(i, 16, Allocate(tmp, BufferStore(c, i, load(a, i))), ForKind.VECTORIZED),
            (),
        ),
        "too many lanes": (loop(i, 65, BufferStore(c, i, load(a, i)), ForKind.VECTORIZED), ()),
    }
    for name, (body, shape_vars) in cases.items():
        out = vectorize_loops(PrimFunc("f", (a, c), shape_vars, body))
        assert _kinds(out) == [ForKind.SERIAL], name
        assert not _nodes(out, Ramp), name
    # The serial fallback of the reduction and the lane dependency compute the serial result.
    for name in ("reduction", "lane dependency"):
        body, _ = cases[name]
        m = build_module(vectorize_loops(PrimFunc("f", (a, c), (), body)))
        x = np.arange(100, dtype="float32")
        y = np.zeros(100, "float32")
        m(x, y)
        if name == "reduction":
            assert y[0] == x[:16].sum()
        else:
            np.testing.assert_array_equal(y[:17], np.arange(17, dtype="float32"))


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


def test_unroll_constant_min_folds_and_limits() -> None:
    a = buf("A", "float32", (200,))
    i = Var("i", INT32)
    n = Var("n", INT32)
    out = unroll_loops(
        PrimFunc(
            "u", (a,), (), loop(i, 3, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED, lo=5)
        )
    )
    assert [s.index.value for s in _nodes(out, BufferStore)] == [5, 6, 7]
    for extent in (n, const(65)):
        kept = loop(i, extent, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED)
        assert _kinds(unroll_loops(PrimFunc("u", (a,), (n,), kept))) == [ForKind.SERIAL]
