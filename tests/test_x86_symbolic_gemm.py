"""The GEMM schedule of symbolic extents (topi/x86/symbolic_gemm.py) against numpy, at awkward
sizes, on the host and with AVX2."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from topi import nn, x86

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _build(out: tl.Tensor, inputs: list[tl.Tensor], target: str,
           schedule=x86.schedule_batch_matmul):
    with tl.Target(target):
        return tl.build(schedule(out), [*inputs, out]), tl.lower(schedule(out), [*inputs, out])


@pytest.mark.parametrize("target", TARGETS)
def test_attention_products_with_a_symbolic_sequence(target):
    """Q K^T (columns and rows symbolic, K = 8) and P V (rows and K symbolic, 8 columns: fewer
    than a vector) of 4 heads, at 1, primes and sizes that split no block evenly."""
    n = tl.var("n")
    q, k = tl.placeholder((4, n, 8), name="q"), tl.placeholder((4, n, 8), name="k")
    p, v = tl.placeholder((4, n, n), name="p"), tl.placeholder((4, 8, n), name="v")
    scores, context = nn.batch_matmul(q, k), nn.batch_matmul(p, v)
    f_scores, ir_scores = _build(scores, [q, k], target)
    f_context, ir_context = _build(context, [p, v], target)
    for ir in (ir_scores, ir_context):  # panels packed per chunk, not gathered per K step
        assert "b_pack = allocate" in str(ir)
    rng = np.random.default_rng(0)
    for size in (1, 2, 7, 17, 61, 64, 100):
        qa, ka = (rng.standard_normal((4, size, 8), dtype="float32") for _ in range(2))
        pa = rng.standard_normal((4, size, size), dtype="float32")
        va = rng.standard_normal((4, 8, size), dtype="float32")
        got = np.empty((4, size, size), "float32")
        f_scores(qa, ka, got)
        np.testing.assert_allclose(got, qa @ ka.transpose(0, 2, 1), rtol=1e-4, atol=1e-4,
                                   err_msg=f"scores at {size}")
        got = np.empty((4, size, 8), "float32")
        f_context(pa, va, got)
        np.testing.assert_allclose(got, pa @ va.transpose(0, 2, 1), rtol=1e-4, atol=1e-4,
                                   err_msg=f"context at {size}")


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_batch_and_every_extent(target):
    """A symbolic batch with static rows (their row panels read in place), and everything
    symbolic, including K."""
    b, m, n, k = (tl.var(v) for v in "bmnk")
    rng = np.random.default_rng(1)
    cases = [((b, 9, 20), (b, 37, 20), [{"b": 1}, {"b": 3}]),
             ((b, m, k), (b, n, k), [{"b": 1, "m": 1, "n": 1, "k": 1},
                                     {"b": 2, "m": 13, "n": 50, "k": 3},
                                     {"b": 3, "m": 9, "n": 37, "k": 20}])]
    for x_shape, y_shape, sizes in cases:
        x, y = tl.placeholder(x_shape, name="x"), tl.placeholder(y_shape, name="y")
        out = nn.batch_matmul(x, y)
        f, _ = _build(out, [x, y], target)
        for values in sizes:
            xa = rng.standard_normal(_at(x_shape, values), dtype="float32")
            ya = rng.standard_normal(_at(y_shape, values), dtype="float32")
            got = np.empty((xa.shape[0], xa.shape[1], ya.shape[1]), "float32")
            f(xa, ya, got)
            np.testing.assert_allclose(got, xa @ ya.transpose(0, 2, 1), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{x_shape} x {y_shape} at {values}")


def _at(shape, values):
    return tuple(values[d.name] if isinstance(d, tl.Var) else d for d in shape)


@pytest.mark.parametrize("target", TARGETS)
def test_dense_with_symbolic_rows_and_a_fused_tail(target):
    rows = tl.var("rows")
    data, weight = tl.placeholder((rows, 24), name="data"), tl.placeholder((35, 24), name="w")
    bias = tl.placeholder((35,), name="bias")
    out = nn.relu(nn.dense(data, weight, bias))
    f, _ = _build(out, [data, weight, bias], target, x86.schedule_dense)
    rng = np.random.default_rng(2)
    wa = rng.standard_normal((35, 24), dtype="float32")
    ba = rng.standard_normal(35, dtype="float32")
    for size in (1, 5, 31, 64):
        xa = rng.standard_normal((size, 24), dtype="float32")
        got = np.empty((size, 35), "float32")
        f(xa, wa, ba, got)
        np.testing.assert_allclose(got, np.maximum(xa @ wa.T + ba, 0), rtol=1e-4, atol=1e-4)


def test_serial_variant_runs_on_the_calling_thread():
    """The variant a symbolic module runs below the L2 size has no parallel loop."""
    from topi.x86.common import symbolic_outputs_small

    n = tl.var("n")
    q, k = tl.placeholder((4, n, 8), name="q"), tl.placeholder((4, n, 8), name="k")
    out = nn.batch_matmul(q, k)
    assert "parallel" in str(tl.lower(x86.schedule_batch_matmul(out), [q, k, out]))
    with symbolic_outputs_small():
        s = x86.schedule_batch_matmul(out)
    assert "parallel" not in str(tl.lower(s, [q, k, out]))
    f = tl.build(s, [q, k, out])
    qa, ka = np.ones((4, 3, 8), "float32"), np.full((4, 3, 8), 2, "float32")
    got = np.empty((4, 3, 3), "float32")
    f(qa, ka, got)
    np.testing.assert_allclose(got, np.full((4, 3, 3), 16, "float32"))
