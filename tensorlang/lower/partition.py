"""Loop partitioning: split off the iterations where a non-dividing split's guard can fail.

A guard `if i.outer * 8 + i.inner < n` (marked likely by the loop-nest builder) holds for every
iteration of `i.outer` below some bound. This pass splits such a loop in two: a main loop where
the guard is known to hold and is removed, and a short tail loop that keeps it. The main body is
then branch-free, which is what vectorization and the CPU's pipeline want.
"""

from __future__ import annotations

from ..arith import INF, Simplifier, conjuncts, simplify, structural_key, symbolic_bounds
from ..expr import Binary, BinaryOp, Compare, CompareOp, Const, Expr, Var, binary, const
from ..ir import For, ForKind, IfThenElse, PrimFunc, Stmt, seq
from ..visitor import Mutator, Visitor, substitute, uses_var


def _as_negative(atom: Expr) -> Expr | None:
    """`e` such that atom <=> e < 0, for integer comparisons."""
    if not isinstance(atom, Compare) or not atom.a.dtype.is_integer:
        return None
    a, b = atom.a, atom.b
    one = const(1, a.dtype)
    table = {
        CompareOp.LT: lambda: binary(BinaryOp.SUB, a, b),
        CompareOp.LE: lambda: binary(BinaryOp.SUB, binary(BinaryOp.SUB, a, b), one),
        CompareOp.GT: lambda: binary(BinaryOp.SUB, b, a),
        CompareOp.GE: lambda: binary(BinaryOp.SUB, binary(BinaryOp.SUB, b, a), one),
    }
    return table[atom.op]() if atom.op in table else None


class _StatementVisitor(Visitor):
    """A visitor of statements only: what it looks for (loops, guards) is never inside an
    expression, and the expressions are most of the nodes of an unrolled body."""

    def visit_Expr(self, node: Expr) -> None:
        return None


class _InnerLoops(_StatementVisitor):
    """Collects the loops inside a statement with their extents (to relax their variables) and
    the variables of those that are serial (which this pass may split themselves)."""

    def __init__(self) -> None:
        self.relax: dict[Var, tuple[Expr, Expr]] = {}
        self.serial: set[Var] = set()

    def visit_For(self, node: For) -> None:
        hi = simplify(binary(BinaryOp.SUB, binary(BinaryOp.ADD, node.min, node.extent), 1))
        self.relax[node.var] = (node.min, hi)
        if node.kind is ForKind.SERIAL:
            self.serial.add(node.var)
        self.visit(node.body)


def _decided_further_in(neg: Expr, inner: _InnerLoops) -> bool:
    """Whether a guard that also depends on inner loops depends only on serial ones, linearly:
    splitting the innermost of them removes the guard just as well, copying only that loop's
    body instead of this loop's (a register block's write-back loop, not the block's whole
    computation)."""
    mentioned = [v for v in inner.relax if uses_var(neg, {v})]
    return bool(mentioned) and all(
        v in inner.serial and _linear_split(neg, v, inner.relax) is not None for v in mentioned
    )


class _LikelyGuards(_StatementVisitor):
    def __init__(self) -> None:
        self.guards: list[IfThenElse] = []

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        if node.likely:
            self.guards.append(node)
        self.generic_visit(node)


class _ReplaceAtoms(Mutator):
    """Replaces the comparisons whose value is known in one piece of a partitioned loop."""

    def __init__(self, known: set[int], value: bool):
        self.known = known
        self.value = value

    def visit_Compare(self, node: Compare) -> Expr:
        return const(self.value) if id(node) in self.known else node


