"""Shorthands for building loop IR by hand in tests of the passes, codegen and runtime."""

from __future__ import annotations

from tensorlang.dtype import HANDLE, as_dtype
from tensorlang.expr import Expr, Var, const
from tensorlang.ir import Buffer, BufferLoad, For, ForKind, Scope, Stmt


def _expr(value: int | Expr) -> Expr:
    return const(value) if isinstance(value, int) else value


def buf(name: str, dtype: str, shape: tuple, scope: Scope = Scope.GLOBAL) -> Buffer:
    """A buffer whose dimensions may be ints or expressions."""
    return Buffer(name, as_dtype(dtype), tuple(_expr(s) for s in shape), Var(name, HANDLE), scope)


def load(b: Buffer, index: Expr) -> BufferLoad:
    return BufferLoad(b, index, b.dtype)


def loop(
    var: Var, extent: int | Expr, body: Stmt, kind: ForKind = ForKind.SERIAL, lo: int | Expr = 0
) -> For:
    return For(var, _expr(lo), _expr(extent), kind, body)
