"""Optimising a GEMM on the CPU, one schedule step at a time.

C = A @ B for 1024 x 1024 float32 matrices. The computation never changes; only the schedule does.
Each step below adds one idea, prints the loop IR it produces, and the table at the end compares
every step with numpy's `A @ B` (OpenBLAS), measured side by side in this process.

    python tutorials/03_optimize_gemm.py            # the full 1024^3 ladder
    python tutorials/03_optimize_gemm.py 256 --quiet
    TL_TUTORIAL_SMALL=1 python tutorials/03_optimize_gemm.py   # 96^3, one timing round (CI)

The steps follow the classic recipe:
1. naive: three nested loops, C[i, j] += A[i, k] * B[k, j].
2. blocking: work on 32 x 32 tiles of C so that the data a tile needs stays in cache.
3. vectorize: the innermost loop over j becomes SIMD lanes (AVX-512 holds 16 floats).
4. loop permutation: walk k outside the rows of the tile, so B is read along its rows.
5. packing B: copy B into [N/32][K][32] panels so the inner loop reads contiguous memory.
6. write cache: accumulate an 8 x 32 block of C in registers (cache_write + unroll).
7. parallel: run the row blocks on all cores.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np

import tensorlang as tl
from tensorlang.benchmark import compare

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes
BLOCK = 32  # columns of a tile / a packed panel: two AVX-512 vectors of float32
ROWS = 8  # rows of the register block: 8 x 2 accumulators out of 32 vector registers


def gemm(M: int, N: int, K: int):
    A = tl.placeholder((M, K), "float32", name="A")
    B = tl.placeholder((K, N), "float32", name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def naive(M: int, N: int, K: int):
    A, B, C = gemm(M, N, K)
    return tl.create_schedule(C.op), [A, B, C]


def blocking(M: int, N: int, K: int, vectorize: bool = False, permute: bool = False):
    A, B, C = gemm(M, N, K)
    s = tl.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], BLOCK, BLOCK)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    if permute:
        s[C].reorder(mo, no, ko, mi, ki, ni)
    else:
        s[C].reorder(mo, no, ko, ki, mi, ni)
    if vectorize:
        s[C].vectorize(ni)
    return s, [A, B, C]


def vectorized(M: int, N: int, K: int):
    return blocking(M, N, K, vectorize=True)


def permuted(M: int, N: int, K: int):
    return blocking(M, N, K, vectorize=True, permute=True)


def packed_gemm(M: int, N: int, K: int):
    """C reads B from [N/32][K][32] panels (a compute of its own, so a stage to schedule)."""
    A = tl.placeholder((M, K), "float32", name="A")
    B = tl.placeholder((K, N), "float32", name="B")
    panels = (N + BLOCK - 1) // BLOCK
    packed = tl.compute(
        (panels, K, BLOCK),
        lambda x, y, z: tl.if_then_else(x * BLOCK + z < N, B[y, x * BLOCK + z], 0.0),
        name="packedB",
    )
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute(
        (M, N),
        lambda i, j: tl.sum(A[i, k] * packed[j // BLOCK, k, j % BLOCK], axis=k),
        name="C",
    )
    return A, B, packed, C


def packing(M: int, N: int, K: int):
    A, B, packed, C = packed_gemm(M, N, K)
    s = tl.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], BLOCK, BLOCK)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(mo, no, ko, mi, ki, ni)
    s[C].vectorize(ni)
    s[packed].vectorize(packed.op.axis[2])
    return s, [A, B, C]


def write_cache(M: int, N: int, K: int, parallel: bool = False):
    A, B, packed, C = packed_gemm(M, N, K)
    s = tl.create_schedule(C.op)
    CC = s.cache_write(C, "local")  # the register block
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], ROWS, BLOCK)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, ki, mc, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(mc)
    s[CC].unroll(ki)
    s[C].vectorize(ni)
    x, y, z = packed.op.axis
    s[packed].vectorize(z)
    if parallel:
        s[C].parallel(mo)
        s[packed].parallel(x)
    return s, [A, B, C]


def parallel(M: int, N: int, K: int):
    return write_cache(M, N, K, parallel=True)


STEPS: list[tuple[str, Callable]] = [
    ("naive", naive),
    ("blocking", blocking),
    ("vectorize", vectorized),
    ("loop permutation", permuted),
    ("packing B", packing),
    ("write cache", write_cache),
    ("parallel", parallel),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("size", nargs="?", type=int, default=96 if SMALL else 1024)
    parser.add_argument("--quiet", action="store_true", help="do not print the loop IR")
    opts = parser.parse_args()
    M = N = K = opts.size
    rng = np.random.default_rng(0)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    expected = a @ b
    flop = 2.0 * M * N * K
    rows = []
    for name, step in STEPS:
        s, args = step(M, N, K)
        if not opts.quiet:
            print(f"\n=== {name} ===")
            print(tl.lower(s, args, name="gemm"))
        f = tl.build(s, args, name="gemm")
        c = np.zeros((M, N), "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-3)
        slow = SMALL or name in ("naive", "blocking")
        result = compare(lambda: f(a, b, c), lambda: a @ b, repeat=1 if slow else 7,
                         min_seconds=0.01 if SMALL else 0.05)
        ours, ref = result.gflops(flop)
        rows.append((name, ours, ref, result.speedup))
    print(f"\nGEMM {M}x{N}x{K} float32, {tl.get_num_threads()} threads; numpy measured alongside")
    print(f"{'step':<18}{'GFLOP/s':>10}{'numpy GFLOP/s':>15}{'ratio':>8}")
    for name, ours, ref, ratio in rows:
        print(f"{name:<18}{ours:>10.1f}{ref:>15.1f}{ratio:>8.2f}")
    print("every step matches numpy")


if __name__ == "__main__":
    main()
