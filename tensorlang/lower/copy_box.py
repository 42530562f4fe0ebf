"""Copy stages as one call of the runtime's box copy (`tl_copy_box`, runtime/copy.c).

A stage at the root whose every element is an element of another buffer, or a constant where
a condition on its position fails (padding, packing into panels, a slice), needs no loops of
its own: the order in which its elements are written does not matter, so the schedule of its
loops cannot change what it computes. LLVM spent as long on such a loop nest as on the kernel
it feeds (the packing of a 1024^3 matmul's right operand: 9 of its 31 ms of LLVM), while the
runtime copies each contiguous run with memcpy and solves the conditions once per row.

What qualifies: the value is `tensor[indices]`, or `if_then_else(cond, tensor[indices], c)`
(nested, with one constant), where every index is affine in the stage's axes with constant
coefficients, `cond` is a conjunction of comparisons of such expressions, and the innermost
axis reads consecutive source elements (a transposing copy is left to vectorized loops, which
gather faster than an element-by-element copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..arith import simplify
from ..calls import AddressOf, CallExtern
from ..dtype import INT64, DType
from ..expr import (
    Binary,
    BinaryOp,
    Cast,
    Compare,
    CompareOp,
    Const,
    Expr,
    Select,
    TensorRead,
    Var,
    binary,
    cast,
    const,
)
from ..ir import Allocate, Buffer, Evaluate, ProducerStore, Scope, Stmt, seq
from ..visitor import uses_var

MAX_DIMS = 8
MAX_CONDITIONS = 16
"""The limits of runtime/copy.c (TL_COPY_MAX_DIMS, TL_COPY_MAX_CONDS)."""

Affine = tuple[dict[Var, int], Expr]
"""Integer coefficients of the axes, and the rest (which no axis occurs in)."""


@dataclass(frozen=True)
class CopyBox:
    """What a copy stage reads: `read` (its indices as `indices`) where every condition
    `base + coefs . axes >= 0` holds, the bits of `fill_bits` elsewhere."""

    read: TensorRead
    indices: tuple[Affine, ...]
    conditions: tuple[Affine, ...]
    fill_bits: int


def copy_box(value: Expr, axes: Sequence[Var], dtype: DType) -> CopyBox | None:
    """The copy that a stage's `value` (over `axes`, stored as `dtype`) is, or None."""
    if not axes or len(axes) > MAX_DIMS or dtype.is_vector or dtype.itemsize not in (1, 2, 4, 8):
        return None
    axis_set = frozenset(axes)
    conditions: list[Affine] = []
    fill: Const | None = None
    while isinstance(value, Select) and isinstance(value.false_value, Const):
        if fill is not None and fill.value != value.false_value.value:
            return None
        fill = value.false_value
        found = _conditions(value.cond, axis_set)
        if found is None:
            return None
        conditions += found
        value = value.true_value
    if not (isinstance(value, TensorRead) and value.dtype == dtype
            and len(conditions) <= MAX_CONDITIONS):
        return None
    indices = [_affine(i, axis_set) for i in value.indices]
    if any(i is None for i in indices):
        return None
    # The innermost axis must step through the source's last dimension alone, by one.
    steps = [coefs.get(axes[-1], 0) for coefs, _ in indices]  # type: ignore[union-attr]
    if steps[-1] != 1 or any(steps[:-1]):
        return None
    bits = 0 if fill is None else _bits(fill.value, dtype)
    return None if bits is None else CopyBox(value, tuple(indices), tuple(conditions), bits)


def copy_call(box: CopyBox, source: Buffer, dst: Buffer, axes: Sequence[Var],
              extents: Sequence[Expr], parallel: bool) -> Stmt:
    """The statement that fills `dst` (the stage's whole output, `extents` per axis) from
    `source` (the buffer `box.read` reads) in one call, its descriptor in a stack buffer."""
    strides = _row_major_strides(source.shape)
    src_coefs: dict[Var, Expr] = {axis: const(0, INT64) for axis in axes}
    src_base: Expr = const(0, INT64)
    for (coefs, rest), stride in zip(box.indices, strides):
        for axis, c in coefs.items():
            src_coefs[axis] = binary(BinaryOp.ADD, src_coefs[axis], binary(BinaryOp.MUL, stride, c))
        src_base = binary(BinaryOp.ADD, src_base, binary(BinaryOp.MUL, _int64(rest), stride))
    fields: list[Expr] = [
        const(dst.dtype.itemsize, INT64), const(len(axes), INT64),
        const(len(box.conditions), INT64), const(int(parallel), INT64),
        const(box.fill_bits, INT64), simplify(src_base),
        *[simplify(_int64(e)) for e in extents],
        *[simplify(src_coefs[axis]) for axis in axes],
    ]
    for coefs, rest in box.conditions:
        fields.append(simplify(_int64(rest)))
        fields += [const(coefs.get(axis, 0), INT64) for axis in axes]
    desc = Buffer(f"{dst.name}_copy", INT64, (const(len(fields)),),
                  Var(f"{dst.name}_copy_data", dst.data.dtype), Scope.LOCAL)
    stores = [ProducerStore(desc, (const(k),), value) for k, value in enumerate(fields)]
    call = CallExtern("tl_copy_box", (AddressOf(dst, const(0)), AddressOf(source, const(0)),
                                      AddressOf(desc, const(0))), INT64, returns_void=True)
    return Allocate(desc, seq(*stores, Evaluate(call)))


