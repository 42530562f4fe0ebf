"""from_onnx: every supported op against onnxruntime on small awkward shapes (built and run
with the fallback configs), across opsets, and clear errors for what is not supported."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper

from topi.graph.onnx import UnsupportedError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_ELEM = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64,
         "int32": TensorProto.INT32, "float64": TensorProto.DOUBLE,
         "float16": TensorProto.FLOAT16}


def make_model(op_type: str, inputs: dict[str, np.ndarray], attrs: dict | None = None,
               consts: dict[str, np.ndarray] | None = None, order: list[str] | None = None,
               outputs: int = 1, opset: int = 17):
    """A one-node model: `inputs` are graph inputs, `consts` initializers; `order` lists the
    node's input names ("" for an omitted optional input)."""
    consts = consts or {}
    names = order if order is not None else [*inputs, *consts]
    out_names = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op_type, names, out_names, name=f"the_{op_type.lower()}",
                            **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, _ELEM[str(v.dtype)], v.shape) for k, v in inputs.items()],
        [onnx.ValueInfoProto(name=k) for k in out_names],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model, inputs: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-5) -> None:
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, inputs)
    g = tg.from_onnx(model)
    actual = tg.build(g)(**inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def rand(rng, *shape, low=-1.0, high=1.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype("float32")


@pytest.mark.parametrize("attrs, wshape", [
    ({"pads": [1, 2, 0, 1], "strides": [2, 1]}, (5, 3, 3, 2)),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (4, 3, 3, 3)),
    ({"auto_pad": "SAME_LOWER", "strides": [1, 2]}, (4, 3, 2, 3)),
    ({"pads": [2, 0, 1, 1], "dilations": [2, 3]}, (4, 3, 3, 2)),
    ({"auto_pad": "VALID"}, (7, 3, 1, 1)),
    ({"group": 3, "pads": [1, 1, 1, 1]}, (6, 1, 3, 3)),  # depthwise, multiplier 2
    ({"group": 3, "kernel_shape": [3, 3]}, (3, 1, 3, 3)),  # depthwise
])
def test_conv(attrs, wshape, rng):
    x = {"x": rand(rng, 1, 3, 9, 7)}
    consts = {"w": rand(rng, *wshape), "b": rand(rng, wshape[0])}
    check(make_model("Conv", x, attrs, consts), x)


def test_grouped_conv_without_bias(rng):
    x = {"x": rand(rng, 2, 4, 6, 5)}
    check(make_model("Conv", x, {"group": 2, "pads": [1, 1, 1, 1]}, {"w": rand(rng, 6, 2, 3, 3)}),
          x)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]},
    {"strides": [2, 3], "group": 2, "dilations": [1, 2]},
    {"strides": [2, 2], "output_shape": [10, 9]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
])
def test_conv_transpose(attrs, rng):
    x = {"x": rand(rng, 1, 4, 5, 4)}
    consts = {"w": rand(rng, 4, 3, 3, 3), "b": rand(rng, 3 * attrs.get("group", 1))}
    check(make_model("ConvTranspose", x, attrs, consts), x)


@pytest.mark.parametrize("attrs, cshape", [
    ({}, (7,)), ({"transA": 1, "alpha": 0.5, "beta": 2.0}, (3, 7)), ({"transB": 1}, (1, 7)),
])
def test_gemm(attrs, cshape, rng):
    a = rand(rng, 5, 3) if attrs.get("transA") else rand(rng, 3, 5)
    b = rand(rng, 7, 5) if attrs.get("transB") else rand(rng, 5, 7)
    check(make_model("Gemm", {"a": a}, attrs, {"b": b, "c": rand(rng, *cshape)}), {"a": a})


@pytest.mark.parametrize("sa, sb, b_const", [
    ((3, 5), (5, 7), True), ((2, 3, 5), (5, 4), True), ((2, 3, 5), (2, 5, 4), False),
    ((2, 1, 3, 5), (4, 5, 2), False),
])
def test_matmul(sa, sb, b_const, rng):
    a, b = rand(rng, *sa), rand(rng, *sb)
    if b_const:
        check(make_model("MatMul", {"a": a}, consts={"b": b}), {"a": a})
    else:
        check(make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})


