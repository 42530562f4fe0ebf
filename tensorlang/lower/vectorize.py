"""Vectorization: a VECTORIZED loop of constant extent L becomes straight-line code on L lanes.

A lowering pass (PrimFunc -> PrimFunc). The loop variable v becomes `Ramp(min, 1, L)` and vector
types propagate outwards: scalars next to vectors are broadcast, loads and stores whose index is
affine in v keep a Ramp index (one vector load/store in the codegen), other vector indices become
gathers/scatters. An `if` whose condition depends on v and whose body only stores becomes masked
stores with masked loads under it: the vector tail of a non-dividing split.

Whatever is not provably lane-independent falls back to a SERIAL loop: a non-constant extent, more
than 64 lanes, an Allocate inside, a store whose index does not depend on v but whose value does
(a reduction into one location), or a buffer that is read at a different index than it is written.
"""

from __future__ import annotations

from ..expr import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Not,
    Select,
    Var,
)
from ..ir import (
    Allocate,
    Broadcast,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    LetStmt,
    PrimFunc,
    Ramp,
    Seq,
    Stmt,
)
from ..visitor import Mutator, post_order_visit, structural_equal, uses_var

MAX_LANES = 64


class _CannotVectorize(Exception):
    """Raised inside the vectorizer when a loop body is not provably lane-independent."""


def _lanes(e: Expr) -> int:
    return e.dtype.lanes


def _fold(op: BinaryOp, a: Expr, b: Expr) -> Expr:
    """`a op b` for scalar integers, folding constants so that unit strides stay recognisable."""
    if isinstance(a, Const) and isinstance(b, Const) and a.dtype.is_integer:
        va, vb = int(a.value), int(b.value)
        value = {BinaryOp.ADD: va + vb, BinaryOp.SUB: va - vb, BinaryOp.MUL: va * vb}[op]
        return Const(value, a.dtype)
    if op is BinaryOp.ADD and isinstance(b, Const) and b.value == 0:
        return a
    if op is BinaryOp.ADD and isinstance(a, Const) and a.value == 0:
        return b
    if op is BinaryOp.MUL and isinstance(b, Const) and b.value == 1:
        return a
    return Binary(op, a, b, a.dtype)


def _broadcast(e: Expr, lanes: int) -> Expr:
    if _lanes(e) == lanes:
        return e
    if _lanes(e) != 1:
        raise _CannotVectorize(f"lane mismatch: {e} has {_lanes(e)} lanes, need {lanes}")
    return Broadcast(e, lanes, e.dtype.with_lanes(lanes))


def _and(a: Expr | None, b: Expr) -> Expr:
    return b if a is None else Binary(BinaryOp.AND, a, b, b.dtype)


