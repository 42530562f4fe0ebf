"""Graph ops of quantization: quantize, dequantize, requantize, the int8 dense and
convolutions (NCHW, and NCHW[x]c in and out for models whose activations stay blocked), each
registered once with its topi compute, x86 schedule and numpy reference (the pattern of
`ops.py`); depthwise convolutions have int8 forms of their own (channels in the lanes). Scales and zero points are inputs (graph constants): one element per tensor, or one
per channel along `axis`."""

from __future__ import annotations

import numpy as np

import tensorlang as tl

from .. import nn, x86
from ..nn.conv2d_int8 import (
    conv2d_NCHWc_bf16,
    conv2d_NCHWc_int8,
    conv2d_nchw_bf16,
    depthwise_conv2d_NCHWc_int8,
    depthwise_conv2d_nchw_int8,
)
from ..nn.dense_int8 import int8_lanes
from ..testing import qnn as ref
from .ops import OpPattern, register_op

P = OpPattern


def _quantize(x, scale, zero_point, axis=1, out_dtype="uint8"):
    return nn.qnn.quantize(x, scale, zero_point, axis, out_dtype)


def _dequantize(x, scale, zero_point, axis=1):
    return nn.qnn.dequantize(x, scale, zero_point, axis)


def _requantize(x, input_scale, input_zero_point, output_scale, output_zero_point, axis=1,
                out_dtype="int8"):
    return nn.qnn.requantize(x, input_scale, input_zero_point, output_scale, output_zero_point,
                             axis, out_dtype)