def test_attention_scores_are_one_batch_matmul_without_transpose(rng):
    """q @ k^T over (batch, heads): the transpose of k cancels against batch_matmul's layout."""
    q, k = rand(rng, 1, 3, 7, 5), rand(rng, 1, 3, 7, 5)
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        n, TensorProto.FLOAT, v.shape) for n, v in (("q", q), ("k", k))],
        [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    check(model, {"q": q, "k": k})
    live = tg.passes.remove_dead_nodes(tg.from_onnx(model))
    assert [n.op for n in live.ops] == ["reshape", "reshape", "batch_matmul", "reshape"]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"])
def test_broadcast_binary(op, rng):
    a, b = rand(rng, 2, 3, 5, low=0.1), rand(rng, 3, 1, low=0.5)
    check(make_model(op, {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
@pytest.mark.parametrize("op", ["Add", "MatMul", "ReduceSum", "Max"])
def test_other_dtypes(op, dtype, rng):
    a = (rng.uniform(-4, 4, (3, 5))).astype(dtype)
    b = (rng.uniform(-4, 4, (5, 5) if op == "MatMul" else (1, 5))).astype(dtype)
    inputs = {"a": a} if op == "ReduceSum" else {"a": a, "b": b}
    tol = 1e-2 if dtype == "float16" else 1e-6
    check(make_model(op, inputs), inputs, rtol=tol, atol=tol)


@pytest.mark.parametrize("op, attrs", [
    ("Relu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Sigmoid", {}), ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.6}), ("HardSwish", {}), ("Tanh", {}), ("Erf", {}),
    ("Sqrt", {}), ("Exp", {}), ("Abs", {}), ("Neg", {}), ("Identity", {}),
])
def test_unary(op, attrs, rng):
    x = {"x": rand(rng, 3, 17, low=0.0 if op == "Sqrt" else -4.0, high=4.0)}
    check(make_model(op, x, attrs), x, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate, rng):
    x = {"x": rand(rng, 2, 19, low=-3, high=3)}
    check(make_model("Gelu", x, {"approximate": approximate}, opset=20), x)


@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.2), (0.0, 6.0)])
def test_clip(bounds, rng):
    x = {"x": rand(rng, 4, 9, low=-2, high=8)}
    consts, order = {}, ["x"]
    for name, v in zip(("lo", "hi"), bounds):
        if v is None:
            order.append("")
        else:
            consts[name] = np.array(v, "float32")
            order.append(name)
    check(make_model("Clip", x, consts=consts, order=order), x)


@pytest.mark.parametrize("to", [TensorProto.INT32, TensorProto.DOUBLE, TensorProto.FLOAT])
def test_cast(to, rng):
    x = {"x": rand(rng, 3, 7, low=-20, high=20)}
    check(make_model("Cast", x, {"to": to}), x)


def test_batch_normalization(rng):
    x = {"x": rand(rng, 2, 3, 5, 4)}
    consts = {"s": rand(rng, 3), "b": rand(rng, 3), "m": rand(rng, 3),
              "v": rand(rng, 3, low=0.5, high=2.0)}
    check(make_model("BatchNormalization", x, {"epsilon": 1e-3}, consts), x)


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "ceil_mode": 1, "strides": [2, 2]}),
    ("MaxPool", {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 0, 1, 1], "dilations": [2, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1}),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
])
def test_pooling(op, attrs, rng):
    x = {"x": rand(rng, 1, 3, 9, 8)}
    check(make_model(op, x, attrs), x)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([-1, 0], 0), (None, 0)])
def test_reductions(op, opset, axes, keepdims, rng):
    x = {"x": rand(rng, 3, 5, 7)}
    attrs, consts = {"keepdims": keepdims}, {}
    if axes is not None:
        if op == "ReduceSum" or opset >= 18:
            consts["axes"] = np.array(axes, "int64")
        else:
            attrs["axes"] = axes
    check(make_model(op, x, attrs, consts, opset=opset), x, rtol=1e-4)


@pytest.mark.parametrize("op, attrs", [("Softmax", {"axis": 1}), ("Softmax", {}),
                                       ("LogSoftmax", {"axis": -1})])
def test_softmax(op, attrs, rng):
    x = {"x": rand(rng, 2, 5, 11, low=-5, high=5)}
    check(make_model(op, x, attrs), x)


