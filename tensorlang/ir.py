"""Loop IR: the imperative program that lowering produces and codegen consumes.

Statements (For, Seq, BufferStore, Allocate, IfThenElse, LetStmt, Evaluate), the buffers they
touch, the vector expressions introduced by vectorization (Ramp, Broadcast), and `PrimFunc` /
`IRModule`. After buffer flattening every access is a `BufferLoad`/`BufferStore` with one flat
element index into a buffer's data, so codegen never sees multi-dimensional indexing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .dtype import DType
from .expr import Expr, Node, Var, _frozen, node_text


class ForKind(enum.Enum):
    """How a loop runs: in order, across threads, as SIMD lanes, or copied out."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"


class Scope(enum.Enum):
    """Where a buffer lives: an argument or heap/stack memory of the kernel."""

    GLOBAL = "global"
    LOCAL = "local"


@_frozen
class Buffer(Node):
    """A named, typed region of memory. `shape` is logical (row-major); `data` is the pointer var.

    Argument buffers are `Scope.GLOBAL`; buffers that a kernel allocates are `Scope.LOCAL`.
    """

    name: str
    dtype: DType
    shape: tuple[Expr, ...]
    data: Var
    scope: Scope = Scope.GLOBAL

    opaque_to_mutators = True  # accesses refer to a buffer by identity: passes keep it whole

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.dtype}, {[str(s) for s in self.shape]})"


@_frozen
class BufferLoad(Expr):
    """`buffer[index]` with a flat element index; a vector index (Ramp) loads several lanes.

    `mask` (bool vector or None) loads only the lanes where it holds; the others read as 0.
    """

    buffer: Buffer
    index: Expr
    dtype: DType
    mask: Expr | None = None


@_frozen
class Ramp(Expr):
    """The vector [base, base + stride, ..., base + (lanes - 1) * stride]."""

    base: Expr
    stride: Expr
    lanes: int
    dtype: DType


@_frozen
class Broadcast(Expr):
    """A scalar repeated in every lane."""

    value: Expr
    lanes: int
    dtype: DType


@_frozen
class ProducerLoad(Expr):
    """`buffer[i, j, ...]` with one index per dimension; buffer flattening turns it into a
    BufferLoad, so codegen never sees it."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: DType


@_frozen
class Let(Expr):
    """`body` with `var` bound to `value` (evaluated once)."""

    var: Var
    value: Expr
    body: Expr
    dtype: DType


class Stmt(Node):
    """Base of statements."""

    __slots__ = ()

    def __str__(self) -> str:
        return node_text(self)


@_frozen
class For(Stmt):
    """`for var in range(min, min + extent)`; `annotations` carries pragmas as (key, value)."""

    var: Var
    min: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    annotations: tuple[tuple[str, object], ...] = ()


@_frozen
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@_frozen
class BufferStore(Stmt):
    """`buffer[index] = value`; with a vector index, `mask` (if any) selects the lanes written."""

    buffer: Buffer
    index: Expr
    value: Expr
    mask: Expr | None = None


@_frozen
class ProducerStore(Stmt):
    """`buffer[i, j, ...] = value` before buffer flattening."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@_frozen
class Allocate(Stmt):
    """Memory for `buffer` (a LOCAL buffer) that lives while `body` runs."""

    buffer: Buffer
    body: Stmt


@_frozen
class IfThenElse(Stmt):
    """A branch; `likely` marks guards of non-dividing splits (the loop partitioner's targets)."""

    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None
    likely: bool = False


@_frozen
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@_frozen
class Evaluate(Stmt):
    """Evaluate an expression for its effect (a no-op when it has none)."""

    value: Expr


NOP = Evaluate(Var("nop"))


def seq(*stmts: Stmt | None) -> Stmt:
    """A Seq of the given statements with nested Seqs flattened and None / no-ops dropped."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None or s is NOP:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if not flat:
        return NOP
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


@_frozen
class PrimFunc(Node):
    """A lowered kernel: buffer parameters, the symbolic dimensions they carry, and a body.

    `shape_vars` are the symbolic `tl.var`s bound from argument shapes at call time;
    `attrs` carries facts for later passes and codegen (e.g. the target).
    """

    name: str
    params: tuple[Buffer, ...]
    shape_vars: tuple[Var, ...]
    body: Stmt
    attrs: tuple[tuple[str, object], ...] = ()

    def with_body(self, body: Stmt) -> PrimFunc:
        """The same function with another body (itself when the body is unchanged)."""
        if body is self.body:
            return self
        return PrimFunc(self.name, self.params, self.shape_vars, body, self.attrs)

    def __str__(self) -> str:
        return node_text(self)


@dataclass
class IRModule:
    """A set of lowered functions by name; `str()` prints them as Python-like loop code."""

    functions: dict[str, PrimFunc] = field(default_factory=dict)

    def __getitem__(self, name: str) -> PrimFunc:
        return self.functions[name]

    @property
    def main(self) -> PrimFunc:
        """The single (or first) function."""
        return next(iter(self.functions.values()))

    def __str__(self) -> str:
        return "\n\n".join(str(f) for f in self.functions.values())