def _dense_int8_reference(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    return (data.astype(np.int64) @ weight.astype(np.int64).T).astype(np.int32)


def _dequantize_add(x, q, scale, zero_point, axis=1):
    dq = nn.qnn.dequantize(q, scale, zero_point, axis)
    return tl.compute(x.shape, lambda *i: x[i] + dq[i], name="dequantize_add", tag="elemwise")


def _dequantize_add_reference(x, q, scale, zero_point, axis=1) -> np.ndarray:
    return (x + ref.dequantize_python(q, scale, zero_point, axis)).astype(x.dtype)


register_op("quantize", _quantize, x86.schedule_injective, P.ELEMWISE,
            reference=ref.quantize_python)
register_op("dequantize", _dequantize, x86.schedule_injective, P.ELEMWISE,
            reference=ref.dequantize_python)
register_op("requantize", _requantize, x86.schedule_injective, P.ELEMWISE,
            reference=ref.requantize_python)
#: x + dequantize(q): a residual add reading its 8-bit shortcut (passes.quantize_ops).
register_op("dequantize_add", _dequantize_add, x86.schedule_injective, P.ELEMWISE,
            reference=_dequantize_add_reference)
def _conv2d_int8(data, kernel, stride=1, padding=0, dilation=1, data_zero_point=0):
    return nn.conv2d_nchw_int8(data, kernel, stride, padding, dilation, data_zero_point)


def _unblocked(data: np.ndarray) -> np.ndarray:
    """NCHW[x]c data back in NCHW (NCHW data as it is)."""
    if data.ndim == 4:
        return data
    n, blocks, h, w, block = data.shape
    return data.transpose(0, 1, 4, 2, 3).reshape(n, blocks * block, h, w)


def _conv2d_int8_reference(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0,
                           dilation=1, data_zero_point=0) -> np.ndarray:
    """NCHW, or NCHW[x]c data (int8_layout's input to an NCHW output) -> int32 NCHW."""
    from ..testing import conv2d_nchw_python

    centred = _unblocked(data).astype(np.float64) - data_zero_point
    out = conv2d_nchw_python(centred, kernel.astype(np.float64), stride, padding, dilation)
    return np.rint(out).astype(np.int32)


register_op("conv2d_int8", _conv2d_int8, x86.schedule_conv2d_nchw_int8, P.OUT_FUSABLE,
            tasks={"conv2d_NCHWc_int8": "conv2d_int8.x86"}, reference=_conv2d_int8_reference)
def _depthwise_int8(data, kernel, stride=1, padding=0, dilation=1, data_zero_point=0):
    return depthwise_conv2d_nchw_int8(data, kernel, stride, padding, dilation, data_zero_point)


def _depthwise_int8_reference(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0,
                              dilation=1, data_zero_point=0) -> np.ndarray:
    from ..testing import depthwise_conv2d_nchw_python

    centred = data.astype(np.float64) - data_zero_point
    out = depthwise_conv2d_nchw_python(centred, kernel.astype(np.float64), stride, padding,
                                       dilation)
    return np.rint(out).astype(np.int32)


register_op("depthwise_conv2d_int8", _depthwise_int8, x86.schedule_conv2d_nchw_int8,
            P.OUT_FUSABLE, tasks={"depthwise_conv2d_NCHWc_int8": "depthwise_conv2d_int8.x86"},
            reference=_depthwise_int8_reference)


def _blocked_int8_reference(nchw_reference):
    """The reference of an NCHW[x]c int8 op: `nchw_reference` on the blocked data (returned
    to NCHW), its output in blocks of `out_block`."""

    def reference(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0, dilation=1,
                  data_zero_point=0, out_block=None) -> np.ndarray:
        out = nchw_reference(_unblocked(data), kernel, stride, padding, dilation,
                             data_zero_point)
        n, k, oh, ow = out.shape
        lanes = out_block or int8_lanes()
        out = np.pad(out, ((0, 0), (0, -k % lanes), (0, 0), (0, 0)))
        return np.ascontiguousarray(out.reshape(n, -1, lanes, oh, ow).transpose(0, 1, 3, 4, 2))

    return reference


register_op("conv2d_NCHWc_int8", lambda data, kernel, stride=1, padding=0, dilation=1,
            data_zero_point=0, out_block=None: conv2d_NCHWc_int8(
                data, kernel, stride, padding, dilation, data_zero_point, out_block),
            x86.schedule_conv2d_nchw_int8, P.OUT_FUSABLE,
            tasks={"conv2d_NCHWc_int8": "conv2d_int8.x86"},
            reference=_blocked_int8_reference(_conv2d_int8_reference))
#: int8 depthwise convolutions kept blocked by int8_layout (data block = output block).
register_op("depthwise_conv2d_NCHWc_int8", lambda data, kernel, stride=1, padding=0,
            dilation=1, data_zero_point=0, out_block=None: depthwise_conv2d_NCHWc_int8(
                data, kernel, stride, padding, dilation, data_zero_point, out_block),
            x86.schedule_conv2d_nchw_int8, P.OUT_FUSABLE,
            tasks={"depthwise_conv2d_NCHWc_int8": "depthwise_conv2d_int8.x86"},
            reference=_blocked_int8_reference(_depthwise_int8_reference))


def _conv2d_bf16_reference(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0,
                           dilation=1) -> np.ndarray:
    from ..testing import conv2d_nchw_python

    return conv2d_nchw_python(data.astype(np.float32), kernel.astype(np.float32), stride,
                              padding, dilation).astype(np.float32)


def _conv2d_nchwc_bf16_reference(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0,
                                 dilation=1) -> np.ndarray:
    if data.ndim == 5:
        n, blocks, h, w, block = data.shape
        data = data.transpose(0, 1, 4, 2, 3).reshape(n, blocks * block, h, w)
    out = _conv2d_bf16_reference(data, kernel, stride, padding, dilation)
    n, k, oh, ow = out.shape
    out = np.pad(out, ((0, 0), (0, -k % 16), (0, 0), (0, 0)))
    return np.ascontiguousarray(out.reshape(n, -1, 16, oh, ow).transpose(0, 1, 3, 4, 2))


#: bf16 convolutions (tg.build(precision="bf16")): NCHW, and NCHW[16]c as int8_layout makes.
register_op("conv2d_bf16", conv2d_nchw_bf16, x86.schedule_conv2d_nchw_int8, P.OUT_FUSABLE,
            tasks={"conv2d_NCHWc_bf16": "conv2d_bf16.x86"}, reference=_conv2d_bf16_reference)
register_op("conv2d_NCHWc_bf16", conv2d_NCHWc_bf16, x86.schedule_conv2d_nchw_int8,
            P.OUT_FUSABLE, tasks={"conv2d_NCHWc_bf16": "conv2d_bf16.x86"},
            reference=_conv2d_nchwc_bf16_reference)
register_op("dense_bf16", lambda data, weight: nn.dense_bf16(data, weight), x86.schedule_dense,
            P.OUT_FUSABLE, tasks={"dense_bf16": "dense_bf16.x86"},
            reference=lambda data, weight: (data.astype(np.float32)
                                            @ weight.astype(np.float32).T))
register_op("dense_int8", lambda data, weight: nn.dense(data, weight, out_dtype="int32"),
            x86.schedule_dense, P.OUT_FUSABLE, tasks={"dense_int8": "dense_int8.x86"},
            reference=_dense_int8_reference)
