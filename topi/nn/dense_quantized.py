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

`dense_dequantized` is the same product for many rows of data (a prompt): a float GEMM whose
weight panels are dequantized as they are packed, once per call instead of once per row.

`scale` (and `zero`) are float32 (N, K // group_size). The reduction runs over (group, position
in the group), so that the group's scale is one value per run of the inner loop; a single
group (int8 per output channel) scales the sum instead, in an elementwise stage after it. The
product stage is tagged `TAG`.
"""

from __future__ import annotations

import tensorlang as tl

from .dense import dense
from .utils import check_tensor, static_dim

TAG = "dense_quantized"
#: Elements per int4 block (two nibbles of 16 bytes).
INT4_BLOCK = 32
#: The zero point of symmetric int4 (the nibble that means 0).
INT4_MIDPOINT = 8


def _check(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor, zero: tl.Tensor | None,
           bits: int, group_size: int | None) -> tuple[object, int, int]:
    """(M, K, N) after checking the operands against each other (no group size: K)."""
    for name, t in (("data", data), ("weight", weight), ("scale", scale)):
        check_tensor(t, f"dense_quantized {name}")
    if bits not in (4, 8):
        raise ValueError(f"dense_quantized: bits must be 4 or 8, got {bits!r}")
    if data.dtype != "float32" or len(data.shape) != 2:
        raise TypeError(f"dense_quantized: data must be 2-D float32, got {data.dtype} "
                        f"{tuple(data.shape)}")
    m, k = data.shape
    k = static_dim(k)
    if k is None:
        raise ValueError("dense_quantized: the reduction length K must be static")
    n = static_dim(weight.shape[0])
    expected = ((n, k), "int8") if bits == 8 else ((n, k // INT4_BLOCK, INT4_BLOCK // 2), "uint8")
    if bits == 4 and k % INT4_BLOCK:
        raise ValueError(f"dense_quantized: int4 needs K a multiple of {INT4_BLOCK}, got {k}")
    if tuple(static_dim(d) for d in weight.shape) != expected[0] or weight.dtype != expected[1]:
        raise ValueError(f"dense_quantized: weight must be {expected[1]} {expected[0]} for "
                         f"bits={bits} and K={k}, got {weight.dtype} {tuple(weight.shape)}")
    group_size = group_size or k
    if group_size < 1 or k % group_size or (bits == 4 and group_size % INT4_BLOCK):
        raise ValueError(f"dense_quantized: group_size {group_size} must divide K={k}"
                         + (f" and be a multiple of {INT4_BLOCK}" if bits == 4 else ""))
    groups = (n, k // group_size)
    for name, t in (("scale", scale), ("zero", zero)):
        if t is not None and (tuple(static_dim(d) for d in t.shape) != groups
                              or t.dtype != "float32"):
            raise ValueError(f"dense_quantized: {name} must be float32 {groups}, got {t.dtype} "
                             f"{tuple(t.shape)}")
    if zero is not None and bits == 8:
        raise ValueError("dense_quantized: int8 weights are symmetric (no zero points)")
    return m, k, n


def dense_quantized(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor,
                    zero: tl.Tensor | None = None, bits: int = 8,
                    group_size: int | None = None) -> tl.Tensor:
    """data @ dequantize(weight).T, float32 (M, N); see the module docstring.

    Raises:
        TypeError: data is not 2-D float32.
        ValueError: shapes or dtypes that do not fit `bits` and `group_size` (K must be a
            multiple of the group, and int4 groups a multiple of 32).
    """
    m, k, n = _check(data, weight, scale, zero, bits, group_size)
    group_size = group_size or k
    groups = k // group_size
    if bits == 8 and groups == 1:
        # One scale per output channel: it multiplies the sum, not each product.
        k_axis = tl.reduce_axis((0, k), name="k")
        sums = tl.compute((m, n), lambda i, j: tl.sum(
            data[i, k_axis] * weight[j, k_axis].astype("float32"), axis=k_axis),
            name="dense_quantized", tag=TAG)
        return tl.compute((m, n), lambda i, j: sums[i, j] * scale[j, 0],
                          name="dense_quantized_scaled", tag="elemwise")
    g = tl.reduce_axis((0, groups), name="g")
    if bits == 8:
        t = tl.reduce_axis((0, group_size), name="t")

        def product(i, j):
            kk = g * group_size + t
            return tl.sum(data[i, kk] * weight[j, kk].astype("float32") * scale[j, g],
                          axis=[g, t])
    else:
        blocks = group_size // INT4_BLOCK
        half = INT4_BLOCK // 2
        b = tl.reduce_axis((0, blocks), name="b")
        t = tl.reduce_axis((0, half), name="t")

        def product(i, j):
            byte = weight[j, g * blocks + b, t].astype("int32")
            mid = zero[j, g] if zero is not None else tl.const(INT4_MIDPOINT, "float32")
            low = (byte & 15).astype("float32") - mid
            high = (byte // 16).astype("float32") - mid
            kk = g * group_size + b * INT4_BLOCK + t
            return tl.sum((data[i, kk] * low + data[i, kk + half] * high) * scale[j, g],
                          axis=[g, b, t])

    return tl.compute((m, n), product, name="dense_quantized", tag=TAG)


def dequantize_weight(weight: tl.Tensor, scale: tl.Tensor, zero: tl.Tensor | None = None,
                      bits: int = 8, group_size: int | None = None) -> tl.Tensor:
    """The float32 (N, K) weight that packed `weight` stands for (tag "injective": a GEMM that
    reads it computes it in its panel packing, never storing it whole)."""
    k = static_dim(weight.shape[1]) * (1 if bits == 8 else INT4_BLOCK)
    group_size = group_size or k

    def value(j, kk):
        g = kk // group_size
        if bits == 8:
            return weight[j, kk].astype("float32") * scale[j, g]
        byte = weight[j, kk // INT4_BLOCK, kk % (INT4_BLOCK // 2)].astype("int32")
        nibble = tl.if_then_else(kk % INT4_BLOCK < INT4_BLOCK // 2, byte & 15, byte // 16)
        mid = zero[j, g] if zero is not None else tl.const(INT4_MIDPOINT, "float32")
        return (nibble.astype("float32") - mid) * scale[j, g]

    return tl.compute((weight.shape[0], k), value, name="dequantized_weight", tag="injective")


def dense_dequantized(data: tl.Tensor, weight: tl.Tensor, scale: tl.Tensor,
                      zero: tl.Tensor | None = None, bits: int = 8,
                      group_size: int | None = None) -> tl.Tensor:
    """`dense_quantized`'s product as a float GEMM (`nn.dense`, tag "dense") whose weight panels
    are dequantized as they are packed: for many rows of data (a prompt), where dequantizing
    in the inner loop would repeat the work for every row."""
    _check(data, weight, scale, zero, bits, group_size)
    return dense(data, dequantize_weight(weight, scale, zero, bits, group_size))
