"""ONNX converters of quantized models, registered into the ONNX frontend's converter table.

QDQ models (onnxruntime's `quantize_static`) wrap float ops in QuantizeLinear/DequantizeLinear
pairs: they become the graph's `quantize`/`dequantize` ops (a DequantizeLinear of a constant
weight folds into a float constant at import). QOperator models' MatMulInteger and
QLinearMatMul become the int8 dense (`dense_int8`: uint8 x int8 -> int32 on VNNI) with zero
points subtracted where they are not zero, and a `requantize` epilogue for QLinearMatMul.

QLinearConv and onnxruntime's com.microsoft QLinearAdd, QLinearGlobalAveragePool and QGemm
are written as their QDQ equivalents (dequantize, the float op, quantize), which
`passes.quantize_ops` runs as the int8 convolution with a requantizing epilogue and the add
reading 8-bit operands, as for a QDQ model. ConvInteger runs
as the int8 convolution where its data zero point is a constant and its weight a constant with
zero zero points; DynamicQuantizeLinear computes its scale and zero point from the data's range
at run time.
"""

from __future__ import annotations

import numpy as np

from . import ops_qnn  # noqa: F401  (the graph ops these converters emit)
from .importer import dtype_of, require, shape_of
from .onnx import (_Attrs, _conv, _conv_window, _converter, _gemm, _Importer, _optional,
                   _window_pads)


def _zero_point(im: _Importer, zp, dtype: str):
    return zp if zp is not None else np.zeros((), dtype)


