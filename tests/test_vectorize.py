"""The vectorize and unroll passes: the IR they produce, their fallbacks, and compiled results."""

from __future__ import annotations

import numpy as np

from tensorlang.dtype import HANDLE, INT32, as_dtype
from tensorlang.expr import Const, Var, const
from tensorlang.ir import (
    Allocate,
    Broadcast,
    Buffer,
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


def _buf(name: str, shape: tuple, dtype: str = "float32", scope: Scope = Scope.GLOBAL) -> Buffer:
    return Buffer(
        name,
        as_dtype(dtype),
        tuple(const(s) if isinstance(s, int) else s for s in shape),
        Var(name, HANDLE),
        scope,
    )


def _ld(b: Buffer, index) -> BufferLoad:  # noqa: ANN001
    return BufferLoad(b, index, b.dtype)


def _for(var: Var, extent, body, kind=ForKind.SERIAL, lo=0) -> For:  # noqa: ANN001
    return For(
        var,
        const(lo) if isinstance(lo, int) else lo,
        const(extent) if isinstance(extent, int) else extent,
        kind,
        body,
    )


def _nodes(func: PrimFunc, cls: type) -> list:
    found: list = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def _kinds(func: PrimFunc) -> list[ForKind]:
    return [f.kind for f in _nodes(func, For)]


def test_contiguous_loop_becomes_ramp_store() -> None:
    a, c = _buf("A", (32,)), _buf("C", (32,))
    i = Var("i", INT32)
    func = PrimFunc(
        "v", (a, c), (), _for(i, 16, BufferStore(c, i + 16, _ld(a, i) * 2.0), ForKind.VECTORIZED)
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
    a, s, c = _buf("A", (40,)), _buf("s", (1,)), _buf("C", (40,))
    i = Var("i", INT32)
    zero = Const(0, INT32)
    func = PrimFunc(
        "m",
        (a, s, c),
        (),
        _for(i, 8, BufferStore(c, i, _ld(a, i) + _ld(s, zero)), ForKind.VECTORIZED, lo=5),
    )
    out = vectorize_loops(func)
    assert any(isinstance(n, Broadcast) for n in _nodes(out, Broadcast))
    x, y = np.arange(40, dtype="float32"), np.zeros(40, "float32")
    build_module(out)(x, np.array([3], "float32"), y)
    np.testing.assert_array_equal(y[5:13], x[5:13] + 3)
    assert (y[:5] == 0).all() and (y[13:] == 0).all()


def test_inner_loop_stays_a_loop_around_vectors() -> None:
    """C[j] += A[k] * B[k, j] with j vectorized outside the k loop (a GEMM row)."""
    a, b, c = _buf("A", (8,)), _buf("B", (8, 16)), _buf("C", (16,))
    j, k = Var("j", INT32), Var("k", INT32)
    body = _for(k, 8, BufferStore(c, j, _ld(c, j) + _ld(a, k) * _ld(b, k * 16 + j)))
    out = vectorize_loops(PrimFunc("row", (a, b, c), (), _for(j, 16, body, ForKind.VECTORIZED)))
    assert _kinds(out) == [ForKind.SERIAL]
    rng = np.random.default_rng(0)
    x, w = rng.random(8, dtype="float32"), rng.random((8, 16), dtype="float32")
    y = np.zeros(16, "float32")
    build_module(out)(x, w, y)
    np.testing.assert_allclose(y, x @ w, rtol=1e-5)


def test_fallbacks_to_serial() -> None:
    a, c = _buf("A", (100,)), _buf("C", (100,))
    i = Var("i", INT32)
    n = Var("n", INT32)
    zero = Const(0, INT32)
    tmp = _buf("tmp", (1,), scope=Scope.LOCAL)
    cases = {
        "symbolic extent": (_for(i, n, BufferStore(c, i, _ld(a, i)), ForKind.VECTORIZED), (n,)),
        "reduction": (
            _for(i, 16, BufferStore(c, zero, _ld(c, zero) + _ld(a, i)), ForKind.VECTORIZED),
            (),
        ),
        "lane dependency": (
            _for(i, 16, BufferStore(c, i + 1, _ld(c, i) + 1.0), ForKind.VECTORIZED),
            (),
        ),
        "allocate": (
            _for(i, 16, Allocate(tmp, BufferStore(c, i, _ld(a, i))), ForKind.VECTORIZED),
            (),
        ),
        "too many lanes": (_for(i, 65, BufferStore(c, i, _ld(a, i)), ForKind.VECTORIZED), ()),
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
    a, c = _buf("A", (n,)), _buf("C", (n,))
    io, ii = Var("io", INT32), Var("ii", INT32)
    idx = io * 8 + ii
    guard = IfThenElse(idx < n, BufferStore(c, idx, _ld(a, idx) * 3.0), None, likely=True)
    func = PrimFunc(
        "t", (a, c), (n,), _for(io, (n + 7) // 8, _for(ii, 8, guard, ForKind.VECTORIZED))
    )
    out = vectorize_loops(func)
    (store,) = _nodes(out, BufferStore)
    (load,) = _nodes(out, BufferLoad)
    assert store.mask is not None and load.mask is not None
    assert not _nodes(out, IfThenElse)
    x = np.arange(13, dtype="float32")
    big = np.full(24, -1.0, "float32")
    build_module(out)(x, big[:13])
    np.testing.assert_array_equal(big[:13], x * 3)
    assert (big[13:] == -1).all()


def test_let_in_vector_loop() -> None:
    a, c = _buf("A", (16,)), _buf("C", (16,))
    i, t = Var("i", INT32), Var("t", F32)
    body = LetStmt(t, _ld(a, i) + 1.0, BufferStore(c, i, t * t))
    out = vectorize_loops(PrimFunc("let", (a, c), (), _for(i, 16, body, ForKind.VECTORIZED)))
    (let,) = _nodes(out, LetStmt)
    assert let.var.dtype.lanes == 16
    x, y = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    build_module(out)(x, y)
    np.testing.assert_array_equal(y, (x + 1) ** 2)


def test_unroll_copies_body() -> None:
    a, c = _buf("A", (12,)), _buf("C", (12,))
    i, j = Var("i", INT32), Var("j", INT32)
    body = _for(
        i, 3, _for(j, 4, BufferStore(c, i * 4 + j, _ld(a, i * 4 + j) + 1.0), ForKind.UNROLLED)
    )
    out = unroll_loops(PrimFunc("u", (a, c), (), body))
    assert _kinds(out) == [ForKind.SERIAL]
    (outer,) = _nodes(out, For)
    assert isinstance(outer.body, Seq) and len(outer.body.stmts) == 4
    x, y = np.arange(12, dtype="float32"), np.zeros(12, "float32")
    build_module(out)(x, y)
    np.testing.assert_array_equal(y, x + 1)


def test_unroll_constant_min_folds_and_limits() -> None:
    a = _buf("A", (200,))
    i = Var("i", INT32)
    n = Var("n", INT32)
    out = unroll_loops(
        PrimFunc(
            "u", (a,), (), _for(i, 3, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED, lo=5)
        )
    )
    assert [s.index.value for s in _nodes(out, BufferStore)] == [5, 6, 7]
    for extent in (n, const(65)):
        loop = _for(i, extent, BufferStore(a, i, Const(1.0, F32)), ForKind.UNROLLED)
        assert _kinds(unroll_loops(PrimFunc("u", (a,), (n,), loop))) == [ForKind.SERIAL]
