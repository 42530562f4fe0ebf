"""Permutes that feed a matrix product join its kernel: the product reads the permuted view.

Attention splits its heads with reshape / transpose chains (ViT's (197, 768) -> (12, 197, 64),
Swin's window partition (B, H, W, C) -> (B * windows, 49, C) and its head split), and after
`fuse_ops` each chain is a kernel of its own that copies the whole tensor for the dense or
batch_matmul that reads it. The product's compute already reads its operands through an index
map (the right operand through its packed panels, which copy it anyway; the left one through
its row read), so the chain costs nothing there: this pass puts the chain's ops in front of the
product in its kernel, and the x86 schedule inlines them (`traverse`), the panels and rows then
reading the permuted source directly. The product's workload (its tuning task) is that of its
own operands, so tuning logs still apply.

A producer joins when it only moves data: reshape, transpose, a take at one constant index (a
slice there), and a scaling by one constant (attention's 1 / sqrt(d) on the queries). The left operand is read once per block of output columns, and
any arithmetic in the chain would be recomputed that often. Its readers must all be products
(each then reads its own part through its own copy of the index map), and it must not be a
graph output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..graph import FUSED, Graph, Node, NodeKind
from ..ops import OpPattern
from .common import copy_node, successor

#: The ops whose kernels the products read through.
GEMMS = frozenset({"dense", "matmul", "batch_matmul"})
#: Data movement the products' index maps absorb.
#: Not a layout transform out of the blocked layout: folding Swin-T's first window partition of
#: each stage (a QKV dense reading the blocked LayerNorm through one) ran the model 0.72x of the
#: unfolded build, against 0.91 with those left as kernels (one process, 7 rounds, loaded).
MOVES = frozenset({"reshape", "transpose", "squeeze", "expand_dims", "flatten",
                   "strided_slice"})
#: Elementwise ops that join a chain when their other operand is one constant value (as does a
#: take at one constant index).
SCALINGS = frozenset({"multiply", "divide"})


def anchor_op(node: Node) -> str:
    """The op whose schedule `node`'s kernel uses (a fused node's anchor)."""
    return node.attrs["anchor"] if node.op == FUSED else node.op


def _body(node: Node) -> tuple[list[Node], list[Node]]:
    """(the ops of `node`'s kernel in order, the nodes they read from outside, in the order of
    `node.inputs`, as the body's inputs stand for them)."""
    if node.op == FUSED:
        return list(node.body.ops), list(node.body.inputs)
    return [node], list(node.inputs)


def _outer(node: Node, body_inputs: Sequence[Node]) -> dict[Node, Node]:
    """Each input of `node`'s body (or each input of a plain op) -> the outer node it reads."""
    return dict(zip(body_inputs, node.inputs))


def only_moves(node: Node) -> bool:
    """Whether `node`'s kernel only moves data (or scales it by one constant)."""
    if node.kind is not NodeKind.OP or node.symbolic or node.pattern > OpPattern.INJECTIVE:
        return False
    ops, inputs = _body(node)
    outer = _outer(node, inputs)
    for op in ops:
        if op.op in SCALINGS or op.op == "take":  # by one constant; at one constant index
            if not _one_constant(outer.get(op.inputs[-1]), index=op.op == "take"):
                return False
        elif op.op not in MOVES:
            return False
    return True


def _one_constant(node: Node | None, index: bool = True) -> bool:
    """Whether `node` is one constant value: a scale (of any rank), or the 0-d index of a take
    that is a slice (a take of an index array gathers, and its index loads and clamps would sit
    in the product's inner loop)."""
    if node is None or node.kind is not NodeKind.CONSTANT:
        return False
    return np.ndim(node.value) == 0 if index else np.size(node.value) == 1


def foldable(g: Graph) -> set[Node]:
    """The move kernels of `g` that only products read."""
    users = g.consumers()
    outputs = set(g.outputs)
    return {
        n for n, readers in users.items()
        if readers and n not in outputs and only_moves(n)
        and all(r.kind is NodeKind.OP and anchor_op(r) in GEMMS for r in readers)
    }


def fold_gemm_permutes(g: Graph) -> Graph:
    """`g` with each move kernel that only dense / matmul / batch_matmul kernels read joined to
    each of them, until none is left: a chain of move kernels (attention's QKV split into three
    heads-first slices) joins in steps, its copy in each product reading its own part."""
    while folded := foldable(g):
        g = _fold(g, folded)
    return g


def _fold(g: Graph, folded: set[Node]) -> Graph:
    out = successor(g)
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        if node in folded:
            continue
        if any(i in folded for i in node.inputs):
            mapped[node] = _merged(out, node, folded, mapped)
        else:
            mapped[node] = copy_node(out, node, [mapped[i] for i in node.inputs])
    out.output(*(mapped[n] for n in g.outputs))
    return out


def _merged(out: Graph, consumer: Node, folded: set[Node], mapped: dict[Node, Node]) -> Node:
    """One fused node computing the folded producers of `consumer`, then `consumer`'s ops."""
    producers = [i for i in consumer.inputs if i in folded]
    body = Graph(reserved=(m.name for p in (*producers, consumer) for m in _body(p)[0]))
    free = body.unique_name
    outer: list[Node] = []
    param: dict[Node, Node] = {}  # outer node (of g) -> its input in `body`

    def read(node: Node) -> Node:
        if node not in param:
            param[node] = body.input(free(f"p{len(outer)}"), node.shape, node.dtype)
            outer.append(mapped[node])
        return param[node]

    def sliced(op: Node, data: Node, index: Node) -> Node:
        """A take of one constant index as the slice it is, so that the product's index map
        holds no load of the index and no clamp."""
        axis = op.attrs.get("axis", 0) % len(data.shape)
        size = data.shape[axis]
        k = int(index.value)
        k = min(max(k + size if k < 0 else k, 0), size - 1)
        part = body.apply("strided_slice", data, begin=(k,), end=(k + 1,), axes=(axis,),
                          name=free(f"{op.name}_slice"))
        return body.apply("reshape", part, newshape=tuple(op.shape), name=op.name)

    def copy(node: Node, through: dict[Node, Node]) -> Node:
        """`node`'s ops into `body`, reading `through` (outer node -> body node) or parameters;
        returns its last op's copy."""
        ops, inputs = _body(node)
        source = _outer(node, inputs)
        body_of: dict[Node, Node] = {}

        def arg(i: Node) -> Node:
            if i in body_of:
                return body_of[i]
            return through[source[i]] if source[i] in through else read(source[i])

        for op in ops:
            index = source.get(op.inputs[-1]) if op.op == "take" else None
            if _one_constant(index):
                body_of[op] = sliced(op, arg(op.inputs[0]), index)
            else:
                body_of[op] = copy_node(body, op, [arg(i) for i in op.inputs])
        return body_of[ops[-1]]

    through = {p: copy(p, {}) for p in dict.fromkeys(producers)}
    tail = copy(consumer, through)
    body.output(tail)
    attrs = {"anchor": anchor_op(consumer), "pattern": int(OpPattern.OUT_FUSABLE)}
    return out.add_node(Node(consumer.name, FUSED, tuple(outer), attrs, consumer.shape,
                             consumer.dtype, body=body))
