"""Integer interval analysis and the expression simplifier.

Lowering produces index arithmetic such as `(i.outer * 8 + i.inner) // 8`; this module turns it
back into `i.outer` using what is known about loop variables. Three tools:

- `const_bounds(e, ranges)`: a constant interval that contains every value of `e`;
- `symbolic_bounds(e, relax)`: an interval with expression ends, relaxing only some variables
  (bound inference asks "which region does one iteration of this loop touch?");
- `simplify(e, ranges)`: constant folding plus a canonical linear form for integer sums, with the
  floor-division and modulo rules that are exact for floor semantics.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping

import numpy as np

from .dtype import DType
from .expr import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Compare,
    CompareOp,
    Const,
    Expr,
    Not,
    Select,
    Var,
    binary,
    cast,
    const,
)
from .visitor import Mutator, _field_names, uses_var

INF = math.inf
Interval = tuple[float, float]
Ranges = Mapping[Var, Interval]


def _is_const(e: Expr, value: int | float | None = None) -> bool:
    return isinstance(e, Const) and e.dtype.lanes == 1 and (value is None or e.value == value)


# ----------------------------------------------------------------------------- constant bounds


def const_bounds(e: Expr, ranges: Ranges) -> Interval:
    """Inclusive constant bounds of an integer expression (±inf where unknown)."""
    if isinstance(e, Const):
        v = e.value
        return (float(v), float(v)) if not isinstance(v, float) else (v, v)
    if isinstance(e, Var):
        if e in ranges:
            return ranges[e]
        return (-INF, INF)
    if isinstance(e, Cast) and e.value.dtype.is_integer and e.dtype.is_integer:
        lo, hi = const_bounds(e.value, ranges)
        if e.dtype.bits >= e.value.dtype.bits or (
            e.dtype.min_value() <= lo and hi <= e.dtype.max_value()
        ):
            return lo, hi
        return float(e.dtype.min_value()), float(e.dtype.max_value())
    if isinstance(e, Binary) and e.dtype.is_integer:
        return _binary_bounds(e.op, const_bounds(e.a, ranges), const_bounds(e.b, ranges))
    if isinstance(e, Select):
        a, b = const_bounds(e.true_value, ranges), const_bounds(e.false_value, ranges)
        return min(a[0], b[0]), max(a[1], b[1])
    if e.dtype.is_integer:
        return float(e.dtype.min_value()), float(e.dtype.max_value())
    return (-INF, INF)


def _mul_bounds(a: Interval, b: Interval) -> Interval:
    products = []
    for x in a:
        for y in b:
            if (x == 0 and abs(y) == INF) or (y == 0 and abs(x) == INF):
                products.append(0.0)
            else:
                products.append(x * y)
    return min(products), max(products)


def _binary_bounds(op: BinaryOp, a: Interval, b: Interval) -> Interval:
    if op is BinaryOp.ADD:
        return a[0] + b[0], a[1] + b[1]
    if op is BinaryOp.SUB:
        return a[0] - b[1], a[1] - b[0]
    if op is BinaryOp.MUL:
        return _mul_bounds(a, b)
    if op is BinaryOp.MIN:
        return min(a[0], b[0]), min(a[1], b[1])
    if op is BinaryOp.MAX:
        return max(a[0], b[0]), max(a[1], b[1])
    if op is BinaryOp.FLOORDIV and b[0] == b[1] and b[0] > 0:
        d = b[0]
        return (math.floor(a[0] / d) if a[0] != -INF else -INF, math.floor(a[1] / d) if a[1] != INF else INF)
    if op is BinaryOp.FLOORMOD and b[0] > 0:
        if b[0] == b[1] and a[0] >= 0 and a[1] < b[0]:
            return a
        return 0.0, b[1] - 1
    return (-INF, INF)


def conjuncts(cond: Expr) -> list[Expr]:
    """The terms of a conjunction `a & b & ...` (`[cond]` for any other condition)."""
    if isinstance(cond, Binary) and cond.op is BinaryOp.AND:
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def prove(cond: Expr, ranges: Ranges) -> bool | None:
    """True/False when the ranges decide `cond`, None when they do not."""
    return Simplifier(ranges).prove(cond)


# ----------------------------------------------------------------------------- symbolic bounds


def symbolic_bounds(e: Expr, relax: Mapping[Var, tuple[Expr, Expr]]) -> tuple[Expr, Expr] | None:
    """Inclusive bounds of integer `e` when each var in `relax` ranges over [lo, hi] and every
    other var is held fixed. None when the expression is not understood (the caller then falls
    back to the whole domain)."""
    if isinstance(e, Const):
        return e, e
    if isinstance(e, Var):
        return relax.get(e, (e, e))
    if isinstance(e, Cast) and e.dtype.is_integer and e.value.dtype.is_integer:
        inner = symbolic_bounds(e.value, relax)
        return None if inner is None else (cast(inner[0], e.dtype), cast(inner[1], e.dtype))
    if not isinstance(e, Binary) or not e.dtype.is_integer:
        return None if _mentions(e, relax) else (e, e)
    if not _mentions(e, relax):  # a point: one expression, so that readers see lo is hi
        return e, e
    a = symbolic_bounds(e.a, relax)
    b = symbolic_bounds(e.b, relax)
    if a is None or b is None:
        return None
    op = e.op
    if op is BinaryOp.ADD:
        return binary(op, a[0], b[0]), binary(op, a[1], b[1])
    if op is BinaryOp.SUB:
        return binary(op, a[0], b[1]), binary(op, a[1], b[0])
    if op in (BinaryOp.MIN, BinaryOp.MAX):
        return binary(op, a[0], b[0]), binary(op, a[1], b[1])
    if op is BinaryOp.MUL:
        for x, y in ((a, b), (b, a)):
            if x[0] is x[1] and _is_const(x[0]):
                c = x[0].value
                return (binary(op, y[0], x[0]), binary(op, y[1], x[0])) if c >= 0 else (
                    binary(op, y[1], x[0]),
                    binary(op, y[0], x[0]),
                )
        if a[0] is a[1] and b[0] is b[1]:
            return binary(op, e.a, e.b), binary(op, e.a, e.b)
        return None
    if op is BinaryOp.FLOORDIV and b[0] is b[1] and _is_const(b[0]) and b[0].value > 0:
        return binary(op, a[0], b[0]), binary(op, a[1], b[0])
    if op is BinaryOp.FLOORMOD and b[0] is b[1] and _is_const(b[0]) and b[0].value > 0:
        if a[0] is a[1]:
            return binary(op, a[0], b[0]), binary(op, a[0], b[0])
        return const(0, e.dtype), const(b[0].value - 1, e.dtype)
    return None


def _mentions(e: Expr, variables: Mapping[Var, object]) -> bool:
    return uses_var(e, set(variables))


# ----------------------------------------------------------------------------- linear forms


def structural_key(e: object) -> object:
    """A hashable key equal for structurally equal expressions (variables by identity)."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("const", str(e.dtype), e.value)
    if isinstance(e, tuple):
        return tuple(structural_key(x) for x in e)
    if isinstance(e, enum.Enum):  # its value: enums hash slowly, and keys are hashed often
        return e.value
    if hasattr(type(e), "__dataclass_fields__"):
        return (type(e).__name__,) + tuple(structural_key(getattr(e, n)) for n in _field_names(type(e)))
    if hasattr(e, "op") and hasattr(e, "value_index"):  # a Tensor
        return ("tensor", id(e.op), e.value_index)
    return e


