"""Symbolic dimensions: shape entries that are ints or expressions of named `tl.var`s.

A model with a dynamic batch or sequence has shapes like (batch, seq, 768) and (batch * seq, 768).
Shapes are compared by identity (an expression's `==` builds a node), so every symbolic dim goes
through `canon`: it becomes a polynomial with integer coefficients over the named variables
(`dim_var(name)`, one variable per name in the process) and is interned, so that equal dims are
the same object (`b * s` and `s * b` alike) and tuples of dims compare and hash as they should.
A dim that is no polynomial (a floor division that does not divide) is interned structurally.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

import tensorlang as tl
from tensorlang.arith import structural_key
from tensorlang.expr import Binary, BinaryOp, Cast, Const, Expr, Var

Dim = Union[int, Expr]
#: A polynomial: {monomial (sorted var names): coefficient}; the constant is the empty monomial.
Poly = dict[tuple[str, ...], int]

_VARS: dict[str, Var] = {}
_INTERNED: dict[object, Expr] = {}


def dim_var(name: str) -> Var:
    """The shape variable called `name` (the same object on every call)."""
    var = _VARS.get(name)
    if var is None:
        var = _VARS[name] = tl.var(name)
    return var


def is_symbolic(d: object) -> bool:
    return isinstance(d, Expr) and not isinstance(d, Const)


def _poly(e: Any) -> Poly | None:
    if isinstance(e, (int, np.integer)) and not isinstance(e, bool):
        return {(): int(e)} if e else {}
    if isinstance(e, Const):
        return _poly(int(e.value))
    if isinstance(e, Var):
        return {(e.name,): 1}
    if isinstance(e, Cast):
        return _poly(e.value)
    if not isinstance(e, Binary):
        return None
    a, b = _poly(e.a), _poly(e.b)
    if a is None or b is None:
        return None
    if e.op is BinaryOp.ADD:
        return _add(a, b, 1)
    if e.op is BinaryOp.SUB:
        return _add(a, b, -1)
    if e.op is BinaryOp.MUL:
        return _mul(a, b)
    if e.op in (BinaryOp.FLOORDIV, BinaryOp.DIV):
        return divide(a, b)
    return None


def _add(a: Poly, b: Poly, sign: int) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def divide(a: Poly, b: Poly) -> Poly | None:
    """a / b when b is one term that divides every term of a exactly, else None."""
    if len(b) != 1:
        return None
    ((mb, cb),) = b.items()
    out: Poly = {}
    for m, c in a.items():
        rest = list(m)
        for v in mb:
            if v not in rest:
                return None
            rest.remove(v)
        if c % cb:
            return None
        out[tuple(rest)] = c // cb
    return out


def _expr(p: Poly) -> Dim:
    if not p:
        return 0
    if list(p) == [()]:
        return p[()]
    terms: list[Expr] = []
    for m in sorted(p, key=lambda m: (-len(m), m)):
        c = p[m]
        term: Expr | int = c
        if m:
            term = dim_var(m[0])
            for v in m[1:]:
                term = term * dim_var(v)
            if c != 1:
                term = term * c
        terms.append(term)  # type: ignore[arg-type]
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def canon(d: Any) -> Dim:
    """`d` (an int, a numpy integer or an expression) as an int or an interned expression."""
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        return int(d)
    if not isinstance(d, Expr):
        raise TypeError(f"a dimension must be an int or a tl expression, got {d!r}")
    p = _poly(d)
    if p is not None:
        e = _expr(p)
        if isinstance(e, int):
            return e
        key: object = ("poly", tuple(sorted(p.items())))
    else:
        e, key = d, structural_key(d)
    return _INTERNED.setdefault(key, e)


def canon_shape(shape: Sequence[Any]) -> tuple[Dim, ...]:
    return tuple(canon(d) for d in shape)


def as_poly(d: Any) -> Poly | None:
    return _poly(d)


def quotient(a: Any, b: Any) -> Dim | None:
    """a / b as a dim when it divides exactly (symbolically), else None."""
    pa, pb = _poly(a), _poly(b)
    if pa is None or pb is None:
        return None
    q = divide(pa, pb)
    return None if q is None else canon(_expr(q))


def product(dims: Sequence[Any]) -> Dim:
    """The product of `dims`, canonical."""
    return canon(math.prod(dims, start=1)) if dims else 1


def free_vars(shape: Any) -> list[str]:
    """The names of the variables in a dim or a sequence of dims, in first-seen order."""
    names: list[str] = []

    def walk(e: Any) -> None:
        if isinstance(e, Var):
            if e.name not in names:
                names.append(e.name)
        elif isinstance(e, Binary):
            walk(e.a)
            walk(e.b)
        elif isinstance(e, Cast):
            walk(e.value)

    for d in (shape if isinstance(shape, (tuple, list)) else [shape]):
        walk(d)
    return names


_OPS = {
    BinaryOp.ADD: lambda a, b: a + b, BinaryOp.SUB: lambda a, b: a - b,
    BinaryOp.MUL: lambda a, b: a * b, BinaryOp.FLOORDIV: lambda a, b: a // b,
    BinaryOp.DIV: lambda a, b: a // b, BinaryOp.FLOORMOD: lambda a, b: a % b,
    BinaryOp.MIN: min, BinaryOp.MAX: max,
}


def evaluate(d: Any, values: Mapping[str, int]) -> int:
    """The value of a dim given the variables' values (by name)."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    if isinstance(d, Const):
        return int(d.value)
    if isinstance(d, Var):
        return int(values[d.name])
    if isinstance(d, Cast):
        return evaluate(d.value, values)
    if isinstance(d, Binary) and d.op in _OPS:
        return int(_OPS[d.op](evaluate(d.a, values), evaluate(d.b, values)))
    raise ValueError(f"cannot evaluate the dimension {d}")


def evaluate_shape(shape: Sequence[Any], values: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(evaluate(d, values) for d in shape)


def dim_str(d: Any) -> str:
    return str(d) if not isinstance(d, Expr) else str(d).replace(" ", "")


def dim_json(d: Any) -> Any:
    """A dim as JSON: an int, or {"poly": [[[variables], coefficient], ...]}."""
    if isinstance(d, int):
        return d
    poly = as_poly(d)
    if poly is None:
        raise NotImplementedError(f"export_library: the dim {d} is no polynomial of the shape "
                                  "variables, which the library's driver cannot compute")
    return {"poly": [[list(m), c] for m, c in sorted(poly.items())]}


def dim_from_json(d: Any) -> Any:
    """The dim that `dim_json` wrote."""
    if isinstance(d, int):
        return d
    total: Any = 0
    for monomial, c in d["poly"]:
        term: Any = c
        for v in monomial:
            term = term * dim_var(v)
        total = total + term
    return canon(total)
