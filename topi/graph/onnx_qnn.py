"""ONNX converters of quantized models, registered into the ONNX frontend's converter table.

QDQ models (onnxruntime's `quantize_static`) wrap float ops in QuantizeLinear/DequantizeLinear
pairs: they become the graph's `quantize`/`dequantize` ops (a DequantizeLinear of a constant
weight folds into a float constant at import). QOperator models' MatMulInteger and
QLinearMatMul become the int8 dense (`dense_int8`: uint8 x int8 -> int32 on VNNI) with zero
points subtracted where they are not zero, and a `requantize` epilogue for QLinearMatMul.
"""

from __future__ import annotations

import numpy as np

from . import ops_qnn  # noqa: F401  (the graph ops these converters emit)
from .importer import dtype_of, require, shape_of
from .onnx import _Attrs, _converter, _Importer, _optional


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
