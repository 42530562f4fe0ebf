"""The mask pass: decided masks fold away, a vector tail's stack accumulator runs unmasked, and
the masks that guard memory or depend on the lanes' history stay."""

from __future__ import annotations

import numpy as np
import pytest
from ir_builders import buf, loop

import tensorlang as tl
from tensorlang.dtype import BOOL, INT32, as_dtype
from tensorlang.expr import Compare, CompareOp, Var, const
from tensorlang.ir import (
    Allocate,
    Broadcast,
    BufferLoad,
    BufferStore,
    PrimFunc,
    Ramp,
    Scope,
    seq,
)
from tensorlang.lower.masks import fold_masks, known_mask
from tensorlang.runtime import build_module
from tensorlang.visitor import nodes_below

F32x8 = as_dtype("float32").with_lanes(8)


def _lanes_below(start: int, limit: int, lanes: int = 8) -> Compare:
    ramp = Ramp(const(start), const(1), lanes, INT32.with_lanes(lanes))
    return Compare(CompareOp.LT, ramp, Broadcast(const(limit), lanes, INT32.with_lanes(lanes)),
                   BOOL.with_lanes(lanes))


def _accesses(func: PrimFunc, scope: Scope) -> list:
    return [n for n in nodes_below(func.body)
            if isinstance(n, (BufferLoad, BufferStore)) and n.buffer.scope is scope]


def test_known_mask_decides_ramps_against_limits() -> None:
    i = Var("i", INT32)
    assert known_mask(_lanes_below(0, 56, 16), {}) is True
    assert known_mask(_lanes_below(64, 56, 16), {}) is False
    assert known_mask(_lanes_below(48, 56, 16), {}) is None
    ramp = Ramp(i * 8, const(1), 8, INT32.with_lanes(8))
    below = Compare(CompareOp.LT, ramp, Broadcast(const(100), 8, INT32.with_lanes(8)),
                    BOOL.with_lanes(8))
    assert known_mask(below, {i: (0.0, 11.0)}) is True  # lanes 0..95
    assert known_mask(below, {i: (0.0, 12.0)}) is None  # the last block holds 96..103


@pytest.mark.parametrize("width, block", [(29, 24), (13, 8), (7, 16), (56, 48)])
def test_tail_accumulator_in_registers_and_dead_vectors_dropped(width: int, block: int) -> None:
    """A row reduction cached in a LOCAL block of `block` lanes, over rows of a prime or
    non-dividing `width`: no access of the tail block carries a mask, its last vector is as wide
    as the lanes left in the row, the vectors of the block that lie wholly past the row are
    gone, and the result matches numpy."""
    lanes = 8
    a = tl.placeholder((3, width + 2), name="A")
    k = tl.reduce_axis((0, 3), name="k")
    out = tl.compute((3, width), lambda y, x: tl.sum(a[y, x + k], axis=k), name="out")
    s = tl.create_schedule(out.op)
    acc = s.cache_write(out, "local")
    _, x = s[out].op.axis
    xo, xi = s[out].split(x, factor=block)
    vectors, lane = s[out].split(xi, factor=lanes)
    s[out].vectorize(lane)
    s[out].unroll(vectors)
    s[acc].compute_at(s[out], xo)
    ax = s[acc].op.axis[1]
    (kk,) = s[acc].op.reduce_axis
    acc_vectors, acc_lane = s[acc].split(ax, factor=lanes)
    s[acc].reorder(kk, acc_vectors, acc_lane)
    s[acc].vectorize(acc_lane)
    s[acc].unroll(acc_vectors)
    func = tl.lower(s, [a, out])["main"]
    assert all(n.mask is None for n in _accesses(func, Scope.LOCAL) + _accesses(func, Scope.GLOBAL))
    stored = {n.value.dtype.lanes for n in _accesses(func, Scope.GLOBAL) if isinstance(n, BufferStore)}
    assert stored == ({lanes} if width >= lanes else set()) | ({width % lanes} - {0})
    data = np.random.default_rng(0).random((3, width + 2), dtype="float32")
    expected = sum(data[:, d:d + width] for d in range(3))
    for target in ("llvm", "llvm -mcpu=haswell"):  # the host's masked accesses and AVX2's
        result = np.full((3, width), np.nan, "float32")
        tl.build(s, [a, out], target=target)(data, result)
        np.testing.assert_allclose(result, expected, rtol=1e-6, err_msg=target)


def _masked_local_func(mask_a, mask_b, offset_b: int, inner: Var | None = None) -> PrimFunc:
    """C[0:8] = T[offset_b:+8] after T[0:8] = A[0:8] and T[offset_b:+8] += 1 under masks."""
    a, c = buf("A", "float32", (16,)), buf("C", "float32", (16,))
    t = buf("T", "float32", (16,), Scope.LOCAL)

    def ramp(base: int) -> Ramp:
        return Ramp(const(base), const(1), 8, INT32.with_lanes(8))

    fill = BufferStore(t, ramp(0), BufferLoad(a, ramp(0), F32x8), mask_a)
    bump = BufferStore(t, ramp(offset_b),
                       BufferLoad(t, ramp(offset_b), F32x8, mask_b)
                       + Broadcast(const(1.0, "float32"), 8, F32x8), mask_b)
    if inner is not None:
        bump = loop(inner, 2, bump)
    body = seq(fill, bump, BufferStore(c, ramp(0), BufferLoad(t, ramp(offset_b), F32x8), None))
    return PrimFunc("m", (a, c), (), Allocate(t, body))


def test_masks_stay_where_lanes_could_see_each_other() -> None:
    # Overlapping spans: element 4 is lane 4 of the fill and lane 0 of the bump.
    func = _masked_local_func(_lanes_below(0, 5), _lanes_below(0, 5), offset_b=4)
    assert any(n.mask is not None for n in _accesses(fold_masks(func), Scope.LOCAL))
    # A mask that varies inside the allocation: a lane may be active in one step only.
    r = Var("r", INT32)
    ramp = Ramp(r * 4, const(1), 8, INT32.with_lanes(8))
    varying = Compare(CompareOp.LT, ramp, Broadcast(const(6), 8, INT32.with_lanes(8)),
                      BOOL.with_lanes(8))
    func = _masked_local_func(_lanes_below(0, 5), varying, offset_b=0, inner=r)
    assert any(n.mask is not None for n in _accesses(fold_masks(func), Scope.LOCAL))


def test_same_span_same_mask_is_unmasked() -> None:
    func = fold_masks(_masked_local_func(_lanes_below(0, 5), _lanes_below(0, 5), offset_b=0))
    assert all(n.mask is None for n in _accesses(func, Scope.LOCAL))
    x = np.arange(16, dtype="float32")
    y = np.zeros(16, "float32")
    build_module(func)(x, y)
    np.testing.assert_array_equal(y[:5], x[:5] + 1)  # the active lanes; the rest are unspecified
