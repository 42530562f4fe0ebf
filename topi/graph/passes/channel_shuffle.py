"""Channel shuffles as one gather of channels, and slices of a gather as a smaller gather.

ShuffleNet's shuffle is written reshape (N, C, H, W) -> (N, g, C/g, H, W), transpose of the two
channel factors, reshape back: a permutation of whole channel planes. As that chain the kernel
recomputes a 5-D index per element and ran at about a nanosecond per element (0.19 ms for
116 x 28 x 28 on one core); as `take` along the channel axis with the permutation as a constant,
each output row is one contiguous copy of an input row (0.026 ms). The halves that the network
then slices off the shuffled value become gathers of their own channels, so the whole shuffled
value is not written at all where nothing else reads it.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Node, NodeKind
from .common import copy_node, successor
from .dead_code import remove_dead_nodes


def _shuffle_permutation(merge: Node, private: set[Node]) -> tuple[Node, np.ndarray] | None:
    """(x, perm) when `merge` = reshape(transpose(reshape(x))) swaps two factors of x's axis 1
    (the intermediates read by nothing else): output channel k is x's channel perm[k]."""
    transpose = merge.inputs[0] if merge.op == "reshape" else None
    if transpose is None or transpose.op != "transpose" or transpose not in private:
        return None
    split = transpose.inputs[0]
    if split.op != "reshape" or split not in private:
        return None
    x = split.inputs[0]
    rank = len(x.shape)
    if rank < 2 or merge.shape != x.shape or len(split.shape) != rank + 1:
        return None
    channels = x.shape[1]
    a, b = split.shape[1], split.shape[2]
    axes = tuple(transpose.attrs.get("axes") or ())
    swapped = (0, 2, 1, *range(3, rank + 1))
    if (split.shape[0] != x.shape[0] or a * b != channels
            or tuple(split.shape[3:]) != tuple(x.shape[2:]) or axes != swapped):
        return None
    # Output channel j * a + i is (j, i) of the transposed value, i.e. (i, j) of the split one.
    perm = np.arange(channels).reshape(a, b).T.reshape(-1)
    return x, perm


def _sliced_take(node: Node, source: Node) -> tuple[Node, np.ndarray] | None:
    """(x, indices) when `node` slices axis 1 of `source` (its input in the new graph) and
    `source` is take(x, constant indices, axis=1)."""
    if node.op != "strided_slice" or tuple(node.attrs.get("axes") or ()) != (1,):
        return None
    if source.op != "take" or source.attrs.get("axis") != 1:
        return None
    x, indices = source.inputs
    if indices.kind is not NodeKind.CONSTANT or indices.value is None or indices.value.ndim != 1:
        return None
    (begin,), (end,) = node.attrs["begin"], node.attrs["end"]
    (step,) = node.attrs.get("strides") or (1,)
    if step < 1:
        return None
    return x, indices.value[begin:end:step]


def fold_channel_shuffles(g: Graph) -> Graph:
    """`g` with each channel shuffle (reshape, transpose, reshape) a `take` of its channels
    along axis 1, and each slice along axis 1 of such a take a take of the sliced channels."""
    g = remove_dead_nodes(g)
    users = g.consumers()
    outputs = set(g.outputs)
    private = {n for n, readers in users.items() if len(readers) == 1 and n not in outputs}
    out = successor(g)
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        inputs = [mapped[i] for i in node.inputs]
        found = None
        if node.op == "reshape":
            shuffle = _shuffle_permutation(node, private)
            found = None if shuffle is None else (mapped[shuffle[0]], shuffle[1])
        elif node.op == "strided_slice":
            found = _sliced_take(node, inputs[0])
        if found is None:
            mapped[node] = copy_node(out, node, inputs)
            continue
        x, indices = found
        index = out.constant(np.ascontiguousarray(indices, "int64"), name=f"{node.name}_index")
        mapped[node] = out.apply("take", x, index, axis=1, name=node.name)
    out.output(*(mapped[n] for n in g.outputs))
    return remove_dead_nodes(out)
