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


def _quantize_static(tmp_path, model, batches: list) -> object:
    """`model` quantized by onnxruntime's quantize_static (QDQ, per-channel int8 weights,
    uint8 activations) calibrated on `batches`."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    onnx.save(model, tmp_path / "float.onnx")
    feeds = iter(batches)

    class Reader(quantization.CalibrationDataReader):
        def get_next(self):
            return next(feeds, None)

    quantization.quantize_static(
        str(tmp_path / "float.onnx"), str(tmp_path / "qdq.onnx"), Reader(),
        quant_format=quantization.QuantFormat.QDQ, per_channel=True,
        activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8)
    return onnx.load(tmp_path / "qdq.onnx")


def _ops(g) -> set[str]:
    """The ops of a graph, those inside its fused nodes included."""
    return {m.op for n in g.ops for m in (n.body.ops if n.body is not None else [n])}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b))


def test_qdq_model_from_quantize_static_matches_onnxruntime(tmp_path):
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
    qdq = _quantize_static(tmp_path, model, [{"x": rng.standard_normal((1, 3, 8, 8)).astype(
        "float32")} for _ in range(8)])
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in qdq.graph.node}
    optimized = str(tg.passes.optimize(tg.from_onnx(qdq)))
    assert "conv2d_int8" in optimized and "dense_int8" in optimized
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    theirs = _session(qdq).run(None, {"x": x})[0]
    ours = _ours(qdq, {"x": x})
    assert _cosine(ours, theirs) >= 0.999
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


def _classifier(nodes: list, features: str, inits: dict, size: int) -> object:
    """The model of `nodes` on a (1, 3, size, size) image, with a head of global average pooling
    and a 10-way Gemm (weights "fc", "fcb" in `inits`) on the value named `features`."""
    head = [helper.make_node("GlobalAveragePool", [features], ["g"]),
            helper.make_node("Flatten", ["g"], ["f"]),
            helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    return _model([*nodes, *head],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                  [numpy_helper.from_array(v, k) for k, v in inits.items()])


def _residual_cnn(channels: int, size: int) -> object:
    """A ResNet-like float CNN: a 3x3 stem of `channels` (stride 2), max pooling, a residual
    block of a 1x1 and a 3x3 convolution, global pooling and a Gemm classifier."""
    rng = np.random.default_rng(3)
    c = channels

    def weight(*shape):
        return (rng.standard_normal(shape) * (2 / np.prod(shape[1:])) ** 0.5).astype("float32")

    inits = {"w0": weight(c, 3, 3, 3), "w1": weight(c, c, 1, 1), "w2": weight(c, c, 3, 3),
             "b0": rng.standard_normal(c).astype("float32") * 0.1,
             "b1": rng.standard_normal(c).astype("float32") * 0.1,
             "b2": rng.standard_normal(c).astype("float32") * 0.1,
             "fc": weight(10, c), "fcb": np.zeros(10, "float32")}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("MaxPool", ["r0"], ["pool"], kernel_shape=[3, 3], pads=[1] * 4,
                              strides=[2, 2]),
             helper.make_node("Conv", ["pool", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4),
             helper.make_node("Add", ["c2", "pool"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"])]
    return _classifier(nodes, "r2", inits, size)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_qdq_residual_cnn_keeps_int8_activations_blocked(tmp_path, target):
    """Between int8 convolutions the activations stay uint8 NCHW[x]c: no layout transform,
    no float tensor; the result matches onnxruntime's int8 session."""
    import tensorlang as tl

    if "haswell" in target and not tl.Target("llvm")._has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    rng = np.random.default_rng(4)
    size = 30  # 15 after the stem, 8 after pooling: widths that no tile divides evenly
    qdq = _quantize_static(tmp_path, _residual_cnn(32, size), [
        {"x": rng.standard_normal((1, 3, size, size)).astype("float32")} for _ in range(4)])
    with tl.Target(target):
        optimized = str(tg.passes.optimize(tg.from_onnx(qdq)))
    assert optimized.count("conv2d_NCHWc_int8{") == 3
    assert optimized.count("layout_transform{") == 1  # before the classifier
    x = rng.standard_normal((1, 3, size, size)).astype("float32")
    theirs = _session(qdq).run(None, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = tg.build(tg.from_onnx(qdq), target=target)(x=x)[0]
    assert _cosine(ours, theirs) >= 0.999
    np.testing.assert_allclose(ours, theirs, atol=3 * float(np.abs(theirs).max()) / 255)


def _mobilenet_block_cnn(channels: int, size: int, expansion: int = 3) -> object:
    """A MobileNet-V2-like float CNN: a 3x3 stem (stride 2, ReLU6), an inverted residual block
    (1x1 expansion, 3x3 depthwise, 1x1 projection, residual add), a block with a 5x5
    depthwise convolution of stride 2, global pooling and a Gemm classifier."""
    rng = np.random.default_rng(5)
    c, e = channels, expansion * channels

    def weight(*shape):
        return (rng.standard_normal(shape) * (2 / np.prod(shape[1:])) ** 0.5).astype("float32")

    def bias(n):
        return rng.standard_normal(n).astype("float32") * 0.1

    inits = {"w0": weight(c, 3, 3, 3), "b0": bias(c), "w1": weight(e, c, 1, 1), "b1": bias(e),
             "w2": weight(e, 1, 3, 3), "b2": bias(e), "w3": weight(c, e, 1, 1), "b3": bias(c),
             "w4": weight(e, c, 1, 1), "b4": bias(e), "w5": weight(e, 1, 5, 5), "b5": bias(e),
             "fc": weight(10, e), "fcb": np.zeros(10, "float32"),
             "lo": np.array(0, "float32"), "hi": np.array(6, "float32")}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Clip", ["c0", "lo", "hi"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"]),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4, group=e),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
             helper.make_node("Add", ["c3", "r0"], ["s"]),
             helper.make_node("Conv", ["s", "w4", "b4"], ["c4"]),
             helper.make_node("Clip", ["c4", "lo", "hi"], ["r4"]),
             helper.make_node("Conv", ["r4", "w5", "b5"], ["c5"], pads=[2] * 4, strides=[2, 2],
                              group=e),
             helper.make_node("Clip", ["c5", "lo", "hi"], ["r5"])]
    return _classifier(nodes, "r5", inits, size)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_qdq_depthwise_block_runs_int8_kernels(tmp_path, target):
    """A QDQ MobileNet-like model: its depthwise convolutions (3x3, 5x5 of stride 2) run as
    int8 kernels on the blocked uint8 activations (no float depthwise kernel, no layout
    transform between the stem and the classifier), within one output quantum of
    onnxruntime's int8 session."""
    import tensorlang as tl

    if "haswell" in target and not tl.Target("llvm")._has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    rng = np.random.default_rng(6)
    size = 26  # 13 after the stem, 7 after the strided depthwise: odd widths
    qdq = _quantize_static(tmp_path, _mobilenet_block_cnn(32, size), [
        {"x": rng.standard_normal((1, 3, size, size)).astype("float32")} for _ in range(4)])
    with tl.Target(target):
        optimized = str(tg.passes.optimize(tg.from_onnx(qdq)))
    assert optimized.count("depthwise_conv2d_NCHWc_int8{") == 2
    assert "depthwise_conv2d_NCHWc{" not in optimized and "depthwise_conv2d{" not in optimized
    assert optimized.count("conv2d_NCHWc_int8{") == 6  # with the depthwise ones
    assert optimized.count("layout_transform{") == 1  # before the classifier
    quantum = next(numpy_helper.to_array(t) for t in qdq.graph.initializer
                   if t.name == next(n.input[1] for n in qdq.graph.node
                                     if n.op_type == "DequantizeLinear" and n.output[0] == "y"))
    for _ in range(2):
        x = rng.standard_normal((1, 3, size, size)).astype("float32")
        theirs = _session(qdq).run(None, {"x": x})[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = tg.build(tg.from_onnx(qdq), target=target)(x=x)[0]
        assert _cosine(ours, theirs) >= 0.999
        np.testing.assert_allclose(ours, theirs, atol=1.001 * float(quantum))


def test_qdq_depthwise_block_of_24_channels_reads_blocked_inputs(tmp_path):
    """24 channels fill no AVX-512 int32 vector: the convolutions to 24 channels give NCHW,
    reading the blocked output of the depthwise convolution as it is (no layout transform
    between convolutions); the result matches onnxruntime's int8 session."""
    import tensorlang as tl

    rng = np.random.default_rng(7)
    size = 22
    qdq = _quantize_static(tmp_path, _mobilenet_block_cnn(24, size, expansion=4), [
        {"x": rng.standard_normal((1, 3, size, size)).astype("float32")} for _ in range(4)])
    with tl.Target("llvm -mcpu=skylake-avx512"):
        optimized = str(tg.passes.optimize(tg.from_onnx(qdq)))
    assert optimized.count("depthwise_conv2d_NCHWc_int8{") == 2
    assert optimized.count("layout_transform{") == 1  # before the classifier
    x = rng.standard_normal((1, 3, size, size)).astype("float32")
    theirs = _session(qdq).run(None, {"x": x})[0]
    ours = _ours(qdq, {"x": x})
    assert _cosine(ours, theirs) >= 0.999


def _float_cnn(rng) -> tg.Graph:
    """conv (3 -> 32, 3x3) + ReLU, conv (32 -> 48, 3x3, stride 2) + ReLU, global pooling,
    dense to 10: odd sizes (13 x 13)."""
    g = tg.Graph()
    x = g.input("x", (1, 3, 13, 13))

    def weight(*shape):
        return (rng.standard_normal(shape) * (2 / np.prod(shape[1:])) ** 0.5).astype("float32")

    h = g.relu(g.bias_add(g.conv2d(x, g.constant(weight(32, 3, 3, 3)), padding=1),
                          g.constant(rng.standard_normal(32).astype("float32") * 0.1)))
    h = g.relu(g.conv2d(h, g.constant(weight(48, 32, 3, 3)), stride=2, padding=1))
    h = g.reshape(g.global_avg_pool2d(h), (1, 48))
    g.output(g.dense(h, g.constant(weight(10, 48))))
    return g


def _float_mlp(rng) -> tg.Graph:
    """dense 61 -> 96 + ReLU, matmul 96 -> 33 + ReLU, dense 33 -> 7, batch 5."""
    g = tg.Graph()
    x = g.input("x", (5, 61))
    h = g.relu(g.dense(x, g.constant(rng.standard_normal((96, 61)).astype("float32") * 0.2)))
    h = g.relu(g.matmul(h, g.constant(rng.standard_normal((96, 33)).astype("float32") * 0.1)))
    g.output(g.dense(h, g.constant(rng.standard_normal((7, 33)).astype("float32") * 0.2)))
    return g


@pytest.mark.parametrize("model, shape", [(_float_cnn, (1, 3, 13, 13)), (_float_mlp, (5, 61))],
                         ids=["cnn", "mlp"])
@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_quantize_float_graph_matches_float_model(model, shape, method):
    rng = np.random.default_rng(7)
    g = model(rng)
    calibration = [{"x": rng.standard_normal(shape).astype("float32")} for _ in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = tg.quantize(g, calibration, method=method)
        optimized = str(tg.passes.optimize(q))
        assert "dense_int8" in optimized
        if model is _float_cnn:
            assert optimized.count("conv2d_NCHWc_int8{") + optimized.count("conv2d_int8{") == 2
        float_model, int8_model = tg.build(g), tg.build(q)
    for _ in range(3):
        x = rng.standard_normal(shape).astype("float32")
        assert _cosine(int8_model(x=x)[0], float_model(x=x)[0]) >= 0.99


def test_quantize_names_bad_arguments():
    g = _float_mlp(np.random.default_rng(0))
    x = {"x": np.zeros((5, 61), "float32")}
    with pytest.raises(ValueError, match="method"):
        tg.quantize(g, [x], method="entropy")
    with pytest.raises(ValueError, match="empty"):
        tg.quantize(g, [])
    with pytest.raises(ValueError, match=r"lacks the graph inputs \['x'\]"):
        tg.quantize(g, [{"y": x["x"]}])
    with pytest.raises(TypeError, match="Graph"):
        tg.quantize("model.onnx", [x])


def _qlinear_conv_model(c: int, k: int, size: int, stride: int, group: int = 1):
    rng = np.random.default_rng(8)
    w = rng.integers(-127, 128, (k, c // group, 3, 3)).astype("int8")
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.uniform(0.002, 0.01, k).astype("float32"), "w_scale"),
             numpy_helper.from_array(np.zeros(k, "int8"), "w_zp"),
             numpy_helper.from_array(np.array(0.02, "float32"), "x_scale"),
             numpy_helper.from_array(np.array(np.uint8(9)), "x_zp"),
             numpy_helper.from_array(np.array(0.05, "float32"), "y_scale"),
             numpy_helper.from_array(np.array(np.uint8(120)), "y_zp"),
             numpy_helper.from_array(rng.integers(-3000, 3000, k).astype("int32"), "b")]
    node = helper.make_node("QLinearConv", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp",
                                            "y_scale", "y_zp", "b"], ["y"], pads=[1] * 4,
                            strides=[stride] * 2, group=group)
    out = (size + 2 - 3) // stride + 1
    return _model([node], [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                         [1, c, size, size])],
                  [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, k, out, out])],
                  inits)


