"""Pick layouts: convolutions run on channel-blocked NCHW[x]c activations, kept between them.

Each convolution, grouped convolution and depthwise convolution whose weight is a constant
becomes its NCHW[x]c form (`conv2d_NCHWc`, `group_conv2d_NCHWc`, `depthwise_conv2d_NCHWc`, with
the weight packed here, by numpy), and its result stays blocked through what reads it channel by
channel: elementwise ops (relu, clip, ...), broadcast ops whose other operands are constants or
blocked values of the same shape (a bias add, a residual add), batch norms with constant
parameters (as a multiply and an add), channel concatenations whose inputs all take one block of
at least half a vector, pooling and resizing. A `layout_transform` is inserted only where a
value crosses into or out of the blocked world: at a graph input, before an op without NCHW[x]c
support (reshape, dense, ...) and at the graph outputs, which
keep their NCHW shapes and names. Constants are re-laid-out here, never by running kernels.
Channels-last code on a blocked value (ConvNeXt's permute, LayerNorm, Linear layers and
permute back) stays blocked too, through views that move no data (`channels_last.py`).
A grouped convolution takes the blocks of a dense one (groups narrower than a block share it, no
channel is padded; wider ones span several blocks), or half-vector blocks where its groups are an
odd number of half vectors wide.

Block sizes come from the current target (`tl.Target.current()`): a layer's channels use the
largest power of two that divides them and fits one vector (`topi.nn.channel_block`: 16 on
AVX-512, 8 on AVX2; 24 channels use 8). A convolution whose output block would be less than half
a vector (e.g. 3 or 4 channels on AVX-512) stays in NCHW, and a conv2d_NCHWc reads an NCHW
input of such channels (a 3-channel image) as it is. A value that is already blocked keeps its
block: a convolution reads any input block, and only an elementwise op between values of
different blocks converts one of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import tensorlang as tl

from ...nn import channel_block, pack_group_conv2d_kernel
from ..graph import Graph, Node, NodeKind
from ..ops import OpPattern
from .channels_last import ChannelsLastViews
from .common import copy_node, successor

POOLS = ("max_pool2d", "avg_pool2d", "global_avg_pool2d")


def _layout(block: int) -> str:
    return f"NCHW{block}c" if block else "NCHW"


def _relayout(value: np.ndarray, channels: int, block: int) -> np.ndarray | None:
    """A constant operand of a broadcast op on an NCHW value of `channels` channels, laid out to
    broadcast the same way against its NCHW<block>c form; None when it cannot (more than 4-D)."""
    if value.ndim > 4:
        return None
    n, c, h, w = (1,) * (4 - value.ndim) + value.shape
    plain = value.reshape(n, c, h, w)
    if c == 1:
        return plain.reshape(n, 1, h, w, 1)
    return plain.reshape(n, channels // block, block, h, w).transpose(0, 1, 3, 4, 2)


class _Rewriter:
    """The new graph under construction and the block of each of its blocked values."""

    def __init__(self, g: Graph) -> None:
        self.old = g
        self.out = successor(g)
        self.block: dict[Node, int] = {}
        self.moved: dict[tuple[Node, int], Node] = {}
        self.outputs = set(g.outputs)
        self.channels_last = ChannelsLastViews(self)
        self.users: dict[Node, list[Node]] | None = None

    def lanes(self, node: Node) -> int:
        return tl.Target.current().vector_lanes(node.dtype)

    def blocked_name(self, old: Node) -> str:
        """A graph output keeps its name for the NCHW value, so its blocked form gets another;
        any other blocked value takes the name of the node it replaces."""
        return self.out.unique_name(f"{old.name}_NCHWc") if old in self.outputs else old.name

    def as_block(self, node: Node, block: int) -> Node:
        """`node` in NCHW<block>c (NCHW when block is 0), transformed once per layout."""
        have = self.block.get(node, 0)
        if have == block:
            return node
        key = (node, block)
        if key not in self.moved:
            name = self.out.unique_name(f"{node.name}_{_layout(block)}")
            moved = self.out.apply("layout_transform", node, src_layout=_layout(have),
                                   dst_layout=_layout(block), name=name)
            if block:
                self.block[moved] = block
            self.moved[key] = moved
        return self.moved[key]

    def plain(self, old: Node, inputs: Sequence[Node]) -> Node:
        """`old` as it was, reading NCHW inputs."""
        return copy_node(self.out, old, [self.as_block(i, 0) for i in inputs])

    def visit(self, old: Node, inputs: Sequence[Node]) -> Node:
        if old.kind is not NodeKind.OP:
            return copy_node(self.out, old, inputs)
        viewed = self.channels_last.visit(old, inputs)
        if viewed is not None:
            return viewed
        if old.op == "conv2d":
            new = self.conv2d(old, inputs)
        elif old.op == "group_conv2d":
            new = self.group_conv2d(old, inputs)
        elif old.op == "depthwise_conv2d":
            new = self.depthwise(old, inputs)
        elif old.op in POOLS or old.op == "resize2d" and self.stays_blocked(old):
            new = self.pool(old, inputs)
        elif old.op == "bias_add":
            new = self.bias_add(old, inputs)
        elif old.op == "batch_norm":
            new = self.batch_norm(old, inputs)
        elif old.op == "concatenate" and old.attrs.get("axis") in (2, 3, -2, -1):
            new = self.spatial(old, inputs, axis=old.attrs["axis"] % 4)
        elif old.op == "strided_slice" and set(old.attrs.get("axes") or (0,)) <= {2, 3}:
            new = self.spatial(old, inputs)
        elif old.op == "concatenate":
            new = self.concatenate(old, inputs)
        elif old.op == "take":
            new = self.take(old, inputs)
        elif old.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST):
            new = self.elementwise(old, inputs)
        else:
            new = None
        return self.plain(old, inputs) if new is None else new

    def blocked_op(self, old: Node, op: str, inputs: Sequence[Node], block: int,
                   **attrs: object) -> Node:
        new = self.out.apply(op, *inputs, name=self.blocked_name(old), **attrs)
        self.block[new] = block
        return new

    def constant(self, old: Node, value: np.ndarray) -> Node:
        return self.out.constant(value, name=f"{old.name}_NCHWc")  # one aligned copy

    def conv_blocks(self, old: Node, data: Node, weight: Node) -> tuple[int, int] | None:
        """(input block, output block) of a convolution in NCHW[x]c, or None when it stays in
        NCHW (a weight that is not a constant, or too few output channels for a block)."""
        if weight.kind is not NodeKind.CONSTANT:
            return None
        lanes = self.lanes(old)
        out_block = channel_block(weight.shape[0], lanes)
        if out_block < lanes // 2:
            return None
        # An NCHW input is worth a transform when its channels make blocks (then each step
        # reads channels contiguously); one without (an image's 3 channels) is read as it is.
        in_block = self.block.get(data, 0)
        channels = data.shape[1]
        if not in_block and channel_block(channels, lanes) >= lanes // 2:
            in_block = channel_block(channels, lanes)
        return in_block, out_block

    def conv2d(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        data, weight = inputs
        blocks = self.conv_blocks(old, data, weight)
        if blocks is None:
            return None
        in_block, out_block = blocks
        k, c, r, s = weight.shape
        packed = weight.value.reshape(k // out_block, out_block, c, r, s).transpose(0, 2, 3, 4, 1)
        return self.blocked_op(old, "conv2d_NCHWc", [self.as_block(data, in_block),
                                                     self.constant(weight, packed)],
                               out_block, **old.attrs)

    def group_conv2d(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """A grouped convolution in NCHW[x]c: several narrow groups share an output block
        (`topi.nn.pack_group_conv2d_kernel`), so the blocks are those of a dense conv."""
        data, weight = inputs
        blocks = self.conv_blocks(old, data, weight)
        if blocks is None:
            return None
        in_block, out_block = blocks
        groups = old.attrs["groups"]
        half = self.lanes(old) // 2
        if (weight.shape[0] // groups) % (2 * half) == half:
            # Groups of an odd number of half vectors (8 or 24 channels on AVX-512) fill
            # half-vector blocks exactly, where full vectors would spend FMAs on zero weights
            # between groups: 1.6-2x faster on Zen 4 (RegNet-Y's 8 per group at 208 x 28 x 28);
            # on AVX2, 4 per group in half vectors measured even.
            out_block = half
        packed = pack_group_conv2d_kernel(weight.value, groups, out_block)
        return self.blocked_op(old, "group_conv2d_NCHWc", [self.as_block(data, in_block),
                                                           self.constant(weight, packed)],
                               out_block, **old.attrs)

    def depthwise(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        data, weight = inputs
        c, multiplier, r, s = weight.shape
        if weight.kind is not NodeKind.CONSTANT or multiplier != 1:
            return None
        block = self.block.get(data) or channel_block(c, self.lanes(old))
        if block < self.lanes(old) // 2:
            return None
        packed = weight.value.reshape(c // block, block, r, s).transpose(0, 2, 3, 1)
        return self.blocked_op(old, "depthwise_conv2d_NCHWc", [self.as_block(data, block),
                                                               self.constant(weight, packed)],
                               block, **old.attrs)

    def pool(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        (data,) = inputs
        block = self.block.get(data)
        if not block or old.attrs.get("layout", "NCHW") != "NCHW":
            return None
        return self.blocked_op(old, old.op, [data], block, **{**old.attrs,
                                                              "layout": _layout(block)})

    def stays_blocked(self, old: Node) -> bool:
        """Whether a blocked value computed by `old` has a reader that takes it blocked: not
        when it is read only as a graph output or by convolutions too narrow for a block (an
        LR-ASPP head's 21 classes), where a resize is cheaper on the NCHW value than blocked
        with a layout transform fused after it (0.11 against 0.22-0.32 ms for its 128 x 14 x 14
        -> 28 x 28 upsample on Zen 4)."""
        if self.users is None:
            self.users = self.old.consumers()
        lanes = self.lanes(old)
        return any(u.op not in ("conv2d", "group_conv2d", "depthwise_conv2d")
                   or channel_block(u.shape[1], lanes) >= lanes // 2 for u in self.users[old])

    def bias_add(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        data, bias = inputs
        block = self.block.get(data)
        if not block or old.attrs.get("axis", 1) != 1 or bias.kind is not NodeKind.CONSTANT:
            return None
        value = bias.value.reshape(1, -1, 1, 1)
        return self.blocked_op(old, "add", [data, self.constant(bias,
                                                               _relayout(value, value.size,
                                                                         block))], block)

    def batch_norm(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """A batch norm that no convolution absorbed (a pre-activation one, as in DenseNet) on a
        blocked value: a multiply and an add by re-laid-out constants, so that it stays blocked
        and fuses with its neighbours like any broadcast op."""
        data, *params = inputs
        block = self.block.get(data)
        if not block or old.attrs.get("axis", 1) != 1 or len(old.shape) != 4 \
                or any(p.kind is not NodeKind.CONSTANT for p in params):
            return None
        gamma, beta, mean, var = (p.value.astype(np.float64) for p in params)
        scale = gamma / np.sqrt(var + old.attrs.get("epsilon", 1e-5))
        channels = old.shape[1]
        factors = [_relayout(v.astype(old.dtype).reshape(1, -1, 1, 1), channels, block)
                   for v in (scale, beta - mean * scale)]
        scaled = self.out.apply("multiply", data, self.constant(params[0], factors[0]),
                                name=self.out.unique_name(f"{old.name}_scale"))
        self.block[scaled] = block
        return self.blocked_op(old, "add", [scaled, self.constant(params[1], factors[1])], block)

    def concatenate(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """A channel concatenation with a blocked input, in the blocked layout (a concatenation
        of the blocks), in the largest block that divides every input's channels (at least half
        a vector; else it stays NCHW): the branches of an Inception module and DenseNet's growing
        feature map never go through NCHW."""
        blocks = [self.block[i] for i in inputs if i in self.block]
        if not blocks or len(old.shape) != 4 or old.attrs.get("axis") not in (1, -3):
            return None
        lanes = self.lanes(old)
        block = min(*blocks, *(channel_block(i.shape[1], lanes) for i in old.inputs))
        if block < lanes // 2:
            return None
        return self.blocked_op(old, "concatenate", [self.as_block(i, block) for i in inputs],
                               block, axis=1)

    def spatial(self, old: Node, inputs: Sequence[Node], **attrs: object) -> Node | None:
        """A concatenation or slice along the height and width of blocked values, in the block
        of the first (those axes keep their places in NCHW[x]c): the regions of a convolution
        split by `split_border_taps` never go through NCHW."""
        blocks = [self.block[i] for i in inputs if i in self.block]
        if not blocks or len(old.shape) != 4:
            return None
        return self.blocked_op(old, old.op, [self.as_block(i, blocks[0]) for i in inputs],
                               blocks[0], **{**old.attrs, **attrs})

    def take(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """A gather of channels from a blocked value reads it through a layout transform of its
        own, which fuses into the gather's kernel, instead of a shared NCHW copy: each half of a
        ShuffleNet shuffle (two takes of one blocked concatenation) reads the blocks once, and
        no NCHW copy of the concatenation is written and read again."""
        data, indices = inputs
        block = self.block.get(data)
        if not block or len(old.shape) != 4 or old.attrs.get("axis") not in (1, -3):
            return None
        private = self.out.apply("layout_transform", data, src_layout=_layout(block),
                                 dst_layout="NCHW",
                                 name=self.out.unique_name(f"{old.name}_{_layout(0)}"))
        return copy_node(self.out, old, [private, indices])

    def elementwise(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """An elementwise or broadcast op with a blocked input, on the NCHW value's shape:
        blocked inputs meet in one block, constants are re-laid-out, anything else stays NCHW."""
        blocks = [self.block[i] for i in inputs if i in self.block]
        if not blocks or len(old.shape) != 4 or any("axis" in k for k in old.attrs):
            return None
        block = blocks[0]
        channels = old.shape[1]
        operands = []
        for new, was in zip(inputs, old.inputs):
            if new in self.block or (new.kind is not NodeKind.CONSTANT and was.shape == old.shape):
                operands.append(self.as_block(new, block))
                continue
            value = _relayout(new.value, channels, block) if new.value is not None else None
            if value is None:
                return None
            operands.append(self.constant(new, value))
        return self.blocked_op(old, old.op, operands, block, **old.attrs)

    def run(self) -> Graph:
        mapped: dict[Node, Node] = {}
        for node in self.old.nodes:
            mapped[node] = self.visit(node, [mapped[i] for i in node.inputs])
        for node in self.old.outputs:
            new = mapped[node]
            if new in self.block:
                new = self.out.apply("layout_transform", new, src_layout=_layout(self.block[new]),
                                     dst_layout="NCHW", name=node.name)
            self.out.output(new)
        return self.out


def alter_layout(g: Graph) -> Graph:
    """`g` with its convolutions in NCHW[x]c and the layout kept between them (see the module
    docstring); block sizes from the current target."""
    return _Rewriter(g).run()
