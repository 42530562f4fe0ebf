"""What the graph passes share: rebuilding a graph node by node."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ..graph import Graph, Node

#: `visit(new_graph, old_node, new_inputs)` returns the node that replaces `old_node` in the new
#: graph, or None to copy it with its new inputs.
Visit = Callable[[Graph, Node, Sequence[Node]], Node | None]


def successor(g: Graph) -> Graph:
    """An empty graph to rebuild `g` into: the names it makes up (`unique_name`) avoid every
    name of `g`, so copying `g`'s nodes under their own names never collides with a node the
    pass made before."""
    return Graph(reserved=(n.name for n in g.nodes))


def copy_node(g: Graph, node: Node, inputs: Sequence[Node]) -> Node:
    """`node` added to `g` with `inputs` (nodes of `g`) in place of its own, and under a new
    name where a node the pass made already holds its own."""
    name = g.unique_name(node.name) if g.has_name(node.name) else node.name
    return g.add_node(replace(node, name=name, inputs=tuple(inputs)))


def rewrite(g: Graph, visit: Visit) -> Graph:
    """A new graph with every node of `g`, in order, passed through `visit`."""
    out = successor(g)
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        inputs = [mapped[i] for i in node.inputs]
        new = visit(out, node, inputs)
        mapped[node] = new if new is not None else copy_node(out, node, inputs)
    out.output(*(mapped[n] for n in g.outputs))
    return out
