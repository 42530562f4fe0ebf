"""Weight-only quantization of a float graph: `quantize_weights(g, bits, group_size)`.

Every `dense` and 2-D-weight `matmul` with a constant float32 weight reads the weight packed
(int8, or int4 two to a byte) with its group scales, in panels of output channels (the layout
the kernels stream, `WeightPanels`), dequantized inside the product's kernel, so
a model's weights take a quarter (int8) or an eighth plus scales (int4) of the bytes to stream:
`dense_quantized` (dequantized in the inner loop) for a few rows of data, `dense_dequantized` (a
GEMM dequantizing its weight panels) for many or a symbolic count. Activations stay float32;
data of more than two dimensions is flattened to rows around the product.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..graph import Graph, Node, NodeKind
from ..passes.common import rewrite
from ..passes.dead_code import remove_dead_nodes
from . import ops  # noqa: F401  (registers dense_quantized)
from .packing import PackedWeight, WeightPanels, quantize_int4, quantize_int8

#: The default group of int4 (int8 defaults to one scale per output channel).
INT4_GROUP = 32
#: Rows of data (static) up to which the weight is dequantized in the product's inner loop
#: (`dense_quantized`, read once); more rows, or a symbolic count, take a GEMM whose panels are
#: dequantized as they are packed (`dense_dequantized`), which a 64-row product of a 2048 x 2048
#: int4 weight ran in half the time.
READ_ONCE_ROWS = 8


def _weight_nk(node: Node, inputs: Sequence[Node]) -> np.ndarray | None:
    """The (N, K) float32 weight of a dense / matmul reading a constant, else None."""
    if len(inputs) != 2 or inputs[1].kind is not NodeKind.CONSTANT or inputs[0].dtype != \
            "float32" or inputs[1].dtype != "float32" or len(inputs[1].shape) != 2:
        return None
    if node.op == "dense":
        return inputs[1].value
    if node.op == "matmul" and not node.attrs.get("transpose_a"):
        w = inputs[1].value
        return w if node.attrs.get("transpose_b") else w.T
    return None


def pack_dense(out: Graph, data: Node, packed: PackedWeight | WeightPanels, name: str) -> Node:
    """`data` (..., K) times the packed weight, as `dense_quantized` or `dense_dequantized`
    (module docstring) on its rows, the weight held in panels (`WeightPanels`; a
    `PackedWeight` is arranged so here)."""
    panels = packed if isinstance(packed, WeightPanels) else packed.panels()
    leading = data.shape[:-1]
    rows = data if len(data.shape) == 2 else out.reshape(
        data, (math.prod(leading), data.shape[-1]), name=f"{name}__rows")
    inputs = [out.constant(panels.weight, f"{name}__q{panels.bits}", share=True),
              out.constant(panels.scale, f"{name}__scale", share=True)]
    if panels.zero is not None:
        inputs.append(out.constant(panels.zero, f"{name}__zero", share=True))
    few = isinstance(rows.shape[0], int) and rows.shape[0] <= READ_ONCE_ROWS
    op = "dense_quantized" if few else "dense_dequantized"
    result = out.apply(op, rows, *inputs, bits=panels.bits, group_size=panels.group_size,
                       channels=panels.channels, name=name if len(leading) == 1 else None)
    if len(leading) == 1:
        return result
    return out.reshape(result, (*leading, panels.channels), name=name)


def quantize_weight(weight: np.ndarray, bits: int, group_size: int | None = None,
                    zero_points: bool = False) -> PackedWeight:
    """One (N, K) float weight packed as `quantize_weights` packs a layer's."""
    if bits not in (4, 8):
        raise ValueError(f"quantize_weights: bits must be 8 or 4, got {bits!r}")
    return quantize_int8(weight, group_size) if bits == 8 else \
        quantize_int4(weight, group_size or INT4_GROUP, zero_points)


def quantize_weights(g: Graph, bits: int = 8, group_size: int | None = None,
                     zero_points: bool = False) -> Graph:
    """`g` with its dense and matmul weights quantized (see the module docstring).

    Args:
        g: a float graph.
        bits: 8 (symmetric int8) or 4 (int4 two to a byte).
        group_size: elements per scale along K: 32 or 128 are usual; by default one scale per
            output channel for int8, 32 for int4 (which needs a multiple of 32).
        zero_points: int4 with a zero point per group (asymmetric) instead of symmetric.

    Raises:
        TypeError: `g` is not a Graph.
        ValueError: bad bits, or a layer whose K the group does not divide (named).
    """
    if not isinstance(g, Graph):
        raise TypeError(f"quantize_weights takes a topi.graph.Graph, got {type(g).__name__}")
    if bits not in (4, 8):
        raise ValueError(f"quantize_weights: bits must be 8 or 4, got {bits!r}")
    if zero_points and bits == 8:
        raise ValueError("quantize_weights: int8 is symmetric; zero_points needs bits=4")

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        weight = _weight_nk(node, inputs)
        if weight is None:
            return None
        try:
            packed = quantize_weight(weight, bits, group_size, zero_points)
        except ValueError as err:
            raise ValueError(f"quantize_weights: layer {node.name!r}: {err}") from None
        return pack_dense(out, inputs[0], packed, node.name)

    return remove_dead_nodes(rewrite(g, visit))
