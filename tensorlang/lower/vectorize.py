"""Vectorization: a VECTORIZED loop becomes straight-line code on vector lanes.

A lowering pass (PrimFunc -> PrimFunc). The loop variable v becomes `Ramp(min, 1, L)` and vector
types propagate outwards: scalars next to vectors are broadcast, loads and stores whose index is
affine in v keep a Ramp index (one vector load/store in the codegen), other vector indices become
gathers/scatters. A loop of constant range whose body is guarded by a bound on v alone keeps
only the lanes the guard allows (the last tile of a non-dividing split, unrolled: a shorter
vector). Any other `if` whose condition depends on v and whose body only stores becomes masked
stores with masked loads under it.

A loop of constant extent up to 64 becomes one vector of that many lanes (a schedule that asks
for that width gets it). A longer or symbolic extent runs as a serial loop over chunks of the
native width of the current target (`Target.current()`: one SIMD register of the body's widest
element type, e.g. 16 float32 lanes with AVX-512, 8 with AVX2, 4 with SSE), followed by the rest:
a shorter vector when the extent is constant, else one chunk under a lane mask. Wider chunks would
only be split into registers again by LLVM, and a masked tail of native width wastes less.

A loop body that is not lane-independent cannot be vectorized and raises `ScheduleError`: an
Allocate inside, a store whose index does not depend on v but whose value does (a reduction into
one location), or a buffer that is read at a different index than it is written.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..arith import INF, Simplifier, const_bounds, simplify, upper_bound
from ..calls import Reinterpret
from ..dtype import BOOL
from ..expr import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Compare,
    CompareOp,
    Const,
    Expr,
    Node,
    Not,
    Select,
    Var,
)
from ..ir import (
    Allocate,
    Broadcast,
    Buffer,
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
    seq,
)
from ..schedule import ScheduleError
from ..visitor import Mutator, nodes_below, structural_equal, substitute, uses_var
from .simplify import guarded_range

MAX_LANES = 64
"""The longest vector a constant extent becomes in one piece; longer ones run in native chunks."""


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

    def __init__(self, var: Var, start: Expr, lanes: int, active: Expr | None = None) -> None:
        """`active`, if given, is how many of the lanes exist (a scalar): the others are masked."""
        self.lanes = lanes
        vector_t = var.dtype.with_lanes(lanes)
        self.map: dict[Var, Expr] = {var: Ramp(start, Const(1, var.dtype), lanes, vector_t)}
        self.mask: Expr | None = None
        first = int(start.value) if isinstance(start, Const) else None
        self.ranges = {var: (first, first + lanes - 1)} if first is not None else {}
        if active is not None:
            lane = Ramp(Const(0, var.dtype), Const(1, var.dtype), lanes, vector_t)
            self.mask = Compare(CompareOp.LT, lane, _broadcast(active, lanes),
                                BOOL.with_lanes(lanes))

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
        if isinstance(e, Reinterpret) and e.value.dtype.lanes == e.dtype.lanes == 1:
            # Lane by lane (an int32 read as a float32): the vector of the same lanes.
            v = self.expr(e.value)
            return e if v is e.value else Reinterpret(v, e.dtype.with_lanes(_lanes(v)))
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
            return self._inner_loop(s)
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

    def _inner_loop(self, s: For) -> Stmt:
        """A loop inside the vector loop stays a loop. Where its range differs between lanes
        (guards of non-dividing splits), it runs over the union of the lanes' ranges and masks
        each lane outside its own. Its own range bounds the loops inside it, whose ranges may
        depend on it and on the lanes (a vector loop split twice inside)."""
        end = Binary(BinaryOp.ADD, s.min, s.extent, s.extent.dtype)
        lo, hi = const_bounds(simplify(s.min), self.ranges)[0], upper_bound(end, self.ranges)
        if uses_var(s.min, set(self.map)) or uses_var(s.extent, set(self.map)):
            if hi is None or lo == -INF:
                raise _CannotVectorize(f"the range of the inner loop {s.var.name} differs by "
                                       "lane and has no constant bounds")
            inside = Binary(BinaryOp.AND, Compare(CompareOp.GE, s.var, s.min, BOOL),
                            Compare(CompareOp.LT, s.var, end, BOOL), BOOL)
            t = s.extent.dtype
            s = For(s.var, Const(int(lo), t), Const(max(hi - int(lo), 0), t), s.kind,
                    IfThenElse(inside, s.body, None, True), s.annotations)
        saved = self.ranges.get(s.var)
        if hi is not None and lo != -INF:
            self.ranges[s.var] = (int(lo), hi - 1)
        try:
            return For(s.var, s.min, s.extent, s.kind, self.stmt(s.body), s.annotations)
        finally:
            if saved is None:
                self.ranges.pop(s.var, None)
            else:
                self.ranges[s.var] = saved

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


def _nodes_but_buffers(body: Stmt) -> Iterator[Node]:
    """`nodes_below(body)` without descending into the buffers that accesses name (their shapes
    hold no access, loop or allocation): the walks of this pass run once per vectorized loop,
    and every access would otherwise lead into its buffer's declaration."""
    return nodes_below(body, stop_at=Buffer)


