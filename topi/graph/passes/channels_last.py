"""The layout pass's channels-last views: NHWC code on channel-blocked values, with no permute.

ConvNeXt's block reads its depthwise convolution's NCHW output through permute(0, 2, 3, 1),
normalises each pixel over its channels (LayerNorm on the last axis), runs two Linear layers on
the pixels as rows of a matrix (reshape to (N*H*W, C), dense, GELU, dense) and permutes back
(LayerNorm2d in its stem and downsampling layers is the same permute, norm, permute). In
NCHW[x]c all of it has a blocked form: a channels-last value of (N, H, W, C), or its rows
(N*H*W, C), is the NCHW value (N, C, H, W) read in another order, so the pass keeps the
blocked value and records the view instead of moving data:

- permute(0, 2, 3, 1) of a blocked value is a channels-last view of it; permute(0, 3, 1, 2) of
  a view is the blocked value itself, and a reshape between (N, H, W, C) and (N*H*W, C) is a
  view of the same value;
- a layer norm over the last axis of a view is `layer_norm_NCHWc` (over the blocks and lanes);
- a dense of the view's rows by a constant weight is a 1x1 `conv2d_NCHWc`;
- elementwise ops on views, with constants that broadcast along the channels, stay blocked.

The NHWC form of each view is still emitted, as a copy of the blocked value (a layout
transform and a transpose), for any reader that knows no view, so no op is computed twice; when
every reader takes the blocked value, `remove_dead_nodes` drops the copy, and no transpose or
layout transform is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from ...nn import channel_block
from .. import ops_layout  # noqa: F401  (layer_norm_NCHWc)
from ..graph import Graph, Node, NodeKind
from ..ops import OpPattern

TO_CHANNELS_LAST = (0, 2, 3, 1)
TO_CHANNELS_FIRST = (0, 3, 1, 2)


class BlockedRewriter(Protocol):
    """What the views need of the layout pass's rewriter (`alter_layout._Rewriter`)."""

    out: Graph
    block: dict[Node, int]

    def lanes(self, node: Node) -> int: ...

    def as_block(self, node: Node, block: int) -> Node: ...

    def constant(self, old: Node, value: np.ndarray) -> Node: ...


