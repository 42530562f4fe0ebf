"""Dense with weight-only quantization: float32 data times int8 or int4 weights with scales.

`dense_quantized(data, weight, scale, zero=None, bits=8, group_size=K)` is data (M, K) times the
dequantized weight (N, K) transposed, the weight kept in its packed form and dequantized where
it is read (inside the product's inner loop: the point of the kernel is to read each weight
byte once, as the memory-bound batch-1 decode of a language model does):

- bits=8: `weight` (N, K) int8, value = weight * scale[n, k // group_size].
- bits=4: `weight` (N, K // 32, 16) uint8, the layout of GGUF's Q4_0 blocks: byte b of block kb
  holds element kb * 32 + b in its low nibble and element kb * 32 + 16 + b in its high one, so a
  vector of 16 bytes dequantizes into two vectors of 16 consecutive elements with uniform
  shifts. value = (nibble - zero[n, g]) * scale[n, g], with zero = 8 when no zero points are
  given (symmetric, Q4_0's convention).

The product reads the weight, scales and zero points in panels of output channels
(`quantized_panels`: one sequential stream per block of channels, the channels in vector lanes).
`dense_quantized` packs them inside the computation (stages a graph would run once for a
constant weight); `dense_quantized_panels` takes them packed, as the language-model graphs hold
their weights (`topi.graph.llm.packing`), so that one copy serves every module. Each group's
products are summed apart (`dense_quantized_groups`, a reduction over the group's positions) and
scaled once per group and channel: sum_g scale * (sum_t x * q - zero * sum_t x), the data's
group sums (`dense_quantized_data_sums`) standing for the zero points (int4: 8 when symmetric),
so the inner loop converts each weight and multiplies it with the data, nothing more. A single
group (int8 per output channel) scales the sum in an elementwise stage after it. The product
stage (tag `TAG`) runs over whole panels; the (M, N) output reads its first N channels.

`dense_dequantized` is the same product of panels for many rows of data (a prompt): a float
GEMM whose weight panels are dequantized as they are packed, once per call instead of once per
row.

`scale` (and `zero`) are float32 or float16 (N, K // group_size), in panels (blocks,
K // group_size, rows); the kernel widens them to float32.
"""

from __future__ import annotations

import tensorlang as tl

from .dense import dense
from .quantized_panels import pack_group_panels, pack_weight_panels, panel_rows
from .utils import check_tensor, static_dim

TAG = "dense_quantized"
#: The tags of the per-group sums and of the data's group sums (the schedule finds them by tag).
GROUPS_TAG = "dense_quantized_groups"
DATA_SUMS_TAG = "dense_quantized_data_sums"
#: Elements per int4 block (two nibbles of 16 bytes).
INT4_BLOCK = 32
#: The zero point of symmetric int4 (the nibble that means 0).
INT4_MIDPOINT = 8
#: The types of scales and zero points (float16 as GGUF's blocks hold them).
SCALE_TYPES = "float32 or float16"


def _check_data(data: tl.Tensor, bits: int, group_size: int | None) -> tuple[object, int, int]:
    """(M, K, group size) after checking the data, `bits` and the group (no group size: K)."""
    check_tensor(data, "dense_quantized data")
    if bits not in (4, 8):
        raise ValueError(f"dense_quantized: bits must be 4 or 8, got {bits!r}")
    if data.dtype != "float32" or len(data.shape) != 2:
        raise TypeError(f"dense_quantized: data must be 2-D float32, got {data.dtype} "
                        f"{tuple(data.shape)}")
    m, k = data.shape
    k = static_dim(k)
    if k is None:
        raise ValueError("dense_quantized: the reduction length K must be static")
    if bits == 4 and k % INT4_BLOCK:
        raise ValueError(f"dense_quantized: int4 needs K a multiple of {INT4_BLOCK}, got {k}")
    group_size = group_size or k
    if group_size < 1 or k % group_size or (bits == 4 and group_size % INT4_BLOCK):
        raise ValueError(f"dense_quantized: group_size {group_size} must divide K={k}"
                         + (f" and be a multiple of {INT4_BLOCK}" if bits == 4 else ""))
    return m, k, group_size


def _expect(name: str, t: tl.Tensor | None, shape: tuple, dtype: str) -> None:
    """A ValueError unless `t` (if given) is a tensor of static `shape` and of `dtype` (one of
    its words: "float32 or float16")."""
    if t is None:
        return
    check_tensor(t, f"dense_quantized {name}")
    if tuple(static_dim(d) for d in t.shape) != shape or t.dtype not in dtype.split(" or "):
        raise ValueError(f"dense_quantized: {name} must be {dtype} {shape}, got {t.dtype} "
                         f"{tuple(t.shape)}")


