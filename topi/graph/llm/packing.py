"""Weights in the packed forms of `topi.nn.dense_quantized`, from float32 or from GGUF blocks.

int8: (N, K) int8 and one scale per group of `group_size` along K (a whole row: per output
channel). int4: (N, K // 32, 16) uint8, two nibbles a byte in GGUF Q4_0's block order, scales per
group and, asymmetric, a zero point per group (a float holding an integer 0..15); symmetric int4
centres on 8. Scales of groups within a row are float16 as GGUF's are (float32 where a scale is
no normal float16), per-channel scales float32; zero points take the scales' type. GGUF's Q8_0
and Q4_0 blocks are these forms with group 32: their bytes are reinterpreted, nothing is
re-quantized.

`WeightPanels` is a `PackedWeight` rearranged into the panels of output channels that the
kernels read (`topi.nn.quantized_panels`): what the graphs hold, one copy for every module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tensorlang as tl

from ...nn.dense_quantized import INT4_BLOCK, INT4_MIDPOINT
from ...nn.quantized_panels import panel_rows
from ..aligned import aligned_copy

#: The GGUF block size of Q8_0 and Q4_0 (elements per f16 scale).
GGUF_BLOCK = 32
#: The range of normal float16 numbers (scales outside it are stored as float32).
F16_SMALLEST, F16_LARGEST = float(np.finfo(np.float16).tiny), float(np.finfo(np.float16).max)
#: Architectures whose code converts float16 by calls into the compiler's runtime library
#: (RVV without Zvfh; GCC's libgcc for riscv64 lacks those functions, so a library exported
#: with them would not load): their panels hold float32 scales.
HALF_BY_LIBRARY = ("riscv64",)


@dataclass(frozen=True)
class PackedWeight:
    """A quantized (N, K) weight: the packed integers, scales and zero points of its groups."""

    weight: np.ndarray
    scale: np.ndarray
    zero: np.ndarray | None
    bits: int
    group_size: int

    def dequantize(self) -> np.ndarray:
        """The float32 (N, K) weight these stand for (the reference the kernels match)."""
        scale = self.scale.astype(np.float32)
        if self.bits == 8:
            values = self.weight.astype(np.float32)
            zero = np.zeros_like(scale)
        else:
            values = unpack_int4(self.weight)
            zero = self.zero.astype(np.float32) if self.zero is not None else \
                np.full_like(scale, INT4_MIDPOINT)
        wide = np.repeat(scale, self.group_size, axis=1)
        return (values - np.repeat(zero, self.group_size, axis=1)) * wide

    def panels(self, rows: int | None = None) -> WeightPanels:
        """This weight in panels of `rows` output channels (default: `panel_rows` of the
        current target), channels past N zero; float16 scales become float32 for targets that
        convert half precision through library calls (`HALF_BY_LIBRARY`)."""
        n = self.weight.shape[0]
        rows = rows or panel_rows(n)
        blocks = -(-n // rows)
        widen = tl.Target.current().arch in HALF_BY_LIBRARY

        def panel(values: np.ndarray | None) -> np.ndarray | None:
            """(N, ...) -> (blocks, ..., rows)."""
            if values is None:
                return None
            if widen and values.dtype == np.float16:
                values = values.astype(np.float32)
            padded = np.zeros((blocks * rows, *values.shape[1:]), values.dtype)
            padded[:n] = values
            grouped = padded.reshape(blocks, rows, *values.shape[1:])
            return aligned_copy(np.moveaxis(grouped, 1, -1))

        return WeightPanels(panel(self.weight), panel(self.scale), panel(self.zero), self.bits,
                            self.group_size, n)


@dataclass(frozen=True)
class WeightPanels:
    """A `PackedWeight` in panels of output channels: `weight` (blocks, K, rows) int8 or
    (blocks, K // 32, 16, rows) uint8, `scale` and `zero` (blocks, groups, rows), of which the
    first `channels` channels are the weight's."""

    weight: np.ndarray
    scale: np.ndarray
    zero: np.ndarray | None
    bits: int
    group_size: int
    channels: int

    def unpanel(self) -> PackedWeight:
        """The weight in its (N, ...) form."""

        def rows(values: np.ndarray | None) -> np.ndarray | None:
            if values is None:
                return None
            flat = np.moveaxis(values, -1, 1)
            return flat.reshape(-1, *flat.shape[2:])[:self.channels]

        return PackedWeight(rows(self.weight), rows(self.scale), rows(self.zero), self.bits,
                            self.group_size)

    def dequantize(self) -> np.ndarray:
        """The float32 (channels, K) weight these stand for (the reference the kernels match)."""
        return self.unpanel().dequantize()


def _groups(weight: np.ndarray, group_size: int, bits: int) -> np.ndarray:
    """`weight` (N, K) as (N, K / group_size, group_size), or a ValueError."""
    if weight.ndim != 2:
        raise ValueError(f"quantize: weights must be 2-D (N, K), got shape {weight.shape}")
    n, k = weight.shape
    if group_size < 1 or k % group_size or (bits == 4 and group_size % INT4_BLOCK):
        raise ValueError(f"quantize: group_size {group_size} must divide K={k}"
                         + (f" and be a multiple of {INT4_BLOCK}" if bits == 4 else ""))
    return weight.astype(np.float32).reshape(n, k // group_size, group_size)


def _stored_scales(scale: np.ndarray, compact: bool) -> np.ndarray:
    """The scales as stored: with `compact`, float16 (as GGUF's blocks hold them: a group of 32
    int4 weights then takes 18 bytes, not 20) where every scale is a normal float16, rounded up
    so that no value of a group falls outside the integer range it was given; else float32."""
    scale = scale.astype(np.float32)
    if not compact or not np.all((scale >= F16_SMALLEST) & (scale <= F16_LARGEST)):
        return scale
    half = scale.astype(np.float16)
    return np.where(half.astype(np.float32) < scale, np.nextafter(half, np.float16(np.inf)),
                    half)


def quantize_int8(weight: np.ndarray, group_size: int | None = None) -> PackedWeight:
    """Symmetric int8 (-127..127), one scale per group (default: per output channel; float16
    scales for groups of a row, `_stored_scales`)."""
    group_size = group_size or weight.shape[1]
    groups = _groups(weight, group_size, 8)
    peak = np.abs(groups).max(axis=2)
    scale = _stored_scales(np.where(peak > 0, peak / 127, 1), group_size < weight.shape[1])
    q = np.clip(np.rint(groups / scale[..., None].astype(np.float32)), -127, 127)
    return PackedWeight(q.astype(np.int8).reshape(weight.shape), scale, None, 8, group_size)


def quantize_int4(weight: np.ndarray, group_size: int = 32,
                  zero_points: bool = False) -> PackedWeight:
    """int4 with a scale per group (float16 where they fit, `_stored_scales`): symmetric (-8..7
    around 8) or with a zero point per group (the group's range over 0..15, zero exact)."""
    groups = _groups(weight, group_size, 4)
    if zero_points:
        low = np.minimum(groups.min(axis=2), 0)
        high = np.maximum(groups.max(axis=2), 0)
        scale = _stored_scales(np.where(high > low, (high - low) / 15, 1), True)
        wide = scale.astype(np.float32)
        zero = np.clip(np.rint(-low / wide), 0, 15).astype(scale.dtype)
        q = np.clip(np.rint(groups / wide[..., None]) + zero[..., None], 0, 15)
    else:
        peak = np.abs(groups).max(axis=2)
        scale = _stored_scales(np.where(peak > 0, peak / 7, 1), True)
        zero = None
        q = np.clip(np.rint(groups / scale[..., None].astype(np.float32)), -8, 7) + INT4_MIDPOINT
    packed = pack_int4(q.reshape(weight.shape).astype(np.uint8))
    return PackedWeight(packed, scale, zero, 4, group_size)


def pack_int4(values: np.ndarray) -> np.ndarray:
    """(N, K) integers 0..15 -> (N, K // 32, 16) bytes in Q4_0's order (module docstring)."""
    n, k = values.shape
    blocks = values.reshape(n, k // INT4_BLOCK, 2, INT4_BLOCK // 2).astype(np.uint8)
    return (blocks[:, :, 0] | (blocks[:, :, 1] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """(N, K // 32, 16) bytes -> (N, K) float32 nibbles 0..15."""
    n = packed.shape[0]
    return np.concatenate([packed & 15, packed >> 4], axis=2).reshape(n, -1).astype(np.float32)


def _gguf_blocks(raw: np.ndarray, n: int, k: int, block_bytes: int) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """(scales (N, K // 32) float16, payload bytes (N, K // 32, block_bytes - 2)) of GGUF blocks
    that start with an f16 scale."""
    if k % GGUF_BLOCK:
        raise ValueError(f"GGUF block tensor: K={k} is not a multiple of {GGUF_BLOCK}")
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(n, k // GGUF_BLOCK, block_bytes)
    scale = blocks[..., :2].copy().view(np.float16)[..., 0]
    return scale, np.ascontiguousarray(blocks[..., 2:])


def from_q8_0(raw: np.ndarray, n: int, k: int) -> PackedWeight:
    """GGUF Q8_0 blocks (an f16 scale and 32 int8 each) of an (N, K) weight."""
    scale, payload = _gguf_blocks(raw, n, k, 2 + GGUF_BLOCK)
    return PackedWeight(payload.view(np.int8).reshape(n, k), scale, None, 8, GGUF_BLOCK)


def from_q4_0(raw: np.ndarray, n: int, k: int) -> PackedWeight:
    """GGUF Q4_0 blocks (an f16 scale and 16 bytes of nibbles each, value (q - 8) * d)."""
    scale, payload = _gguf_blocks(raw, n, k, 2 + GGUF_BLOCK // 2)
    return PackedWeight(payload, scale, None, 4, GGUF_BLOCK)