def _row_major_strides(shape: Sequence[Expr]) -> list[Expr]:
    """Each dimension's stride in elements (an expression where sizes are symbolic)."""
    strides: list[Expr] = []
    stride: Expr = const(1, INT64)
    for dim in reversed(shape):
        strides.append(stride)
        stride = simplify(binary(BinaryOp.MUL, stride, _int64(dim)))
    return strides[::-1]


def _int64(e: Expr) -> Expr:
    return e if e.dtype == INT64 else cast(e, INT64)


def _affine(e: Expr, axes: frozenset[Var]) -> Affine | None:
    """`e` as integer coefficients of `axes` plus a remainder free of them, or None."""
    if not e.dtype.is_integer or e.dtype.is_vector:
        return None
    if isinstance(e, Var) and e in axes:
        return {e: 1}, const(0, e.dtype)
    if not uses_var(e, axes):
        return {}, e
    if isinstance(e, Cast) and e.value.dtype.is_integer:
        inner = _affine(e.value, axes)
        return None if inner is None else (inner[0], cast(inner[1], e.dtype))
    if not isinstance(e, Binary):
        return None
    if e.op in (BinaryOp.ADD, BinaryOp.SUB):
        a, b = _affine(e.a, axes), _affine(e.b, axes)
        if a is None or b is None:
            return None
        sign = 1 if e.op is BinaryOp.ADD else -1
        coefs = dict(a[0])
        for axis, c in b[0].items():
            coefs[axis] = coefs.get(axis, 0) + sign * c
        return coefs, binary(e.op, a[1], b[1])
    if e.op is BinaryOp.MUL:
        for factor, term in ((e.a, e.b), (e.b, e.a)):
            if isinstance(factor, Const):
                inner = _affine(term, axes)
                if inner is None:
                    return None
                k = int(factor.value)
                return ({axis: c * k for axis, c in inner[0].items()},
                        binary(BinaryOp.MUL, inner[1], factor))
    return None


def _conditions(cond: Expr, axes: frozenset[Var]) -> list[Affine] | None:
    """`cond` as affine forms that must all be >= 0, or None."""
    if isinstance(cond, Binary) and cond.op is BinaryOp.AND:
        a, b = _conditions(cond.a, axes), _conditions(cond.b, axes)
        return None if a is None or b is None else a + b
    if isinstance(cond, Const) and cond.dtype.is_bool:
        return [] if cond.value else [({}, const(-1, INT64))]
    if not isinstance(cond, Compare) or cond.op is CompareOp.NE:
        return None
    difference = _affine(binary(BinaryOp.SUB, cond.a, cond.b), axes)
    if difference is None:
        return None
    coefs, rest = difference

    def form(sign: int, shift: int) -> Affine:
        return ({axis: sign * c for axis, c in coefs.items()},
                binary(BinaryOp.ADD, binary(BinaryOp.MUL, _int64(rest), sign), shift))

    # a - b = d: a >= b is d >= 0, a > b is d - 1 >= 0, a <= b is -d >= 0, a < b is -d - 1 >= 0.
    return {
        CompareOp.GE: [form(1, 0)],
        CompareOp.GT: [form(1, -1)],
        CompareOp.LE: [form(-1, 0)],
        CompareOp.LT: [form(-1, -1)],
        CompareOp.EQ: [form(1, 0), form(-1, 0)],
    }[cond.op]


def _bits(value: object, dtype: DType) -> int | None:
    """The fill value's bits as a signed 64-bit integer (little-endian, low bytes used)."""
    try:
        raw = np.array(value, dtype=dtype.numpy).tobytes()
    except (TypeError, ValueError, AttributeError, ImportError):
        return None
    return int.from_bytes(raw.ljust(8, b"\0"), "little", signed=True)
