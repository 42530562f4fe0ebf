"""Panels of weight-quantized products: a block of output channels read as one sequential stream.

A batch-1 product with a quantized weight is bound by the time to read the weight. Read row by
row, a block of output channels is several streams a row (K bytes) apart, and the cores keep too
few of their reads in flight: a 1536 x 576 int8 weight read cold (from memory) ran at 7-9 GB/s
on one Zen 4 core that streams 25 GB/s. In panels of `rows` output channels, whose weights are
interleaved along K (`rows` consecutive values per position of K, the channels in vector
lanes), a block's reads are consecutive addresses, and the same product reads 23-26 GB/s.

- int8: (ceil(N / rows), K, rows), element (b, k, r) = weight[b * rows + r, k].
- int4: (ceil(N / rows), K // 32, 16, rows) bytes, element (b, kb, t, r) = byte t of block kb of
  channel b * rows + r (GGUF Q4_0's byte: element 32 kb + t in its low nibble, 32 kb + 16 + t in
  its high one), so one vector load gives one byte of each channel of the panel.
- group scales and zero points: (ceil(N / rows), K // group_size, rows) float32.

Channels past N are zeros. The stages are tagged as the other weight packings (`PACK_TAG`), so
a graph packs a constant weight once, at build time.
"""

from __future__ import annotations

import tensorlang as tl

from .dense_int8 import PACK_TAG
from .utils import static_dim

#: Vector registers of output channels per panel: independent accumulator chains in the inner
#: loop (enough to hide the latency of the multiply-adds).
PANEL_VECTORS = 4
#: Panels under which a product takes panels of half the width (two chains, still enough for
#: int8), so that its panels split evenly between the threads (a 576-channel product in panels
#: of 64 is 9 panels: 5 for one thread, 4 for the other).
MIN_PANELS = 16


def panel_rows(n: int) -> int:
    """Output channels per panel for an N-channel product on the current target: a whole
    number of float32 vectors (module docstring)."""
    wide = tl.Target.current().vector_lanes("float32") * PANEL_VECTORS
    return wide if -(-n // wide) >= MIN_PANELS else wide // 2


def _channel(source: tl.Tensor, rows: int, b, r, *rest) -> tl.Expr:
    """source[b * rows + r, *rest], zero past the last channel."""
    n = static_dim(source.shape[0])
    j = b * rows + r
    if n % rows == 0:
        return source[(j, *rest)]
    value = source[(tl.minimum(j, n - 1), *rest)]
    return tl.if_then_else(j < n, value, tl.const(0, source.dtype))


def pack_weight_panels(weight: tl.Tensor, bits: int, rows: int) -> tl.Tensor:
    """The packed int8 (N, K) or int4 (N, K // 32, 16) weight in panels of `rows` channels."""
    n = static_dim(weight.shape[0])
    blocks = -(-n // rows)
    if bits == 8:
        k = static_dim(weight.shape[1])
        return tl.compute((blocks, k, rows), lambda b, kk, r: _channel(weight, rows, b, r, kk),
                          name="weight_panels", tag=PACK_TAG)
    kb, half = (static_dim(d) for d in weight.shape[1:])
    return tl.compute((blocks, kb, half, rows),
                      lambda b, q, t, r: _channel(weight, rows, b, r, q, t),
                      name="weight_panels", tag=PACK_TAG)


def pack_group_panels(values: tl.Tensor, rows: int, name: str) -> tl.Tensor:
    """Per-group values (N, groups) (`name`: scale, zero) in panels of `rows` channels."""
    n, groups = (static_dim(d) for d in values.shape)
    return tl.compute((-(-n // rows), groups, rows),
                      lambda b, g, r: _channel(values, rows, b, r, g), name=f"{name}_panels",
                      tag=PACK_TAG)
