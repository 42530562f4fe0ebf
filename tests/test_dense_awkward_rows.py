"""Matrix products whose row count no register block divides (issue 23: ViT's 197 = 196 patches +
the class token, ViT-B/32's 50, primes, a single row): the fallback schedule's last row block is
partial (its rows clamped in the product, cut in the store), and the result must not depend on it.
Checked against numpy on the host (AVX-512 blocks of 4 rows) and -mcpu=haswell (6 rows), with the
bias and activation epilogues that the graph fuses into the product."""

from __future__ import annotations

import numpy as np
import pytest
from topi_check import assert_close, dense_case, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref

TARGETS = ["llvm", "llvm -mcpu=haswell"]
#: Rows that leave a partial block of 4 and of 6 (197 = 4 x 49 + 1 = 6 x 32 + 5), primes, 1, and
#: ViT-B/32's 50 rows.
ROWS = [1, 5, 7, 13, 50, 197]


def _run(target: str, out: tl.Tensor, inputs: list[tl.Tensor], arrays: list[np.ndarray],
         schedule) -> np.ndarray:
    f = tl.build(schedule([out]), [*inputs, out], target=target)
    result = np.zeros([int(d) for d in out.shape], out.dtype)
    f(*arrays, result)
    return result


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("tail", ["none", "bias", "bias_relu"])
def test_dense_awkward_rows(target, m, tail, rng):
    k, n = 37, 83  # neither a multiple of a vector: partial column panels too
    with tl.Target(target):
        out, inputs, arrays, expected = dense_case(rng, m, k, n, tail)
        assert_close(_run(target, out, inputs, arrays, x86.schedule_dense), expected, k)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [1, 7, 50, 197])
def test_matmul_awkward_rows_with_bias(target, m, rng):
    """ViT's projections as ONNX gives them: (1, M, K) x (K, N) + bias, N past the parallel
    column blocks' threshold (64 columns of 16) and a partial last panel."""
    k, n = 29, 131
    with tl.Target(target):
        a = tl.placeholder((1, m, k), name="a")
        b = tl.placeholder((k, n), name="b")
        bias = tl.placeholder((n,), name="bias")
        arrays = [uniform(rng, 1, m, k), uniform(rng, k, n), uniform(rng, n)]
        out = nn.relu(nn.matmul(a, b, bias=bias))
        expected = np.maximum(arrays[0] @ arrays[1] + arrays[2], 0)
        assert_close(_run(target, out, [a, b, bias], arrays, x86.schedule_matmul), expected, k)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,n", [(1, 13), (7, 197), (197, 17), (50, 50)])
def test_batch_matmul_awkward_rows(target, m, n, rng):
    """Attention's products at awkward sequence lengths: Q K^T (M = N = tokens) and P V."""
    k = 19
    with tl.Target(target):
        x = tl.placeholder((3, m, k), name="x")
        y = tl.placeholder((3, n, k), name="y")
        arrays = [uniform(rng, 3, m, k), uniform(rng, 3, n, k)]
        out = nn.batch_matmul(x, y)
        assert_close(_run(target, out, [x, y], arrays, x86.schedule_batch_matmul),
                     ref.batch_matmul_python(*arrays), k)

