"""Lane masks after vectorization: decided masks folded, stack buffers unmasked.

The vector tail of a non-dividing split (vectorize.py) masks every access under the split's
guard. Two things then cost time for nothing:

- Masks that the loop ranges decide. A block of several vectors whose tail holds fewer lanes
  than the block has masks that are false in every lane of its last vectors (`ramp(64, 1, 16) <
  x16(56)`): those stores are dropped and those loads read zeros. A mask true in every lane is
  removed.
- Masked accesses to the small LOCAL buffers a schedule caches into, such as a `cache_write`
  accumulator. LLVM cannot keep a buffer in registers while it is read and written through
  masked loads and stores, and a masked store does not forward to the next load: the tail's
  accumulator round-trips through memory at every step of the reduction (the tail of a 56-wide
  row of 16-lane vectors ran slower than the three vectors before it).

The masks of the accesses to a LOCAL buffer are dropped when doing so is invisible:
- every access to it is a unit-stride vector at a constant offset inside the allocation, so an
  unmasked lane never leaves the buffer;
- accesses at one offset carry one mask (or none), spans at different offsets do not overlap,
  and no mask uses a variable bound inside the allocation.
Then each element is touched by one lane only, a lane active or inactive for the buffer's whole
life, so what the formerly masked lanes compute reaches only other inactive lanes; the stores to
argument buffers that end the tail keep their masks.
"""

from __future__ import annotations

import itertools
import math

from ..arith import Interval, const_bounds
from ..expr import Binary, BinaryOp, Compare, CompareOp, Const, Expr, Var, const
from ..ir import (
    NOP,
    Allocate,
    Broadcast,
    BufferLoad,
    BufferStore,
    For,
    LetStmt,
    PrimFunc,
    Ramp,
    Scope,
    Seq,
    Stmt,
    seq,
)
from ..visitor import Mutator, nodes_below, structural_equal, uses_var


def _compare_lanes(op: CompareOp, diff: Interval) -> bool | None:
    """Whether `d <op> 0` holds for every d in `diff` (True), for none (False), or either."""
    lo, hi = diff
    decided = {
        CompareOp.LT: (hi < 0, lo >= 0),
        CompareOp.LE: (hi <= 0, lo > 0),
        CompareOp.GT: (lo > 0, hi <= 0),
        CompareOp.GE: (lo >= 0, hi < 0),
    }.get(op)
    if decided is None:
        return None
    return True if decided[0] else False if decided[1] else None


def known_mask(mask: Expr, ranges: dict[Var, Interval]) -> bool | None:
    """True if `mask` holds in every lane for all values of the loop variables in `ranges`,
    False if it holds in none, None if that depends."""
    if isinstance(mask, Broadcast) and isinstance(mask.value, Const):
        return bool(mask.value.value)
    if isinstance(mask, Binary) and mask.op is BinaryOp.AND:
        a, b = known_mask(mask.a, ranges), known_mask(mask.b, ranges)
        if a is False or b is False:
            return False
        return True if a is True and b is True else None
    if (isinstance(mask, Compare) and isinstance(mask.a, Ramp) and isinstance(mask.b, Broadcast)
            and isinstance(mask.a.stride, Const)):
        ramp = mask.a
        lo, hi = const_bounds(Binary(BinaryOp.SUB, ramp.base, mask.b.value, ramp.base.dtype),
                              ranges)
        spread = int(ramp.stride.value) * (ramp.lanes - 1)
        return _compare_lanes(mask.op, (lo + min(0, spread), hi + max(0, spread)))
    return None


def _constant_span(index: Expr) -> tuple[int, int] | None:
    """(first element, lanes) of a unit-stride Ramp at a constant offset, else None."""
    if (isinstance(index, Ramp) and isinstance(index.base, Const)
            and isinstance(index.stride, Const) and index.stride.value == 1):
        return int(index.base.value), index.lanes
    return None


def _can_unmask(alloc: Allocate) -> bool:
    """Whether the accesses to `alloc.buffer` satisfy the module's conditions."""
    if not all(isinstance(d, Const) for d in alloc.buffer.shape):
        return False
    size = math.prod(int(d.value) for d in alloc.buffer.shape)
    bound_inside: set[Var] = set()
    masks: dict[tuple[int, int], Expr | None] = {}
    for node in nodes_below(alloc.body):
        if isinstance(node, (For, LetStmt)):
            bound_inside.add(node.var)
        if not isinstance(node, (BufferLoad, BufferStore)) or node.buffer is not alloc.buffer:
            continue
        span = _constant_span(node.index)
        if span is None or span[0] < 0 or span[0] + span[1] > size:
            return False
        seen = masks.get(span)
        if seen is not None and node.mask is not None and not structural_equal(seen, node.mask):
            return False
        masks[span] = seen if seen is not None else node.mask
    spans = sorted(masks)
    if any(a[0] + a[1] > b[0] for a, b in itertools.pairwise(spans)):
        return False
    return not any(m is not None and uses_var(m, bound_inside) for m in masks.values())


class _Masks(Mutator):
    def __init__(self) -> None:
        self.ranges: dict[Var, Interval] = {}
        self.unmasked: set[int] = set()  # ids of buffers: accesses name a buffer by identity

    def visit_For(self, node: For) -> Stmt:
        lo, _ = const_bounds(node.min, self.ranges)
        _, hi = const_bounds(Binary(BinaryOp.ADD, node.min, node.extent, node.min.dtype),
                             self.ranges)
        self.ranges[node.var] = (lo, hi - 1)
        try:
            return self.generic_visit(node)
        finally:
            del self.ranges[node.var]

    def visit_Seq(self, node: Seq) -> Stmt:
        return seq(*(self.visit(s) for s in node.stmts))  # dropped stores leave no NOPs

    def visit_Allocate(self, node: Allocate) -> Stmt:
        if node.buffer.scope is Scope.LOCAL and _can_unmask(node):
            self.unmasked.add(id(node.buffer))
        return self.generic_visit(node)

    def _fold(self, node: BufferLoad | BufferStore) -> BufferLoad | BufferStore | None:
        """`node` unmasked where its mask holds in every lane or its buffer is unmasked, None
        where the mask holds in no lane."""
        node = self.generic_visit(node)
        if node.mask is None:
            return node
        known = known_mask(node.mask, self.ranges)
        if known is False:
            return None
        if known is None and id(node.buffer) not in self.unmasked:
            return node
        if isinstance(node, BufferLoad):
            return BufferLoad(node.buffer, node.index, node.dtype, None)
        return BufferStore(node.buffer, node.index, node.value, None)

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:
        folded = self._fold(node)
        if folded is None:  # no lane reads: the zeros a masked load gives
            return Broadcast(const(0, node.dtype.element), node.dtype.lanes, node.dtype)
        return folded

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        folded = self._fold(node)
        return NOP if folded is None else folded


def fold_masks(func: PrimFunc) -> PrimFunc:
    """`func` with decided masks folded and stack-buffer accesses unmasked (module doc)."""
    return func.with_body(_Masks().visit(func.body))
