"""The graph ops of language models: `dense_quantized` and `dense_dequantized` (weight-only
quantized products for few and for many rows), `rms_norm` and `cached_attention` (a decode
step's attention over its KV cache), each with its topi compute, x86
schedule and numpy reference (the pattern of `topi/graph/ops.py`)."""

from __future__ import annotations

import numpy as np

from ... import x86
from ...nn.cached_attention import cached_attention
from ...nn.dense_quantized import dense_dequantized, dense_quantized_panels
from ...nn.rms_norm import rms_norm
from ...x86.cached_attention import schedule_cached_attention
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



def _cached_attention_reference(q: np.ndarray, keys: np.ndarray, values: np.ndarray,
                                new_keys: np.ndarray, new_values: np.ndarray, mask: np.ndarray,
                                new_mask: np.ndarray, scale: float = 1.0) -> np.ndarray:
    tokens = new_keys.shape[1]
    token_of_row = np.arange(q.shape[1]) % tokens
    q64 = q.astype(np.float64)
    scores = np.concatenate([q64 @ keys.transpose(0, 2, 1) * scale + mask[token_of_row],
                             q64 @ new_keys.transpose(0, 2, 1) * scale +
                             new_mask[token_of_row]], axis=2)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    return (weights @ np.concatenate([values, new_values], axis=1)).astype(np.float32)


#: q rows (heads, rows, dim), the cache's keys and values (heads, cached, dim), the new ones
#: (heads, tokens, dim), masks (tokens, cached) and (tokens, tokens) -> (heads, rows, dim): a
#: decode step's attention in one kernel.
register_op("cached_attention",
            lambda q, keys, values, new_keys, new_values, mask, new_mask, scale=1.0:
            cached_attention(q, keys, values, new_keys, new_values, mask, new_mask, scale),
            schedule_cached_attention, OpPattern.OPAQUE, reference=_cached_attention_reference)