class _Linear:
    """sum(coef * atom) + constant over one integer dtype; atoms are keyed structurally."""

    __slots__ = ("terms", "atoms", "constant", "dtype", "key")

    def __init__(self, dtype: DType, key: Callable[[Expr], object] = structural_key):
        self.terms: dict[object, int] = {}
        self.atoms: dict[object, Expr] = {}
        self.constant = 0
        self.dtype = dtype
        self.key = key

    def add_atom(self, atom: Expr, coef: int) -> None:
        key = self.key(atom)
        self.atoms.setdefault(key, atom)
        self.terms[key] = self.terms.get(key, 0) + coef

    def add(self, other: _Linear, scale: int) -> None:
        for key, coef in other.terms.items():
            self.atoms.setdefault(key, other.atoms[key])
            self.terms[key] = self.terms.get(key, 0) + coef * scale
        self.constant += other.constant * scale

    def scaled(self, scale: int) -> _Linear:
        out = _Linear(self.dtype, self.key)
        out.add(self, scale)
        return out

    def nonzero(self) -> list[tuple[Expr, int]]:
        return [(self.atoms[k], c) for k, c in self.terms.items() if c != 0]

    def to_expr(self) -> Expr:
        t = self.dtype
        positive = [(a, c) for a, c in self.nonzero() if c > 0]
        negative = [(a, -c) for a, c in self.nonzero() if c < 0]

        def term(atom: Expr, coef: int) -> Expr:
            return atom if coef == 1 else Binary(BinaryOp.MUL, atom, Const(coef, t), t)

        result: Expr | None = None
        if not positive and self.constant > 0:  # "8 - x" rather than "0 - x + 8"
            result = Const(self.constant, t)
            self.constant, restore = 0, self.constant
        else:
            restore = None
        for atom, coef in positive:
            result = term(atom, coef) if result is None else Binary(BinaryOp.ADD, result, term(atom, coef), t)
        for atom, coef in negative:
            left = result if result is not None else Const(0, t)
            result = Binary(BinaryOp.SUB, left, term(atom, coef), t)
        if restore is not None:
            self.constant = restore
            return result
        if result is None:
            return Const(self.constant, t)
        if self.constant > 0:
            return Binary(BinaryOp.ADD, result, Const(self.constant, t), t)
        if self.constant < 0:
            return Binary(BinaryOp.SUB, result, Const(-self.constant, t), t)
        return result