@pytest.mark.parametrize("c, k, size, stride", [(20, 32, 13, 2), (16, 48, 7, 1), (3, 16, 11, 1)])
def test_qlinear_conv_matches_onnxruntime(c, k, size, stride):
    model = _qlinear_conv_model(c, k, size, stride)
    assert _ops(tg.passes.optimize(tg.from_onnx(model))) & {"conv2d_int8", "conv2d_NCHWc_int8"}
    x = np.random.default_rng(c).integers(0, 256, (1, c, size, size)).astype("uint8")
    theirs = _session(model).run(None, {"x": x})[0]
    ours = _ours(model, {"x": x})
    assert ours.dtype == theirs.dtype
    # onnxruntime requantizes the int32 sums with the bias in integers, we rescale to float
    # first: a tie may round the other way.
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


def test_qlinear_add_from_com_microsoft_matches_onnxruntime():
    rng = np.random.default_rng(9)
    params = {"a_scale": np.array(0.03, "float32"), "a_zp": np.array(np.uint8(100)),
              "b_scale": np.array(0.05, "float32"), "b_zp": np.array(np.uint8(7)),
              "y_scale": np.array(0.07, "float32"), "y_zp": np.array(np.uint8(60))}
    node = helper.make_node("QLinearAdd", ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp",
                                           "y_scale", "y_zp"], ["y"], domain="com.microsoft")
    value = [helper.make_tensor_value_info(n, TensorProto.UINT8, [2, 5, 3, 7]) for n in "aby"]
    model = _model([node], value[:2], value[2:],
                   [numpy_helper.from_array(v, k) for k, v in params.items()])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    feeds = {n: rng.integers(0, 256, (2, 5, 3, 7)).astype("uint8") for n in "ab"}
    theirs = _session(model).run(None, feeds)[0]
    ours = _ours(model, feeds)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


