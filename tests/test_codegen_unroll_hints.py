"""Which loops codegen keeps from LLVM's unroller (CodeGen._loop_metadata): register blocks the
schedule unrolled already and loops holding a loop kept rolled, never a plain vector loop, and
that the kernels still compute what numpy does."""

from __future__ import annotations

import re

import numpy as np
from ir_builders import buf, load, loop

import tensorlang as tl
from tensorlang.codegen import codegen
from tensorlang.codegen.llvm import REGISTER_BLOCK_STORES
from tensorlang.dtype import INT32
from tensorlang.expr import Var
from tensorlang.ir import BufferStore, ForKind, PrimFunc, seq
from tensorlang.lower.vectorize import vectorize_loops
from tensorlang.runtime import build_module


def _rolled_loops(ll: str) -> list[str]:
    """The variables of the loops whose metadata asks LLVM not to unroll them."""
    meta = dict(re.findall(r"^!(\d+) = (.*)$", ll, re.M))
    latch = r"%next\d+ = add nsw i64 %(\w+?)\d+, 1\n  br label %\w+, !llvm.loop !(\d+)"
    return [var for var, node in re.findall(latch, ll)
            if any("unroll.disable" in meta[n] for n in re.findall(r"!(\d+)", meta[node])[1:])]


def _blocks(stores: int):
    """out[i, 16 b + l] = 2 x[i, 16 b + l] with b unrolled into `stores` vector stores per i."""
    x, out = buf("x", "float32", (9, 16 * stores)), buf("out", "float32", (9, 16 * stores))
    i, lane = Var("i", INT32), Var("l", INT32)
    body = seq(*[loop(lane, 16, BufferStore(out, i * (16 * stores) + 16 * b + lane,
                                            load(x, i * (16 * stores) + 16 * b + lane) * 2.0),
                      ForKind.VECTORIZED) for b in range(stores)])
    return vectorize_loops(PrimFunc("blocks", (x, out), (), loop(i, 9, body))), stores


def test_a_register_block_is_kept_rolled_and_a_vector_loop_is_not(rng) -> None:
    for stores in (1, REGISTER_BLOCK_STORES - 1, REGISTER_BLOCK_STORES, 7):
        func, n = _blocks(stores)
        ll = codegen(func, "llvm")
        assert (_rolled_loops(ll) == ["i"]) == (stores >= REGISTER_BLOCK_STORES), (stores, ll)
        x = rng.random((9, 16 * n), dtype=np.float32)
        out = np.zeros_like(x)
        build_module(func)(x, out)
        np.testing.assert_array_equal(out, 2 * x)


def test_a_loop_holding_a_rolled_loop_is_kept_rolled(rng) -> None:
    # B[i, j, k] = A[i, k, j] + 1 with j marked scalar_loop (kept rolled): i and j stay rolled,
    # k, an innermost loop of scalar stores, is LLVM's.
    A = tl.placeholder((5, 7, 3), name="A")
    B = tl.compute((5, 3, 7), lambda i, j, k: A[i, k, j] + 1.0, name="B")
    s = tl.create_schedule(B.op)
    s[B].pragma(B.op.axis[1], "scalar_loop")
    f = tl.build(s, [A, B])
    rolled = _rolled_loops(f.get_source("ll"))
    assert sorted(rolled) == ["i", "j"], rolled
    a = rng.random((5, 7, 3), dtype=np.float32)
    b = np.zeros((5, 3, 7), "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a.transpose(0, 2, 1) + 1)
