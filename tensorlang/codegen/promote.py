"""Which elements of a stack buffer a loop may keep in SSA registers instead of memory.

A register block (a GEMM's or a convolution's accumulators) is a stack buffer that the loops of
its reduction read and write only at constant offsets, or at constant offsets from one base that
the loop does not change (a block of a larger tile that a loop over blocks around the reduction
picks: `acc[i * 64 + 16]` in the loop over k inside the loop over i). Left in memory, LLVM's LICM promotes it to
registers itself, loop level by loop level, after building alias sets over every access of the
unrolled body. Codegen instead carries those values through loop phis (`CodeGen._loop`) when
`loop_slots` says that every access to the buffer in the loop allows it: the machine code is the
one LICM made (the same instructions for the bench_core kernels), and LLVM's passes take 5 of
the 83 ms of a 3x3 conv2d_nchw, 4 of 52 of a 3x3 conv2d_NCHWc, 2 of 25 of a depthwise one less
(LICM on the 3x3 conv2d_nchw: 23 -> 15 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import Simplifier, structural_key
from ..expr import Const, Expr, Node, Var
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Ramp,
    Seq,
    Stmt,
)
from ..visitor import children, uses_var

MAX_SLOTS = 64
"""At most this many values of one buffer are carried through a loop: a block of accumulators
needs at most the 32 vector registers of AVX-512; more values (a whole tile indexed by constants
after unrolling) would only be spilled to the stack again."""


@dataclass(frozen=True)
class Slots:
    """The accesses to one buffer inside a statement, at constant offsets from one `base` (None:
    from 0): element offset -> lanes, and the offsets written."""

    lanes: dict[int, int]
    written: frozenset[int]
    base: Expr | None = None


_NONE = Slots({}, frozenset())


def slot_of(index: Expr) -> tuple[Expr | None, int, int] | None:
    """(base, offset, lanes) of a scalar integer index or a unit-stride ramp: the index's
    constant term is the offset, the rest (None when there is none) the base."""
    lanes = 1
    if isinstance(index, Ramp):
        if not (isinstance(index.stride, Const) and int(index.stride.value) == 1):
            return None
        index, lanes = index.base, index.lanes
    if index.dtype.is_float or index.dtype.lanes != 1:
        return None
    if isinstance(index, Const):
        return None, int(index.value), lanes
    lin = Simplifier()._linear(index)
    offset = lin.constant
    rest = lin.scaled(1)
    rest.constant = 0
    return rest.to_expr(), offset, lanes


def _merge(parts: list[Slots | None]) -> Slots | None:
    lanes: dict[int, int] = {}
    written: set[int] = set()
    base, key = None, None
    for part in parts:
        if part is None:
            return None
        if part.lanes:
            if not lanes:
                base, key = part.base, structural_key(part.base)
            elif structural_key(part.base) != key:
                return None  # two bases: which elements they share is not known
        for offset, n in part.lanes.items():
            if lanes.setdefault(offset, n) != n:
                return None  # the same element read as a scalar and as a vector
        written |= part.written
    return Slots(lanes, frozenset(written), base) if lanes else _NONE


class SlotFinder:
    """`loop_slots` of the loops inside one allocation of the stack buffer `data`, each statement
    analysed once (memoised by identity: codegen asks at every loop level of a nest)."""

    def __init__(self, data: Var) -> None:
        self.data = data
        self._memo: dict[int, Slots | None] = {}

    def loop_slots(self, body: Stmt, var: Var) -> Slots | None:
        """The slots a loop of `var` with this body may carry in registers, or None when the
        body touches the buffer otherwise (an index not at an offset from one base that neither
        `var` nor the body changes, a mask, a conditional store, a parallel loop or a pointer to
        it), when its slots overlap, or when they are too many."""
        found = self._stmt(body)
        if found is None or not found.lanes or not found.written or len(found.lanes) > MAX_SLOTS:
            return None
        if found.base is not None and uses_var(found.base, {var}):
            return None
        end = None
        for offset in sorted(found.lanes):
            if end is not None and offset < end:
                return None  # overlapping accesses: one element in two registers
            end = offset + found.lanes[offset]
        return found

    def _stmt(self, s: Stmt) -> Slots | None:
        key = id(s)
        if key not in self._memo:
            self._memo[key] = self._analyse(s)
        return self._memo[key]

    def _analyse(self, s: Stmt) -> Slots | None:
        if isinstance(s, Seq):
            return _merge([self._stmt(child) for child in s.stmts])
        if isinstance(s, For):
            found = _merge([self._exprs(s.min, s.extent), self._stmt(s.body)])
            # An outlined parallel loop cannot see the caller's registers.
            return None if s.kind is ForKind.PARALLEL and found is not _NONE else \
                _fixed_in(found, s.var)
        if isinstance(s, LetStmt):
            return _fixed_in(_merge([self._exprs(s.value), self._stmt(s.body)]), s.var)
        if isinstance(s, Allocate):
            return self._stmt(s.body)
        if isinstance(s, IfThenElse):
            parts = [self._exprs(s.cond), self._stmt(s.then_case)]
            if s.else_case is not None:
                parts.append(self._stmt(s.else_case))
            found = _merge(parts)
            return found if found is _NONE else None  # a conditional access stays in memory
        if isinstance(s, BufferStore):
            found = self._exprs(s.value, s.index, *(() if s.mask is None else (s.mask,)))
            if s.buffer.data is not self.data:
                return found
            at = slot_of(s.index)
            if (at is None or s.mask is not None or s.buffer.dtype.is_bool
                    or s.value.dtype.lanes not in (1, at[2])):
                return None
            base, offset, lanes = at
            return _merge([found, Slots({offset: lanes}, frozenset({offset}), base)])
        if isinstance(s, Evaluate):
            return self._exprs(s.value)
        return None

    def _exprs(self, *exprs: Expr) -> Slots | None:
        lanes: list[Slots | None] = []
        stack: list[Node] = list(exprs)
        while stack:  # every node below, without descending into buffers' shapes
            node = stack.pop()
            if isinstance(node, Buffer):
                continue
            buffer = getattr(node, "buffer", None)
            if buffer is not None and buffer.data is self.data:
                if not isinstance(node, BufferLoad) or node.mask is not None:
                    return None  # an address taken, or a masked read
                at = slot_of(node.index)
                if at is None:
                    return None
                base, offset, n = at
                lanes.append(Slots({offset: n}, frozenset(), base))
            stack += children(node)
        return _merge(lanes) if lanes else _NONE


def _fixed_in(found: Slots | None, var: Var) -> Slots | None:
    """`found`, the accesses inside the scope of `var`, as seen from outside it: none that an
    enclosing loop may carry when their base depends on `var`."""
    if found is None or found.base is None or not uses_var(found.base, {var}):
        return found
    return None
