"""Drop the kernel taps of a convolution that read only padding.

An atrous convolution on a small map reads padding alone with its outer taps: DeepLab's ASPP at
rate 36 on a 28 x 28 map (a 224 x 224 input) has tap rows and columns 0 and 2 at 36 pixels from
every output, outside the input, so 8 of its 9 taps multiply zeros. With those taps sliced off
the constant weight and the padding reduced by as much, the convolution computes the same
values from the live taps only, and its padded copy of the input shrinks with it (the 3 x 3
rate-36 branch becomes a 1 x 1 convolution without padding).

Applies to conv2d, depthwise_conv2d and group_conv2d with a constant weight and a static input,
where the reduced padding stays non-negative and gives the same output size (the taps cut at
the bottom or right would otherwise need a crop of the input).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...nn.conv2d import window_geometry
from ..graph import Graph, Node, NodeKind
from .common import rewrite

CONVS = ("conv2d", "depthwise_conv2d", "group_conv2d")


def live_taps(size: int, taps: int, stride: int, dilation: int, before: int,
              out: int) -> tuple[int, int]:
    """The (start, stop) of the taps along one axis that read some of the `size` input
    positions, tap t reading t * dilation - before + stride * [0, out); (0, taps) when none
    does (a window over padding only keeps its taps)."""
    live = [t for t in range(taps)
            if t * dilation - before < size and (out - 1) * stride + t * dilation - before >= 0]
    return (live[0], live[-1] + 1) if live else (0, taps)


def _trimmed_pads(size: int, taps: int, stride: int, dilation: int, before: int,
                  out: int) -> tuple[int, int, int, int] | None:
    """(start, stop, before, after) of the live taps along one axis and the padding that reads
    the same input positions with them alone; None when nothing is cut or the cut would need
    a crop of the input."""
    start, stop = live_taps(size, taps, stride, dilation, before, out)
    if (start, stop) == (0, taps):
        return None
    new_before = before - start * dilation
    after = max(0, (out - 1) * stride + (stop - start - 1) * dilation + 1 - size - new_before)
    new_out = (size + new_before + after - (stop - start - 1) * dilation - 1) // stride + 1
    if new_before < 0 or new_out != out:
        return None
    return start, stop, new_before, after


def trim_dead_taps(g: Graph) -> Graph:
    """`g` with the taps of each convolution that read only padding cut from its weight."""

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        if node.op not in CONVS or inputs[1].kind is not NodeKind.CONSTANT:
            return None
        data, weight = inputs
        if len(data.shape) != 4 or not all(isinstance(d, int) for d in data.shape):
            return None
        (_, _, h, w), (r, s) = data.shape, weight.shape[2:]
        geo = window_geometry(node.op, (h, w), (r, s), node.attrs.get("stride", 1),
                              node.attrs.get("padding", 0), node.attrs.get("dilation", 1))
        (sh, sw), (dh, dw), (top, left, _, _) = geo.stride, geo.dilation, geo.pad
        rows = _trimmed_pads(h, r, sh, dh, top, geo.out_h) or (0, r, top, geo.pad[2])
        cols = _trimmed_pads(w, s, sw, dw, left, geo.out_w) or (0, s, left, geo.pad[3])
        if rows[:2] == (0, r) and cols[:2] == (0, s):
            return None
        value = weight.value[:, :, rows[0]:rows[1], cols[0]:cols[1]].copy()
        kept = out.constant(value, name=f"{weight.name}_live")
        attrs = {**node.attrs, "padding": (rows[2], cols[2], rows[3], cols[3])}
        return out.apply(node.op, data, kept, name=node.name, **attrs)

    return rewrite(g, visit)
