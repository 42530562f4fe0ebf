"""Unrolling: loops marked unroll, and loops under an `auto_unroll_max_step` pragma, are copied out.

A lowering pass (PrimFunc -> PrimFunc). Each copy has the loop variable replaced by `min + k`
(folded when `min` is a constant), so that the simplifier and LLVM see constant offsets, which
is what register blocking needs.

- A loop marked `unroll` is unrolled whatever its constant extent. A symbolic extent with a
  constant upper bound gives that many copies, each guarded by `k < extent`; an unbounded one
  cannot be unrolled and `lower/loop_nest.py` has already rejected it.
- The pragmas of TVM (`Stage.pragma(axis, key, value)`) apply to the loops inside `axis`:
  `auto_unroll_max_step=N` unrolls every serial loop of constant extent whose copies would hold at
  most N statements in all, innermost first (as TVM's UnrollLoop pass counts them), and
  `unroll_explicit=False` keeps loops chosen for unrolling as loops of kind UNROLLED, which the
  codegen hands to LLVM with `llvm.loop.unroll.full` instead of copying them here. A loop under
  `scalar_loop=True` stays a loop (`auto_unroll_max_step` passes it by, as LLVM does).
- Where the copies of an unrolled loop hold loop nests that, fully unrolled, would give more
  than LLVM_UNROLL_LIMIT statements in all, the loops that hold loops stay loops in LLVM too
  (annotation `KEEP_ROLLED`, `llvm.loop.unroll.disable`; LLVM may still unroll the innermost
  ones). LLVM's unroller sizes each loop on its own and so multiplies whole nests by the
  copies: a 7x7 kernel packed 16 rows at a time became 784 stores in one block, on which LLVM's
  vectorizers and memory analyses (quadratic in the accesses of a block) spent 7-9 s; with the
  kernel rows rolled it compiles in 0.3 s and runs as fast. Small nests (a 3x3 kernel's 144
  stores) stay LLVM's to unroll: rolled they ran 4% slower with AVX2.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import upper_bound
from ..expr import Binary, BinaryOp, CompareOp, Const, Expr, compare
from ..ir import (
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    Seq,
    Stmt,
    seq,
)
from ..schedule import MAX_UNROLL_COPIES, ScheduleError
from ..visitor import Mutator, children, contains, substitute


KEEP_ROLLED = ("keep_rolled", True)
"""The annotation of a loop that codegen asks LLVM not to unroll."""

LLVM_UNROLL_LIMIT = 256
"""Statements that the copies of an unrolled loop may hold once LLVM unrolls their loops."""


class _KeepRolled(Mutator):
    """Annotates with KEEP_ROLLED the serial loops of a copied-out body that hold loops."""

    def visit_For(self, node: For) -> Stmt:
        body = self.visit(node.body)
        if (node.kind is not ForKind.SERIAL or KEEP_ROLLED in node.annotations
                or not contains(body, For)):
            return node if body is node.body else For(node.var, node.min, node.extent,
                                                        node.kind, body, node.annotations)
        return For(node.var, node.min, node.extent, node.kind, body,
                   (*node.annotations, KEEP_ROLLED))

    def visit_Expr(self, node: Expr) -> Expr:
        return node  # loops are statements: no expression holds one


def _unrolled_size(node: Stmt) -> int:
    """Statements in `node` once every loop of constant extent in it is copied out."""
    if isinstance(node, (BufferStore, Evaluate)):
        return 1
    if isinstance(node, Seq):
        return sum(_unrolled_size(child) for child in node.stmts)
    if isinstance(node, For):
        extent = int(node.extent.value) if isinstance(node.extent, Const) else 1
        return extent * _unrolled_size(node.body)
    return sum(_unrolled_size(child) for child in children(node) if isinstance(child, Stmt))


def _offset(start: Expr, k: int) -> Expr:
    if isinstance(start, Const):
        return Const(int(start.value) + k, start.dtype)
    if k == 0:
        return start
    return Binary(BinaryOp.ADD, start, Const(k, start.dtype), start.dtype)


@dataclass
class _Scope:
    """The unroll pragmas in force and the counts TVM's rule needs, for the statement at hand."""

    max_step: int = 0  # auto_unroll_max_step (0: no automatic unrolling)
    explicit: bool = True  # unroll_explicit
    steps: int = 0  # statements in the code visited so far, after unrolling
    normal_depth: int = 0  # loops kept as loops below this point (they stop auto-unrolling)


