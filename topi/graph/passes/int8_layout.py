"""Keep a quantized model's int8 activations in NCHW[x]c from one int8 convolution to the next.

After `quantize_ops`, a QDQ model is a chain of int8 convolutions, each with an epilogue that
rescales its int32 sums to float (a multiply by a constant per channel), adds the bias and
requantizes to uint8 for the next one. In NCHW every convolution would copy its uint8 input into
the blocked layout of the VNNI product and gather its output back out of it. Here each
`conv2d_int8` whose output channels fill whole int32 vectors becomes `conv2d_NCHWc_int8` (a
`depthwise_conv2d_int8`, `depthwise_conv2d_NCHWc_int8`), whose output stays blocked (oc_bn =
the target's int32 lanes), and what reads it channel by channel
stays blocked too: the elementwise epilogue, per-tensor quantize / dequantize / requantize, the
residual adds and pooling (the rules of `alter_layout`, which this pass extends). A convolution
reads a blocked input as it is. Float convolutions are left to `alter_layout`, which runs next:
a value that leaves the int8 world (a float op without a rule here, a graph output) goes back to
NCHW through one `layout_transform`.

The bf16 convolutions of `build(precision="bf16")` (`conv2d_bf16`) are kept blocked the same
way (16 float32 lanes, bfloat16 pairs).

Runs after `fold_constants` (biases and rescales are constants by then, so they are re-laid-out
here) and before `alter_layout`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...nn.dense_int8 import BF16_GROUP, GROUP, int8_lanes
from ..graph import Graph, Node, NodeKind
from ..ops import OpPattern
from .alter_layout import POOLS, _Rewriter
from .common import copy_node

#: The convolutions made blocked: their NCHW[x]c op and the channels per lane of its dot.
BLOCKED_CONVS = {"conv2d_int8": ("conv2d_NCHWc_int8", GROUP),
                 "conv2d_bf16": ("conv2d_NCHWc_bf16", BF16_GROUP)}
#: Depthwise: channels in the lanes, so the data's block is the output's.
BLOCKED_DEPTHWISE = {"depthwise_conv2d_int8": "depthwise_conv2d_NCHWc_int8"}
#: Quantization ops, blocked where their scales and zero points are one per tensor.
QNN_OPS = ("quantize", "dequantize", "requantize")


class _Int8Rewriter(_Rewriter):
    """alter_layout's rewriter with the int8 convolution and per-tensor quantization ops, and
    no float convolution."""

    def visit(self, old: Node, inputs: Sequence[Node]) -> Node:
        if old.kind is not NodeKind.OP:
            return copy_node(self.out, old, inputs)
        if old.op in BLOCKED_CONVS:
            new = self.conv2d(old, inputs)
        elif old.op in BLOCKED_DEPTHWISE:
            new = self.int8_depthwise(old, inputs)
        elif old.op in QNN_OPS:
            new = self.per_tensor(old, inputs)
        elif old.op in POOLS or old.op == "bias_add" or \
                old.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST):
            return super().visit(old, inputs)
        else:
            new = None
        return self.plain(old, inputs) if new is None else new

    def conv2d(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        data, weight = inputs
        op, group = BLOCKED_CONVS[old.op]
        lanes = int8_lanes() if op == "conv2d_NCHWc_int8" else 16
        if weight.kind is not NodeKind.CONSTANT:
            return None
        # A blocked input of whole groups of channels is read as it is; an NCHW one is copied
        # into blocks by the convolution itself (what a layout_transform would cost).
        block = self.block.get(data, 0)
        source = data if block % group == 0 else self.as_block(data, 0)
        if weight.shape[0] % lanes:
            # Output channels that fill no whole vector (MobileNet-V2's 24) stay NCHW, the
            # int8 convolution unpacking its padded blocks; its blocked input is read as it is.
            return copy_node(self.out, old, [source, weight]) if op == "conv2d_NCHWc_int8" \
                and block else None
        extra = {"out_block": lanes} if op == "conv2d_NCHWc_int8" else {}
        return self.blocked_op(old, op, [source, weight], lanes, **extra, **old.attrs)

    def int8_depthwise(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        data, weight = inputs
        lanes = int8_lanes()
        if weight.kind is not NodeKind.CONSTANT or weight.shape[0] % lanes:
            return None
        # Read as it is in blocks of the lanes, else copied into them from NCHW by the op.
        source = data if self.block.get(data) == lanes else self.as_block(data, 0)
        return self.blocked_op(old, BLOCKED_DEPTHWISE[old.op], [source, weight], lanes,
                               out_block=lanes, **old.attrs)

    def per_tensor(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        data, *params = inputs
        block = self.block.get(data)
        if not block or any(p.kind is not NodeKind.CONSTANT or p.value.size != 1
                            for p in params):
            return None
        return self.blocked_op(old, old.op, [data, *params], block, **old.attrs)


def int8_layout(g: Graph) -> Graph:
    """`g` with its int8 convolutions in NCHW[x]c and the layout kept between them (see the
    module docstring); blocks from the current target."""
    return _Int8Rewriter(g).run()
