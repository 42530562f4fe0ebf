"""Constant folding: an op whose inputs are all constants becomes a constant.

What the frontends leave behind (weights reshaped or transposed into topi's layouts, scalars
combined, shape arithmetic) is computed once here instead of at every run. Passes never run
kernels (shared/DESIGN.md): the value comes from the op's numpy reference (the oracle every op is
tested against), in the node's exact dtype, so folding compiles nothing and cannot depend on a
schedule. An op without a reference is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..graph import Graph, Node, NodeKind
from ..reference import reference_value
from .common import rewrite


def fold_constants(g: Graph) -> Graph:
    """`g` with every op on constants that has a numpy reference replaced by its value (a
    constant of the same name, shape and dtype)."""

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        if node.kind is not NodeKind.OP or node.symbolic or not all(
                i.kind is NodeKind.CONSTANT for i in inputs):
            return None
        try:
            value = reference_value(node, [i.value for i in inputs])
        except NotImplementedError:
            return None
        # the value is new, or a view of read-only constants (a reshaped weight): not copied
        return out.constant(value, name=node.name, share=True)

    return rewrite(g, visit)
