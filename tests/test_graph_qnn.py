"""Quantized ONNX models through from_onnx: QDQ (onnxruntime's quantize_static) and QOperator
(MatMulInteger, QLinearMatMul), against onnxruntime's int8 sessions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import topi.graph as tg  # noqa: E402


def _session(model) -> object:
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _ours(model, feeds: dict) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: fallback configs
        module = tg.build(tg.from_onnx(model))
    return module(**feeds)[0]


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "m", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_qdq_model_from_quantize_static_matches_onnxruntime(tmp_path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype("float32")
    b1 = (rng.standard_normal(8) * 0.1).astype("float32")
    w2 = (rng.standard_normal((512, 10)) * 0.05).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "w2"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                   [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"),
                                                               (w2, "w2"))])
    onnx.save(model, tmp_path / "float.onnx")
    batches = iter([{"x": rng.standard_normal((1, 3, 8, 8)).astype("float32")}
                    for _ in range(8)])

    class Reader(quantization.CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    quantization.quantize_static(
        str(tmp_path / "float.onnx"), str(tmp_path / "qdq.onnx"), Reader(),
        quant_format=quantization.QuantFormat.QDQ, per_channel=True,
        activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8)
    qdq = onnx.load(tmp_path / "qdq.onnx")
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in qdq.graph.node}
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    theirs = _session(qdq).run(None, {"x": x})[0]
    ours = _ours(qdq, {"x": x})
    cosine = float((ours * theirs).sum() / np.linalg.norm(ours) / np.linalg.norm(theirs))
    assert cosine >= 0.999
    np.testing.assert_allclose(ours, theirs, atol=2 * float(np.abs(theirs).max()) / 255)


@pytest.mark.parametrize("op", ["MatMulInteger", "QLinearMatMul"])
@pytest.mark.parametrize("zero_points", [False, True])
def test_qoperator_matmuls_match_onnxruntime(op, zero_points):
    rng = np.random.default_rng(1)
    m, k, n = 6, 40, 24
    b = rng.integers(-128, 128, (k, n)).astype("int8")
    a_zp = np.uint8(7 if zero_points else 0)
    b_zp = np.int8(-3 if zero_points else 0)
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.array(a_zp), "a_zp"),
             numpy_helper.from_array(np.array(b_zp), "b_zp")]
    if op == "MatMulInteger":
        node = helper.make_node(op, ["A", "B", "a_zp", "b_zp"], ["Y"])
        out = TensorProto.INT32
    else:
        inits += [numpy_helper.from_array(np.array(v, "float32"), name) for v, name in
                  ((0.02, "a_scale"), (0.01, "b_scale"), (0.3, "y_scale"))]
        inits.append(numpy_helper.from_array(np.array(np.uint8(100)), "y_zp"))
        node = helper.make_node(op, ["A", "a_scale", "a_zp", "B", "b_scale", "b_zp", "y_scale",
                                     "y_zp"], ["Y"])
        out = TensorProto.UINT8
    model = _model([node], [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])],
                   [helper.make_tensor_value_info("Y", out, [m, n])], inits)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    theirs = _session(model).run(None, {"A": a})[0]
    ours = _ours(model, {"A": a})
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)
