"""Quantization ops (ONNX's QuantizeLinear / DequantizeLinear semantics, TVM's qnn names).

    quantize:   q = saturate(round_half_even(x / scale) + zero_point)
    dequantize: x = (q - zero_point) * scale
    requantize: q' = saturate(round_half_even((q - zp_in) * (scale_in / scale_out)) + zp_out)

Scales and zero points are Python numbers or tensors: a tensor of one element (or 0-d) applies
per tensor, a 1-D tensor of the size of `axis` per channel along `axis` (ONNX's default axis 1).
Arithmetic is in float32 as onnxruntime's kernels do. The stages are tagged "elemwise", so they
fuse into the stages around them (a requantize into an int8 kernel's epilogue).
"""

from __future__ import annotations

from typing import Union

import tensorlang as tl
from tensorlang.expr import Expr

from .utils import check_tensor

Param = Union[float, int, tl.Tensor]

_QUANTIZED = ("uint8", "int8", "int32", "uint16", "int16")


def _param(p: Param, dtype: str, x: tl.Tensor, axis: int, what: str):
    """A function of the output index giving the parameter's value (as `dtype`)."""
    if not isinstance(p, tl.Tensor):
        value = tl.const(p, dtype)
        return lambda index: value
    if p.ndim == 0:
        return lambda index: p[()].astype(dtype)
    count = 1
    for d in p.shape:
        count *= int(d)
    if count == 1:
        return lambda index: p[(0,) * p.ndim].astype(dtype)
    if p.ndim != 1:
        raise ValueError(f"{what}: a per-channel parameter is 1-D, got {p.ndim} dimensions")
    if int(p.shape[0]) != int(x.shape[axis]):
        raise ValueError(f"{what}: {p.shape[0]} values for axis {axis} of size {x.shape[axis]}")
    return lambda index: p[index[axis]].astype(dtype)


def _axis(x: tl.Tensor, axis: int, what: str) -> int:
    if x.ndim == 0:
        return 0
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{what}: axis {axis} out of range for {x.ndim} dimensions")
    return axis % x.ndim


def _check(x: tl.Tensor, axis: int, out_dtype: str, what: str) -> int:
    """Check the arguments of an op with a quantized output; the axis, made non-negative."""
    check_tensor(x, f"{what}: x")
    if out_dtype not in _QUANTIZED:
        raise ValueError(f"{what}: out_dtype must be one of {_QUANTIZED}, got {out_dtype!r}")
    return _axis(x, axis, what)


def _round_half_even(v: Expr) -> Expr:
    """v rounded to the nearest integer, halves to the even one, with arithmetic only: a select
    whose sides read memory evaluates lane by lane (only the chosen side may run), which made
    a quantize 10x slower than its loads."""
    below = tl.floor(v)
    frac = v - below  # exact
    half = tl.const(0.5, v.dtype)
    odd = below - tl.floor(below * half) * tl.const(2.0, v.dtype)  # 1.0 when below is odd
    up = (frac > half).astype(v.dtype) + (frac == half).astype(v.dtype) * odd
    return below + up


#: 1.5 * 2^23: adding it to a float32 of magnitude below 2^22 rounds the sum to an integer,
#: halves to even (the FPU's rounding), and the sum's bits are then those of 1.5 * 2^23 plus
#: that integer.
_MAGIC = 1.5 * 2.0 ** 23
_MAGIC_BITS = 0x4B400000


def _to_quantized(v: Expr, zero: Expr, dtype: str) -> Expr:
    """saturate(round_half_even(v) + zero) as `dtype`, for float32 `v` and a float32 zero
    point. For 8- and 16-bit types, v is clamped to the type's range less the zero point first
    (integer bounds, which the rounding keeps) and rounded by adding `_MAGIC`, whose bits give
    the integer: five operations where `_round_half_even` and a clamp after it take fourteen,
    which were most of an int8 convolution's epilogue. Wider types take that exact path."""
    info = tl.const(0, dtype).dtype
    lo = tl.const(float(info.min_value()), "float32")
    hi = tl.const(float(info.max_value()), "float32")
    if info.bits > 16:
        return tl.minimum(tl.maximum(_round_half_even(v) + zero, lo), hi).astype(dtype)
    clamped = tl.minimum(tl.maximum(v, lo - zero), hi - zero)
    bits = tl.reinterpret(clamped + tl.const(_MAGIC, "float32"), "int32")
    return (bits - (tl.const(_MAGIC_BITS, "int32") - zero.astype("int32"))).astype(dtype)


def quantize(x: tl.Tensor, scale: Param, zero_point: Param = 0, axis: int = 1,
             out_dtype: str = "uint8") -> tl.Tensor:
    """float -> `out_dtype`: saturate(round_half_even(x / scale) + zero_point)."""
    axis = _check(x, axis, out_dtype, "quantize")
    s = _param(scale, "float32", x, axis, "quantize: scale")
    z = _param(zero_point, "float32", x, axis, "quantize: zero_point")

    def f(*index):
        return _to_quantized(x[index].astype("float32") / s(index), z(index), out_dtype)

    return tl.compute(x.shape, f, name="quantize", tag="elemwise")


def dequantize(x: tl.Tensor, scale: Param, zero_point: Param = 0, axis: int = 1,
               out_dtype: str = "float32") -> tl.Tensor:
    """quantized -> float: (x - zero_point) * scale (the difference taken in int32)."""
    check_tensor(x, "dequantize: x")
    axis = _axis(x, axis, "dequantize")
    s = _param(scale, "float32", x, axis, "dequantize: scale")
    z = _param(zero_point, "int32", x, axis, "dequantize: zero_point")
    return tl.compute(
        x.shape, lambda *index: ((x[index].astype("int32") - z(index)).astype("float32")
                                 * s(index)).astype(out_dtype),
        name="dequantize", tag="elemwise")


def requantize(x: tl.Tensor, input_scale: Param, input_zero_point: Param, output_scale: Param,
               output_zero_point: Param = 0, axis: int = 1, out_dtype: str = "int8"
               ) -> tl.Tensor:
    """One quantization to another (typically int32 accumulators to int8/uint8):
    saturate(round_half_even((x - zp_in) * (scale_in / scale_out)) + zp_out). Either scale
    may be per channel."""
    axis = _check(x, axis, out_dtype, "requantize")
    s_in = _param(input_scale, "float32", x, axis, "requantize: input_scale")
    z_in = _param(input_zero_point, "int32", x, axis, "requantize: input_zero_point")
    s_out = _param(output_scale, "float32", x, axis, "requantize: output_scale")
    z_out = _param(output_zero_point, "float32", x, axis, "requantize: output_zero_point")

    def f(*index):
        centred = (x[index].astype("int32") - z_in(index)).astype("float64")
        # The float32 product, rounded once (exact in float64, then to float32), as
        # onnxruntime computes it: a product contracted into the rounding's additions (fma)
        # would round ties the other way.
        ratio = (s_in(index) / s_out(index)).astype("float64")
        return _to_quantized((centred * ratio).astype("float32"), z_out(index), out_dtype)

    return tl.compute(x.shape, f, name="requantize", tag="elemwise")