class _Vectorizer:
    """Rewrites one loop body with the loop variable replaced by a Ramp of `lanes` lanes."""

    def __init__(self, var: Var, start: Expr, lanes: int) -> None:
        self.lanes = lanes
        self.map: dict[Var, Expr] = {
            var: Ramp(start, Const(1, var.dtype), lanes, var.dtype.with_lanes(lanes))
        }
        self.mask: Expr | None = None

    # ------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> Expr:
        if isinstance(e, Var):
            return self.map.get(e, e)
        if isinstance(e, Const):
            return e
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Compare):
            a, b = self.expr(e.a), self.expr(e.b)
            if a is e.a and b is e.b:
                return e
            n = max(_lanes(a), _lanes(b))
            return Compare(e.op, _broadcast(a, n), _broadcast(b, n), e.dtype.with_lanes(n))
        if isinstance(e, Not):
            v = self.expr(e.value)
            return e if v is e.value else Not(v, e.dtype.with_lanes(_lanes(v)))
        if isinstance(e, Cast):
            return self._cast(e)
        if isinstance(e, Select):
            c, a, b = self.expr(e.cond), self.expr(e.true_value), self.expr(e.false_value)
            if c is e.cond and a is e.true_value and b is e.false_value:
                return e
            n = max(_lanes(c), _lanes(a), _lanes(b))
            return Select(
                _broadcast(c, n), _broadcast(a, n), _broadcast(b, n), e.dtype.with_lanes(n)
            )
        if isinstance(e, Call):
            args = [self.expr(a) for a in e.args]
            if all(a is b for a, b in zip(args, e.args, strict=True)):
                return e
            n = max(_lanes(a) for a in args)
            return Call(e.func, tuple(_broadcast(a, n) for a in args), e.dtype.with_lanes(n))
        if isinstance(e, BufferLoad):
            return self._load(e)
        if isinstance(e, Let):
            value = self.expr(e.value)
            var = e.var
            if _lanes(value) > 1:
                var = Var(e.var.name, value.dtype)
                self.map[e.var] = var
            body = self.expr(e.body)
            if var is e.var and value is e.value and body is e.body:
                return e
            return Let(var, value, body, body.dtype)
        raise _CannotVectorize(f"{type(e).__name__} inside a vectorized loop")

    def _binary(self, e: Binary) -> Expr:
        a, b = self.expr(e.a), self.expr(e.b)
        if a is e.a and b is e.b:
            return e
        la, lb = _lanes(a), _lanes(b)
        if la == 1 and lb == 1:
            return Binary(e.op, a, b, e.dtype)
        n = max(la, lb)
        if e.dtype.is_integer:
            ramp = self._ramp_arith(e.op, a, b)
            if ramp is not None:
                return ramp
        return Binary(e.op, _broadcast(a, n), _broadcast(b, n), e.dtype.with_lanes(n))

    @staticmethod
    def _ramp_arith(op: BinaryOp, a: Expr, b: Expr) -> Expr | None:
        """Keep affine index arithmetic in Ramp form (so loads stay contiguous)."""
        if op in (BinaryOp.ADD, BinaryOp.SUB):
            if isinstance(a, Ramp) and isinstance(b, Ramp):
                return Ramp(
                    _fold(op, a.base, b.base), _fold(op, a.stride, b.stride), a.lanes, a.dtype
                )
            if isinstance(a, Ramp) and _lanes(b) == 1:
                return Ramp(_fold(op, a.base, b), a.stride, a.lanes, a.dtype)
            if isinstance(b, Ramp) and _lanes(a) == 1:
                stride = (
                    _fold(BinaryOp.SUB, Const(0, b.stride.dtype), b.stride)
                    if op is BinaryOp.SUB
                    else b.stride
                )
                return Ramp(_fold(op, a, b.base), stride, b.lanes, b.dtype)
        if op is BinaryOp.MUL:
            if isinstance(a, Ramp) and _lanes(b) == 1:
                return Ramp(_fold(op, a.base, b), _fold(op, a.stride, b), a.lanes, a.dtype)
            if isinstance(b, Ramp) and _lanes(a) == 1:
                return Ramp(_fold(op, a, b.base), _fold(op, a, b.stride), b.lanes, b.dtype)
        return None

    def _cast(self, e: Cast) -> Expr:
        v = self.expr(e.value)
        if v is e.value:
            return e
        t = e.dtype.with_lanes(_lanes(v))
        if isinstance(v, Ramp) and e.dtype.is_integer:
            base_t, stride_t = e.dtype.element, e.dtype.element
            return Ramp(Cast(v.base, base_t), Cast(v.stride, stride_t), v.lanes, t)
        return Cast(v, t)

    def _load(self, e: BufferLoad) -> Expr:
        index = self.expr(e.index)
        own = self.expr(e.mask) if e.mask is not None else None
        if _lanes(index) == 1 and (own is None or _lanes(own) == 1):
            if self.mask is None:
                if index is e.index and own is e.mask:
                    return e
                return BufferLoad(e.buffer, index, e.dtype, own)
            # A lane-invariant read under a mask: read it only when some lane is active.
            index = Broadcast(index, self.lanes, index.dtype.with_lanes(self.lanes))
        n = self.lanes
        mask = self.mask
        if own is not None:
            mask = _and(mask, _broadcast(own, n))
        return BufferLoad(e.buffer, _broadcast(index, n), e.dtype.with_lanes(n), mask)

    # ------------------------------------------------------------- statements
    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Seq):
            return Seq(tuple(self.stmt(c) for c in s.stmts))
        if isinstance(s, BufferStore):
            return self._store(s)
        if isinstance(s, For):
            if uses_var(s.min, set(self.map)) or uses_var(s.extent, set(self.map)):
                raise _CannotVectorize("an inner loop's bounds depend on the vectorized variable")
            return For(s.var, s.min, s.extent, s.kind, self.stmt(s.body), s.annotations)
        if isinstance(s, IfThenElse):
            return self._if(s)
        if isinstance(s, LetStmt):
            value = self.expr(s.value)
            if _lanes(value) == 1:
                return LetStmt(s.var, value, self.stmt(s.body))
            var = Var(s.var.name, value.dtype)
            self.map[s.var] = var
            return LetStmt(var, value, self.stmt(s.body))
        if isinstance(s, Evaluate):
            return s
        raise _CannotVectorize(f"{type(s).__name__} inside a vectorized loop")

    def _store(self, s: BufferStore) -> Stmt:
        index = self.expr(s.index)
        value = self.expr(s.value)
        own = self.expr(s.mask) if s.mask is not None else None
        if _lanes(index) == 1:
            if _lanes(value) > 1 or (own is not None and _lanes(own) > 1):
                raise _CannotVectorize(f"store to {s.buffer.name}[{s.index}] reduces over lanes")
            if self.mask is not None:
                raise _CannotVectorize(f"lane-invariant store to {s.buffer.name} under a lane mask")
            return BufferStore(s.buffer, index, value, own)
        n = self.lanes
        mask = self.mask
        if own is not None:
            mask = _and(mask, _broadcast(own, n))
        return BufferStore(s.buffer, index, _broadcast(value, n), mask)

    def _if(self, s: IfThenElse) -> Stmt:
        cond = self.expr(s.cond)
        if _lanes(cond) == 1:
            else_case = self.stmt(s.else_case) if s.else_case is not None else None
            return IfThenElse(cond, self.stmt(s.then_case), else_case, s.likely)
        outer = self.mask
        self.mask = _and(outer, cond)
        then_case = self.stmt(s.then_case)
        else_case = None
        if s.else_case is not None:
            inverse = Not(cond, cond.dtype)
            self.mask = _and(outer, inverse)
            else_case = self.stmt(s.else_case)
        self.mask = outer
        return then_case if else_case is None else Seq((then_case, else_case))