# ----------------------------------------------------------------------------- the simplifier


def _fold_float(op: BinaryOp, a: Const, b: Const, t: DType) -> Const | None:
    x, y = t.numpy.type(a.value), t.numpy.type(b.value)
    with np.errstate(all="ignore"):
        table = {
            BinaryOp.ADD: lambda: x + y,
            BinaryOp.SUB: lambda: x - y,
            BinaryOp.MUL: lambda: x * y,
            BinaryOp.DIV: lambda: x / y,
            BinaryOp.MIN: lambda: min(x, y),
            BinaryOp.MAX: lambda: max(x, y),
        }
        if op not in table:
            return None
        return Const(float(table[op]()), t)


def _fold_int(op: BinaryOp, x: int, y: int, t: DType) -> Const | None:
    if op is BinaryOp.ADD:
        v = x + y
    elif op is BinaryOp.SUB:
        v = x - y
    elif op is BinaryOp.MUL:
        v = x * y
    elif op is BinaryOp.FLOORDIV:
        v = 0 if y == 0 else x // y
    elif op is BinaryOp.FLOORMOD:
        v = 0 if y == 0 else x % y
    elif op is BinaryOp.MIN:
        v = min(x, y)
    elif op is BinaryOp.MAX:
        v = max(x, y)
    elif op is BinaryOp.AND:
        v = x & y
    elif op is BinaryOp.OR:
        v = x | y
    else:
        return None
    if t.is_bool:
        return Const(bool(v), t)
    if not t.min_value() <= v <= t.max_value():
        return None  # would wrap: leave it to run time
    return Const(v, t)


