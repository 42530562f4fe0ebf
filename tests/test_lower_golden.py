"""Golden text of the lowered IR for a handful of schedules (the printer's format is stable)."""

from __future__ import annotations

import tensorlang as tl
from tensorlang.lower import lower_structure


def lowered(s, args, name):
    return str(tl.lower(s, args, name)).strip()


def elementwise():
    A = tl.placeholder((10, 6), "float32", name="A")
    B = tl.compute((10, 6), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B


def test_default_schedule():
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    assert lowered(s, [A, B], "scale") == SCALE


def test_non_dividing_split_has_guard_free_main_loop_and_tail():
    """The guard of the last, partial block is decided by the inner loop: unrolled, the block
    runs in a main loop and a tail of its own; serial, its loop stops at the edge."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(xo)
    assert lowered(s, [A, B], "split_edge") == SPLIT_EDGE
    s[B].unroll(xi)
    assert lowered(s, [A, B], "split_tail") == SPLIT_TAIL


def test_guard_that_the_inner_loop_cannot_split_is_split_at_the_outer_loop():
    """Rows and columns fused: the guard is not linear in the fused loop, so the row blocks are
    split instead, the full ones unguarded; in the last one the guard bounds the fused loop's
    row (`fused // 6 + 8 < 10`), a bound on the fused loop itself, which ends where the rows
    do."""
    A, B = elementwise()
    s = tl.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].fuse(xi, B.op.axis[1])
    assert lowered(s, [A, B], "fused_tail") == FUSED_TAIL


def test_partial_tile_loops_run_only_where_their_guard_holds():
    """A block computed per tile of a non-dividing split (20 = 2 x 8 + 4): in the last tile the
    block's loop runs 4 iterations instead of 8 under a guard, already in the loop structure
    (so unrolling copies 4 bodies, not 8), and the vectorized tail is a 4-lane vector with no
    mask."""
    A = tl.placeholder((20,), "float32", name="A")
    B = tl.compute((20,), lambda i: A[i] * 2.0, name="B")
    C = tl.compute((20,), lambda i: B[i] + 1.0, name="C")
    s = tl.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=8)
    s[B].compute_at(s[C], outer)
    s[B].unroll(s[B].op.axis[0])
    s[C].vectorize(inner)
    structure = str(lower_structure(s, [A, C], "tile_tail"))
    assert "for i in range(4):  # unrolled" in structure and " if " not in structure
    assert lowered(s, [A, C], "tile_tail") == TILE_TAIL


def test_reduction_init_before_first_reduction_loop():
    A = tl.placeholder((16, 8), "float32", name="A")
    k = tl.reduce_axis((0, 8), name="k")
    R = tl.compute((16,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=4)
    s[R].reorder(ko, R.op.axis[0], ki)
    assert lowered(s, [A, R], "rowsum") == ROWSUM


def test_compute_inline():
    A = tl.placeholder((8,), "float32", name="A")
    B = tl.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = tl.compute((8,), lambda i: B[i] * B[i], name="C")
    s = tl.create_schedule(C.op)
    s[B].compute_inline()
    assert lowered(s, [A, C], "inlined") == INLINED


def test_compute_at_allocates_the_region_with_its_halo():
    A = tl.placeholder((12,), "float32", name="A")
    B = tl.compute((12,), lambda i: A[i] + 1.0, name="B")
    C = tl.compute((10,), lambda i: B[i] + B[i + 2], name="C")
    s = tl.create_schedule(C.op)
    co, ci = s[C].split(C.op.axis[0], factor=5)
    s[B].compute_at(s[C], co)
    assert lowered(s, [A, C], "stencil") == STENCIL


SCALE = """\
def scale(A: float32[10, 6], B: float32[10, 6]):
    for i in range(10):
        for j in range(6):
            B[i * 6 + j] = A[i * 6 + j] * 2.0"""

SPLIT_EDGE = """\
def split_edge(A: float32[10, 6], B: float32[10, 6]):
    for i.outer in range(3):  # parallel
        for i.inner in range(min(4, 10 - i.outer * 4)):
            for j in range(6):
                B[i.outer * 24 + i.inner * 6 + j] = A[i.outer * 24 + i.inner * 6 + j] * 2.0"""

SPLIT_TAIL = """\
def split_tail(A: float32[10, 6], B: float32[10, 6]):
    for i.outer in range(2):  # parallel
        for j in range(6):
            B[i.outer * 24 + j] = A[i.outer * 24 + j] * 2.0
        for j in range(6):
            B[i.outer * 24 + j + 6] = A[i.outer * 24 + j + 6] * 2.0
        for j in range(6):
            B[i.outer * 24 + j + 12] = A[i.outer * 24 + j + 12] * 2.0
        for j in range(6):
            B[i.outer * 24 + j + 18] = A[i.outer * 24 + j + 18] * 2.0
    for j in range(6):
        B[j + 48] = A[j + 48] * 2.0
    for j in range(6):
        B[j + 54] = A[j + 54] * 2.0"""

TILE_TAIL = """\
def tile_tail(A: float32[20], C: float32[20]):
    for i.outer in range(2):
        B = allocate((8,), float32, 'local')
        B[0] = A[i.outer * 8] * 2.0
        B[1] = A[i.outer * 8 + 1] * 2.0
        B[2] = A[i.outer * 8 + 2] * 2.0
        B[3] = A[i.outer * 8 + 3] * 2.0
        B[4] = A[i.outer * 8 + 4] * 2.0
        B[5] = A[i.outer * 8 + 5] * 2.0
        B[6] = A[i.outer * 8 + 6] * 2.0
        B[7] = A[i.outer * 8 + 7] * 2.0
        C[ramp(i.outer * 8, 1, 8)] = B[ramp(0, 1, 8)] + x8(1.0)
    B = allocate((8,), float32, 'local')
    B[0] = A[16] * 2.0
    B[1] = A[17] * 2.0
    B[2] = A[18] * 2.0
    B[3] = A[19] * 2.0
    C[ramp(16, 1, 4)] = B[ramp(0, 1, 4)] + x4(1.0)"""

FUSED_TAIL = """\
def fused_tail(A: float32[10, 6], B: float32[10, 6]):
    for i.outer in range(2):
        for i.inner.j.fused in range(24):
            B[i.outer * 24 + i.inner.j.fused] = A[i.outer * 24 + i.inner.j.fused] * 2.0
    for i.inner.j.fused in range(12):
        B[i.inner.j.fused + 48] = A[i.inner.j.fused + 48] * 2.0"""

ROWSUM = """\
def rowsum(A: float32[16, 8], R: float32[16]):
    for i in range(16):
        R[i] = 0.0
    for k.outer in range(2):
        for i in range(16):
            for k.inner in range(4):
                R[i] = R[i] + A[i * 8 + k.outer * 4 + k.inner]"""

INLINED = """\
def inlined(A: float32[8], C: float32[8]):
    for i in range(8):
        C[i] = (A[i] + 1.0) * (A[i] + 1.0)"""

STENCIL = """\
def stencil(A: float32[12], C: float32[10]):
    for i.outer in range(2):
        B = allocate((7,), float32, 'local')
        for i in range(7):
            B[i] = A[i.outer * 5 + i] + 1.0
        for i.inner in range(5):
            C[i.outer * 5 + i.inner] = B[i.inner] + B[i.inner + 2]"""