class ChannelsLastViews:
    """The views of one run of the layout pass: `views` maps each NHWC-form node of the new
    graph that is a view to the blocked value it reads."""

    def __init__(self, rewriter: BlockedRewriter) -> None:
        self.rw = rewriter
        self.block = rewriter.block
        self.views: dict[Node, Node] = {}

    def visit(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """`old` on views, or a permute that makes one: the blocked value it stands for, or its
        NHWC form recorded as a view; None when `old` neither reads nor makes a view."""
        if old.op == "transpose":
            return self.permute(old, inputs)
        if not any(i in self.views for i in inputs):
            return None
        if old.op == "reshape":
            blocked = self.views[inputs[0]]
            return self.view(old, blocked) if self.fits(old.shape, blocked) else None
        if old.op == "layer_norm":
            return self.layer_norm(old, inputs)
        if old.op == "dense":
            return self.dense(old, inputs)
        if old.op == "bias_add" and old.attrs.get("axis", 1) % len(old.shape) \
                == len(old.shape) - 1:  # (the from_torch form of a Linear's bias)
            return self.elementwise(old, inputs, "add", {})
        if old.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST) \
                and not any("axis" in k for k in old.attrs):
            return self.elementwise(old, inputs, old.op, old.attrs)
        return None

    def view(self, old: Node, blocked: Node) -> Node:
        """`blocked` as `old` reads it, recorded as a view: its NHWC form, under `old`'s name,
        is a copy of it (a layout transform, a transpose and for rows a reshape), so that
        readers that know no view take that copy and every op is computed once."""
        nchw = self.rw.as_block(blocked, 0)
        nhwc = self.rw.out.apply("transpose", nchw, axes=TO_CHANNELS_LAST,
                                 name=old.name if len(old.shape) == 4
                                 else self.rw.out.unique_name(f"{old.name}_NHWC"))
        if len(old.shape) == 2:
            nhwc = self.rw.out.apply("reshape", nhwc, newshape=tuple(old.shape), name=old.name)
        self.views[nhwc] = blocked
        return nhwc

    def blocked_op(self, old: Node, op: str, inputs: Sequence[Node], block: int,
                   **attrs: object) -> Node:
        """`op` on blocked values in place of `old`, named apart from `old`'s NHWC form."""
        new = self.rw.out.apply(op, *inputs, name=self.rw.out.unique_name(f"{old.name}_NCHWc"),
                                **attrs)
        self.block[new] = block
        return new

    def fits(self, shape: Sequence[int], blocked: Node) -> bool:
        """Whether `shape` is (N, H, W, C) or (N*H*W, C) of the NCHW value `blocked` holds."""
        n, blocks, h, w, lanes = blocked.shape
        return tuple(shape) in ((n, h, w, blocks * lanes), (n * h * w, blocks * lanes))

    def permute(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        (data,) = inputs
        axes = tuple(old.attrs.get("axes") or ())
        if axes == TO_CHANNELS_LAST and data in self.block:
            return self.view(old, data)
        if axes == TO_CHANNELS_FIRST and data in self.views and len(data.shape) == 4:
            return self.views[data]
        return None

    def channel_vector(self, node: Node, channels: int) -> np.ndarray | None:
        """The values of constant `node` per channel when it broadcasts along the last axis of
        an NHWC value or its rows (a bias, a scale); None when it varies along another axis."""
        if node.kind is not NodeKind.CONSTANT:
            return None
        value = np.asarray(node.value)
        if any(d != 1 for d in value.shape[:-1]) or (value.ndim and value.shape[-1]
                                                      not in (1, channels)):
            return None
        return np.broadcast_to(value.reshape(-1), (channels,))

    def layer_norm(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """A layer norm over the channels of a view: `layer_norm_NCHWc` on its blocked value."""
        data, gamma, beta = inputs
        blocked = self.views.get(data)
        axis = old.attrs.get("axis", -1)
        axes = {a % len(old.shape) for a in ((axis,) if isinstance(axis, int) else axis)}
        if blocked is None or axes != {len(old.shape) - 1}:
            return None
        block = self.block[blocked]
        channels = old.shape[-1]
        params = [self.channel_vector(p, channels) for p in (gamma, beta)]
        if any(p is None for p in params):
            return None
        scales = [self.rw.constant(p, v.reshape(channels // block, block))
                  for p, v in zip((gamma, beta), params)]
        return self.view(old, self.blocked_op(old, "layer_norm_NCHWc", [blocked, *scales], block,
                                              epsilon=old.attrs.get("epsilon", 1e-5)))

    def dense(self, old: Node, inputs: Sequence[Node]) -> Node | None:
        """A dense layer on a view's rows by a constant weight: a 1x1 convolution in
        NCHW[x]c, in the output block of a convolution with as many output channels."""
        data, weight = inputs
        blocked = self.views.get(data)
        if blocked is None or len(data.shape) != 2 or weight.kind is not NodeKind.CONSTANT:
            return None
        k, c = weight.shape
        block = channel_block(k, self.rw.lanes(old))
        if block < self.rw.lanes(old) // 2:
            return None
        packed = weight.value.reshape(k // block, block, c, 1, 1).transpose(0, 2, 3, 4, 1)
        packed_weight = self.rw.constant(weight, packed)
        return self.view(old, self.blocked_op(old, "conv2d_NCHWc", [blocked, packed_weight], block,
                                              stride=(1, 1), padding=(0, 0), dilation=(1, 1)))

    def elementwise(self, old: Node, inputs: Sequence[Node], op: str,
                    attrs: Mapping[str, object]) -> Node | None:
        """An elementwise op (`op` with `attrs` on blocked values) whose operands are views of
        one shape and block, or constants along the channels."""
        channels = old.shape[-1]
        views = [self.views[i] for i in inputs if i in self.views]
        block = self.block[views[0]]  # (equal shapes: equal blocks)
        operands = []
        for new in inputs:
            if new in self.views and new.shape == old.shape \
                    and self.views[new].shape == views[0].shape:
                operands.append(self.views[new])
                continue
            value = self.channel_vector(new, channels)
            if value is None:
                return None
            operands.append(self.rw.constant(new, value.reshape(1, channels // block, 1, 1,
                                                                block)))
        return self.view(old, self.blocked_op(old, op, operands, block, **attrs))
