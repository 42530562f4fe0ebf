"""Simplify every expression of a function, using the constant ranges of enclosing loops.

Removes branches whose condition the loop ranges decide, loops that run zero times, and turns
one-iteration loops into a substitution, so later passes and the printed IR stay small. A loop
whose whole body is guarded by a bound on its own variable runs only where the guard holds: the
partial last tile of a non-dividing split (`for x in 0..11: if x + 66 < 73`) becomes a loop of 7
iterations without the guard, so unrolling and vectorizing copy only the iterations that exist.
"""

from __future__ import annotations

from ..arith import INF, Simplifier
from ..expr import Const, Expr, Var
from ..ir import NOP, Allocate, For, IfThenElse, LetStmt, PrimFunc, Stmt, seq
from ..visitor import Mutator, substitute


class _StmtSimplifier(Mutator):
    def __init__(self, func: PrimFunc):
        # Shape variables are sizes: never negative.
        self.expr = Simplifier({v: (0.0, INF) for v in func.shape_vars})

    def visit_Expr(self, node: Expr) -> Expr:  # every expression goes to the arithmetic simplifier
        return self.expr.visit(node)

    def visit_Var(self, node: Var) -> Expr:
        return node

    def visit_For(self, node: For) -> Stmt:
        lo, extent = self.expr.visit(node.min), self.expr.visit(node.extent)
        if isinstance(lo, Const) and isinstance(extent, Const):
            lo, extent = guarded_range(node, lo, extent, self.expr)
        if isinstance(extent, Const) and int(extent.value) <= 0:
            return NOP
        if isinstance(extent, Const) and int(extent.value) == 1 and not node.annotations:
            # A loop that carries pragmas stays, since they apply to the loops inside it.
            return self.visit(substitute(node.body, {node.var: lo}))
        saved = self.expr.ranges.get(node.var)
        lo_b = self.expr.bounds(lo)
        hi_b = self.expr.bounds(extent)
        self.expr.set_range(node.var, (lo_b[0], lo_b[1] + hi_b[1] - 1))
        body = self.visit(node.body)
        self.expr.set_range(node.var, saved)
        if body is NOP:
            return NOP
        if lo is node.min and extent is node.extent and body is node.body:
            return node
        return For(node.var, lo, extent, node.kind, body, node.annotations)

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        cond = self.expr.visit(node.cond)
        if isinstance(cond, Const):
            chosen = node.then_case if cond.value else node.else_case
            return NOP if chosen is None else self.visit(chosen)
        then_case = self.visit(node.then_case)
        else_case = None if node.else_case is None else self.visit(node.else_case)
        if then_case is NOP and else_case in (None, NOP):
            return NOP
        if cond is node.cond and then_case is node.then_case and else_case is node.else_case:
            return node
        return IfThenElse(cond, then_case, else_case, node.likely)

    def visit_Seq(self, node: Stmt) -> Stmt:
        stmts = [self.visit(s) for s in node.stmts]  # type: ignore[attr-defined]
        return seq(*stmts)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        body = self.visit(node.body)
        if body is NOP:
            return NOP
        return node if body is node.body else Allocate(node.buffer, body)

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        return self.generic_visit(node)


def guarded_range(loop: For, lo: Const, extent: Const,
                  simplifier: Simplifier) -> tuple[Const, Const]:
    """The constant range (`lo`, `extent`) of `loop` narrowed to where the guard of its body
    can hold: an `if` without `else` that the body is, seen through inner loops (of constant
    ranges where the bound uses their variables: it then holds for some of their values). The
    same two constants where that changes nothing."""
    body = loop.body
    inner: dict[Var, tuple[float, float]] = {}
    while isinstance(body, For):
        if isinstance(body.min, Const) and isinstance(body.extent, Const):
            inner[body.var] = (int(body.min.value), int(body.min.value + body.extent.value) - 1)
        body = body.body
    if not (isinstance(body, IfThenElse) and body.else_case is None):
        return lo, extent
    first, last = int(lo.value), int(lo.value) + int(extent.value) - 1
    low, high = simplifier.implied_range(body.cond, loop.var, inner)
    if low <= first and high >= last:
        return lo, extent
    first, last = int(max(first, low)), int(min(last, high))
    return Const(first, lo.dtype), Const(max(last - first + 1, 0), extent.dtype)


def simplify_func(func: PrimFunc) -> PrimFunc:
    """Simplify the body of `func` (see the module docstring)."""
    return func.with_body(_StmtSimplifier(func).visit(func.body))
