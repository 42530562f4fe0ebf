"""The graph ops of language models: `dense_quantized` and `dense_dequantized` (weight-only
quantized products for few and for many rows) and `rms_norm`, each with its topi compute, x86
schedule and numpy reference (the pattern of `topi/graph/ops.py`)."""

from __future__ import annotations

import numpy as np

from ... import x86
from ...nn.dense_quantized import dense_dequantized, dense_quantized_panels
from ...nn.rms_norm import rms_norm
from ...x86.dense_quantized import schedule_dense_quantized
from ..ops import OpPattern, register_op
from .packing import WeightPanels


def _dense_quantized(data, weight, scale, zero=None, bits=8, group_size=None, channels=None):
    return dense_quantized_panels(data, weight, scale, zero, bits, group_size, channels)


def _dense_quantized_reference(data: np.ndarray, weight: np.ndarray, scale: np.ndarray,
                               zero: np.ndarray | None = None, bits: int = 8,
                               group_size: int | None = None,
                               channels: int | None = None) -> np.ndarray:
    panels = WeightPanels(weight, scale, zero, bits, group_size or data.shape[1],
                          channels or weight.shape[0] * weight.shape[-1])
    return (data.astype(np.float64) @ panels.dequantize().T.astype(np.float64)).astype(np.float32)


def _dense_dequantized(data, weight, scale, zero=None, bits=8, group_size=None, channels=None):
    return dense_dequantized(data, weight, scale, zero, bits, group_size, channels)


#: data (M, K) float32 x weight panels, scale panels[, zero point panels] -> (M, channels)
#: float32: for a few rows (decode), the weight dequantized in the inner loop; for many, in a
#: GEMM's panel packing.
register_op("dense_quantized", _dense_quantized, schedule_dense_quantized, OpPattern.OUT_FUSABLE,
            reference=_dense_quantized_reference)
register_op("dense_dequantized", _dense_dequantized, x86.schedule_dense, OpPattern.OUT_FUSABLE,
            reference=_dense_quantized_reference)


def _rms_norm_reference(x: np.ndarray, weight: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
    squares = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True)
    return (x / np.sqrt(squares + epsilon) * weight).astype(x.dtype)


register_op("rms_norm", lambda x, weight, epsilon=1e-5: rms_norm(x, weight, epsilon),
            x86.schedule_reduce, OpPattern.REDUCTION, reference=_rms_norm_reference)

