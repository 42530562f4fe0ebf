"""Operator fusion: elementwise ops join the kernel of the op that produces their input.

A group grows along single-consumer edges: a conv, dense or matmul takes its elementwise and
broadcast tail (bias, batch norm, relu, gelu, a residual add: its output stage computes them from
the register block, so they cost no extra pass over memory); a reduction (pooling, softmax,
layer_norm) takes its elementwise tail, and the elementwise ops before it (its schedule inlines
them into its reads); elementwise, broadcast and injective ops chain with each other (the
injective schedule inlines them into one loop nest). Each group of two or more ops becomes one
"fused" node whose body is a Graph of its ops; the group's strongest op (by OpPattern) is its
anchor, whose schedule the kernel uses. A concatenation that the memory plan computes in place
(`concat_in_place`) joins no group: its producers write into its buffer and it runs no kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..graph import FUSED, Graph, Node, NodeKind
from ..ops import OpPattern
from .common import copy_node, successor
from .concat_in_place import concat_slices

P = OpPattern
_ELEMENTWISE = (P.ELEMWISE, P.BROADCAST)
#: What may join a group, by the strongest pattern in it so far. A conv, GEMM or reduction takes
#: an elementwise tail of its own output shape (computed from its output stage); a group of
#: elementwise and data-movement ops takes more of them, of any shape, or a reduction that reads
#: them inlined (the residual add before a layer_norm, the scaling before a softmax).
_JOINS = {
    P.OUT_FUSABLE: _ELEMENTWISE,
    P.REDUCTION: _ELEMENTWISE,
    P.ELEMWISE: (*_ELEMENTWISE, P.INJECTIVE, P.REDUCTION),
    P.BROADCAST: (*_ELEMENTWISE, P.INJECTIVE, P.REDUCTION),
    P.INJECTIVE: (*_ELEMENTWISE, P.INJECTIVE, P.REDUCTION),
}
_SAME_SHAPE = (P.OUT_FUSABLE, P.REDUCTION)


def _groups(g: Graph) -> dict[Node, list[Node]]:
    """Each op node's group (shared lists) in graph order: a chain along single readers."""
    users = g.consumers()
    outputs = set(g.outputs)
    alone = concat_slices(g).in_place
    group: dict[Node, list[Node]] = {}
    for node in g.ops:
        for producer in () if node in alone else node.inputs:
            members = group.get(producer)
            if members is None or members[-1] is not producer or producer in alone:
                continue
            strongest = max(m.pattern for m in members)
            joins = (
                node.pattern in _JOINS.get(strongest, ())
                and len(users[producer]) == 1 and producer not in outputs
                and (strongest not in _SAME_SHAPE or node.shape == producer.shape)
            )
            if joins:
                members.append(node)
                group[node] = members
                break
        else:
            group[node] = [node]
    return group


def fuse_ops(g: Graph) -> Graph:
    """`g` with each fusable chain of ops replaced by one "fused" node (named after its last
    op, so outputs keep their names)."""
    group = _groups(g)
    out = successor(g)
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        members = group.get(node)
        if node.kind is not NodeKind.OP or len(members) == 1:
            mapped[node] = copy_node(out, node, [mapped[i] for i in node.inputs])
        elif node is members[-1]:
            mapped[node] = _fused(out, members, mapped)
    out.output(*(mapped[n] for n in g.outputs))
    return out


def _fused(out: Graph, members: Sequence[Node], mapped: dict[Node, Node]) -> Node:
    """One node computing `members` (a chain in graph order), reading their outside inputs."""
    inside = set(members)
    # a fused body's inputs and members share one namespace (a model may name its values "p0")
    body = Graph(reserved=(m.name for m in members))
    body_of: dict[Node, Node] = {}
    outer: list[Node] = []
    for member in members:
        for i in member.inputs:
            if i not in inside and i not in body_of:
                body_of[i] = body.input(body.unique_name(f"p{len(outer)}"), i.shape, i.dtype)
                outer.append(mapped[i])
        body_of[member] = copy_node(body, member, [body_of[i] for i in member.inputs])
    tail = members[-1]
    body.output(body_of[tail])
    anchor = max(members, key=lambda n: (n.pattern, -members.index(n)))
    attrs = {"anchor": anchor.op, "pattern": int(anchor.pattern)}
    return out.add_node(Node(tail.name, FUSED, tuple(outer), attrs, tail.shape, tail.dtype,
                             body=body))