@pytest.mark.parametrize("zero_point", [None, 17])
def test_conv_integer_is_exact(zero_point):
    rng = np.random.default_rng(10)
    w = rng.integers(-128, 128, (24, 12, 3, 3)).astype("int8")
    names = ["x", "w"] + (["x_zp"] if zero_point is not None else [])
    inits = [numpy_helper.from_array(w, "w")]
    if zero_point is not None:
        inits.append(numpy_helper.from_array(np.array(np.uint8(zero_point)), "x_zp"))
    node = helper.make_node("ConvInteger", names, ["y"], pads=[1, 0, 1, 2], strides=[1, 2])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                          [1, 12, 9, 10])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 24, 9, 6])],
                   inits)
    x = rng.integers(0, 256, (1, 12, 9, 10)).astype("uint8")
    np.testing.assert_array_equal(_ours(model, {"x": x}), _session(model).run(None, {"x": x})[0])


def test_dynamic_quantization_from_quantize_dynamic_matches_onnxruntime(tmp_path):
    """quantize_dynamic's DynamicQuantizeLinear -> ConvInteger / MatMulInteger graphs."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype("float32")
    m = (rng.standard_normal((16 * 5 * 5, 10)) * 0.05).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[0] * 4),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 7, 7])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(m, "m")])
    onnx.save(model, tmp_path / "float.onnx")
    quantization.quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "dyn.onnx"),
                                  weight_type=quantization.QuantType.QInt8)
    dynamic = onnx.load(tmp_path / "dyn.onnx")
    assert "DynamicQuantizeLinear" in {n.op_type for n in dynamic.graph.node}
    x = rng.standard_normal((1, 8, 7, 7)).astype("float32")
    theirs = _session(dynamic).run(None, {"x": x})[0]
    ours = _ours(dynamic, {"x": x})
    assert _cosine(ours, theirs) >= 0.9999
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3 * float(np.abs(theirs).max()))


def test_qoperator_model_from_quantize_static_matches_onnxruntime(tmp_path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(12)
    onnx.save(_residual_cnn(16, 20), tmp_path / "float.onnx")
    batches = iter([{"x": rng.standard_normal((1, 3, 20, 20)).astype("float32")}
                    for _ in range(4)])

    class Reader(quantization.CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    quantization.quantize_static(
        str(tmp_path / "float.onnx"), str(tmp_path / "qop.onnx"), Reader(),
        quant_format=quantization.QuantFormat.QOperator, per_channel=True,
        activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8)
    qop = onnx.load(tmp_path / "qop.onnx")
    assert "QLinearConv" in {n.op_type for n in qop.graph.node}
    assert {"conv2d_NCHWc_int8", "dense_int8", "dequantize_add"} <= _ops(
        tg.passes.optimize(tg.from_onnx(qop)))
    x = rng.standard_normal((1, 3, 20, 20)).astype("float32")
    theirs = _session(qop).run(None, {"x": x})[0]
    ours = _ours(qop, {"x": x})
    assert _cosine(ours, theirs) >= 0.999


@pytest.mark.parametrize("model, shape", [(_float_cnn, (1, 3, 13, 13)), (_float_mlp, (5, 61))],
                         ids=["cnn", "mlp"])
def test_build_bf16_matches_float32(model, shape):
    import tensorlang as tl
    from topi.graph.passes.bf16 import to_bf16
    from topi.x86.tensor_intrin import has_bf16_dot

    host = tl.Target("llvm")
    if not has_bf16_dot(host):
        pytest.skip("the host has no AVX512-BF16")
    rng = np.random.default_rng(13)
    g = model(rng)
    with host:
        ops = _ops(tg.passes.optimize(to_bf16(g, host)))
    assert "dense_bf16" in ops and (model is _float_mlp or "conv2d_NCHWc_bf16" in ops)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fp32, bf16 = tg.build(g), tg.build(g, precision="bf16")
    for _ in range(3):
        x = rng.standard_normal(shape).astype("float32")
        ours, exact = bf16(x=x)[0], fp32(x=x)[0]
        # bfloat16 operands: 8 bits of mantissa each, float32 sums.
        np.testing.assert_allclose(ours, exact, rtol=2e-2, atol=2e-2 * float(np.abs(exact).max()))
        assert _cosine(ours, exact) >= 0.999


def test_build_bf16_names_a_target_without_it():
    g = _float_mlp(np.random.default_rng(0))
    with pytest.raises(ValueError, match="AVX512-BF16.*haswell"):
        tg.build(g, target="llvm -mcpu=haswell", precision="bf16")
    with pytest.raises(ValueError, match="precision must be"):
        tg.build(g, precision="fp16")
