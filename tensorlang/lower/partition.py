"""Loop partitioning: split off the iterations where a non-dividing split's guard can fail.

A guard `if i.outer * 8 + i.inner < n` (marked likely by the loop-nest builder) holds for every
iteration of `i.outer` below some bound. This pass splits such a loop in two: a main loop where
the guard is known to hold and is removed, and a short tail loop that keeps it. The main body is
then branch-free, which is what vectorization and the CPU's pipeline want.

A loop that fuses block loops (`f = j.outer * 8 + i.outer`, the parallel loop of a GEMM with few
column blocks) sees their guards through its digits `f // 8` and `f % 8`. A bound on `f % 8`
holds on a periodic set of iterations, so the body is unswitched instead: `if f % 8 < 7` runs
the copy with the guard removed, the other branch the copy of the last block (where `f % 8` is
7). A bound on `f // 8` is a bound on `f`, which splits a serial loop the same way as above; a
parallel loop is unswitched on it too, so that the schedule's one parallel loop stays one (its
threads start once). Left in the body, such a guard masks a register block's every access, and
the block stays in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import INF, Simplifier, conjuncts, simplify, structural_key, symbolic_bounds
from ..expr import Binary, BinaryOp, Compare, CompareOp, Const, Expr, Var, binary, compare, const
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
        v in inner.serial and _linear_split(neg, v, inner.relax, fused=False) is not None
        for v in mentioned
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


@dataclass(frozen=True)
class _Digit:
    """The term `(v // step) % modulus` (no modulus: `v // step`) of a loop variable v that fuses
    block loops: the index of one of them (step 1: the innermost, no modulus: the outermost)."""

    step: int
    modulus: int | None

    def of(self, v: Expr) -> Expr:
        digit = _div(v, self.step)
        return digit if self.modulus is None else binary(BinaryOp.FLOORMOD, digit, self.modulus)

    def rewritten(self, v: Var, digit: Expr) -> Expr:
        """v with this digit replaced by `digit`, its other digits kept."""
        out = binary(BinaryOp.MUL, digit, self.step)
        if self.modulus is not None:
            period = self.step * self.modulus
            out = binary(BinaryOp.ADD, binary(BinaryOp.MUL, _div(v, period), period), out)
        if self.step > 1:
            out = binary(BinaryOp.ADD, out, binary(BinaryOp.FLOORMOD, v, self.step))
        return simplify(out)


def _div(v: Expr, d: int) -> Expr:
    return v if d == 1 else binary(BinaryOp.FLOORDIV, v, d)


def _positive_const(e: Expr) -> int | None:
    return int(e.value) if isinstance(e, Const) and int(e.value) > 0 else None


def _digit_of(atom: Expr, v: Var) -> _Digit | None:
    """What `atom` is of v: a digit (v itself is the digit of step 1 without modulus)."""
    if atom is v:
        return _Digit(1, None)
    if not isinstance(atom, Binary) or _positive_const(atom.b) is None:
        return None
    d = int(atom.b.value)
    if atom.op is BinaryOp.FLOORDIV and atom.a is v:
        return _Digit(d, None)
    if atom.op is BinaryOp.FLOORMOD:
        inner = _digit_of(atom.a, v)
        if inner is not None and inner.modulus is None:
            return _Digit(inner.step, d)
    return None


def _split_term(lin, v: Var) -> tuple[Expr, int, _Digit] | None:
    """(atom, coefficient, digit) of the one term of `lin` that uses `v`; None if `v` appears
    otherwise or in two terms."""
    found = None
    for atom, c in lin.nonzero():
        if not uses_var(atom, {v}):
            continue
        digit = _digit_of(atom, v)
        if digit is None or found is not None:
            return None
        found = (atom, c, digit)
    return found


def _linear_split(
    neg: Expr, v: Var, relax: dict[Var, tuple[Expr, Expr]], fused: bool = True
) -> tuple[str, Expr, bool, _Digit] | None:
    """For `neg < 0` with neg = c*t + rest, t a digit of v (v itself, v // d or (v // a) % m):
    ('below', p, exact, digit) if it holds for t < p, ('from', p, exact, digit) if for t >= p,
    whatever the inner loop variables are; `exact` when rest involves no inner loop variable,
    so that the comparison is false on the other side of p. None if `neg` is not of that form,
    or if t is not v itself and not `fused`."""
    s = Simplifier()
    lin = s._linear(simplify(neg))
    term = _split_term(lin, v)
    if term is None:
        return None
    atom, coef, digit = term
    if not fused and atom is not v:
        return None
    rest = lin.scaled(1)
    for key, a in lin.atoms.items():
        if a is atom:
            rest.terms[key] = 0
    rest_expr = rest.to_expr()
    bounds = symbolic_bounds(rest_expr, relax)
    if bounds is None:
        return None
    upper = bounds[1]
    exact = not uses_var(rest_expr, set(relax))
    if coef > 0:  # coef*t + upper <= -1  <=>  t <= (-1 - upper) // coef
        p = binary(BinaryOp.ADD, binary(BinaryOp.FLOORDIV, binary(BinaryOp.SUB, -1, upper), coef), 1)
        return "below", simplify(p), exact, digit
    k = -coef  # upper + 1 <= k*t  <=>  t >= ceil((upper + 1) / k)
    p = binary(BinaryOp.FLOORDIV, binary(BinaryOp.ADD, upper, k), k)
    return "from", simplify(p), exact, digit


def _unswitch(body: Stmt, v: Var, digit: _Digit, side: str, p: Expr, atoms: set[int],
              exact: set[int]) -> Stmt:
    """`body` as two copies under `if digit < p` (or >= p): the guard atoms `atoms` removed
    where the bound holds; where it does not, the exact ones false. Each copy sees v with the
    digit clamped to its side, so that the simplifier's ranges decide what depends on it there
    (the extents of write-back loops, the guards of unrolled rows): the other side of a last
    partial block's bound is that block alone."""
    bound = _positive_const(p)
    if bound is None or (digit.modulus is not None and bound >= digit.modulus):
        return body
    below = side == "below"
    holds = compare(CompareOp.LT if below else CompareOp.GE, digit.of(v), p)
    inside = binary(BinaryOp.MIN if below else BinaryOp.MAX, digit.of(v),
                    bound - 1 if below else bound)
    outside = binary(BinaryOp.MAX if below else BinaryOp.MIN, digit.of(v),
                     bound if below else bound - 1)
    return IfThenElse(
        holds,
        substitute(_ReplaceAtoms(atoms, True).visit(body), {v: digit.rewritten(v, inside)}),
        substitute(_ReplaceAtoms(exact, False).visit(body), {v: digit.rewritten(v, outside)}))


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
        # bounds on a digit of v, unswitched: (digit, side, p) -> (p, atoms, exact ones)
        unswitched: dict[tuple, tuple[Expr, set[int], set[int]]] = {}
        for guard in finder.guards:
            for atom in conjuncts(guard.cond):
                neg = _as_negative(atom)
                if neg is None or not uses_var(neg, {node.var}) or _decided_further_in(neg, inner):
                    continue
                split = _linear_split(neg, node.var, inner.relax)
                if split is None:
                    continue
                side, p, exact, digit = split
                if digit.modulus is None and node.kind is not ForKind.PARALLEL:
                    p = simplify(binary(BinaryOp.MUL, p, digit.step))  # v // d < p <=> v < d*p
                elif digit != _Digit(1, None):
                    _, decided, decided_exact = unswitched.setdefault(
                        (digit, side, structural_key(p)), (p, set(), set()))
                    decided.add(id(atom))
                    if exact:
                        decided_exact.add(id(atom))
                    continue
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

        def piece(body: Stmt) -> Stmt:
            """A body with its digits' bounds unswitched (before the variable is renamed), its
            inner loops partitioned."""
            for (digit, side, _), (p, atoms, exact) in unswitched.items():
                body = _unswitch(body, node.var, digit, side, p, atoms, exact)
            return self.visit(body)

        if not proven:
            if not unswitched:
                return self.generic_visit(node)
            return For(node.var, node.min, node.extent, node.kind, piece(node.body),
                       node.annotations)
        lo = simplify(binary(BinaryOp.MIN, binary(BinaryOp.MAX, lo, start), end), self.ranges)
        hi = simplify(binary(BinaryOp.MAX, binary(BinaryOp.MIN, hi, end), lo), self.ranges)
        # An exact atom is false beyond its own bound; the tail starts at the smallest bound, so
        # that only holds for the tail when every atom on that side has the same bound.
        sides = [side for side, _ in seen_bounds]
        if sides.count("below") > 1:
            false_after = set()
        if sides.count("from") > 1:
            false_before = set()
        main_body = piece(_ReplaceAtoms(proven, True).visit(node.body))
        head_body = piece(_ReplaceAtoms(false_before, False).visit(node.body))
        tail_body = piece(_ReplaceAtoms(false_after, False).visit(node.body))
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
