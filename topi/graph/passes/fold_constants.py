"""Constant folding: an op whose inputs are all constants becomes a constant.

What the frontends leave behind (weights reshaped or transposed into topi's layouts, scalars
combined) is computed once here instead of at every run. The value comes from the op's own
kernel (`kernel.evaluate`), so folding computes exactly what the model would; reshape and
transpose, pure data movement, are done by numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..graph import Graph, Node, NodeKind
from ..kernel import evaluate
from .common import rewrite

_NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "reshape": lambda v, newshape: v.reshape(newshape),
    "transpose": lambda v, axes=None: np.transpose(v, axes),
}


def fold_constants(g: Graph) -> Graph:
    """`g` with every op on constants replaced by its value (a constant of the same name)."""

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        if node.kind is not NodeKind.OP or not all(
                i.kind is NodeKind.CONSTANT for i in inputs):
            return None
        arrays = [i.value for i in inputs]
        return out.constant(_value(node, inputs, arrays), name=node.name)

    return rewrite(g, visit)


def _value(node: Node, inputs: Sequence[Node], arrays: list[Any]) -> np.ndarray:
    numpy_fn = _NUMPY.get(node.op)
    if numpy_fn is not None:
        value = numpy_fn(arrays[0], **node.attrs)
    else:
        value = evaluate(replace(node, inputs=tuple(inputs)), arrays)
    if value.shape != node.shape or str(value.dtype) != node.dtype:
        raise AssertionError(f"fold_constants: {node!r} gave {value.dtype}{value.shape}, "
                             f"expected {node.dtype}{node.shape}")
    return value
