"""The graph op of weight-only quantized products: `dense_quantized`, its topi compute, x86
schedule and numpy reference (the pattern of `topi/graph/ops.py`)."""

from __future__ import annotations

import numpy as np

from ...nn.dense_quantized import dense_quantized
from ...x86.dense_quantized import schedule_dense_quantized
from ..ops import OpPattern, register_op
from .packing import PackedWeight


def _dense_quantized(data, weight, scale, zero=None, bits=8, group_size=None):
    return dense_quantized(data, weight, scale, zero, bits, group_size)


def _dense_quantized_reference(data: np.ndarray, weight: np.ndarray, scale: np.ndarray,
                               zero: np.ndarray | None = None, bits: int = 8,
                               group_size: int | None = None) -> np.ndarray:
    packed = PackedWeight(weight, scale, zero, bits, group_size or data.shape[1])
    return (data.astype(np.float64) @ packed.dequantize().T.astype(np.float64)).astype(np.float32)


#: data (M, K) float32 x packed weight, scales[, zero points] -> (M, N) float32.
register_op("dense_quantized", _dense_quantized, schedule_dense_quantized, OpPattern.OUT_FUSABLE,
            reference=_dense_quantized_reference)
