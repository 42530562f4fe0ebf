"""Buffer flattening: multi-dimensional accesses become one row-major element index.

After this pass every access is a `BufferLoad`/`BufferStore` on a flat index, the form codegen
expects; the index arithmetic is simplified later.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import BinaryOp, Expr, binary, const
from ..ir import BufferLoad, BufferStore, PrimFunc, ProducerLoad, ProducerStore, Stmt
from ..visitor import Mutator


def flat_index(shape: Sequence[Expr], indices: Sequence[Expr]) -> Expr:
    """Row-major offset of `indices` in an array of `shape` (Horner form)."""
    if not indices:
        return const(0)
    index = indices[0]
    for extent, i in zip(shape[1:], indices[1:]):
        index = binary(BinaryOp.ADD, binary(BinaryOp.MUL, index, extent), i)
    return index


class _Flatten(Mutator):
    def visit_ProducerLoad(self, node: ProducerLoad) -> Expr:
        indices = [self.visit(i) for i in node.indices]
        return BufferLoad(node.buffer, flat_index(node.buffer.shape, indices), node.dtype)

    def visit_ProducerStore(self, node: ProducerStore) -> Stmt:
        indices = [self.visit(i) for i in node.indices]
        value = self.visit(node.value)
        return BufferStore(node.buffer, flat_index(node.buffer.shape, indices), value)


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    """Rewrite every ProducerLoad/ProducerStore of `func` into flat BufferLoad/BufferStore."""
    return func.with_body(_Flatten().visit(func.body))
