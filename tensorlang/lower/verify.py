"""The verifier: the last lowering step checks what codegen relies on.

Every variable must be defined where it is used (a parameter, a shape variable, an enclosing loop
or let), every buffer must be a parameter or allocated around its use, and no front-end node
(tensor reads, reductions, multi-dimensional accesses) may remain. A failure here is a compiler
bug, reported with the offending node rather than as a crash in LLVM.
"""

from __future__ import annotations

from ..expr import Node, Var
from ..ir import Allocate, BufferLoad, BufferStore, For, Let, LetStmt, PrimFunc
from ..visitor import Visitor


class VerifyError(RuntimeError):
    """The lowered IR breaks an invariant (a bug in a lowering pass)."""


class _Verifier(Visitor):
    def __init__(self, func: PrimFunc):
        self.defined: set[Var] = set(func.shape_vars)
        self.buffers = set(func.params)
        self.func = func

    def _fail(self, message: str) -> None:
        raise VerifyError(f"{self.func.name}: {message}")

    def visit_Var(self, node: Var) -> None:
        if node not in self.defined and node.name != "nop":
            self._fail(f"variable {node.name} is used outside the scope that defines it")

    def visit_Buffer(self, node: Node) -> None:
        return None  # buffer shapes are checked at the allocation or as parameters

    def _scoped(self, var: Var, body: Node) -> None:
        self.defined.add(var)
        self.visit(body)
        self.defined.discard(var)

    def visit_For(self, node: For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self._scoped(node.var, node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self._scoped(node.var, node.body)

    def visit_Let(self, node: Let) -> None:
        self.visit(node.value)
        self._scoped(node.var, node.body)

    def visit_Allocate(self, node: Allocate) -> None:
        for dim in node.buffer.shape:
            self.visit(dim)
        self.buffers.add(node.buffer)
        self.visit(node.body)
        self.buffers.discard(node.buffer)

    def _access(self, node: BufferLoad | BufferStore) -> None:
        if node.buffer not in self.buffers:
            self._fail(f"buffer {node.buffer.name} is accessed outside its allocation")
        self.generic_visit(node)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._access(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._access(node)

    def _front_end(self, node: Node) -> None:
        self._fail(f"{type(node).__name__} survived lowering")

    visit_TensorRead = visit_Reduce = visit_ProducerLoad = visit_ProducerStore = _front_end


def verify(func: PrimFunc) -> PrimFunc:
    """Check the invariants of lowered IR; returns `func` unchanged (raises VerifyError)."""
    for param in func.params:
        for dim in param.shape:
            _Verifier(func).visit(dim)
    _Verifier(func).visit(func.body)
    return func