class _Unroller(Mutator):
    def __init__(self) -> None:
        self.scope = _Scope()

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        self.scope.steps += 1
        return node

    def visit_Evaluate(self, node: Evaluate) -> Stmt:
        self.scope.steps += 1
        return node

    def visit_Seq(self, node: Seq) -> Stmt:
        # Each statement is counted on its own; a sequence holds the sum of its parts' steps.
        outer = self.scope
        steps, depth, children = 0, 0, []
        for child in node.stmts:
            self.scope = _Scope(outer.max_step, outer.explicit)
            children.append(self.visit(child))
            steps += self.scope.steps
            depth = max(depth, self.scope.normal_depth)
        self.scope = outer
        outer.steps += steps
        outer.normal_depth = max(outer.normal_depth, depth)
        if all(a is b for a, b in zip(children, node.stmts)):
            return node
        return seq(*children)

    def visit_For(self, node: For) -> Stmt:
        scope = self.scope
        saved = (scope.max_step, scope.explicit)
        for key, value in node.annotations:
            if key == "auto_unroll_max_step":
                scope.max_step = int(value)  # type: ignore[call-overload]
            elif key == "unroll_explicit":
                scope.explicit = bool(value)
        body = self.visit(node.body)
        scope.max_step, scope.explicit = saved
        extent = int(node.extent.value) if isinstance(node.extent, Const) else None
        if node.kind is ForKind.VECTORIZED and extent is not None:
            # Becomes straight-line vector code: its statements count, the loop does not.
            return For(node.var, node.min, node.extent, node.kind, body, node.annotations)
        requested = node.kind is ForKind.UNROLLED
        automatic = (
            node.kind is ForKind.SERIAL
            and ("scalar_loop", True) not in node.annotations
            and extent is not None
            and scope.normal_depth == 0
            and extent * max(scope.steps, 1) <= scope.max_step
        )
        if not (requested or automatic):
            scope.normal_depth += 1
            if body is node.body:
                return node
            return For(node.var, node.min, node.extent, node.kind, body, node.annotations)
        copies = extent if extent is not None else _bound(node)
        scope.steps *= max(copies, 1)
        if not scope.explicit:
            return For(node.var, node.min, node.extent, ForKind.UNROLLED, body, node.annotations)
        return _copy_out(node, body, copies, guarded=extent is None)


def _bound(node: For) -> int:
    bound = upper_bound(node.extent, {})
    if bound is None:
        raise ScheduleError(f"unroll: loop {node.var.name} has extent {node.extent}, which has no "
                          "constant upper bound; split it by a constant and unroll the inner loop")
    return max(bound, 0)


def _copy_out(node: For, body: Stmt, copies: int, guarded: bool) -> Stmt:
    if copies > MAX_UNROLL_COPIES:
        raise ScheduleError(f"unroll: loop {node.var.name} has {copies} iterations, more than "
                          f"{MAX_UNROLL_COPIES} copies of its body; split it and unroll a part")
    if copies > 1 and copies * _unrolled_size(body) > LLVM_UNROLL_LIMIT:
        body = _KeepRolled().visit(body)
    out = []
    for k in range(copies):
        copy = substitute(body, {node.var: _offset(node.min, k)})
        if guarded:
            copy = IfThenElse(compare(CompareOp.LT, k, node.extent), copy, None, True)
        out.append(copy)
    return seq(*out)


def unroll_loops(func: PrimFunc) -> PrimFunc:
    """Copy out the loops marked unroll and those the unroll pragmas select.

    Args:
        func: a lowered function.

    Returns:
        The function with only the UNROLLED loops left that `unroll_explicit=False` leaves to LLVM.

    Raises:
        ScheduleError: a loop marked unroll has no constant bound or too many iterations.
    """
    return func.with_body(_Unroller().visit(func.body))
