"""Run dequantize -> conv2d / dense patterns of QDQ models as int8 kernels.

A QDQ model computes a quantized convolution as conv2d(dequantize(x_q), dequantize(W_q)): float
arithmetic on values that are integers times scales. With uint8 activations (one scale and zero
point) and int8 weights (zero zero points, a scale per output channel or one), it equals

    float(conv2d_int8(x_q, W_q, data_zero_point=zp_x)) * (s_x * s_w per channel)

exactly up to float rounding: an int8 kernel (VNNI where the target has it) whose output stage
rescales to float, into which the bias, ReLU and the next QuantizeLinear fuse as before. dense
(Gemm) and 2-D matmul (MatMul on a weight) likewise, the zero point of the data subtracted as
zp_x x the weight's row sums. Runs before fold_constants, while weights are still
dequantize(int8 constant) nodes (the ONNX frontend keeps them so).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..graph import Graph, Node, NodeKind
from .common import rewrite


def _const(node: Node) -> np.ndarray | None:
    return node.value if node.kind is NodeKind.CONSTANT else None


def _per_tensor_data(node: Node) -> tuple[Node, float, int] | None:
    """(uint8 source, scale, zero point) of a per-tensor dequantize of uint8 data."""
    if node.op != "dequantize" or node.inputs[0].dtype != "uint8":
        return None
    scale, zero = (_const(n) for n in node.inputs[1:])
    if scale is None or zero is None or scale.size != 1 or zero.size != 1:
        return None
    return node.inputs[0], float(scale.reshape(())), int(zero.reshape(()))


def _int8_weight(node: Node, channel_axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 weight, scale per channel of `channel_axis`) of a dequantized int8 constant
    (through a 2-D transpose), when its zero points are zero."""
    transposed = node.op == "transpose" and tuple(node.attrs.get("axes") or (1, 0)) == (1, 0)
    if transposed:
        node = node.inputs[0]
    if node.op != "dequantize":
        return None
    weight, scale, zero = (_const(n) for n in node.inputs)
    if weight is None or scale is None or zero is None or weight.dtype != np.int8 or zero.any():
        return None
    axis = node.attrs.get("axis", 1) % weight.ndim
    if transposed:
        weight, axis = weight.T, 1 - axis
    if scale.size != 1 and axis != channel_axis:
        return None
    channels = weight.shape[channel_axis]
    return weight, np.broadcast_to(scale.reshape(-1), (channels,)).astype(np.float32)


def quantize_ops(g: Graph) -> Graph:
    """`g` with the dequantize -> conv2d / dense / matmul patterns of the module docstring as
    int8 kernels."""

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        if node.op == "conv2d":
            data, weight = _per_tensor_data(inputs[0]), _int8_weight(inputs[1], 0)
            if data is None or weight is None:
                return None
            source, scale, zero = data
            acc = out.apply("conv2d_int8", source, out.constant(weight[0], f"{node.name}__w8"),
                            data_zero_point=zero, name=f"{node.name}__int8", **node.attrs)
        elif node.op in ("dense", "matmul") and len(inputs[1].shape) == 2 and \
                len(inputs[0].shape) == 2 and not any(node.attrs.values()):
            data = _per_tensor_data(inputs[0])
            weight = _int8_weight(inputs[1], 0 if node.op == "dense" else 1)
            if data is None or weight is None:
                return None
            source, scale, zero = data
            w8 = weight[0] if node.op == "dense" else np.ascontiguousarray(weight[0].T)
            acc = out.apply("dense_int8", source, out.constant(w8, f"{node.name}__w8"),
                            name=f"{node.name}__int8")
            if zero:
                rows = (zero * w8.astype(np.int64).sum(axis=1)).astype(np.int32)
                acc = out.subtract(acc, out.constant(rows, f"{node.name}__zp"))
        else:
            return None
        # The dequantization as a multiply by a constant shaped to broadcast along the
        # channels, which the layout passes re-lay-out like any bias.
        rescale = (scale * weight[1]).astype(np.float32).reshape(
            (1, -1) + (1,) * (len(node.shape) - 2))
        return out.multiply(out.apply("cast", acc, dtype="float32", name=f"{node.name}__float"),
                            out.constant(rescale, f"{node.name}__rescale"), name=node.name)

    return rewrite(g, visit)