class Simplifier(Mutator):
    """Expression rewriter; `ranges` gives constant bounds of variables (loop vars)."""

    def __init__(self, ranges: Ranges | None = None):
        self.ranges: dict[Var, Interval] = dict(ranges or {})
        # The linear form of each expression already taken apart or built from one, by identity
        # (the node is kept with it, so the id stays its own): a sum is simplified bottom-up, and
        # without this every level would take apart all the levels below it again.
        self._linear_of: dict[int, tuple[Expr, _Linear]] = {}
        # Atoms of linear forms are keyed by a small int per structure, computed once per node:
        # structural keys are deep tuples, slow to build and to hash again at every dict access.
        self._key_of: dict[int, tuple[Expr, int]] = {}
        self._interned: dict[object, int] = {}
        # The simplified form of each node visited under the current ranges, by identity. After
        # unrolling, the copies of a body share every subtree that does not use the unrolled
        # variable, so most of a function's index arithmetic is simplified once, not per copy.
        self._done: dict[int, tuple[Expr, Expr]] = {}

    def set_range(self, var: Var, interval: Interval | None) -> None:
        """Bound `var` to `interval` (None: unbound) for the expressions visited from now on."""
        if interval is None:
            self.ranges.pop(var, None)
        else:
            self.ranges[var] = interval
        self._done.clear()  # what was simplified under the old ranges may simplify further

    def prove(self, cond: Expr) -> bool | None:
        """True/False when the ranges decide `cond`, None when they do not. One simplifier
        asked several conditions on the same expressions (an index against both ends of its
        dimension) simplifies each shared subexpression once."""
        cond = self.visit(cond)
        return bool(cond.value) if _is_const(cond) else None

    def implied_range(self, cond: Expr, var: Var, inner: Ranges | None = None) -> Interval:
        """The values of the integer `var` that `cond` allows by its conjuncts that bound `var`
        alone (`c * var + k` against a constant) or with variables of `inner` (the loops inside
        the guard's loop: values of `var` for which some inner values pass); (-INF, INF) where
        none does. The guard of a partial tile, `x + 66 < 73`, allows x in [-INF, 6], and the
        write-back of a one-column tail, `x * 4 + lane + 96 < 97` with lane in [0, 3], x in
        [-INF, 0]."""
        lo, hi = -INF, INF
        inner = inner or {}
        for term in conjuncts(cond):
            if not (isinstance(term, Compare) and term.a.dtype.is_integer
                    and term.a.dtype.lanes == 1):
                continue
            diff = self._linear(Binary(BinaryOp.SUB, term.a, term.b, term.a.dtype))
            coef = sum(c for atom, c in diff.nonzero() if atom is var)
            others = [(atom, c) for atom, c in diff.nonzero() if atom is not var]
            if not coef or any(atom not in inner for atom, _ in others):
                continue
            rest = [sorted((c * inner[atom][0], c * inner[atom][1])) for atom, c in others]
            if term.op in (CompareOp.LT, CompareOp.LE):  # some inner values: the smallest rest
                k = diff.constant + sum(r[0] for r in rest)
            elif term.op in (CompareOp.GT, CompareOp.GE):
                k = diff.constant + sum(r[1] for r in rest)
            elif term.op is CompareOp.EQ and not rest:
                k = diff.constant
            else:
                continue
            # coef * var + k  op  0, as coef * var in [low, high]
            low, high = {CompareOp.LT: (-INF, -k - 1), CompareOp.LE: (-INF, -k),
                         CompareOp.GT: (1 - k, INF), CompareOp.GE: (-k, INF),
                         CompareOp.EQ: (-k, -k)}[term.op]
            if coef < 0:
                coef, low, high = -coef, -high, -low
            if low != -INF:
                lo = max(lo, -(-low // coef))
            if high != INF:
                hi = min(hi, high // coef)
        return lo, hi

    def visit(self, node: Expr) -> Expr:
        known = self._done.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        result = super().visit(node)
        self._done[id(node)] = (node, result)
        return result

    def _key(self, e: Expr) -> int:
        known = self._key_of.get(id(e))
        if known is not None and known[0] is e:
            return known[1]
        key = self._interned.setdefault(structural_key(e), len(self._interned))
        self._key_of[id(e)] = (e, key)
        return key

    # Integer sums go through the linear form.
    def _linear(self, e: Expr) -> _Linear:
        """The linear form of `e`, shared with the cache: read it, never change it (copy it
        with `scaled(1)` first). Copying at every level of a sum was most of the simplifier's
        time."""
        known = self._linear_of.get(id(e))
        if known is not None and known[0] is e:
            return known[1]
        lin = self._take_apart(e)
        self._linear_of[id(e)] = (e, lin)
        return lin

    def _take_apart(self, e: Expr) -> _Linear:
        lin = _Linear(e.dtype, self._key)
        if isinstance(e, Const):
            lin.constant = int(e.value)
        elif isinstance(e, Binary) and e.op in (BinaryOp.ADD, BinaryOp.SUB):
            lin.add(self._linear(e.a), 1)
            lin.add(self._linear(e.b), 1 if e.op is BinaryOp.ADD else -1)
        elif isinstance(e, Binary) and e.op is BinaryOp.MUL and _is_const(e.b):
            lin.add(self._linear(e.a), int(e.b.value))
        elif isinstance(e, Binary) and e.op is BinaryOp.MUL and _is_const(e.a):
            lin.add(self._linear(e.b), int(e.a.value))
        else:
            lin.add_atom(e, 1)
        return lin

    def bounds(self, e: Expr) -> Interval:
        return const_bounds(e, self.ranges)

    def visit_Var(self, node: Var) -> Expr:
        return node  # leaves are already as simple as they get

    visit_Const = visit_Var

    def visit_Binary(self, node: Binary) -> Expr:
        a, b = self.visit(node.a), self.visit(node.b)
        t, op = node.dtype, node.op
        if t.lanes > 1:
            return node if a is node.a and b is node.b else Binary(op, a, b, t)
        if isinstance(a, Const) and isinstance(b, Const):
            folded = _fold_float(op, a, b, t) if t.is_float else _fold_int(op, int(a.value), int(b.value), t)
            if folded is not None:
                return folded
        if t.is_integer:
            result = self._integer_binary(op, a, b, t)
            if result is not None:
                return result
        elif t.is_float:
            if op is BinaryOp.MUL and (_is_const(b, 1.0) or _is_const(a, 1.0)):
                return a if _is_const(b, 1.0) else b
            if op is BinaryOp.ADD and (_is_const(b, 0.0) or _is_const(a, 0.0)):
                return a if _is_const(b, 0.0) else b
        elif t.is_bool and op in (BinaryOp.AND, BinaryOp.OR):
            result = _bool_binary(op, a, b)
            if result is not None:
                return result
        return node if a is node.a and b is node.b else Binary(op, a, b, t)

    def _integer_binary(self, op: BinaryOp, a: Expr, b: Expr, t: DType) -> Expr | None:
        if op in (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL):
            if op is BinaryOp.MUL and not (_is_const(a) or _is_const(b)):
                return None
            lin = self._take_apart(Binary(op, a, b, t))  # a new node: its own, fresh form
            self._recombine_div_mod(lin)
            result = lin.to_expr()
            self._linear_of[id(result)] = (result, lin)
            return result
        if op in (BinaryOp.FLOORDIV, BinaryOp.FLOORMOD) and _is_const(b) and int(b.value) > 0:
            return self._div_mod(op, a, int(b.value), t)
        if op in (BinaryOp.MIN, BinaryOp.MAX):
            diff = self._linear(Binary(BinaryOp.SUB, *_same_divisor_numerators(a, b), t))
            if diff.nonzero():
                lo, hi = self.bounds(diff.to_expr())
            else:
                lo = hi = diff.constant
            if hi <= 0:
                return a if op is BinaryOp.MIN else b
            if lo >= 0:
                return b if op is BinaryOp.MIN else a
        return None

    def _recombine_div_mod(self, lin: _Linear) -> None:
        """c*d*(x // d) + c*(x % d) = c*x: undoes the index split of a padded or packed layout
        read through its original index (so that bounds on x apply again)."""
        for key, atom in list(lin.atoms.items()):
            coef = lin.terms.get(key, 0)
            if not (coef and isinstance(atom, Binary) and atom.op is BinaryOp.FLOORMOD
                    and _is_const(atom.b) and int(atom.b.value) > 0):
                continue
            div = Binary(BinaryOp.FLOORDIV, atom.a, atom.b, atom.dtype)
            div_key = self._key(div)
            if lin.terms.get(div_key, 0) == coef * int(atom.b.value):
                lin.terms[key] = lin.terms[div_key] = 0
                lin.add(self._linear(atom.a), coef)

    def _div_mod(self, op: BinaryOp, a: Expr, d: int, t: DType) -> Expr:
        if d == 1:
            return a if op is BinaryOp.FLOORDIV else Const(0, t)
        lo, hi = self.bounds(a)
        if -INF < lo and hi < INF and lo // d == hi // d:  # one quotient in the whole range
            q = int(lo // d)
            if op is BinaryOp.FLOORDIV:
                return Const(q, t)
            return self.visit(Binary(BinaryOp.SUB, a, Const(q * d, t), t)) if q else a
        lin = self._linear(a)
        divisible, rest = _Linear(t, self._key), _Linear(t, self._key)
        for key, coef in lin.terms.items():
            target = divisible if coef % d == 0 else rest
            target.atoms[key] = lin.atoms[key]
            target.terms[key] = coef
        divisible.constant = lin.constant - lin.constant % d
        rest.constant = lin.constant % d
        rest_expr = rest.to_expr()
        lo, hi = self.bounds(rest_expr)
        if op is BinaryOp.FLOORDIV:
            quotient = divisible.scaled(1)
            for key in quotient.terms:
                quotient.terms[key] //= d
            quotient.constant //= d
            if lo >= 0 and hi < d:
                return quotient.to_expr()
            if not quotient.nonzero() and quotient.constant == 0:
                return self._nested_div(rest_expr, d, t)
            return self.visit(Binary(BinaryOp.ADD, quotient.to_expr(), Binary(op, rest_expr, Const(d, t), t), t))
        if lo >= 0 and hi < d:
            return rest_expr
        if isinstance(rest_expr, Binary) and rest_expr.op is BinaryOp.FLOORMOD and _is_const(rest_expr.b):
            inner = int(rest_expr.b.value)
            if inner % d == 0:  # (x % 32) % 8 == x % 8
                return Binary(op, rest_expr.a, Const(d, t), t)
        return Binary(op, rest_expr, Const(d, t), t)

    def _nested_div(self, x: Expr, d: int, t: DType) -> Expr:
        # (x // a) // b == x // (a * b) for positive a, b.
        if isinstance(x, Binary) and x.op is BinaryOp.FLOORDIV and _is_const(x.b) and int(x.b.value) > 0:
            return Binary(BinaryOp.FLOORDIV, x.a, Const(int(x.b.value) * d, t), t)
        return Binary(BinaryOp.FLOORDIV, x, Const(d, t), t)

    def visit_Compare(self, node: Compare) -> Expr:
        a, b = self.visit(node.a), self.visit(node.b)
        t = a.dtype
        if t.lanes == 1 and (t.is_integer or t.is_bool):
            decided = self._decide(node.op, a, b)
            if decided is not None:
                return Const(decided, node.dtype)
        elif isinstance(a, Const) and isinstance(b, Const) and t.lanes == 1:
            return Const(bool(_compare_values(node.op, a.value, b.value)), node.dtype)
        return node if a is node.a and b is node.b else Compare(node.op, a, b, node.dtype)

    def _decide(self, op: CompareOp, a: Expr, b: Expr) -> bool | None:
        if a.dtype.is_bool:
            if isinstance(a, Const) and isinstance(b, Const):
                return bool(_compare_values(op, a.value, b.value))
            return None
        diff = self._linear(Binary(BinaryOp.SUB, a, b, a.dtype))
        if not diff.nonzero():
            lo = hi = float(diff.constant)
        else:
            lo, hi = self.bounds(diff.to_expr())
        checks = {
            CompareOp.LT: (hi < 0, lo >= 0),
            CompareOp.LE: (hi <= 0, lo > 0),
            CompareOp.GT: (lo > 0, hi <= 0),
            CompareOp.GE: (lo >= 0, hi < 0),
            CompareOp.EQ: (lo == hi == 0, lo > 0 or hi < 0),
            CompareOp.NE: (lo > 0 or hi < 0, lo == hi == 0),
        }
        yes, no = checks[op]
        if yes:
            return True
        if no:
            return False
        return None

    def visit_Not(self, node: Not) -> Expr:
        value = self.visit(node.value)
        if isinstance(value, Const) and value.dtype.is_bool:
            return Const(not value.value, node.dtype)
        return node if value is node.value else Not(value, node.dtype)

    def visit_Select(self, node: Select) -> Expr:
        cond = self.visit(node.cond)
        if _is_const(cond):
            return self.visit(node.true_value if cond.value else node.false_value)
        tv, fv = self.visit(node.true_value), self.visit(node.false_value)
        if cond is node.cond and tv is node.true_value and fv is node.false_value:
            return node
        return Select(cond, tv, fv, node.dtype)

    def visit_Cast(self, node: Cast) -> Expr:
        value = self.visit(node.value)
        if isinstance(value, Const) and value.dtype.lanes == 1:
            folded = cast(value, node.dtype)
            if isinstance(folded, Const):
                return folded
        if value.dtype == node.dtype:
            return value
        return node if value is node.value else Cast(value, node.dtype)

    def visit_Call(self, node: Call) -> Expr:
        return self.generic_visit(node)


def _same_divisor_numerators(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """(x // d, y // d) orders like (x, y) (floor division is monotone): compare x and y."""
    if (
        isinstance(a, Binary)
        and isinstance(b, Binary)
        and a.op is b.op is BinaryOp.FLOORDIV
        and _is_const(a.b)
        and _is_const(b.b)
        and a.b.value == b.b.value
        and int(a.b.value) > 0
    ):
        return a.a, b.a
    return a, b


def _bool_binary(op: BinaryOp, a: Expr, b: Expr) -> Expr | None:
    for x, y in ((a, b), (b, a)):
        if _is_const(x):
            if op is BinaryOp.AND:
                return y if x.value else x
            return x if x.value else y
    return None


def _compare_values(op: CompareOp, x: object, y: object) -> bool:
    return {
        CompareOp.LT: lambda: x < y,
        CompareOp.LE: lambda: x <= y,
        CompareOp.GT: lambda: x > y,
        CompareOp.GE: lambda: x >= y,
        CompareOp.EQ: lambda: x == y,
        CompareOp.NE: lambda: x != y,
    }[op]()


def simplify(e: Expr, ranges: Ranges | None = None) -> Expr:
    """Simplify an expression, using constant `ranges` of variables where given."""
    return Simplifier(ranges).visit(e)


def const_value(e: Expr, ranges: Ranges | None = None) -> int | None:
    """The integer value of `e` if it simplifies to a constant, else None."""
    s = simplify(e, ranges)
    return int(s.value) if isinstance(s, Const) and not s.dtype.is_float else None


def upper_bound(e: Expr, ranges: Ranges) -> int | None:
    """A constant upper bound of integer `e` (None when unbounded)."""
    hi = const_bounds(simplify(e, ranges), ranges)[1]
    return None if hi == INF else int(hi)
