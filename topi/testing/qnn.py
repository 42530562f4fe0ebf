"""numpy references of topi.nn.qnn (ONNX QuantizeLinear / DequantizeLinear semantics)."""

from __future__ import annotations

import numpy as np


def _along(p, x: np.ndarray, axis: int) -> np.ndarray:
    p = np.asarray(p)
    if p.size == 1 or x.ndim == 0:
        return p.reshape(())
    shape = [1] * x.ndim
    shape[axis] = -1
    return p.reshape(shape)


def quantize_python(x, scale, zero_point=0, axis=1, out_dtype="uint8") -> np.ndarray:
    """saturate(round_half_even(x / scale) + zero_point), in float32."""
    info = np.iinfo(out_dtype)
    s = _along(scale, x, axis).astype(np.float32)
    z = _along(zero_point, x, axis).astype(np.float32)
    v = np.rint(x.astype(np.float32) / s) + z
    return np.clip(v, info.min, info.max).astype(out_dtype)


def dequantize_python(x, scale, zero_point=0, axis=1) -> np.ndarray:
    """(x - zero_point) * scale in float32."""
    s = _along(scale, x, axis).astype(np.float32)
    z = _along(zero_point, x, axis).astype(np.int32)
    return ((x.astype(np.int32) - z).astype(np.float32) * s).astype(np.float32)


def requantize_python(x, input_scale, input_zero_point, output_scale, output_zero_point=0,
                      axis=1, out_dtype="int8") -> np.ndarray:
    """saturate(round_half_even((x - zp_in) * (scale_in / scale_out)) + zp_out), float32."""
    info = np.iinfo(out_dtype)
    ratio = (_along(input_scale, x, axis).astype(np.float32)
             / _along(output_scale, x, axis).astype(np.float32))
    centred = (x.astype(np.int32) - _along(input_zero_point, x, axis).astype(np.int32))
    v = np.rint(centred.astype(np.float32) * ratio) + _along(output_zero_point, x, axis)
    return np.clip(v, info.min, info.max).astype(out_dtype)