@pytest.mark.parametrize("axis, with_bias", [(-1, True), (1, False)])
def test_layer_normalization(axis, with_bias, rng):
    x = {"x": rand(rng, 2, 3, 7)}
    norm = (3, 7) if axis == 1 else (7,)
    consts = {"s": rand(rng, *norm), **({"b": rand(rng, *norm)} if with_bias else {})}
    check(make_model("LayerNormalization", x, {"axis": axis, "epsilon": 1e-3}, consts), x,
          rtol=1e-4, atol=1e-5)


def test_shape_with_start_and_end(rng):
    x = {"x": rand(rng, 2, 3, 4, 5)}
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
             helper.make_node("Reshape", ["x", "s2"], ["y"]),
             helper.make_node("Concat", ["minus1", "s"], ["s2"], axis=0)]
    nodes = [nodes[0], nodes[2], nodes[1]]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (2, 3, 4, 5))], [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(np.array([-1], "int64"), "minus1")])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), x)


def test_shape_arithmetic_folds_into_reshape(rng):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write a flatten."""
    x = rand(rng, 2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Flatten", ["x"], ["flat2"], axis=2),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[2, 0, 1]),
        helper.make_node("Squeeze", ["u", "zero1"], ["sq"]),
        helper.make_node("Unsqueeze", ["x", "axes2"], ["u"]),
    ]
    nodes = nodes[:-2] + [nodes[-1], nodes[-2]]
    init = [numpy_helper.from_array(np.array(0, "int64"), "zero"),
            numpy_helper.from_array(np.array([0], "int64"), "zero1"),
            numpy_helper.from_array(np.array([-1], "int64"), "minus1"),
            numpy_helper.from_array(np.array([0, -1], "int64"), "axes2")]
    outs = [onnx.ValueInfoProto(name=k)
            for k in ("flat", "flat2", "xt", "sq")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], outs, init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    check(model, {"x": x})
    g = tg.from_onnx(model)
    assert {n.op for n in g.ops} == {"reshape", "transpose"}  # the shape ops folded away


@pytest.mark.parametrize("opset, attrs, sizes, outputs", [
    (13, {"axis": 1}, None, 3), (13, {"axis": -1}, [2, 5], 2), (18, {"num_outputs": 3}, None, 3),
])
def test_split(opset, attrs, sizes, outputs, rng):
    x = {"x": rand(rng, 7, 6, 7)}
    consts = {} if sizes is None else {"split": np.array(sizes, "int64")}
    check(make_model("Split", x, attrs, consts, outputs=outputs, opset=opset), x)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [4, 100], None, None), ([-1], [-100], [1], [-2]), ([0, 2], [2, 9], [2, 0], [1, 3]),
])
def test_slice(starts, ends, axes, steps, rng):
    x = {"x": rand(rng, 5, 7, 3)}
    consts = {"starts": np.array(starts, "int64"), "ends": np.array(ends, "int64")}
    order = ["x", "starts", "ends"]
    for name, v in (("axes", axes), ("steps", steps)):
        if v is not None:
            consts[name] = np.array(v, "int64")
            order.append(name)
        elif name == "axes" and steps is not None:
            order.append("")
    check(make_model("Slice", x, consts=consts, order=order), x)


@pytest.mark.parametrize("axis, indices", [(0, [[2, -1], [0, 1]]), (1, [3]), (-1, 1)])
def test_gather(axis, indices, rng):
    x = {"x": rand(rng, 4, 5, 3)}
    idx = np.array(indices, "int64")
    check(make_model("Gather", x, {"axis": axis}, {"i": idx}), x)
    check(make_model("Gather", {"x": x["x"], "i": idx}, {"axis": axis}),
          {"x": x["x"], "i": idx})


def test_concat_and_constant(rng):
    x = rand(rng, 2, 3)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
                 rand(rng, 2, 4), "c")),
             helper.make_node("Constant", [], ["f"], value_float=2.5),
             helper.make_node("Mul", ["x", "f"], ["x2"]),
             helper.make_node("Concat", ["x2", "c", "x"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), {"x": x})


# -- errors ------------------------------------------------------------------------------------


def test_unsupported_op_names_node_and_op():
    model = make_model("Einsum", {"x": np.zeros((2, 2), "float32")}, {"equation": "ij->ji"})
    with pytest.raises(UnsupportedError, match=r"'the_einsum' \(Einsum\): unsupported op"):
        tg.from_onnx(model)


def test_unsupported_attribute_names_it():
    model = make_model("Relu", {"x": np.zeros((2,), "float32")}, {"bogus": 3})
    with pytest.raises(UnsupportedError, match=r"'the_relu' \(Relu\): unsupported attribute "
                                               r"'bogus'"):
        tg.from_onnx(model)
    model = make_model("MaxPool", {"x": np.zeros((1, 1, 4, 4), "float32")},
                       {"kernel_shape": [2, 2], "storage_order": 1})
    with pytest.raises(UnsupportedError, match="storage_order"):
        tg.from_onnx(model)
    model = make_model("Gelu", {"x": np.zeros((2,), "float32")}, {"approximate": "fast"},
                       opset=20)
    with pytest.raises(UnsupportedError, match="approximate='fast'"):
        tg.from_onnx(model)


def test_pow_keeps_the_base_dtype(rng):
    x = {"x": rand(rng, 3, 4, low=0.5, high=2.0), "e": np.array([2, 3, 1, 0], "int64")}
    check(make_model("Pow", x), x)
    with pytest.raises(UnsupportedError, match="integer base with a float exponent"):
        tg.from_onnx(make_model("Pow", {"x": np.ones(3, "int32"), "e": np.ones(3, "float32")}))


def test_unsupported_outputs_are_named():
    x = {"x": np.zeros((1, 1, 4, 4), "float32")}
    with pytest.raises(UnsupportedError, match=r"\(MaxPool\): the Indices output"):
        tg.from_onnx(make_model("MaxPool", x, {"kernel_shape": [2, 2]}, outputs=2))
    with pytest.raises(UnsupportedError, match=r"\(Dropout\): output 1 \('y1'\) is not "
                                               r"supported"):
        tg.from_onnx(make_model("Dropout", x, outputs=2))
    with pytest.raises(UnsupportedError, match="training_mode=1"):
        consts = {k: np.ones(1, "float32") for k in "sbmv"}
        tg.from_onnx(make_model("BatchNormalization", x, {"training_mode": 1}, consts))


def test_unsupported_dtype_and_opset_and_shapes():
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, (2, 2))
    y = onnx.ValueInfoProto(name="y")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    with pytest.raises(TypeError, match="input 'x': unsupported dtype BFLOAT16"):
        tg.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(TypeError, match=r"\(Cast\).*unsupported dtype STRING"):
        tg.from_onnx(make_model("Cast", {"x": np.zeros((2,), "float32")},
                                {"to": TensorProto.STRING}))
    with pytest.raises(ValueError, match="opset is 11"):
        tg.from_onnx(make_model("Relu", {"x": np.zeros((2,), "float32")}, opset=11))
    sym = helper.make_tensor_value_info("x", TensorProto.FLOAT, ("batch", 3))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [sym], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ValueError, match="symbolic shape"):
        tg.from_onnx(model)
    g = tg.from_onnx(model, shapes={"x": (2, 3)})
    assert g.inputs[0].shape == (2, 3)
    with pytest.raises(ValueError, match=r"shapes gives \(2, 4\) for an input declared "
                                          r"\['batch', 3\]"):
        tg.from_onnx(model, shapes={"x": (2, 4)})
    with pytest.raises(ValueError, match=r"shapes names \['y'\], which are not inputs"):
        tg.from_onnx(model, shapes={"x": (2, 3), "y": (1,)})
    with pytest.raises(TypeError, match="ModelProto"):
        tg.from_onnx(42)


def test_non_constant_attribute_input_is_rejected(rng):
    x = {"x": rand(rng, 2, 3), "shape": np.array([3, 2], "int64")}
    with pytest.raises(UnsupportedError, match=r"\(Reshape\): input 'shape' must be a constant"):
        tg.from_onnx(make_model("Reshape", x))


def test_from_onnx_reads_a_file(tmp_path, rng):
    x = {"x": rand(rng, 2, 3)}
    path = tmp_path / "relu.onnx"
    onnx.save(make_model("Relu", x), str(path))
    check(onnx.load(str(path)), x)
    assert tg.from_onnx(path).inputs[0].shape == (2, 3)
