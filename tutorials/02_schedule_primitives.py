"""Schedule primitives, one at a time, with the loop IR each one produces.

    python tutorials/02_schedule_primitives.py

The computation stays `B[i, j] = A[i, j] * 2 + 1` on a 10 x 12 array (and, for the producer /
consumer lessons, a two-stage pipeline). Every lesson builds a schedule, prints the loops it
lowers to and checks the compiled result against numpy. 10 and 12 are deliberately awkward: a
split by 4 does not divide 10, and the printed IR shows how the tail is handled.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tensorlang as tl

ROWS, COLS = 10, 12


def elementwise():
    A = tl.placeholder((ROWS, COLS), "float32", name="A")
    B = tl.compute((ROWS, COLS), lambda i, j: A[i, j] * 2 + 1, name="B")
    return A, B


def default():
    """One loop per axis, in order: the schedule before any primitive."""
    A, B = elementwise()
    return tl.create_schedule(B.op), [A, B]


def split():
    """split(i, factor=4): i = i.outer * 4 + i.inner. 4 does not divide 10, so the loop nest
    gets a guard-free main part and a two-row tail."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=4)
    return s, [A, B]


def tile_and_reorder():
    """tile = two splits and a reorder: loops over 4 x 4 blocks, then inside each block."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    s[B].tile(B.op.axis[0], B.op.axis[1], 4, 4)
    return s, [A, B]


def fuse_and_parallel():
    """fuse(i, j) makes one loop of 120 iterations; parallel runs its chunks on all cores."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    fused = s[B].fuse(*B.op.axis)
    s[B].parallel(fused)
    return s, [A, B]


def vectorize():
    """vectorize(j.inner): the 16 iterations become one 16-lane vector operation; the last,
    partial vector of each row is masked."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    return s, [A, B]


def unroll():
    """unroll(j.inner): the loop body is copied out, once per iteration."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=3)
    s[B].unroll(ji)
    return s, [A, B]


def pipeline():
    A = tl.placeholder((ROWS, COLS), "float32", name="A")
    T = tl.compute((ROWS, COLS), lambda i, j: A[i, j] * 2, name="T")
    B = tl.compute((ROWS, COLS), lambda i, j: T[i, j] + 1, name="B")
    return A, T, B


def compute_inline():
    """compute_inline(T): T is substituted into B; it gets no loops and no memory."""
    A, T, B = pipeline()
    s = tl.create_schedule(B.op)
    s[T].compute_inline()
    return s, [A, B]


def compute_at():
    """compute_at(s[B], i): the row of T that one iteration of B's i loop needs is computed
    just before it, in a small buffer (better locality than computing all of T first)."""
    A, T, B = pipeline()
    s = tl.create_schedule(B.op)
    s[T].compute_at(s[B], B.op.axis[0])
    return s, [A, B]


def cache_write():
    """cache_write(B, "local"): B is computed into a local buffer, then copied out; attached
    under a tile of B, the buffer holds one tile (the register-block idiom of fast GEMMs)."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    io, jo, ii, ji = s[B].tile(B.op.axis[0], B.op.axis[1], 2, 4)
    s[BL].compute_at(s[B], jo)
    return s, [A, B]


LESSONS: list[Callable] = [
    default,
    split,
    tile_and_reorder,
    fuse_and_parallel,
    vectorize,
    unroll,
    compute_inline,
    compute_at,
    cache_write,
]


def check(s: tl.Schedule, args: list) -> None:
    """Build the schedule and compare its result with numpy."""
    f = tl.build(s, args)
    a = np.arange(ROWS * COLS, dtype="float32").reshape(ROWS, COLS)
    b = np.zeros((ROWS, COLS), "float32")
    f(a, b)
    np.testing.assert_allclose(b, a * 2 + 1)


def main() -> None:
    for lesson in LESSONS:
        s, args = lesson()
        print(f"=== {lesson.__name__}: {lesson.__doc__.strip()}")
        print(s[args[-1]])
        print(tl.lower(s, args, name=lesson.__name__))
        check(s, args)
        print()
    print("all lessons match numpy")


if __name__ == "__main__":
    main()
