"""Run dequantize -> conv2d / dense patterns of QDQ models as int8 kernels.

A QDQ model computes a quantized convolution as conv2d(dequantize(x_q), dequantize(W_q)): float
arithmetic on values that are integers times scales. With uint8 activations (one scale and zero
point) and int8 weights (zero zero points, a scale per output channel or one), it equals

    float(conv2d_int8(x_q, W_q, data_zero_point=zp_x)) * (s_x * s_w per channel)

exactly up to float rounding: an int8 kernel (VNNI where the target has it) whose output stage
rescales to float, into which the bias, ReLU and the next QuantizeLinear fuse as before. A
depthwise convolution (one filter per channel: MobileNet's, EfficientNet's) likewise becomes
`depthwise_conv2d_int8`, with the weight's scales per channel. dense
(Gemm) and 2-D matmul (MatMul on a weight) likewise, the zero point of the data subtracted as
zp_x x the weight's row sums. Runs before fold_constants, while weights are still
dequantize(int8 constant) nodes (the ONNX frontend keeps them so).

Around them the activations stay 8-bit: a residual add of a dequantized shortcut reads the
shortcut's 8-bit values (`dequantize_add`), max pooling runs before the dequantize, and a
QuantizeLinear of a DequantizeLinear with the same parameters disappears.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..graph import Graph, Node, NodeKind
from .common import rewrite


def _const(node: Node) -> np.ndarray | None:
    return node.value if node.kind is NodeKind.CONSTANT else None


def _per_tensor_data(node: Node, dtypes: Sequence[str] = ("uint8",)
                     ) -> tuple[Node, float, int] | None:
    """(8-bit source, scale, zero point) of a per-tensor dequantize of data of `dtypes`."""
    if node.op != "dequantize" or node.inputs[0].dtype not in dtypes:
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


def _rescaled(out: Graph, node: Node, acc: Node, scale: np.ndarray) -> Node:
    """The int32 sums `acc` back in float: a multiply by a constant shaped to broadcast along
    the channels, which the layout passes re-lay-out like any bias."""
    rescale = scale.astype(np.float32).reshape((1, -1) + (1,) * (len(node.shape) - 2))
    return out.multiply(out.apply("cast", acc, dtype="float32", name=f"{node.name}__float"),
                        out.constant(rescale, f"{node.name}__rescale"), name=node.name)


#: The int8 op of each convolution.
INT8_CONVS = {"conv2d": "conv2d_int8", "depthwise_conv2d": "depthwise_conv2d_int8"}


def _conv2d(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
    """A convolution, or a depthwise one with one filter per channel, of dequantized uint8
    data and int8 weight; the depthwise weight is the graph's reshape of the ONNX one to
    (C, 1, R, S), looked through."""
    weight = inputs[1]
    if node.op == "depthwise_conv2d":
        if weight.shape[1] != 1:
            return None
        if weight.op == "reshape" and weight.inputs[0].shape == weight.shape:
            weight = weight.inputs[0]
    data, weight = _per_tensor_data(inputs[0]), _int8_weight(weight, 0)
    if data is None or weight is None:
        return None
    source, scale, zero = data
    acc = out.apply(INT8_CONVS[node.op], source, out.constant(weight[0], f"{node.name}__w8"),
                    data_zero_point=zero, name=f"{node.name}__int8", **node.attrs)
    return _rescaled(out, node, acc, scale * weight[1])


def _dense(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
    if len(inputs[1].shape) != 2 or len(inputs[0].shape) != 2 or any(node.attrs.values()):
        return None
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
    return _rescaled(out, node, acc, scale * weight[1])


def _add(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
    """x + dequantize(q) (a residual add's shortcut) as one op reading q: it fuses into the
    kernel that computes x (the last convolution of the block), so the shortcut is read as
    8-bit instead of being dequantized into a float tensor of its own first."""
    for i in (1, 0):
        other, dq = inputs[1 - i], inputs[i]
        if _per_tensor_data(dq, ("uint8", "int8")) and other.shape == dq.shape == node.shape:
            return out.apply("dequantize_add", other, *dq.inputs, name=node.name)
    return None


def _max_pool(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
    """max_pool(dequantize(q)) = dequantize(max_pool(q)) for a positive scale (dequantizing is
    increasing): the pooling runs on 8-bit data."""
    data = _per_tensor_data(inputs[0], ("uint8", "int8"))
    if data is None or data[1] <= 0:
        return None
    dq = inputs[0]
    pooled = out.apply(node.op, data[0], name=f"{node.name}__q", **node.attrs)
    return out.apply("dequantize", pooled, *dq.inputs[1:], name=node.name, **dq.attrs)


def _quantize(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
    """quantize(dequantize(q)) with the same scale, zero point and type is q (a pooling's
    QuantizeLinear after `_max_pool`)."""
    dq = inputs[0]
    if dq.op != "dequantize" or dq.inputs[0].dtype != node.dtype:
        return None
    params = [(_const(a), _const(b)) for a, b in zip(dq.inputs[1:], inputs[1:])]
    if any(a is None or b is None or a.size != 1 or b.size != 1 or a.reshape(()) != b.reshape(())
           for a, b in params):
        return None
    return dq.inputs[0]


#: The rewrites by op: each returns the replacement of the node, or None to keep it.
REWRITES = {"conv2d": _conv2d, "depthwise_conv2d": _conv2d, "dense": _dense, "matmul": _dense, "add": _add,
            "max_pool2d": _max_pool, "quantize": _quantize}


def quantize_ops(g: Graph) -> Graph:
    """`g` with the dequantize -> conv2d / dense / matmul patterns of the module docstring as
    int8 kernels, residual adds reading their 8-bit shortcut and max pooling on 8-bit data."""
    outputs = set(g.outputs)

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        rule = REWRITES.get(node.op)
        new = rule(out, node, inputs) if rule else None
        # An output keeps its name: not replaced by a node of another.
        return None if new is not None and node in outputs and new.name != node.name else new

    return rewrite(g, visit)
