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
    optimized = str(tg.passes.optimize(tg.from_onnx(qdq)))
    assert "conv2d_int8" in optimized and "dense_int8" in optimized
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


@pytest.mark.parametrize("trans_b", [0, 1])
def test_qdq_gemm_with_a_data_zero_point_runs_int8(trans_b):
    rng = np.random.default_rng(2)
    m, k, n = 5, 48, 20
    w = rng.integers(-128, 128, (n, k) if trans_b else (k, n)).astype("int8")
    w_scale = rng.uniform(0.001, 0.01, n).astype("float32")
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w_scale, "w_scale"),
             numpy_helper.from_array(np.zeros(n, "int8"), "w_zp"),
             numpy_helper.from_array(np.array(0.05, "float32"), "x_scale"),
             numpy_helper.from_array(np.array(np.uint8(100)), "x_zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wf"],
                              axis=0 if trans_b else 1),
             helper.make_node("Gemm", ["xf", "wf"], ["y"], transB=trans_b)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    assert "dense_int8" in str(tg.passes.optimize(tg.from_onnx(model)))
    x = rng.standard_normal((m, k)).astype("float32") * 3
    theirs = _session(model).run(None, {"x": x})[0]
    ours = _ours(model, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