def _linear_split(
    neg: Expr, v: Var, relax: dict[Var, tuple[Expr, Expr]]
) -> tuple[str, Expr, bool] | None:
    """For `neg < 0` with neg = c*v + rest: ('below', p, exact) if it holds for v < p, ('from',
    p, exact) if for v >= p, whatever the inner loop variables are; `exact` when rest involves no
    inner loop variable, so that the comparison is false on the other side of p. None if `neg`
    is not of that form."""
    s = Simplifier()
    lin = s._linear(simplify(neg))
    coef = 0
    for atom, c in lin.nonzero():
        if atom is v:
            coef = c
        elif uses_var(atom, {v}):
            return None
    if coef == 0:
        return None
    rest = lin.scaled(1)
    for key, atom in lin.atoms.items():
        if atom is v:
            rest.terms[key] = 0
    rest_expr = rest.to_expr()
    bounds = symbolic_bounds(rest_expr, relax)
    if bounds is None:
        return None
    upper = bounds[1]
    exact = not uses_var(rest_expr, set(relax))
    if coef > 0:  # coef*v + upper <= -1  <=>  v <= (-1 - upper) // coef
        p = binary(BinaryOp.ADD, binary(BinaryOp.FLOORDIV, binary(BinaryOp.SUB, -1, upper), coef), 1)
        return "below", simplify(p), exact
    k = -coef  # upper + 1 <= k*v  <=>  v >= ceil((upper + 1) / k)
    p = binary(BinaryOp.FLOORDIV, binary(BinaryOp.ADD, upper, k), k)
    return "from", simplify(p), exact


class _Partitioner(Mutator):
    def __init__(self, func: PrimFunc):
        # Shape variables are sizes: never negative.
        self.ranges = {v: (0.0, INF) for v in func.shape_vars}

    def visit_Expr(self, node: Expr) -> Expr:
        return node  # loops are statements: no expression holds one

    def visit_For(self, node: For) -> Stmt:
        if node.kind in (ForKind.VECTORIZED, ForKind.UNROLLED):
            return self.generic_visit(node)
        finder = _LikelyGuards()
        finder.visit(node.body)
        inner = _InnerLoops()
        inner.visit(node.body)
        start, end = node.min, binary(BinaryOp.ADD, node.min, node.extent)
        lo, hi = start, end
        proven: set[int] = set()
        false_before: set[int] = set()  # exact "from" atoms: false below the main range
        false_after: set[int] = set()  # exact "below" atoms: false above it
        seen_bounds: set[object] = set()
        for guard in finder.guards:
            for atom in conjuncts(guard.cond):
                neg = _as_negative(atom)
                if neg is None or not uses_var(neg, {node.var}) or _decided_further_in(neg, inner):
                    continue
                split = _linear_split(neg, node.var, inner.relax)
                if split is None:
                    continue
                side, p, exact = split
                key = (side, structural_key(p))
                proven.add(id(atom))
                if exact:
                    (false_after if side == "below" else false_before).add(id(atom))
                if key in seen_bounds:
                    continue
                seen_bounds.add(key)
                if side == "below":
                    hi = binary(BinaryOp.MIN, hi, p)
                else:
                    lo = binary(BinaryOp.MAX, lo, p)
        if not proven:
            return self.generic_visit(node)
        lo = simplify(binary(BinaryOp.MIN, binary(BinaryOp.MAX, lo, start), end), self.ranges)
        hi = simplify(binary(BinaryOp.MAX, binary(BinaryOp.MIN, hi, end), lo), self.ranges)
        # An exact atom is false beyond its own bound; the tail starts at the smallest bound, so
        # that only holds for the tail when every atom on that side has the same bound.
        sides = [side for side, _ in seen_bounds]
        if sides.count("below") > 1:
            false_after = set()
        if sides.count("from") > 1:
            false_before = set()
        main_body = self.visit(_ReplaceAtoms(proven, True).visit(node.body))
        head_body = self.visit(_ReplaceAtoms(false_before, False).visit(node.body))
        tail_body = self.visit(_ReplaceAtoms(false_after, False).visit(node.body))
        pieces = [
            _loop_over(node, start, lo, head_body, self.ranges),
            _loop_over(node, lo, hi, main_body, self.ranges),
            _loop_over(node, hi, end, tail_body, self.ranges),
        ]
        return seq(*(p for p in pieces if p is not None))


def _loop_over(node: For, begin: Expr, end: Expr, body: Stmt, ranges: dict) -> Stmt | None:
    extent = simplify(binary(BinaryOp.SUB, end, begin), ranges)
    if isinstance(extent, Const) and int(extent.value) <= 0:
        return None
    # A fresh variable per copy keeps loop variables unique in the function.
    var = Var(node.var.name, node.var.dtype)
    return For(var, simplify(begin), extent, node.kind, substitute(body, {node.var: var}), node.annotations)


def partition_loops(func: PrimFunc) -> PrimFunc:
    """Split loops so that likely guards vanish from the main iterations (see module docstring)."""
    return func.with_body(_Partitioner(func).visit(func.body))
