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

Taps that read padding for only part of the output are split off by region: a stride-1
convolution whose live taps differ across its output is cut into bands of rows and of columns
with one set of live taps each, every region a convolution without padding of its live taps on
the slice of the input they read, the regions concatenated back along the width and the height.
DeepLab-V3's rate-12 ASPP branch on MobileNet-V3's 14 x 14 map runs all 9 taps only at its 2 x 2
corners and the centre tap alone on its 10 x 10 interior: 18% of the taps' multiplies are live.
The split is made for dilated convolutions where the live work is at most `SPLIT_WORK` of the
whole (an undilated 3 x 3 conv meets it on a 2 x 2 map only, where nine kernel calls would cost
more than the taps saved).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...nn.conv2d import WindowGeometry, window_geometry
from ..graph import Graph, Node, NodeKind
from .common import rewrite

CONVS = ("conv2d", "depthwise_conv2d", "group_conv2d")
#: The largest share of live tap work (of the work of the taps left by `trim_dead_taps`) at
#: which a convolution is split into regions: each region is a kernel call and a slice of the
#: input of its own.
SPLIT_WORK = 0.5


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


def tap_bands(size: int, taps: int, dilation: int, before: int,
              out: int) -> list[tuple[int, int, int, int]] | None:
    """The outputs of a stride-1 axis in bands of one set of live taps: (first output, end,
    first live tap, end) each, in order; None when some output reads padding only."""
    bands: list[tuple[int, int, int, int]] = []
    for y in range(out):
        live = [t for t in range(taps) if 0 <= y + t * dilation - before < size]
        if not live:
            return None
        if bands and bands[-1][2:] == (live[0], live[-1] + 1):
            bands[-1] = (bands[-1][0], y + 1, *bands[-1][2:])
        else:
            bands.append((y, y + 1, live[0], live[-1] + 1))
    return bands


def _live_work(bands: list[tuple[int, int, int, int]]) -> int:
    return sum((y1 - y0) * (t1 - t0) for y0, y1, t0, t1 in bands)


def _work(bands: list[tuple[int, int, int, int]]) -> int:
    """The work of the taps that read the input somewhere along the axis (what remains after
    `trim_dead_taps`), over all the axis' outputs."""
    return (bands[-1][1] - bands[0][0]) * (max(b[3] for b in bands) - min(b[2] for b in bands))


def _band_slice(band: tuple[int, int, int, int], dilation: int, before: int) -> tuple[int, int]:
    """The input positions [start, stop) that a band's live taps read."""
    y0, y1, t0, t1 = band
    return y0 + t0 * dilation - before, y1 + (t1 - 1) * dilation - before


def _split_regions(out: Graph, node: Node, data: Node, weight: Node) -> Node | None:
    """`node` as the concatenation of the regions of its output with one set of live taps each
    (see the module docstring), or None where it has one region or the split would not pay.
    `out` reserves the names of the graph it rebuilds, so the names it makes up for the new
    nodes never take one of a node still to copy."""
    fresh = out.unique_name
    geo = _geometry(node, data, weight)
    (_, _, h, w), (r, s) = data.shape, weight.shape[2:]
    if geo.stride != (1, 1) or geo.dilation == (1, 1):
        return None
    (dh, dw), (top, left, _, _) = geo.dilation, geo.pad
    rows = tap_bands(h, r, dh, top, geo.out_h)
    cols = tap_bands(w, s, dw, left, geo.out_w)
    if rows is None or cols is None or len(rows) * len(cols) == 1 or \
            _live_work(rows) * _live_work(cols) > SPLIT_WORK * _work(rows) * _work(cols):
        return None
    attrs = {**node.attrs, "padding": (0, 0, 0, 0)}
    band_rows = []
    for i, row in enumerate(rows):
        pieces = []
        for j, col in enumerate(cols):
            (y0, y1), (x0, x1) = _band_slice(row, dh, top), _band_slice(col, dw, left)
            part = data
            if (y0, y1, x0, x1) != (0, h, 0, w):
                part = out.apply("strided_slice", data, begin=(y0, x0), end=(y1, x1),
                                 strides=(1, 1), axes=(2, 3),
                                 name=fresh(f"{node.name}_in{i}_{j}"))
            taps = weight.value[:, :, row[2]:row[3], col[2]:col[3]].copy()
            kept = out.constant(taps, name=fresh(f"{weight.name}_{i}_{j}"))
            pieces.append(out.apply(node.op, part, kept, **attrs,
                                    name=fresh(f"{node.name}_{i}_{j}")))
        band_rows.append(_join(out, pieces, 3, node.name if len(rows) == 1 else
                               fresh(f"{node.name}_{i}")))
    return _join(out, band_rows, 2, node.name)


def _join(out: Graph, parts: list[Node], axis: int, name: str) -> Node:
    return parts[0] if len(parts) == 1 else out.apply("concatenate", *parts, axis=axis,
                                                      name=name)


def _static_conv(node: Node, inputs: Sequence[Node]) -> bool:
    """A convolution of a constant weight on a static 4-D input."""
    return node.op in CONVS and inputs[1].kind is NodeKind.CONSTANT and \
        len(inputs[0].shape) == 4 and all(isinstance(d, int) for d in inputs[0].shape)


def _geometry(node: Node, data: Node, weight: Node) -> WindowGeometry:
    return window_geometry(node.op, data.shape[2:], weight.shape[2:], node.attrs.get("stride", 1),
                           node.attrs.get("padding", 0), node.attrs.get("dilation", 1))


def split_border_taps(g: Graph) -> Graph:
    """`g` with each stride-1 convolution whose live taps differ across its output cut into
    regions of one set of live taps each (see the module docstring)."""

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        return _split_regions(out, node, *inputs) if _static_conv(node, inputs) else None

    return rewrite(g, visit)


def trim_dead_taps(g: Graph) -> Graph:
    """`g` with the taps of each convolution that read only padding cut from its weight."""

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        if not _static_conv(node, inputs):
            return None
        data, weight = inputs
        (_, _, h, w), (r, s) = data.shape, weight.shape[2:]
        geo = _geometry(node, data, weight)
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
