"""Run a Graph with the numpy references of its ops: the oracle the graph tests compare with.

Slow and obviously correct (topi.testing accumulates in float64); fused nodes run their bodies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorlang.expr import Expr, Var

from ..symbolic import evaluate, evaluate_shape
from .graph import FUSED, Graph, Node, NodeKind
from .ops import get_op


def run_reference(g: Graph, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of `g` on `inputs` (by name), computed op by op with numpy.

    Raises:
        KeyError: an input is missing.
        NotImplementedError: an op has no numpy reference.
    """
    values: dict[Node, np.ndarray] = {}
    sizes: dict[str, int] = {}  # the symbolic dims' values, bound from the inputs
    for node in g.nodes:
        if node.kind is NodeKind.INPUT:
            values[node] = np.asarray(inputs[node.name])
            sizes.update({d.name: n for d, n in zip(node.shape, values[node].shape)
                          if isinstance(d, Var)})
        elif node.kind is NodeKind.CONSTANT:
            values[node] = node.value
        else:
            values[node] = reference_value(node, [values[i] for i in node.inputs], sizes)
    return [values[n] for n in g.outputs]


def _bound(value: Any, sizes: Mapping[str, int]) -> Any:
    if isinstance(value, tuple):
        return tuple(_bound(v, sizes) for v in value)
    return evaluate(value, sizes) if isinstance(value, Expr) else value


def reference_value(node: Node, args: Sequence[np.ndarray],
                    sizes: Mapping[str, int] | None = None) -> np.ndarray:
    """The output of op node `node` on `args` (one array per input), computed with numpy, in
    the node's dtype: how constant folding computes a constant without compiling anything.

    Raises:
        NotImplementedError: an op has no numpy reference.
        ValueError: the reference's result has another shape than the node or a dtype that
            does not convert to the node's within its kind (a reference that disagrees with its
            compute).
    """
    if node.op == FUSED:
        assert node.body is not None
        (out,) = run_reference(node.body, {i.name: a for i, a in zip(node.body.inputs, args)})
        return out
    attrs, shape = node.attrs, node.shape
    if sizes:
        attrs = {k: _bound(v, sizes) for k, v in attrs.items()}
        shape = evaluate_shape(shape, sizes)
    reference = get_op(node.op).reference
    if reference is None:
        raise NotImplementedError(f"graph op {node.op!r} has no numpy reference")
    value = np.asarray(reference(*args, **attrs))
    if value.shape != shape or not np.can_cast(value.dtype, node.dtype, "same_kind"):
        raise ValueError(f"the numpy reference of {node.op!r} ({node!r}) gave "
                         f"{value.dtype}{list(value.shape)}, expected {node.dtype}{list(node.shape)}")
    return value.astype(node.dtype, copy=False)