def _lane_hazard(body: Stmt) -> str | None:
    """Why the lanes of `body` would not be independent (None when they are), found in one walk:
    a loop inside that is vectorized too, an allocation, or a buffer written in `body` and read
    at an index other than the written ones (a lane would read another lane's write)."""
    stores: dict[object, list[Expr]] = {}
    loads: list[BufferLoad] = []
    for node in _nodes_but_buffers(body):
        if isinstance(node, BufferStore):
            stores.setdefault(node.buffer.data, []).append(node.index)
        elif isinstance(node, BufferLoad):
            loads.append(node)
        elif isinstance(node, (Ramp, Broadcast)):
            return "a loop inside it is vectorized too; vectorize one loop of a nest (or fuse them)"
        elif isinstance(node, Allocate):
            return "a stage is computed inside it (it allocates a buffer); compute it further out"
    for load in loads:
        written = stores.get(load.buffer.data)
        if written is not None and not any(structural_equal(load.index, w) for w in written):
            return (f"{load.buffer.name} is read at {load.index} but written at "
                    f"{', '.join(map(str, written))}, so a lane would read another lane's write")
    return None


def _fold_int(op: BinaryOp, a: Expr, b: int) -> Expr:
    return _fold(op, a, Const(b, a.dtype))


def native_lanes(body: Stmt, vector_bits: int) -> int:
    """Lanes of one `vector_bits` register of the widest element type that `body` loads or
    stores (at least 1): the chunk width that needs no splitting by LLVM."""
    dtypes = (n.buffer.dtype for n in _nodes_but_buffers(body)
              if isinstance(n, (BufferLoad, BufferStore)))
    bits = max((t.itemsize * 8 for t in dtypes), default=32)
    return max(1, vector_bits // bits)


def _vectorize_loop(node: For, vector_bits: int) -> Stmt:
    """`node` as vector code: one vector of its constant extent up to MAX_LANES, else native-width
    chunks and a rest (constant extent) or a masked last chunk (symbolic extent)."""
    extent, var, start = node.extent, node.var, node.min
    if isinstance(extent, Const):
        lanes = int(extent.value)
        if lanes <= 1:
            return substitute(node.body, {var: start}) if lanes == 1 else seq()
        if lanes <= MAX_LANES:
            return _Vectorizer(var, start, lanes).stmt(node.body)
    width = native_lanes(node.body, vector_bits)
    chunk = Var(f"{var.name}.chunk", var.dtype)
    chunks = _fold_int(BinaryOp.FLOORDIV, extent, width) if not isinstance(extent, Const) \
        else Const(int(extent.value) // width, extent.dtype)
    chunk_start = _fold(BinaryOp.ADD, start, _fold_int(BinaryOp.MUL, chunk, width))
    main = For(chunk, Const(0, var.dtype), chunks, ForKind.SERIAL,
               _Vectorizer(var, chunk_start, width).stmt(node.body), node.annotations)
    rest_start = _fold(BinaryOp.ADD, start, _fold_int(BinaryOp.MUL, chunks, width))
    if isinstance(extent, Const):
        rest = int(extent.value) % width
        tail = For(var, rest_start, Const(rest, extent.dtype), ForKind.VECTORIZED, node.body)
        return seq(main, _vectorize_loop(tail, vector_bits))
    rest_expr = _fold_int(BinaryOp.FLOORMOD, extent, width)
    masked = _Vectorizer(var, rest_start, width, active=rest_expr).stmt(node.body)
    has_rest = Compare(CompareOp.GT, rest_expr, Const(0, rest_expr.dtype), BOOL)
    return seq(main, IfThenElse(has_rest, masked, None, True))


class _LoopVectorizer(Mutator):
    def __init__(self, vector_bits: int) -> None:
        self.vector_bits = vector_bits
        self.guards = Simplifier()

    def visit_For(self, node: For) -> Stmt:
        body = self.visit(node.body)  # inner loops first
        if node.kind is not ForKind.VECTORIZED:
            if body is node.body:
                return node
            return For(node.var, node.min, node.extent, node.kind, body, node.annotations)
        lo, extent = node.min, node.extent
        if isinstance(lo, Const) and isinstance(extent, Const):
            # The lanes of an unrolled copy of a partial tile that its guard allows (the copies
            # substitute the tile's position into the guard after the structure was simplified).
            lo, extent = guarded_range(node, lo, extent, self.guards)
            if int(extent.value) <= 0:
                return seq()
        node = For(node.var, lo, extent, node.kind, body, node.annotations)
        why = _lane_hazard(node.body)
        if why is None:
            try:
                return _vectorize_loop(node, self.vector_bits)
            except _CannotVectorize as exc:
                why = str(exc)
        raise ScheduleError(f"vectorize: loop {node.var.name} cannot run as vector lanes: {why}")

    def _leaf(self, node: Stmt) -> Stmt:
        return node  # statements without statements inside hold no loop

    visit_BufferStore = visit_Evaluate = _leaf


def vectorize_loops(func: PrimFunc, vector_bits: int | None = None) -> PrimFunc:
    """Turn VECTORIZED loops into vector code.

    Args:
        func: a lowered function whose buffers are flat.
        vector_bits: the SIMD register width that long loops are chunked by; by default that of
            the current target (`with tl.Target(...)`, else the host), as schedules read it.

    Returns:
        The function with no VECTORIZED loop left.

    Raises:
        ScheduleError: a vectorized loop whose lanes are not independent.
    """
    if vector_bits is None:
        from ..codegen.target import Target  # the codegen layer owns the target scope

        vector_bits = Target.current().vector_bits
    return func.with_body(_LoopVectorizer(vector_bits).visit(func.body))
