"""Fold an inference batch norm into the convolution before it.

batch_norm(conv(x, W) [+ b]) = conv(x, W * s) + (b * s + beta - mean * s) with
s = gamma / sqrt(var + eps) per output channel: the normalisation costs nothing at run time and
what is left (a bias add) fuses into the convolution's output stage. Applies when the weights,
the optional bias and the batch-norm parameters are constants (run fold_constants first) and
the convolution's result feeds only the batch norm.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..aligned import aligned_empty
from ..graph import Graph, Node, NodeKind
from .common import rewrite

CONVS = ("conv2d", "depthwise_conv2d", "group_conv2d")


def _const(node: Node) -> bool:
    return node.kind is NodeKind.CONSTANT


def _scaled_weight(conv: Node, scale: np.ndarray) -> np.ndarray:
    weight = conv.inputs[1].value
    assert weight is not None
    if conv.op == "depthwise_conv2d":  # (C, M, R, S): output channel c * M + m
        factor = scale.reshape(weight.shape[0], weight.shape[1], 1, 1)
    else:  # (K, C / groups, R, S)
        factor = scale.reshape(-1, 1, 1, 1)
    # the product in float64 (the ufunc's loop, chunk by chunk), written once into the result:
    # no whole float64 copies of the weight
    out = aligned_empty(weight.shape, weight.dtype)
    np.multiply(weight, factor, out=out, casting="unsafe")
    return out


def fold_batch_norm(g: Graph) -> Graph:
    """`g` with each batch norm (channel axis 1) that follows a convolution folded into it."""
    users = g.consumers()
    single = {n for n, readers in users.items() if len(readers) == 1 and n not in g.outputs}

    def match(bn: Node, inputs: Sequence[Node]) -> tuple[Node, Node | None] | None:
        """(conv, bias_add or None) under the batch norm, in the new graph."""
        if bn.op != "batch_norm" or bn.attrs.get("axis", 1) != 1:
            return None
        if not all(_const(p) for p in inputs[1:]):
            return None
        producer, old = inputs[0], bn.inputs[0]
        bias = None
        if producer.op == "bias_add" and producer.attrs.get("axis", 1) == 1 and old in single \
                and _const(producer.inputs[1]):
            bias, producer, old = producer, producer.inputs[0], old.inputs[0]
        if producer.op in CONVS and old in single and _const(producer.inputs[1]):
            return producer, bias
        return None

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        found = match(node, inputs)
        if found is None:
            return None
        conv, bias = found
        gamma, beta, mean, var = (p.value.astype(np.float64) for p in inputs[1:])
        scale = gamma / np.sqrt(var + node.attrs.get("epsilon", 1e-5))
        old_bias = bias.inputs[1].value.astype(np.float64) if bias is not None else 0.0
        dtype = conv.inputs[1].dtype
        weight = out.constant(_scaled_weight(conv, scale), name=f"{conv.inputs[1].name}_bn",
                              share=True)
        folded = out.apply(conv.op, conv.inputs[0], weight, name=f"{conv.name}_bn", **conv.attrs)
        shift = out.constant(((old_bias - mean) * scale + beta).astype(dtype),
                             name=f"{node.name}_shift")
        return out.bias_add(folded, shift, axis=1, name=node.name)

    return rewrite(g, visit)