def _reads_match_writes(body: Stmt) -> bool:
    """Whether every buffer written in `body` is read only at exactly the written indices, so
    that no lane reads what another lane writes."""
    stores: dict[object, list[Expr]] = {}
    loads: list[BufferLoad] = []

    def visit(node: object) -> None:
        if isinstance(node, BufferStore):
            stores.setdefault(node.buffer.data, []).append(node.index)
        elif isinstance(node, BufferLoad):
            loads.append(node)

    post_order_visit(body, visit)
    for load in loads:
        written = stores.get(load.buffer.data)
        if written is not None and not any(structural_equal(load.index, w) for w in written):
            return False
    return True


def _has_allocate(body: Stmt) -> bool:
    found: list[bool] = []
    post_order_visit(body, lambda n: found.append(True) if isinstance(n, Allocate) else None)
    return bool(found)


class _LoopVectorizer(Mutator):
    def visit_For(self, node: For) -> Stmt:
        node = self.generic_visit(node)  # inner loops first
        if node.kind is not ForKind.VECTORIZED:
            return node
        lanes = int(node.extent.value) if isinstance(node.extent, Const) else 0
        if (
            1 < lanes <= MAX_LANES
            and not _has_allocate(node.body)
            and _reads_match_writes(node.body)
        ):
            try:
                return _Vectorizer(node.var, node.min, lanes).stmt(node.body)
            except _CannotVectorize:
                pass
        return For(node.var, node.min, node.extent, ForKind.SERIAL, node.body, node.annotations)


def vectorize_loops(func: PrimFunc) -> PrimFunc:
    """Turn VECTORIZED loops into vector code (or SERIAL loops where that is not safe).

    Args:
        func: a lowered function whose buffers are flat.

    Returns:
        The function with no VECTORIZED loop left.
    """
    return func.with_body(_LoopVectorizer().visit(func.body))
