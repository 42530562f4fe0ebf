"""Remove nodes that no output depends on (graph inputs stay: they are the model's signature)."""

from __future__ import annotations

from ..graph import Graph, Node, NodeKind
from .common import copy_node, successor


def remove_dead_nodes(g: Graph) -> Graph:
    """`g` without the constants and ops that no output reads, directly or indirectly."""
    live: set[Node] = set()
    stack = list(g.outputs)
    while stack:
        node = stack.pop()
        if node not in live:
            live.add(node)
            stack.extend(node.inputs)
    out = successor(g)
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        if node in live or node.kind is NodeKind.INPUT:
            mapped[node] = copy_node(out, node, [mapped[i] for i in node.inputs])
    out.output(*(mapped[n] for n in g.outputs))
    return out