def _weight_shape(bits: int, k: int) -> tuple[int, ...]:
    """A channel's packed weight: K int8, or K / 32 blocks of 16 bytes."""
    return (k,) if bits == 8 else (k // INT4_BLOCK, INT4_BLOCK // 2)


def _check(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor, zero: tl.Tensor | None,
           bits: int, group_size: int | None) -> tuple[object, int, int, int]:
    """(M, K, N, group size) after checking the operands in the layout of the module
    docstring."""
    m, k, group_size = _check_data(data, bits, group_size)
    check_tensor(weight, "dense_quantized weight")
    n = static_dim(weight.shape[0])
    _expect("weight", weight, (n, *_weight_shape(bits, k)), "int8" if bits == 8 else "uint8")
    _expect("scale", scale, (n, k // group_size), SCALE_TYPES)
    _expect("zero", zero, (n, k // group_size), SCALE_TYPES)
    if zero is not None and bits == 8:
        raise ValueError("dense_quantized: int8 weights are symmetric (no zero points)")
    return m, k, n, group_size


def _check_panels(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor, zero: tl.Tensor | None,
                  bits: int, group_size: int | None, channels: int
                  ) -> tuple[object, int, int, int]:
    """(M, K, channels per panel, group size) after checking the operands in the panel layout
    of `quantized_panels`."""
    m, k, group_size = _check_data(data, bits, group_size)
    rows = static_dim(weight.shape[-1])
    blocks = -(-channels // rows) if isinstance(channels, int) and channels > 0 else None
    if blocks is None:
        raise ValueError(f"dense_quantized: channels must be a positive int, got {channels!r}")
    _expect("weight panels", weight, (blocks, *_weight_shape(bits, k), rows),
            "int8" if bits == 8 else "uint8")
    _expect("scale panels", scale, (blocks, k // group_size, rows), SCALE_TYPES)
    _expect("zero panels", zero, (blocks, k // group_size, rows), SCALE_TYPES)
    if zero is not None and bits == 8:
        raise ValueError("dense_quantized: int8 weights are symmetric (no zero points)")
    return m, k, rows, group_size


def dense_quantized(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor,
                    zero: tl.Tensor | None = None, bits: int = 8,
                    group_size: int | None = None) -> tl.Tensor:
    """data @ dequantize(weight).T, float32 (M, N), the weight in the layout of the module
    docstring, packed into panels inside the computation (stages a graph runs once for a
    constant weight).

    Raises:
        TypeError: data is not 2-D float32.
        ValueError: shapes or dtypes that do not fit `bits` and `group_size` (K must be a
            multiple of the group, and int4 groups a multiple of 32).
    """
    _, _, n, group_size = _check(data, weight, scale, zero, bits, group_size)
    rows = panel_rows(n)
    return dense_quantized_panels(
        data, pack_weight_panels(weight, bits, rows), pack_group_panels(scale, rows, "scale"),
        None if zero is None else pack_group_panels(zero, rows, "zero"), bits, group_size, n)


def dense_quantized_panels(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor,
                           zero: tl.Tensor | None = None, bits: int = 8,
                           group_size: int | None = None,
                           channels: int | None = None) -> tl.Tensor:
    """`dense_quantized` of a weight already in panels (`quantized_panels`: its weight, scales
    and zero points), of `channels` output channels (default: whole panels).

    Raises:
        TypeError: data is not 2-D float32.
        ValueError: shapes or dtypes that do not fit the panels, `bits` and `group_size`.
    """
    check_tensor(weight, "dense_quantized weight panels")
    padded = static_dim(weight.shape[0]) * static_dim(weight.shape[-1])
    m, k, rows, group_size = _check_panels(data, weight, scale, zero, bits, group_size,
                                           channels or padded)
    channels = channels or padded
    attrs = {"panel_rows": rows}
    if bits == 8 and group_size == k:
        # One scale per output channel: it multiplies the sum, not each product.
        k_axis = tl.reduce_axis((0, k), name="k")
        sums = tl.compute((m, padded), lambda i, j: tl.sum(
            data[i, k_axis] * weight[j // rows, k_axis, j % rows].astype("float32"),
            axis=k_axis), name="dense_quantized", tag=TAG, attrs=attrs)
        return tl.compute((m, channels), lambda i, j: sums[i, j] * scale[
            j // rows, 0, j % rows].astype("float32"), name="dense_quantized_scaled",
            tag="elemwise")
    sums = _group_sums(data, weight, bits, group_size)
    offset = None
    if bits == 4:
        data_sums = _data_group_sums(data, group_size)

        def offset(i, g, b, r):
            mid = zero[b, g, r].astype("float32") if zero is not None else \
                tl.const(INT4_MIDPOINT, "float32")
            return mid * data_sums[i, g]

    g = tl.reduce_axis((0, k // group_size), name="g")

    def product(i, j):
        b, r = j // rows, j % rows
        value = sums[i, g, j] if offset is None else sums[i, g, j] - offset(i, g, b, r)
        return tl.sum(scale[b, g, r].astype("float32") * value, axis=g)

    out = tl.compute((m, padded), product, name="dense_quantized", tag=TAG, attrs=attrs)
    if padded == channels:
        return out
    return tl.compute((m, channels), lambda i, j: out[i, j], name="dense_quantized_channels",
                      tag="injective")


def _group_sums(data: tl.Tensor, panels: tl.Tensor, bits: int, group_size: int) -> tl.Tensor:
    """(M, groups, channels): each group's sum of data times the weight's integers, which
    the product scales (module docstring). int4 sums over (block, byte, nibble), the nibble
    innermost: the two products of a byte are multiply-adds in a row."""
    m, k = data.shape
    rows = static_dim(panels.shape[-1])
    shape = (m, k // group_size, static_dim(panels.shape[0]) * rows)
    if bits == 8:
        t = tl.reduce_axis((0, group_size), name="t")
        return tl.compute(shape, lambda i, g, j: tl.sum(
            data[i, g * group_size + t]
            * panels[j // rows, g * group_size + t, j % rows].astype("float32"), axis=t),
            name="dense_quantized_groups", tag=GROUPS_TAG)
    blocks = group_size // INT4_BLOCK
    half = INT4_BLOCK // 2
    q = tl.reduce_axis((0, blocks), name="q")
    t = tl.reduce_axis((0, half), name="t")
    h = tl.reduce_axis((0, 2), name="h")

    def group(i, g, j):
        byte = panels[j // rows, g * blocks + q, t, j % rows].astype("int32")
        nibble = tl.if_then_else(h == 0, byte & 15, byte // 16)
        position = g * group_size + q * INT4_BLOCK + h * half + t
        return tl.sum(data[i, position] * nibble.astype("float32"), axis=[q, t, h])

    return tl.compute(shape, group, name="dense_quantized_groups", tag=GROUPS_TAG)


def _data_group_sums(data: tl.Tensor, group_size: int) -> tl.Tensor:
    """(M, groups): the sum of each group of a row of data (what a zero point multiplies)."""
    m, k = data.shape
    t = tl.reduce_axis((0, group_size), name="t")
    return tl.compute((m, k // group_size), lambda i, g: tl.sum(
        data[i, g * group_size + t], axis=t), name="dense_quantized_data_sums", tag=DATA_SUMS_TAG)


def dequantize_panels(weight: tl.Tensor, scale: tl.Tensor, zero: tl.Tensor | None, bits: int,
                      group_size: int, channels: int) -> tl.Tensor:
    """The float32 (channels, K) weight that the panels stand for (tag "injective": a GEMM that
    reads it computes it in its panel packing, never storing it whole)."""
    rows = static_dim(weight.shape[-1])
    k = static_dim(weight.shape[1]) * (1 if bits == 8 else INT4_BLOCK)

    def value(j, kk):
        b, r, g = j // rows, j % rows, kk // group_size
        step = scale[b, g, r].astype("float32")
        if bits == 8:
            return weight[b, kk, r].astype("float32") * step
        byte = weight[b, kk // INT4_BLOCK, kk % (INT4_BLOCK // 2), r].astype("int32")
        nibble = tl.if_then_else(kk % INT4_BLOCK < INT4_BLOCK // 2, byte & 15, byte // 16)
        mid = zero[b, g, r].astype("float32") if zero is not None else \
            tl.const(INT4_MIDPOINT, "float32")
        return (nibble.astype("float32") - mid) * step

    return tl.compute((channels, k), value, name="dequantized_weight", tag="injective")


def dense_dequantized(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor,
                      zero: tl.Tensor | None = None, bits: int = 8,
                      group_size: int | None = None, channels: int | None = None) -> tl.Tensor:
    """`dense_quantized_panels`' product as a float GEMM (`nn.dense`, tag "dense") whose weight
    panels are dequantized as they are packed: for many rows of data (a prompt), where
    dequantizing in the inner loop would repeat the work for every row."""
    check_tensor(weight, "dense_quantized weight panels")
    channels = channels or static_dim(weight.shape[0]) * static_dim(weight.shape[-1])
    *_, group_size = _check_panels(data, weight, scale, zero, bits, group_size, channels)
    return dense(data, dequantize_panels(weight, scale, zero, bits, group_size, channels))
