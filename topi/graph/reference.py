"""Run a Graph with the numpy references of its ops: the oracle the graph tests compare with.

Slow and obviously correct (topi.testing accumulates in float64); fused nodes run their bodies.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .graph import FUSED, Graph, Node, NodeKind
from .ops import get_op


def run_reference(g: Graph, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of `g` on `inputs` (by name), computed op by op with numpy.

    Raises:
        KeyError: an input is missing.
        NotImplementedError: an op has no numpy reference.
    """
    values: dict[Node, np.ndarray] = {}
    for node in g.nodes:
        if node.kind is NodeKind.INPUT:
            values[node] = np.asarray(inputs[node.name])
        elif node.kind is NodeKind.CONSTANT:
            values[node] = node.value
        else:
            values[node] = _run(node, [values[i] for i in node.inputs])
    return [values[n] for n in g.outputs]


def _run(node: Node, args: list[np.ndarray]) -> np.ndarray:
    if node.op == FUSED:
        assert node.body is not None
        (out,) = run_reference(node.body, {i.name: a for i, a in zip(node.body.inputs, args)})
        return out
    reference = get_op(node.op).reference
    if reference is None:
        raise NotImplementedError(f"graph op {node.op!r} has no numpy reference")
    return np.asarray(reference(*args, **node.attrs)).astype(node.dtype)
