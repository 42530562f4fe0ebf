"""Which generated functions are glue that LLVM need not optimise.

LLVM's O3 pipeline and its machine passes cost about a millisecond each per function, however
small: the packed wrapper (argument loads and a call) and an entry function that only allocates
buffers, fills copy descriptors and starts parallel loops and runtime copies cost 2-3 ms of a
GEMM's 35. Such functions get `optnone` (LLVM's O0 for them alone): their code runs once per
call and does no work per element, so optimising it buys nothing. A function with a loop of its
own, or a memory read or vector outside its parallel loops, is optimised as usual.
"""

from __future__ import annotations

from ..expr import Expr
from ..ir import (
    Allocate,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Seq,
    Stmt,
)
from ..visitor import nodes_below


def is_glue(body: Stmt) -> bool:
    """Whether `body`, outside its parallel loops (outlined into their own functions), has no
    loop, no memory read and no vector: nothing whose speed depends on LLVM's optimiser."""
    if isinstance(body, Seq):
        return all(is_glue(s) for s in body.stmts)
    if isinstance(body, For):
        return body.kind is ForKind.PARALLEL and _scalar_work(body.min, body.extent)
    if isinstance(body, Allocate):
        return is_glue(body.body)
    if isinstance(body, LetStmt):
        return _scalar_work(body.value) and is_glue(body.body)
    if isinstance(body, IfThenElse):
        return (_scalar_work(body.cond) and is_glue(body.then_case)
                and (body.else_case is None or is_glue(body.else_case)))
    if isinstance(body, BufferStore):
        return body.mask is None and _scalar_work(body.value, body.index)
    if isinstance(body, Evaluate):
        return _scalar_work(body.value)
    return False


def _scalar_work(*exprs: Expr) -> bool:
    return all(not isinstance(node, BufferLoad) and node.dtype.lanes == 1
               for e in exprs for node in nodes_below(e) if isinstance(node, Expr))
