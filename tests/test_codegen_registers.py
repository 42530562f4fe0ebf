"""Stack elements carried in registers through loops (codegen/promote.py): which accesses allow
it, and that kernels with and without it compute what numpy does, AVX-512 and AVX2."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from ir_builders import buf, load, loop

import tensorlang as tl
import topi
from tensorlang.codegen import codegen
from tensorlang.dtype import INT32, as_dtype
from tensorlang.expr import Const, Var, const
from tensorlang.ir import (
    Allocate,
    Broadcast,
    BufferLoad,
    BufferStore,
    IfThenElse,
    PrimFunc,
    Ramp,
    Scope,
    seq,
)
from tensorlang.runtime import build_module

F32 = as_dtype("float32")


def _ramp(base: int, lanes: int) -> Ramp:
    return Ramp(const(base), const(1), lanes, INT32.with_lanes(lanes))


def _vload(b, base: int, lanes: int) -> BufferLoad:
    return BufferLoad(b, _ramp(base, lanes), F32.with_lanes(lanes))


def _sum_kernel(acc_body):
    """out[0:8] = sum over k of x[k, 0:8], the sum kept in an 8-float stack buffer `acc`
    whose accesses inside the k loop `acc_body(acc, x, k)` writes."""
    n = 13
    x, out = buf("x", "float32", (n, 8)), buf("out", "float32", (8,))
    acc = buf("acc", "float32", (8,), Scope.LOCAL)
    k, i = Var("k", INT32), Var("i", INT32)
    body = Allocate(acc, seq(
        loop(i, 8, BufferStore(acc, i, Const(0.0, F32))),
        loop(k, n, acc_body(acc, x, k)),
        loop(i, 8, BufferStore(out, i, load(acc, i))),
    ))
    return PrimFunc("sums", (x, out), (), body), n


def _run_sum(func, n, rng) -> str:
    xs = rng.random((n, 8), dtype=np.float32)
    out = np.zeros(8, "float32")
    build_module(func)(xs, out)
    np.testing.assert_allclose(out, xs.sum(axis=0), rtol=1e-5)
    return codegen(func, "llvm")


def _row(x, k, base: int, lanes: int) -> BufferLoad:
    return BufferLoad(x, Ramp(k * 8 + base, const(1), lanes, INT32.with_lanes(lanes)),
                      F32.with_lanes(lanes))


def test_constant_slots_are_carried_through_the_loop(rng) -> None:
    # A 4-lane vector at 0, scalars at 5..7, and a scalar at 4 that the loop only reads.
    def body(acc, x, k):
        return seq(
            BufferStore(acc, _ramp(0, 4), _vload(acc, 0, 4) + _row(x, k, 0, 4)),
            *[BufferStore(acc, const(j), load(acc, const(j)) + load(x, k * 8 + j)
                          + load(acc, const(4)) * 0.0) for j in (5, 6, 7)],
        )

    func, n = _sum_kernel(body)
    xs = rng.random((n, 8), dtype=np.float32)
    out = np.zeros(8, "float32")
    build_module(func)(xs, out)
    expected = xs.sum(axis=0)
    expected[4] = 0.0
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    ll = codegen(func, "llvm")
    # One phi per written element; the read-only one is loaded once before the loop.
    assert ll.count("= phi <4 x float>") == 1 and ll.count("= phi float") == 3, ll


@pytest.mark.parametrize("case", ["computed index", "conditional store", "overlap"])
def test_slots_that_must_stay_in_memory(case: str, rng) -> None:
    def body(acc, x, k):
        if case == "computed index":
            j = Var("j", INT32)
            return loop(j, 8, BufferStore(acc, j, load(acc, j) + load(x, k * 8 + j)))
        if case == "conditional store":
            stores = [BufferStore(acc, const(j), load(acc, const(j)) + load(x, k * 8 + j))
                      for j in range(8)]
            return seq(*stores[:7], IfThenElse(k >= 0, stores[7]))
        # A vector over 0..3 and a scalar at 2: one element would live in two registers.
        return seq(
            BufferStore(acc, _ramp(0, 4), _vload(acc, 0, 4) + _row(x, k, 0, 4)),
            BufferStore(acc, const(2), load(acc, const(2)) + 0.0),
            *[BufferStore(acc, const(j), load(acc, const(j)) + load(x, k * 8 + j))
              for j in range(4, 8)],
        )

    func, n = _sum_kernel(body)
    ll = _run_sum(func, n, rng)
    assert "carry" not in ll


def test_slots_at_a_base_the_loop_keeps_are_carried(rng) -> None:
    """out[i, 0:8] = sum over k of x[i, k, 0:8], the sums of all rows in one stack buffer:
    the loop over k reads and writes acc[i * 8 + 0:8], a base it does not change, so it carries
    that vector in a register; the loop over i, whose rows move the base, does not."""
    rows, n = 5, 7
    x, out = buf("x", "float32", (rows, n, 8)), buf("out", "float32", (rows, 8))
    acc = buf("acc", "float32", (rows * 8,), Scope.LOCAL)
    i, k = Var("i", INT32), Var("k", INT32)

    def vector(b, base):
        return BufferLoad(b, _ramp_at(base), F32.with_lanes(8))

    body = Allocate(acc, loop(i, rows, seq(
        BufferStore(acc, _ramp_at(i * 8), Broadcast(Const(0.0, F32), 8, F32.with_lanes(8))),
        loop(k, n, BufferStore(acc, _ramp_at(i * 8),
                               vector(acc, i * 8) + vector(x, i * n * 8 + k * 8))),
        BufferStore(out, _ramp_at(i * 8), vector(acc, i * 8)),
    )))
    func = PrimFunc("row_sums", (x, out), (), body)
    xs = rng.random((rows, n, 8), dtype=np.float32)
    result = np.zeros((rows, 8), "float32")
    build_module(func)(xs, result)
    np.testing.assert_allclose(result, xs.sum(axis=1), rtol=1e-5)
    ll = codegen(func, "llvm")
    assert ll.count("= phi <8 x float>") == 1, ll


def _ramp_at(base) -> Ramp:
    return Ramp(base, const(1), 8, INT32.with_lanes(8))


def _matmul(m: int, n: int, k: int):
    A = tl.placeholder((m, k), name="A")
    B = tl.placeholder((k, n), name="B")
    C = topi.nn.matmul(A, B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback config's warning
        return topi.x86.schedule_matmul(C), [A, B, C]


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (37, 53, 29), (64, 96, 7)])
def test_register_blocked_matmul_matches_numpy(m, n, k, target, rng) -> None:
    with tl.Target(target):
        s, args = _matmul(m, n, k)
        f = tl.build(s, args, target=target)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    c = np.zeros((m, n), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
