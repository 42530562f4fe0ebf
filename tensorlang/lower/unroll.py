"""Unrolling: an UNROLLED loop of small constant extent becomes a sequence of copies of its body.

A lowering pass (PrimFunc -> PrimFunc). Each copy has the loop variable replaced by `min + k`
(folded when `min` is a constant), so that the simplifier and LLVM see constant offsets, which
is what register blocking needs. Loops too long or of symbolic extent become SERIAL.
"""

from __future__ import annotations

from ..expr import Binary, BinaryOp, Const, Expr
from ..ir import For, ForKind, PrimFunc, Stmt, seq
from ..visitor import Mutator, substitute

MAX_UNROLL = 64


def _offset(start: Expr, k: int) -> Expr:
    if isinstance(start, Const):
        return Const(int(start.value) + k, start.dtype)
    if k == 0:
        return start
    return Binary(BinaryOp.ADD, start, Const(k, start.dtype), start.dtype)


class _Unroller(Mutator):
    def visit_For(self, node: For) -> Stmt:
        node = self.generic_visit(node)  # inner loops first
        if node.kind is not ForKind.UNROLLED:
            return node
        extent = node.extent
        if isinstance(extent, Const) and 0 <= int(extent.value) <= MAX_UNROLL:
            copies = [
                substitute(node.body, {node.var: _offset(node.min, k)})
                for k in range(int(extent.value))
            ]
            return seq(*copies)
        return For(node.var, node.min, node.extent, ForKind.SERIAL, node.body, node.annotations)


def unroll_loops(func: PrimFunc) -> PrimFunc:
    """Copy out UNROLLED loops of constant extent <= 64; make the others SERIAL.

    Args:
        func: a lowered function.

    Returns:
        The function with no UNROLLED loop left.
    """
    return func.with_body(_Unroller().visit(func.body))