@_converter("QuantizeLinear")
def _quantize_linear(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, scale, zp = inputs[0], inputs[1], _optional(inputs, 2)
    require(int(attrs.get("saturate", 1)) == 1, "saturate=0")
    require(int(attrs.get("block_size", 0)) == 0, "blocked quantization (block_size)")
    require(int(attrs.get("output_dtype", 0)) in (0, 2, 3), "an output_dtype other than 8 bits")
    if zp is None:
        out_dtype = "int8" if int(attrs.get("output_dtype", 0)) == 3 else "uint8"
    else:
        out_dtype = str(zp.dtype) if isinstance(zp, np.ndarray) else dtype_of(zp)
    require(out_dtype in ("uint8", "int8"), f"quantization to {out_dtype}")
    axis = int(attrs.get("axis", 1)) % max(len(shape_of(x)), 1)
    return [im.op("quantize", x, scale, _zero_point(im, zp, out_dtype), axis=axis,
                  out_dtype=out_dtype)]


@_converter("DequantizeLinear")
def _dequantize_linear(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, scale, zp = inputs[0], inputs[1], _optional(inputs, 2)
    require(int(attrs.get("block_size", 0)) == 0, "blocked quantization (block_size)")
    axis = int(attrs.get("axis", 1)) % max(len(shape_of(x)), 1)
    if isinstance(x, np.ndarray) and x.dtype == np.int8:
        # An int8 weight stays dequantize(constant) so that passes.quantize_ops can run its
        # convolution or dense as an int8 kernel; fold_constants folds what it leaves.
        x = im.as_node(x)
    return [im.op("dequantize", x, scale, _zero_point(im, zp, dtype_of(x)), axis=axis)]


def _is_zero(zp) -> bool:
    return zp is None or (isinstance(zp, np.ndarray) and not zp.any())


def _int8_matmul(im: _Importer, a, b, a_zp, b_zp):
    """a (..., K) @ b (K, N) in int32: the int8 dense where the operands are uint8 x int8 with
    zero zero points, else int32 arithmetic on the centred operands."""
    sa, sb = shape_of(a), shape_of(b)
    require(len(sb) == 2, "a quantized matmul's right operand must be 2-D")
    rows = int(np.prod(sa[:-1])) if len(sa) > 1 else 1
    a2 = im.reshape(a, (rows, sa[-1]))
    if dtype_of(a) == "uint8" and dtype_of(b) == "int8" and _is_zero(a_zp) and _is_zero(b_zp):
        y = im.op("dense_int8", a2, im.op("transpose", b, axes=(1, 0)))
    else:
        ca = im.op("subtract", im.op("cast", a2, dtype="int32"),
                   im.op("cast", _zero_point(im, a_zp, dtype_of(a)), dtype="int32"))
        cb = im.op("subtract", im.op("cast", b, dtype="int32"),
                   im.op("cast", _zero_point(im, b_zp, dtype_of(b)), dtype="int32"))
        y = im.op("dense", ca, im.op("transpose", cb, axes=(1, 0)))
    return im.reshape(y, (*sa[:-1], sb[1]))


@_converter("MatMulInteger")
def _matmul_integer(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, b = inputs[0], inputs[1]
    return [_int8_matmul(im, a, b, _optional(inputs, 2), _optional(inputs, 3))]


@_converter("QLinearMatMul")
def _qlinear_matmul(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs
    acc = _int8_matmul(im, a, b, a_zp, b_zp)
    require(isinstance(a_scale, np.ndarray) and isinstance(b_scale, np.ndarray),
            "QLinearMatMul with scales computed at run time")
    scale = (a_scale.astype(np.float32) * b_scale.astype(np.float32)).reshape(-1)
    axis = len(shape_of(acc)) - 1
    return [im.op("requantize", acc, scale, np.zeros((), "int32"), y_scale, y_zp, axis=axis,
                  out_dtype=dtype_of(y_zp) if not isinstance(y_zp, np.ndarray) else
                  str(y_zp.dtype))]


def _dequantized(im: _Importer, x, scale, zp, axis: int = 1):
    if isinstance(x, np.ndarray):
        x = im.as_node(x)  # an int8 weight stays dequantize(constant) for quantize_ops
    return im.op("dequantize", x, scale, _zero_point(im, zp, dtype_of(x)), axis=axis)


def _quantized(im: _Importer, y, scale, zp) -> object:
    out_dtype = str(zp.dtype) if isinstance(zp, np.ndarray) else dtype_of(zp)
    return im.op("quantize", y, scale, zp, axis=1, out_dtype=out_dtype)


@_converter("QLinearConv")
def _qlinear_conv(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = inputs[:8]
    (y,) = _conv(im, [_dequantized(im, x, x_scale, x_zp), _dequantized(im, w, w_scale, w_zp, 0),
                      _bias(_optional(inputs, 8), x_scale, w_scale)], attrs)
    return [_quantized(im, y, y_scale, y_zp)]


def _bias(bias, a_scale, b_scale) -> np.ndarray | None:
    """An int32 bias of scale a_scale * b_scale (per output channel) in float."""
    if bias is None:
        return None
    require(all(isinstance(v, np.ndarray) for v in (bias, a_scale, b_scale)),
            "a quantized bias or scales computed at run time")
    scale = a_scale.astype(np.float32) * b_scale.astype(np.float32)
    return (bias.astype(np.float64) * scale.reshape(-1)).astype(np.float32)


@_converter("com.microsoft:QGemm")
def _qgemm(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, a_scale, a_zp, b, b_scale, b_zp = inputs[:6]
    c, y_scale, y_zp = (_optional(inputs, i) for i in (6, 7, 8))
    b_axis = 0 if attrs.get("transB", 0) else 1
    (y,) = _gemm(im, [_dequantized(im, a, a_scale, a_zp, 0),
                      _dequantized(im, b, b_scale, b_zp, b_axis), _bias(c, a_scale, b_scale)],
                 attrs)
    return [y if y_scale is None else _quantized(im, y, y_scale, y_zp)]


@_converter("com.microsoft:QLinearGlobalAveragePool")
def _qlinear_global_average_pool(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, x_scale, x_zp, y_scale, y_zp = inputs
    require(int(attrs.get("channels_last", 0)) == 0 and len(shape_of(x)) == 4,
            "QLinearGlobalAveragePool other than on NCHW images")
    pooled = im.op("global_avg_pool2d", _dequantized(im, x, x_scale, x_zp))
    return [_quantized(im, pooled, y_scale, y_zp)]


@_converter("com.microsoft:QLinearAdd")
def _qlinear_add(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs
    total = im.op("add", _dequantized(im, a, a_scale, a_zp), _dequantized(im, b, b_scale, b_zp))
    return [_quantized(im, total, y_scale, y_zp)]


@_converter("ConvInteger")
def _conv_integer(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, w, x_zp, w_zp = inputs[0], inputs[1], _optional(inputs, 2), _optional(inputs, 3)
    require(dtype_of(x) == "uint8" and isinstance(w, np.ndarray) and w.dtype == np.int8
            and _is_zero(w_zp) and int(attrs.get("group", 1)) == 1,
            "ConvInteger other than uint8 data with a constant int8 weight of zero zero "
            "points and one group")
    _, _, _, kernel, stride, dilation = _conv_window(inputs, attrs)
    pads = _window_pads(attrs, shape_of(x)[2:], kernel, stride, dilation)
    if x_zp is None or isinstance(x_zp, np.ndarray):
        return [im.op("conv2d_int8", x, w, stride=stride, padding=pads, dilation=dilation,
                      data_zero_point=int(np.asarray(x_zp if x_zp is not None else 0)))]
    # A zero point known at run time (DynamicQuantizeLinear's): the padding must read it, so
    # the centred data goes through the float convolution (exact while the sums stay below
    # 2^24 in magnitude, as they do for quantized activations).
    (y,) = _conv(im, [_dequantized(im, x, np.ones((), np.float32), x_zp),
                      w.astype(np.float32), None], attrs)
    return [im.op("cast", im.op("round", y), dtype="int32")]


@_converter("DynamicQuantizeLinear")
def _dynamic_quantize_linear(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    """uint8 over the data's range widened to include 0, as ONNX defines it."""
    (x,) = inputs
    zero = np.zeros((), np.float32)
    low = im.op("minimum", im.op("min", x), zero)
    high = im.op("maximum", im.op("max", x), zero)
    scale = im.op("divide", im.op("subtract", high, low), np.array(255, np.float32))
    zp = im.op("cast", im.op("clip", im.op("round", im.op("divide", im.op("negative", low),
                                                             scale)), a_min=0.0, a_max=255.0),
               dtype="uint8")
    return [im.op("quantize", x, scale, zp, axis=0, out_dtype="uint8"), scale, zp]
